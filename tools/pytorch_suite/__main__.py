"""`python -m tools.pytorch_suite DIR [FILE ...]`: PyTorch's TorchDynamo tests against graphwright.

Runs each test file of DIR (by default every `test_*.py` there) on PyTorch and on
graphwright, prints per file: tests, passed on PyTorch, portable among those,
passed on graphwright among the portable ones, and the portable tests that pass on
graphwright but fail on PyTorch ("gw only"); writes one TSV per file with
each test's outcomes, the portability reasons and graphwright's first failure
line. PyTorch's outcomes are kept (keyed by the file's hash and torch's
version) so that a second run only runs graphwright.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys

import torch

from .portability import classify

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


CRASHES_PYTHON_311 = ("test_list.py::ListTest::test_list_index_modifing_operand",)
"""Tests of CPython 3.13 that crash the 3.11 interpreter itself (deselected in both modes)."""


def is_cpython_file(text: str) -> bool:
    """CPython's own tests as PyTorch runs them: compiled whole by their test case class."""
    return "CPythonTestCase" in text


_IMPORTED = re.compile(r"^\s*(?:import|from) (\w+)", re.M)
_FROM_TEST = re.compile(r"^\s*from test import ([\w, ]+)$", re.M)
"""`import X` / `from X import ...`, and `from test import X, Y`: PyTorch's copies import their
helper modules as `test.X` too, redirected to the module X next to them."""


def sibling_modules(folder: pathlib.Path, text: str) -> dict[str, str]:
    """The modules of FOLDER that `text` imports, transitively: name -> text."""
    found: dict[str, str] = {}
    pending = [text]
    while pending:
        current = pending.pop()
        names = _IMPORTED.findall(current)
        names += [name.strip() for group in _FROM_TEST.findall(current) for name in group.split(",")]
        for name in names:
            path = folder / f"{name}.py"
            if name not in found and path.is_file():
                found[name] = path.read_text()
                pending.append(found[name])
    return found


def run_pytest(folder: pathlib.Path, file: str, mode: str, results: pathlib.Path, jobs: str,
               timeout: int, select: str | None) -> dict:
    environment = dict(os.environ, GW_SUITE_MODE=mode, GW_SUITE_RESULTS=str(results),
                       PYTHONPATH=os.pathsep.join([str(REPOSITORY), str(folder)]))
    traceback = "--tb=no"
    if is_cpython_file((folder / file).read_text()):
        # the classes compile each test only under PyTorch's "test with dynamo" flag; pytest's
        # own traceback formatting fails on 3.13's tests under 3.11
        environment.update(PYTORCH_TEST_WITH_DYNAMO="1", GW_SUITE_CPYTHON="1")
        traceback = "--tb=native"
    command = [sys.executable, "-m", "pytest", file, "-q", "-p", "tools.pytorch_suite.plugin",
               "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(folder),
               f"--timeout={timeout}", "-n", jobs, "--no-header", "-rN", traceback]
    command += [f"--deselect={nodeid}" for nodeid in CRASHES_PYTHON_311 if nodeid.startswith(file + "::")]
    if select:
        command += ["-k", select]
    subprocess.run(command, cwd=folder, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not results.exists():
        return {}
    return json.loads(results.read_text())


def pytorch_outcomes(folder: pathlib.Path, file: str, out: pathlib.Path, jobs: str, timeout: int,
                     select: str | None) -> dict:
    digest = hashlib.sha256((folder / file).read_bytes()).hexdigest()[:16]
    cached = out / f"{file}.pytorch-{torch.__version__}-{digest}{'-' + select if select else ''}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    return run_pytest(folder, file, "pytorch", cached, jobs, timeout, select)


def summarize(folder: pathlib.Path, file: str, out: pathlib.Path, jobs: str, timeout: int,
              select: str | None) -> list:
    on_pytorch = pytorch_outcomes(folder, file, out, jobs, timeout, select)
    on_graphwright = run_pytest(folder, file, "graphwright", out / f"{file}.graphwright.json", jobs, timeout,
                                select)
    text = (folder / file).read_text()
    siblings = sibling_modules(folder, text) if is_cpython_file(text) else None
    verdicts = classify(text, list(on_pytorch), siblings)
    passed = [nodeid for nodeid, entry in on_pytorch.items() if entry["outcome"] == "passed"]
    portable = [nodeid for nodeid in passed if verdicts[nodeid].portable]
    passing = [nodeid for nodeid in portable if on_graphwright.get(nodeid, {}).get("outcome") == "passed"]
    # passed on graphwright where PyTorch failed (a skip on PyTorch is no failure)
    only_graphwright = [nodeid for nodeid, entry in on_pytorch.items()
                        if entry["outcome"] == "failed" and verdicts[nodeid].portable
                        and on_graphwright.get(nodeid, {}).get("outcome") == "passed"]
    with open(out / f"{file}.tsv", "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(["test", "pytorch", "portable", "graphwright", "graphwright message", "reasons"])
        for nodeid, entry in sorted(on_pytorch.items()):
            mine = on_graphwright.get(nodeid, {"outcome": "not run", "message": ""})
            writer.writerow([nodeid, entry["outcome"], verdicts[nodeid].portable, mine["outcome"],
                             mine["message"], "; ".join(verdicts[nodeid].reasons)])
    return [file, len(on_pytorch), len(passed), len(portable), len(passing), len(only_graphwright)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=pathlib.Path, help="a folder with PyTorch's test/dynamo files")
    parser.add_argument("files", nargs="*", help="test files in the folder (default: every test_*.py)")
    parser.add_argument("--out", type=pathlib.Path, help="where outcomes go (default: FOLDER/.graphwright)")
    parser.add_argument("--jobs", default="auto", help="pytest-xdist workers per run")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per test")
    parser.add_argument("-k", dest="select", help="only tests matching this pytest expression")
    options = parser.parse_args()
    folder = options.folder.resolve()
    if REPOSITORY in folder.parents or folder == REPOSITORY:
        parser.error("PyTorch's test files stay outside this repository")
    out = (options.out or folder / ".graphwright").resolve()
    out.mkdir(parents=True, exist_ok=True)
    files = options.files or sorted(path.name for path in folder.glob("test_*.py"))
    rows = [summarize(folder, file, out, options.jobs, options.timeout, options.select) for file in files]
    totals = ["total", *(sum(row[i] for row in rows) for i in range(1, 6))]
    print(f"{'file':32} {'tests':>6} {'pytorch':>8} {'portable':>9} {'graphwright':>14} {'gw only':>8}")
    for row in [*rows, totals]:
        share = f"{100 * row[4] / row[3]:.1f}%" if row[3] else "-"
        print(f"{row[0]:32} {row[1]:>6} {row[2]:>8} {row[3]:>9} {row[4]:>7} {share:>6} {row[5]:>8}")
    print(f"per-test outcomes: {out}/<file>.tsv")


if __name__ == "__main__":
    main()
