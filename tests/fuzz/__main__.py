"""`python -m fuzz` (with tests/ on the path; `make fuzz N=10000`): run a campaign, print
its summary, save shrunk failures under tests/programs/found/. Exits 1 when it found a
mismatch or an internal error. `--record FILE` appends each program's outcome to FILE
(a campaign in chunks: the same FILE with `--first`), `--summarize FILE...` prints the
summary of what was recorded."""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from .campaign import program_rng, run_campaign, summarize
from .program import random_program
from .runner import LONG_CONFIGS, QUICK_CONFIGS, check


def replay(path: Path, configs) -> int:
    report = check(path.read_text(), configs, path=path)
    if report.eager_error:
        print(f"eager raised: {report.eager_error}")
        return 1
    for outcome in report.outcomes:
        print(f"{outcome.config}: {outcome.status} {outcome.detail}")
    return 1 if report.failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    parser.add_argument("--programs", type=int, default=1000, help="how many programs to run")
    parser.add_argument("--seed", default="random", help="an int, or 'random'")
    parser.add_argument("--long", action="store_true", help="also compile with inductor")
    parser.add_argument("--max-statements", type=int, default=8)
    parser.add_argument("--no-shrink", action="store_true", help="report failures as found, unshrunk")
    parser.add_argument("--no-save", action="store_true", help="do not write tests/programs/found/")
    parser.add_argument("--shrink-seconds", type=float, default=300.0, help="time to shrink one failure")
    parser.add_argument("--first", type=int, default=0, help="index of the first program (to resume a seed)")
    parser.add_argument("--show", type=int, metavar="INDEX", help="print program INDEX of the seed and exit")
    parser.add_argument("--replay", metavar="FILE", help="run one saved program under every configuration")
    parser.add_argument("--record", metavar="FILE", type=Path,
                        help="append each program's outcome to FILE; failures recorded there are not shrunk again")
    parser.add_argument("--summarize", metavar="FILE", type=Path, nargs="+",
                        help="print the summary of the programs recorded in FILEs and exit")
    parser.add_argument("--features", action="store_true", help="also print how many programs have each feature")
    args = parser.parse_args(argv)
    if args.summarize:
        summary = summarize(args.summarize)
        print(summary.format(features=args.features))
        return 1 if summary.statuses["mismatch"] or summary.statuses["internal_error"] else 0
    if args.replay:
        return replay(Path(args.replay), LONG_CONFIGS if args.long else QUICK_CONFIGS)
    seed = random.randrange(2**32) if args.seed == "random" else int(args.seed)
    if args.show is not None:
        print(random_program(program_rng(seed, args.show), args.max_statements)[0].source)
        return 0
    print(f"fuzz: {args.programs} programs, seed {seed}", flush=True)
    summary = run_campaign(args.programs, seed, LONG_CONFIGS if args.long else QUICK_CONFIGS,
                           max_statements=args.max_statements, shrink=not args.no_shrink,
                           save=not args.no_save, shrink_seconds=args.shrink_seconds, first=args.first,
                           log=lambda line: print(line, flush=True), record=args.record)
    print(summary.format(features=args.features))
    return 1 if summary.statuses["mismatch"] or summary.statuses["internal_error"] else 0


if __name__ == "__main__":
    sys.exit(main())
