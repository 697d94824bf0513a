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

With a record file (`--record FILE`), every program's outcome is appended to it as one
JSON line as soon as it has run: a long campaign can run in chunks (`--first`), be
interrupted and resumed, a failure already recorded is not shrunk again, and
`--summarize FILE` prints the summary of everything recorded (of several seeds too).
"""
from __future__ import annotations

import collections
import dataclasses
import json
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
from .runner import FAILURES, OK, QUICK_CONFIGS, UNEXPECTED_BREAK, Config, Outcome, Report, check

_ID_OF_TITLE = {kind.title: kind.gb_id for kind in REGISTRY.values()}


def program_rng(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1_000_003 + index)


@dataclasses.dataclass
class Failure:
    outcome: Outcome
    source: str
    path: Path | None
    index: int


def record_of(seed: int, index: int, program: GeneratedProgram, report: Report) -> dict:
    """What a campaign keeps of one program: a JSON-able dict (see `Summary.add`)."""
    return {"seed": seed, "index": index, "features": sorted(set(program.features)), "planted": sorted(program.breaks),
            "invalid": report.eager_error,
            "outcomes": [{"config": str(o.config), "status": o.status,
                          "signature": "" if o.status == OK else o.signature, "detail": o.detail[:500],
                          "breaks": {} if o.config.fullgraph else dict(o.breaks)} for o in report.outcomes]}


def read_records(path: Path) -> list[dict]:
    """The records of a record file (a line cut short by an interruption is skipped)."""
    records = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


@dataclasses.dataclass
class Summary:
    """What a campaign ran and found."""

    seed: int | str
    programs: int = 0
    invalid: int = 0
    statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    breaks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unplanned_breaks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    unexpected: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    features: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failures: dict[str, Failure] = dataclasses.field(default_factory=dict)
    repeated: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failing: dict[str, list] = dataclasses.field(default_factory=dict)  # signature -> [(seed, index, config)]
    invalid_examples: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def record(self, program: GeneratedProgram, report: Report, index: int = 0, seconds: float = 0.0) -> dict:
        record = record_of(self.seed, index, program, report)
        record["seconds"] = round(seconds, 2)
        self.add(record)
        return record

    def add(self, record: dict) -> None:
        """Count one program's record."""
        self.programs += 1
        self.seconds += record.get("seconds", 0.0)
        self.features.update(record["features"])
        if record["invalid"] is not None:
            self.invalid += 1
            self.invalid_examples.append(f"seed {record['seed']}, program {record['index']}: {record['invalid']}")
            return
        for outcome in record["outcomes"]:
            self.statuses[outcome["status"]] += 1
            if outcome["status"] == UNEXPECTED_BREAK:  # its kind: a refusal's text goes on to name files
                self.unexpected[outcome["detail"].split(":")[0]] += 1
            if outcome["status"] in FAILURES:
                self.failing.setdefault(outcome["signature"], []).append(
                    (record["seed"], record["index"], outcome["config"]))
            for title, count in outcome["breaks"].items():
                gb_id = _ID_OF_TITLE.get(title, "?")
                self.breaks[f"{gb_id} {title}"] += count
                if gb_id not in record["planted"]:
                    self.unplanned_breaks[f"{gb_id} {title}"] += count

    def format(self, features: bool = False) -> str:
        lines = [f"programs: {self.programs} (seed {self.seed}, {self.seconds:.0f} s), "
                 f"invalid (eager raised): {self.invalid}"]
        runs = sum(self.statuses.values())
        lines.append(f"compiled runs: {runs}: " + ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())))
        lines.append(f"mismatches: {self.statuses['mismatch']}, internal errors: {self.statuses['internal_error']}")
        lines.append("distinct failures (shrunk and saved):" if self.failures else "distinct failures: none")
        for signature, failure in self.failures.items():
            where = f" -> {failure.path}" if failure.path else ""
            lines.append(f"  {signature} [{failure.outcome.config}, program {failure.index}] "
                         f"x{1 + self.repeated[signature]}{where}")
        if self.failing:
            lines.append("failing runs by signature: count, programs (seed/index) and configurations:")
            for signature, runs_of in sorted(self.failing.items(), key=lambda kv: -len(kv[1])):
                programs = list(dict.fromkeys(f"{seed}/{index}" for seed, index, _ in runs_of))
                configs = collections.Counter(config for _, _, config in runs_of)
                lines.append(f"  {len(runs_of):6d}  {signature}  in {len(programs)} programs: "
                             f"{' '.join(programs[:8])}{' ...' if len(programs) > 8 else ''}  "
                             f"({', '.join(f'{c} {n}' for c, n in sorted(configs.items()))})")
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
        if features:
            lines.append("programs per feature:")
            lines += [f"  {count:6d}  {count / max(self.programs, 1):6.1%}  {name}"
                      for name, count in sorted(self.features.items())]
        return "\n".join(lines)


def summarize(paths: Sequence[Path]) -> Summary:
    """The summary of every program recorded in `paths`."""
    records = [record for path in paths for record in read_records(path)]
    summary = Summary(", ".join(sorted({str(r["seed"]) for r in records}, key=str)) or "none")
    for record in records:
        summary.add(record)
    return summary


def run_campaign(count: int, seed: int, configs: Sequence[Config] = QUICK_CONFIGS, max_statements: int = 8,
                 shrink: bool = True, save: bool = True, shrink_seconds: float = 300.0,
                 log: Callable[[str], None] = print, stop_after: int | None = None,
                 rotate: bool = False, first: int = 0, record: Path | None = None) -> Summary:
    """Run programs `first` to `first + count - 1` of `seed`; shrink and save each new failure
    (stop after `stop_after` of them). With `rotate`, program `i` runs under `configs[i % n]`
    only instead of under all of them. With `record`, each program's record is appended to
    that file, and a failure recorded there before is not shrunk again."""
    summary = Summary(seed)
    known = {o["signature"] for r in read_records(record) for o in r["outcomes"] if o["status"] in FAILURES} \
        if record is not None else set()
    start = time.time()
    for index in range(first, first + count):
        program, choices = random_program(program_rng(seed, index), max_statements)
        began = time.time()
        report = check(program.source, [configs[index % len(configs)]] if rotate else configs)
        written = summary.record(program, report, index, time.time() - began)
        if record is not None:
            with record.open("a") as file:
                file.write(json.dumps(written) + "\n")
        for outcome in report.failures:
            if outcome.signature in summary.failures or outcome.signature in known:
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
