"""`python -m opinfo.record_refusals` (with tests/ on the path): run the sweep through
torch.compile and graphwright and write which checks each refuses to `refusals.json`, the
data `test_opinfo.py` holds graphwright's refusals against.

    PYTHONPATH=tests python -m opinfo.record_refusals                 # both, every op
    PYTHONPATH=tests python -m opinfo.record_refusals --compiler graphwright --report out.json

`--report FILE` also keeps every op's full report (passes, refusals, failures) for triage.
The result file keys refusals by compiler, backend, op id and check kind (`forward`,
`out_contiguous`, ..., `inplace_view_inside`), each with the first reason seen.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .sweep import Compiler, check_op, all_ops

REFUSALS = Path(__file__).with_name("refusals.json")
COMPILERS = {"torch.compile": "torch", "graphwright": "graphwright"}
BACKENDS = ("eager", "aot_eager")


def check_kind(check_name: str) -> str:
    """`inplace_view[2]: reason` -> `inplace_view`."""
    return check_name.split("[", 1)[0]


def refusals_of(refused: list[str]) -> dict[str, str]:
    """A report's refusals, one reason (the first seen) per check kind."""
    kinds: dict[str, str] = {}
    for line in refused:
        name, _, reason = line.partition(": ")
        kinds.setdefault(check_kind(name), reason)
    return kinds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opinfo.record_refusals", description=__doc__)
    parser.add_argument("--compiler", choices=sorted(COMPILERS), action="append",
                        help="which compilers to run (default: both)")
    parser.add_argument("--backend", choices=BACKENDS, action="append")
    parser.add_argument("--ops", nargs="*", help="op ids (default: every op of op_db)")
    parser.add_argument("--report", type=Path,
                        help="also append every op's full report to this JSON-lines file; ops "
                             "already in it are not run again (a run that stopped resumes)")
    parser.add_argument("--no-write", action="store_true", help=f"do not update {REFUSALS.name}")
    args = parser.parse_args(argv)
    done = {}
    if args.report and args.report.exists():
        for line in args.report.read_text().splitlines():
            row = json.loads(line)
            done[row["compiler"], row["backend"], row["op"]] = row
    recorded = json.loads(REFUSALS.read_text()) if REFUSALS.exists() else {}
    ops = args.ops or sorted(all_ops())
    for compiler_name in args.compiler or sorted(COMPILERS):
        for backend in args.backend or BACKENDS:
            compiler = Compiler(COMPILERS[compiler_name], backend)
            refused = recorded.setdefault(compiler_name, {}).setdefault(backend, {})
            start = time.perf_counter()
            for name in ops:
                row = done.get((compiler_name, backend, name))
                if row is None:
                    report = check_op(name, compiler)
                    print(report.summary(), flush=True)
                    row = {"compiler": compiler_name, "backend": backend, "op": name,
                           "samples": report.samples, "passed": report.passed,
                           "refused": report.refused, "failures": report.failures,
                           "skipped": report.skipped}
                    if args.report:
                        with args.report.open("a") as file:
                            file.write(json.dumps(row) + "\n")
                refused.pop(name, None)
                if row["refused"]:
                    refused[name] = refusals_of(row["refused"])
            print(f"{compiler_name}/{backend}: {len(ops)} ops in "
                  f"{time.perf_counter() - start:.0f}s", flush=True)
    if not args.no_write:
        REFUSALS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
