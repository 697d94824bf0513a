"""PyTorch's operator database as the oracle: each op's sample inputs, run eagerly and through
`graphwright.compile(fullgraph=True)`, compared (`sweep.py` says what is compared).

By default the fast slice (`tables.FAST_SLICE`) runs under `eager` and `aot_eager`;
`GW_OPINFO=all` (`make test-opinfo`) runs every op of `op_db`. A rotating handful of ops runs
under `inductor` (slow): chosen from the ISO week, or from `GW_OPINFO_SEED`.

A refusal (a clear graphwright error naming what it cannot compile) passes only where
torch.compile refuses the same check of the same op (`refusals.json`, written by
`record_refusals.py`); `tables.XFAIL` lists the failures still known, with their mechanism.
"""
from __future__ import annotations

import datetime
import json
import os
import random

import pytest

from . import tables
from .record_refusals import REFUSALS, check_kind, refusals_of
from .sweep import Compiler, all_ops, check_op

FULL = os.environ.get("GW_OPINFO") == "all"
INDUCTOR_OPS = 4


def _inductor_seed() -> str:
    year, week, _ = datetime.date.today().isocalendar()
    return os.environ.get("GW_OPINFO_SEED", f"{year}-W{week:02d}")


def _swept_ops() -> list[str]:
    return sorted(all_ops()) if FULL else list(tables.FAST_SLICE)


def _inductor_ops() -> list[str]:
    return sorted(random.Random(_inductor_seed()).sample(sorted(all_ops()), INDUCTOR_OPS))


def _torch_compile_refusals() -> dict:
    return json.loads(REFUSALS.read_text())["torch.compile"]


def _problems(report, backend: str) -> list[str]:
    problems = list(report.failures)
    theirs = _torch_compile_refusals()[backend].get(report.op_id, {})
    for line in report.refused:
        if check_kind(line.partition(": ")[0]) not in theirs:
            problems.append(f"refused where torch.compile compiles: {line}")
    return problems


def _expect(report, problems: list[str], backend: str) -> None:
    reason = tables.XFAIL.get((report.op_id, backend))
    if problems and reason:
        pytest.xfail(f"{reason}: {problems[0][:300]}")
    assert not problems, report.summary() + "\n" + "\n".join(p[:1500] for p in problems[:5])
    assert not reason, f"{report.op_id} passes under {backend}: remove its XFAIL entry ({reason})"


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("op_name", _swept_ops())
def test_op_matches_eager(op_name, backend):
    report = check_op(op_name, Compiler("graphwright", backend))
    if report.skipped:
        pytest.skip(report.skipped)
    assert report.samples or report.passed or report.refused or report.failures, "nothing ran"
    _expect(report, _problems(report, backend), backend)


@pytest.mark.slow
@pytest.mark.parametrize("op_name", _inductor_ops())
def test_op_matches_eager_under_inductor(op_name):
    report = check_op(op_name, Compiler("graphwright", "inductor"), checks=("forward",),
                      max_samples=tables.INDUCTOR_SAMPLES)
    if report.skipped:
        pytest.skip(report.skipped)
    _expect(report, report.failures, "inductor")


def test_recorded_refusals_are_a_subset_of_torch_compiles():
    recorded = json.loads(REFUSALS.read_text())
    for backend, ours in recorded.get("graphwright", {}).items():
        theirs = recorded["torch.compile"][backend]
        extra = {f"{op}:{kind}": reason for op, kinds in ours.items() for kind, reason in kinds.items()
                 if kind not in theirs.get(op, {})}
        allowed = {key: reason for key, reason in extra.items()
                   if (key.partition(":")[0], backend) in tables.XFAIL}
        assert extra == allowed, f"graphwright refuses where torch.compile compiles ({backend})"


def test_refusals_are_keyed_by_check_kind():
    """The helper the data file is written with: one reason per check kind."""
    refused = ["forward[0]: GB019: Unsupported context manager",
               "forward[3]: GB020: something else", "inplace_view[1]: TraceError: x"]
    assert refusals_of(refused) == {"forward": "GB019: Unsupported context manager",
                                   "inplace_view": "TraceError: x"}
