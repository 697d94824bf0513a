"""A campaign: many generated programs under one seed, a summary, and every new failure
shrunk by Hypothesis and saved.

Program `i` of seed `s` is made by `random_program` from its own random generator
(`program_rng(s, i)`), independent of every other: Hypothesis's own generation mutates
earlier examples and starts each run with simplest ones, which skews the mix of
features a campaign sees. Its shrinker is what we want: when a program fails in a way
not seen before in the campaign (`Outcome.signature`), its recorded choices go into an
in-memory example database, and `hypothesis.find` replays and shrinks them, a candidate
counting as failing when it fails under the same configuration with the same signature.
The minimal program is saved under tests/programs/found/.
"""
from __future__ import annotations

import collections
import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.database import InMemoryExampleDatabase, choices_to_bytes
from hypothesis.errors import HypothesisException

from graphwright.strict.interpreter.graph_breaks import REGISTRY

from . import found
from .program import GeneratedProgram, programs, random_program
from .runner import FAILURES, Config, Outcome, QUICK_CONFIGS, Report, check

_ID_OF_TITLE = {kind.title: kind.gb_id for kind in REGISTRY.values()}


def program_rng(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1_000_003 + index)


@dataclasses.dataclass
class Failure:
    outcome: Outcome
    source: str
    path: Path | None
    index: int


@dataclasses.dataclass
class Summary:
    """What a campaign ran and found."""

    seed: int
    programs: int = 0
    invalid: int = 0
    statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    breaks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unplanned_breaks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unexpected: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    features: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failures: dict[str, Failure] = dataclasses.field(default_factory=dict)
    repeated: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    invalid_examples: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def record(self, program: GeneratedProgram, report: Report) -> None:
        self.programs += 1
        self.features.update(set(program.features))
        if report.eager_error is not None:
            self.invalid += 1
            self.invalid_examples.append(report.eager_error)
            return
        for outcome in report.outcomes:
            self.statuses[outcome.status] += 1
            if outcome.status == "unexpected_break":
                self.unexpected[outcome.detail] += 1
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
        lines.append("distinct failures:" if self.failures else "distinct failures: none")
        for signature, failure in self.failures.items():
            where = f" -> {failure.path}" if failure.path else ""
            lines.append(f"  {signature} [{failure.outcome.config}, program {failure.index}] "
                         f"x{1 + self.repeated[signature]}{where}")
        if self.unexpected:
            lines.append("fullgraph=True raised for programs without a planted break:")
            lines += [f"  {count:6d}  {detail}" for detail, count in self.unexpected.most_common()]
        lines.append("graph breaks by kind (fullgraph=False runs):")
        lines += [f"  {count:6d}  {kind}" for kind, count in self.breaks.most_common()]
        if self.unplanned_breaks:
            lines.append("  of which the generator did not plant:")
            lines += [f"  {count:6d}  {kind}" for kind, count in self.unplanned_breaks.most_common()]
        if self.invalid_examples:
            lines.append("invalid programs (eager raised), first few:")
            lines += [f"  {text[:200]}" for text in self.invalid_examples[:5]]
        return "\n".join(lines)


def run_campaign(count: int, seed: int, configs: Sequence[Config] = QUICK_CONFIGS, max_statements: int = 8,
                 shrink: bool = True, save: bool = True, shrink_seconds: float = 300.0,
                 log: Callable[[str], None] = print, stop_after: int | None = None,
                 rotate: bool = False, first: int = 0) -> Summary:
    """Run programs `first` to `first + count - 1` of `seed`; shrink and save each new failure
    (stop after `stop_after` of them). With `rotate`, program `i` runs under `configs[i % n]`
    only instead of under all of them."""
    summary = Summary(seed)
    start = time.time()
    for index in range(first, first + count):
        program, choices = random_program(program_rng(seed, index), max_statements)
        report = check(program.source, [configs[index % len(configs)]] if rotate else configs)
        summary.record(program, report)
        for outcome in report.failures:
            if outcome.signature in summary.failures:
                summary.repeated[outcome.signature] += 1
                continue
            log(f"program {index}: {outcome.signature} under {outcome.config}")
            source = program.source
            if shrink:
                outcome, source = shrink_failure(choices, outcome, source, max_statements, shrink_seconds)
                log(f"  shrunk to {source.count(chr(10))} lines")
            path = found.save(source, outcome.status, str(outcome.config), outcome.detail,
                              f"{seed}, program {index}") if save else None
            summary.failures[outcome.signature] = Failure(outcome, source, path, index)
        if (index + 1 - first) % 50 == 0:
            log(f"{index + 1 - first} programs, {time.time() - start:.0f} s: "
                + ", ".join(f"{k} {v}" for k, v in sorted(summary.statuses.items())))
        if stop_after is not None and len(summary.failures) >= stop_after:
            break
    summary.seconds = time.time() - start
    return summary


def shrink_failure(choices: list[int], failure: Outcome, source: str, max_statements: int,
                   seconds: float) -> tuple[Outcome, str]:
    """The smallest program Hypothesis finds that fails as `failure` did, starting from the
    program `choices` make; after `seconds`, the smallest found so far."""
    database = InMemoryExampleDatabase()
    key = b"graphwright-fuzz"
    database.save(key + b".secondary", choices_to_bytes(choices))  # replayed, then shrunk
    best: list = []
    deadline = time.time() + seconds

    def fails_the_same_way(program: GeneratedProgram) -> bool:
        if time.time() > deadline:
            return bool(best) and program.source == best[-1][1]
        report = check(program.source, [failure.config])
        same = next((o for o in report.failures if o.signature == failure.signature), None)
        if same is not None:
            best.append((same, program.source))
        return same is not None

    try:
        find(programs(max_statements), fails_the_same_way, database_key=key,
             settings=settings(database=database, phases=[Phase.reuse, Phase.shrink], deadline=None,
                               suppress_health_check=list(HealthCheck)))
    except HypothesisException:
        pass  # the failure did not replay (it depends on more than the program): keep what we have
    return best[-1] if best else (failure, source)


def failing(summary: Summary) -> list[str]:
    """Each mismatch and internal error of a campaign, with its program, for an assertion message."""
    return [f"program {f.index}: {sig} [{f.outcome.config}]: {f.outcome.detail[:500]}\n{f.source}"
            for sig, f in summary.failures.items() if f.outcome.status in FAILURES]
