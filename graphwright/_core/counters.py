"""`graphwright.counters`, laid out as PyTorch's `torch._dynamo.utils.counters`, and compile time.

`counters["graph_break"][title]`, `counters["stats"]["unique_graphs"]`,
`counters["recompiles"][reason]`, and `counters["time"][phase]`: seconds spent
compiling, per phase (`PHASES`). `graphwright.reset()` clears them.

Phases nest (the backend compiles inside AOT autograd, which runs inside the
first call of an entry); each second is counted once, in the innermost phase
open at the time, so the phases add up to the whole compile time. The entry
being compiled (`dump.current()`) counts its own share in `scope.times`.

Under `torch.profiler.profile()` each phase is also a profiler range
(`graphwright.trace`, `graphwright.aot`, ...), and in a compile trace a pair of
Chromium events (`structured_trace`).
"""
from __future__ import annotations

import collections
import time

import torch.autograd.profiler
from torch._C._profiler import _RecordFunctionFast

from . import dump, structured_trace

counters: collections.defaultdict[str, collections.Counter] = collections.defaultdict(
    collections.Counter
)

PHASES = {
    "trace": "the strict tracer interpreting bytecode (re-traces at graph breaks included)",
    "guards": "generating the guard code of cache entries",
    "residual": "generating the rest of entries: residual code, resume functions, assembly",
    "aot": "AOT autograd: joint or inference trace (with the graph's metadata), partition",
    "backend": "the backend compiling graphs (Inductor's code generation; a user's backend)",
}
"""The phases of `counters["time"]`, in the order a compile runs them."""

_open: list["phase"] = []  # the phases open now, innermost last


class phase:
    """`with phase(name):` counts the time inside, minus that of phases nested inside, as
    `counters["time"][name]` (a class, not a generator: a few of these open per compile)."""

    __slots__ = ("name", "start", "nested", "range")

    def __init__(self, name: str) -> None:
        self.name = name
        self.nested = 0.0  # seconds spent in phases nested in this one
        self.range = None

    def __enter__(self) -> None:
        _open.append(self)
        if torch.autograd.profiler._is_profiler_enabled:
            self.range = _RecordFunctionFast(f"graphwright.{self.name}")
            self.range.__enter__()
        if structured_trace.on:
            structured_trace.chromium_event(f"graphwright.{self.name}", "B", _compile_id())
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        elapsed = time.perf_counter() - self.start
        if structured_trace.on:
            structured_trace.chromium_event(f"graphwright.{self.name}", "E", _compile_id())
        if self.range is not None:
            self.range.__exit__(*exc)
            self.range = None
        _open.pop()
        own = elapsed - self.nested
        counters["time"][self.name] += own
        scope = dump.current()
        if scope is not None:
            scope.times[self.name] += own
        if _open:
            _open[-1].nested += elapsed


def _compile_id() -> str | None:
    scope = dump.current()
    return None if scope is None or scope.compile_id is None else str(scope.compile_id)


def compile_times() -> dict[str, float]:
    """Seconds per phase so far, in `PHASES` order (phases that never ran left out)."""
    times = counters.get("time", {})
    return {name: times[name] for name in PHASES if name in times}


def clear_counters() -> None:
    counters.clear()
