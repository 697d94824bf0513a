"""`graphwright.counters`, laid out as PyTorch's `torch._dynamo.utils.counters`, and compile time.

`counters["graph_break"][title]`, `counters["stats"]["unique_graphs"]`,
`counters["recompiles"][reason]`, and `counters["time"][phase]`: seconds spent
compiling, per phase (`PHASES`). `graphwright.reset()` clears them.

Phases nest (the backend compiles inside AOT autograd, which runs inside the
first call of an entry); each second is counted once, in the innermost phase
open at the time, so the phases add up to the whole compile time.
"""
from __future__ import annotations

import collections
import contextlib
import time
from typing import Callable, Iterator

counters: collections.defaultdict[str, collections.Counter] = collections.defaultdict(
    collections.Counter
)

PHASES = {
    "trace": "the strict tracer interpreting bytecode (re-traces at graph breaks included)",
    "guards": "generating the guard code of cache entries",
    "residual": "generating the rest of entries: residual code, resume functions, assembly",
    "aot": "AOT autograd: metadata pass, joint or inference trace, partition",
    "backend": "the backend compiling graphs (Inductor's code generation; a user's backend)",
}
"""The phases of `counters["time"]`, in the order a compile runs them."""

_open: list[list[float]] = []  # per open phase: [start, seconds spent in phases nested in it]
_observers: list[Callable[[str, float], None]] = []  # told each phase's own seconds as it closes


@contextlib.contextmanager
def observing_time(observer: Callable[[str, float], None]) -> Iterator[None]:
    """Call `observer(phase, seconds)` for every phase that closes while inside (a report
    attributes the seconds to the entry being compiled)."""
    _observers.append(observer)
    try:
        yield
    finally:
        _observers.remove(observer)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Count the time inside, minus that of phases nested inside, as `counters["time"][name]`."""
    record = [time.perf_counter(), 0.0]
    _open.append(record)
    try:
        yield
    finally:
        _open.pop()
        elapsed = time.perf_counter() - record[0]
        counters["time"][name] += elapsed - record[1]
        for observer in _observers:
            observer(name, elapsed - record[1])
        if _open:
            _open[-1][1] += elapsed


def compile_times() -> dict[str, float]:
    """Seconds per phase so far, in `PHASES` order (phases that never ran left out)."""
    times = counters.get("time", {})
    return {name: times[name] for name in PHASES if name in times}


def clear_counters() -> None:
    counters.clear()
