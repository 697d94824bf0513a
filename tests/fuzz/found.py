"""The programs the generator found graphwright wrong on, kept as regression tests.

Each is a file under tests/programs/found/: a docstring saying how it failed (status,
configuration, the difference or error, the seed of the campaign) followed by the
shrunk program's source, as generated. `tests/programs/test_found.py` runs every file
under every quick configuration. A file may set `XFAIL = "why"` while its bug is open.
"""
from __future__ import annotations

import hashlib
import re
import textwrap
from pathlib import Path

FOUND_DIR = Path(__file__).resolve().parents[1] / "programs" / "found"


def save(source: str, status: str, config: str, detail: str, origin: str, directory: Path = FOUND_DIR) -> Path:
    """Write a shrunk failing program; returns its path (the same source gives the same file)."""
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    path = directory / f"{status}_{digest}.py"
    detail_text = textwrap.indent(textwrap.fill(detail.replace('"""', "'''"), 96, replace_whitespace=False), "    ")
    header = (f'"""Found by the program generator (seed {origin}): {status} under {config}.\n\n'
              f"{detail_text}\n"
              '"""\n')
    path.write_text(header + source)
    return path


def saved_programs(directory: Path = FOUND_DIR) -> list[Path]:
    return sorted(directory.glob("*.py")) if directory.is_dir() else []


def expected_failure(source: str) -> str | None:
    """The `XFAIL = "..."` reason a saved program gives, if any."""
    match = re.search(r'^XFAIL = "(.*)"$', source, re.MULTILINE)
    return match.group(1) if match else None
