"""Every program the generator found graphwright wrong on (tests/programs/found/), run
eagerly and under every quick configuration: now the same answer, every call.

The files are written by `python -m fuzz` (tests/fuzz/): a docstring saying how the
program failed when it was found, then the shrunk program. See docs/fuzzing.md.
"""
from __future__ import annotations

import pytest

from fuzz.found import expected_failure, saved_programs
from fuzz.runner import FAILURES, QUICK_CONFIGS, check

FOUND = saved_programs()


def _param(path):
    reason = expected_failure(path.read_text())
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, id=path.stem, marks=marks)


def test_found_programs_exist():
    assert FOUND, "tests/programs/found/ holds the generator's regression programs"


@pytest.mark.parametrize("path", [_param(p) for p in FOUND])
def test_found_program_matches_eager(path):
    report = check(path.read_text(), QUICK_CONFIGS, path=path)
    assert report.eager_error is None, f"the program itself raised: {report.eager_error}"
    wrong = [f"{o.config}: {o.status}: {o.detail}" for o in report.outcomes if o.status in FAILURES]
    assert not wrong, "\n".join(wrong)
