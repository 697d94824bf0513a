"""The benchmark harness: named workloads timed under graphwright and PyTorch in one run.

A workload is a factory `make(side) -> sample`, where `side` names the system
under test ("graphwright", "pytorch", sometimes "eager") and `sample()` does the
measured work once and returns the seconds it took (the factory does the
untimed setup). Workloads live in `bench/workloads_*.py` and register with
`@workload(...)`; every such file is imported by the harness.

- `cold` workloads take one sample per fresh Python process (import and setup
  excluded), for first-call figures such as tracing or capture time.
- a workload that cannot run yet (a model graphwright cannot capture) raises
  `Skip(reason)` from its factory or sample; its row says why.
- the others take samples in one process after warm-up calls, for steady-state
  figures.

Samples alternate between the sides, so that a change in the machine's load
during a measurement moves both alike. Each figure is the median of the samples; the ratio is graphwright / PyTorch.
Every process runs with `torch.set_num_threads(1)`. Before cold samples the
harness writes graphwright's bytecode cache, as an installed package has one
(torch's has; under PYTHONDONTWRITEBYTECODE every fresh process would
otherwise compile graphwright's sources again).
"""
from __future__ import annotations

import argparse
import compileall
import dataclasses
import fnmatch
import importlib
import importlib.util
import pathlib
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence

Sample = Callable[[], float]

_BENCH_DIR = pathlib.Path(__file__).resolve().parent


class Skip(Exception):
    """Raised by a workload that cannot be measured (yet); the message says why."""


_SKIP_PREFIX = "SKIP: "


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    make: Callable[[str], Sample]
    cold: bool
    sides: tuple[str, ...]
    description: str


WORKLOADS: dict[str, Workload] = {}


def workload(name: str, *, cold: bool = False, sides: Sequence[str] = ("graphwright", "pytorch")):
    """Register `make(side) -> sample` as the workload `name`.

    >>> @workload("make_fx/mlp/fake", cold=True)
    ... def trace_mlp(side):
    ...     model, x = mlp_and_input()
    ...     return lambda: timed(lambda: MAKE_FX[side](model, tracing_mode="fake")(x))
    """

    def register(make: Callable[[str], Sample]) -> Callable[[str], Sample]:
        if name in WORKLOADS:
            raise ValueError(f"workload {name!r} registered twice")
        doc = (make.__doc__ or "").strip().splitlines()
        WORKLOADS[name] = Workload(name, make, cold, tuple(sides), doc[0] if doc else "")
        return make

    return register


def load_workloads() -> None:
    for path in sorted(_BENCH_DIR.glob("workloads_*.py")):
        importlib.import_module(f"bench.{path.stem}")


def _write_bytecode(package: str) -> None:
    for location in importlib.util.find_spec(package).submodule_search_locations:
        compileall.compile_dir(location, quiet=1)


def _setup_process() -> None:
    import torch

    torch.set_num_threads(1)


def sample_in_this_process(name: str, side: str) -> float:
    """One cold sample: setup, then the first measured run."""
    return WORKLOADS[name].make(side)()


def _cold_samples(name: str, side: str, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-m", "bench", "--sample", name, side],
            cwd=_BENCH_DIR.parent,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{name} [{side}] failed:\n{proc.stderr[-4000:]}")
        last = proc.stdout.strip().splitlines()[-1]
        if last.startswith(_SKIP_PREFIX):
            raise Skip(last[len(_SKIP_PREFIX):])
        samples.append(float(last))
    return samples


def _warm_samples(name: str, sides: Sequence[str], runs: int, warmup: int) -> dict[str, list[float]]:
    samplers = {side: WORKLOADS[name].make(side) for side in sides}
    for sample in samplers.values():
        for _ in range(warmup):
            sample()
    samples: dict[str, list[float]] = {side: [] for side in sides}
    for _ in range(runs):
        for side, sample in samplers.items():
            samples[side].append(sample())
    return samples


@dataclasses.dataclass
class Result:
    workload: Workload
    medians: dict[str, float]
    skipped: str | None = None

    @property
    def ratio(self) -> float | None:
        gw, pt = self.medians.get("graphwright"), self.medians.get("pytorch")
        return gw / pt if gw is not None and pt else None


def measure(name: str, runs: int, warmup: int) -> Result:
    """Medians per side; samples alternate between the sides (cold ones in fresh processes, warm
    ones in this process once each side is set up and warmed up), so that a change in the
    machine's load during the measurement affects both alike."""
    wl = WORKLOADS[name]
    try:
        if wl.cold:
            samples: dict[str, list[float]] = {side: [] for side in wl.sides}
            for _ in range(runs):
                for side in wl.sides:
                    samples[side] += _cold_samples(name, side, 1)
        else:
            samples = _warm_samples(name, wl.sides, runs, warmup)
    except Skip as skip:
        return Result(wl, {}, skipped=str(skip))
    return Result(wl, {side: statistics.median(values) for side, values in samples.items()})


def format_table(results: list[Result]) -> str:
    sides = sorted({side for r in results for side in r.medians or r.workload.sides},
                   key=["graphwright", "pytorch", "eager"].index)
    header = ["workload", "kind"] + [f"{side} ms" for side in sides] + ["graphwright/pytorch"]
    rows = [header, ["---"] * len(header)]
    for r in results:
        row = [r.workload.name, "cold" if r.workload.cold else "warm"]
        row += [f"{r.medians[s] * 1e3:.3f}" if s in r.medians else "" for s in sides]
        row.append(f"skipped: {r.skipped}" if r.skipped else f"{r.ratio:.2f}x" if r.ratio is not None else "")
        rows.append(row)
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", default=["*"], help="workload names or globs")
    parser.add_argument("--runs", type=int, default=5, help="samples per side (median taken)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs before warm samples")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    parser.add_argument("--sample", nargs=2, metavar=("NAME", "SIDE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    _setup_process()
    load_workloads()
    if args.sample:
        try:
            print(sample_in_this_process(*args.sample))
        except Skip as skip:
            print(_SKIP_PREFIX + " ".join(str(skip).split()))
        return
    names = [n for n in WORKLOADS if any(fnmatch.fnmatch(n, p) for p in args.patterns)]
    if args.list:
        for name in names:
            wl = WORKLOADS[name]
            print(f"{name:40s} {'cold' if wl.cold else 'warm'}  {wl.description}")
        return
    if any(WORKLOADS[name].cold for name in names):
        _write_bytecode("graphwright")
    results = []
    for name in names:
        results.append(measure(name, args.runs, args.warmup))
        print(format_table(results[-1:]).splitlines()[-1], flush=True)
    print()
    print(format_table(results))
