"""The CI-sized campaign: a fixed seed, each generated program run eagerly and under one
compiled configuration in turn (eager, aot_eager, each with fullgraph on and off), every
call compared. A failure names the program: reproduce it with
`PYTHONPATH=tests python -m fuzz --seed 0 --first INDEX --programs 1` (which shrinks and
saves it under tests/programs/found/), or print it with `--show INDEX`."""
from __future__ import annotations

import os

from fuzz.campaign import failing, run_campaign
from fuzz.runner import QUICK_CONFIGS

PROGRAMS = int(os.environ.get("GW_FUZZ_PROGRAMS", "200"))
SEED = 0


def test_generated_programs_match_eager():
    summary = run_campaign(PROGRAMS, SEED, QUICK_CONFIGS, max_statements=5, shrink=False, save=False,
                           rotate=True, log=lambda line: None)
    print(summary.format())
    assert summary.programs == PROGRAMS
    assert summary.invalid <= PROGRAMS // 50, summary.invalid_examples
    assert not failing(summary), "\n\n".join(failing(summary))
