"""What a report records of a run: every compiled function's cache entries, graphs, breaks, time.

`Recording` listens to the compiler's events (`strict.events`) while it is on.
Everything is filed under the user's function (a resume function's entries
under the function it continues), and, within it, under the cache entry being
compiled when it happened (the entry's compile scope, `_core.dump`): its
guards, why it was compiled when others existed (recompile reasons), the
graphs it compiled, the breaks met, and the seconds of each compile phase the
scope counted (trace, guards, residual code, AOT, backend; AOT work done on the
entry's first call and the lazy backward included).

It holds the captured graphs themselves; `page` renders them. It never
changes what is compiled.
"""
from __future__ import annotations

import collections
import traceback
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from .._core import dump
from ..strict import events
from ..strict.explain import advice
from ..strict.interpreter.graph_breaks import GraphBreak


@dataclass
class BreakRecord:
    """A graph break, or under `fullgraph=True` the error that stopped the compile (`fatal`)."""

    title: str
    gb_id: str
    explanation: str
    hints: tuple[str, ...]
    user_stack: list[traceback.FrameSummary]
    note: str = ""  # what runs instead, when the function could not be split there
    advice: str = ""  # which function to mark, and how
    fatal: bool = False

    @classmethod
    def of(cls, brk: GraphBreak, fatal: bool) -> "BreakRecord":
        return cls(brk.kind.title, brk.kind.gb_id, brk.explanation, tuple(brk.kind.hints),
                   list(brk.user_stack), brk.split_note, advice(brk), fatal)


@dataclass
class EntryRecord:
    """One cache entry of a function (the user's, or one of its resume functions)."""

    code: types.CodeType
    number: int  # its place in that function's cache: 0 is the first compiled
    scope: Any = None  # the compile scope it was built in
    guards: list[str] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    breaks: list[BreakRecord] = field(default_factory=list)
    built: bool = False  # False: the compile raised (fullgraph)


@dataclass
class FunctionRecord:
    """A user's function and every entry compiled for it or its resume functions, in order."""

    code: types.CodeType
    entries: list[EntryRecord] = field(default_factory=list)

    @property
    def graphs(self) -> list[torch.fx.GraphModule]:
        return [gm for entry in self.entries for gm in entry.graphs]

    @property
    def breaks(self) -> list[BreakRecord]:
        return [brk for entry in self.entries for brk in entry.breaks]

    @property
    def recompiles(self) -> list[EntryRecord]:
        return [entry for entry in self.entries if entry.recompile_reasons]


class Recording(events.Listener):
    """Records while `start()`ed, until `stop()`; `functions` in the order first compiled."""

    def __init__(self) -> None:
        self.functions: dict[types.CodeType, FunctionRecord] = {}
        self._entries: dict[int, EntryRecord] = {}  # by id(scope)
        self._reasons: dict[types.CodeType, list[str]] = {}  # recompile reasons waiting for the entry
        self._contexts: list[Any] = []

    def start(self) -> "Recording":
        context = events.listening(self)
        context.__enter__()
        self._contexts.append(context)
        return self

    def stop(self) -> None:
        while self._contexts:
            self._contexts.pop().__exit__(None, None, None)

    def entry_times(self, entry: EntryRecord) -> collections.Counter:
        return collections.Counter() if entry.scope is None else entry.scope.times

    def function_times(self, function: FunctionRecord) -> collections.Counter:
        total: collections.Counter = collections.Counter()
        for entry in function.entries:
            total.update(self.entry_times(entry))
        return total

    def total_times(self) -> collections.Counter:
        total: collections.Counter = collections.Counter()
        for function in self.functions.values():
            total.update(self.function_times(function))
        return total

    # -- events --------------------------------------------------------------------------
    def _entry(self, fn: types.FunctionType) -> EntryRecord:
        scope = dump.current()
        entry = self._entries.get(id(scope)) if scope is not None else None
        if entry is None or entry.scope is not scope:
            number = scope.entry if scope is not None else 0
            entry = EntryRecord(fn.__code__, number, scope)
            if scope is not None:
                self._entries[id(scope)] = entry
            function = self.functions.setdefault(events.user_function(fn), FunctionRecord(events.user_function(fn)))
            function.entries.append(entry)
            entry.recompile_reasons = self._reasons.pop(fn.__code__, [])
        return entry

    def graph_compiled(self, fn: types.FunctionType, gm: torch.fx.GraphModule) -> None:
        self._entry(fn).graphs.append(gm)

    def graph_break(self, fn: types.FunctionType, brk: GraphBreak) -> None:
        self._entry(fn).breaks.append(BreakRecord.of(brk, fatal=False))

    def compile_failed(self, fn: types.FunctionType, brk: GraphBreak) -> None:
        self._entry(fn).breaks.append(BreakRecord.of(brk, fatal=True))

    def recompile(self, fn: types.FunctionType, reasons: list[str]) -> None:
        self._reasons[fn.__code__] = list(reasons)

    def entry_built(self, fn: types.FunctionType, entry: Any) -> None:
        record = self._entry(fn)
        record.built = True
        record.guards = [guard.describe() for guard in getattr(entry, "guards", ())]
