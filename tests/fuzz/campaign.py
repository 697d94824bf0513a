"""A campaign: many generated programs under one seed, a summary, and every new failure
shrunk and saved.

Hypothesis draws the programs. When one fails in a way not seen before in the campaign
(`Outcome.signature`), the run raises so that Hypothesis shrinks it: during shrinking
only the failing configuration runs, and a candidate counts as failing when it fails
with the same signature. The minimal program is saved under tests/programs/found/ and
the campaign goes on with the programs it still owes, under the next seed. Programs run
while shrinking are not counted in the summary.
"""
from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed

from graphwright.strict.interpreter.graph_breaks import REGISTRY

from . import found
from .program import GeneratedProgram, programs
from .runner import FAILURES, Config, Outcome, QUICK_CONFIGS, check

_ID_OF_TITLE = {kind.title: kind.gb_id for kind in REGISTRY.values()}


@dataclasses.dataclass
class Failure:
    outcome: Outcome
    source: str
    path: Path | None


@dataclasses.dataclass
class Summary:
    """What a campaign ran and found."""

    seed: int
    programs: int = 0
    invalid: int = 0
    statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    breaks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unplanned_breaks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    features: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failures: dict[str, Failure] = dataclasses.field(default_factory=dict)
    repeated: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    invalid_examples: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def record(self, program: GeneratedProgram, report) -> None:
        self.programs += 1
        self.features.update(set(program.features))
        if report.eager_error is not None:
            self.invalid += 1
            self.invalid_examples.append(report.eager_error)
            return
        for outcome in report.outcomes:
            self.statuses[outcome.status] += 1
            if outcome.config.fullgraph:
                continue
            for title, count in outcome.breaks.items():
                gb_id = _ID_OF_TITLE.get(title, "?")
                self.breaks[f"{gb_id} {title}"] += count
                if gb_id not in program.breaks:
                    self.unplanned_breaks[f"{gb_id} {title}"] += count

    def format(self) -> str:
        lines = [f"programs: {self.programs} (seed {self.seed}, {self.seconds:.0f} s), "
                 f"invalid (eager raised): {self.invalid}"]
        runs = sum(self.statuses.values())
        lines.append(f"compiled runs: {runs}: " + ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())))
        lines.append(f"mismatches: {self.statuses['mismatch']}, internal errors: {self.statuses['internal_error']}")
        lines.append("distinct failures (shrunk and saved):" if self.failures else "distinct failures: none")
        for signature, failure in self.failures.items():
            where = f" -> {failure.path}" if failure.path else ""
            lines.append(f"  {signature} [{failure.outcome.config}] x{1 + self.repeated[signature]}{where}")
        lines.append("graph breaks by kind (fullgraph=False runs):")
        lines += [f"  {count:6d}  {kind}" for kind, count in self.breaks.most_common()]
        if self.unplanned_breaks:
            lines.append("  of which not planted by the generator:")
            lines += [f"  {count:6d}  {kind}" for kind, count in self.unplanned_breaks.most_common()]
        return "\n".join(lines)


class _Found(Exception):
    """Raised inside the Hypothesis test to make it shrink."""


def run_campaign(count: int, seed: int, configs: Sequence[Config] = QUICK_CONFIGS, max_statements: int = 8,
                 shrink: bool = True, save: bool = True, shrink_seconds: float = 300.0,
                 log: Callable[[str], None] = print, stop_after: int | None = None) -> Summary:
    """Run `count` programs; shrink and save each new failure (at most `stop_after` of them)."""
    summary = Summary(seed)
    start = time.time()
    round_seed = seed
    while summary.programs < count:
        before = summary.programs
        failure = _round(summary, count - summary.programs, round_seed, configs, max_statements, shrink,
                         shrink_seconds, log)
        round_seed += 1
        if failure is None:
            if summary.programs == before:
                break  # Hypothesis ran out of programs to draw
            continue
        outcome, source = failure
        path = found.save(source, outcome.status, str(outcome.config), outcome.detail, seed) if save else None
        summary.failures[outcome.signature] = Failure(outcome, source, path)
        log(f"found {outcome.signature} under {outcome.config}" + (f": saved {path}" if path else ""))
        if stop_after is not None and len(summary.failures) >= stop_after:
            break
    summary.seconds = time.time() - start
    return summary


def _round(summary: Summary, count: int, round_seed: int, configs: Sequence[Config], max_statements: int,
           shrink: bool, shrink_seconds: float, log: Callable[[str], None]) -> tuple[Outcome, str] | None:
    """One Hypothesis run of up to `count` programs; the shrunk new failure, if any."""
    state: dict = {"target": None, "best": None, "deadline": None}

    def run(program: GeneratedProgram) -> None:
        if state["target"] is None:
            failure = first_failure(program)
        elif time.time() > state["deadline"] and program.source != state["best"][1]:
            failure = None  # out of time: only the smallest failure found so far fails again
        else:
            failure = same_failure(program)
        if failure is not None:
            state["best"] = (failure, program.source)
            raise _Found()  # one place: Hypothesis tells failures apart by where they are raised

    def first_failure(program: GeneratedProgram) -> Outcome | None:
        report = check(program.source, configs)
        summary.record(program, report)
        if summary.programs % 50 == 0:
            log(f"{summary.programs} programs: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.statuses.items())))
        for outcome in report.failures:
            if outcome.signature in summary.failures:
                summary.repeated[outcome.signature] += 1
            elif shrink:
                state.update(target=outcome, deadline=time.time() + shrink_seconds)
                log(f"shrinking {outcome.signature} under {outcome.config}")
                return outcome
            else:
                summary.failures[outcome.signature] = Failure(outcome, program.source, None)
        return None

    def same_failure(program: GeneratedProgram) -> Outcome | None:
        target = state["target"]
        report = check(program.source, [target.config])
        return next((o for o in report.failures if o.signature == target.signature), None)

    test = given(programs(max_statements=max_statements))(run)
    test = settings(max_examples=count, database=None, deadline=None, verbosity=Verbosity.quiet,
                    phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False)(test)
    test = hypothesis_seed(round_seed)(test)
    try:
        test()
    except _Found:
        return state["best"]
    except Exception as error:  # e.g. Hypothesis's Flaky: the failure did not happen again
        log(f"shrinking stopped: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
        return state["best"]
    return None


def failing(summary: Summary) -> list[str]:
    """Lines naming each failure, for an assertion message."""
    return [f"{sig} [{f.outcome.config}]: {f.outcome.detail[:500]}\n{f.source}" for sig, f in summary.failures.items()
            if f.outcome.status in FAILURES]

