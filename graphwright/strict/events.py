"""What compiling reports as it goes: graphs, graph breaks, recompiles and cache entries.

`counters` are updated here, the log channels and the dump are fed here (see
`_core.logs`, `_core.dump`), and listeners (`graphwright.explain`, the
`python -m graphwright explain` command, a report) are told, with the
compiled function each event belongs to. Resume functions and callees
compiled for the residual code report under their own function;
`user_function` names the user's function behind a resume function.

Everything here runs on the compile path only; with the channels off, no
dump and no listener, each event costs a few level checks.
"""
from __future__ import annotations

import contextlib
import types
from typing import Callable, Iterator

import torch

from .._core import artifacts, logs
from .._core.counters import counters
from .._core.user_stack import format_user_stack
from .interpreter.graph_breaks import GraphBreak
from .residual.listing import file_name, generated_code, listing
from .residual.resume import original_code


class Listener:
    """Receives the events of the compilations made while it listens."""

    def graph_compiled(self, fn: types.FunctionType, gm: torch.fx.GraphModule) -> None:
        pass

    def graph_break(self, fn: types.FunctionType, brk: GraphBreak) -> None:
        pass

    def compile_failed(self, fn: types.FunctionType, brk: GraphBreak) -> None:
        """Under `fullgraph=True`, `brk` stopped the compile of `fn`: the call raises `Unsupported`."""

    def recompile(self, fn: types.FunctionType, reasons: list[str]) -> None:
        """`fn` compiles again: why each existing entry (newest first) refused the call."""

    def entry_built(self, fn: types.FunctionType, entry: Callable) -> None:
        """A new cache entry of `fn`: `entry.guards` (`Guard`s, `.describe()`), `entry.source`,
        `entry.compile_scope` (`.function`, `.entry`, `.folder`, and `.times`: its compile time per
        phase, still growing: the rest of this compile, its graphs' AOT and backend compiles)."""


_LISTENERS: list[Listener] = []


def graph_captured(fn: types.FunctionType, gm: torch.fx.GraphModule) -> None:
    """`gm` was captured from `fn` and goes to the backend now."""
    if artifacts.wanted("graph_code"):
        artifacts.publish_graph("graph_code", f"TRACED GRAPH of {artifacts.scope_name()}", gm, "graph")


def graph_compiled(fn: types.FunctionType, gm: torch.fx.GraphModule) -> None:
    counters["stats"]["unique_graphs"] += 1
    for listener in _LISTENERS:
        listener.graph_compiled(fn, gm)


def graph_break(fn: types.FunctionType, brk: GraphBreak) -> None:
    """`brk` split (or gave up on) `fn`: counted under its title, once per compile."""
    counters["graph_break"][brk.kind.title] += 1
    if logs.enabled("graph_breaks"):
        logs.log("graph_breaks", describe_break(brk))
    for listener in _LISTENERS:
        listener.graph_break(fn, brk)


def describe_break(brk: GraphBreak) -> str:
    frame = brk.user_stack[-1] if brk.user_stack else None
    where = f" at {frame.filename}:{frame.lineno}" if frame is not None else ""
    lines = [f"Graph break in user code{where}", f"Reason: {brk.kind.title}: {brk.explanation} ({brk.kind.gb_id})",
             "User code traceback:", format_user_stack(brk.user_stack)]
    if getattr(brk, "split_note", ""):
        lines.append(f"Instead: {brk.split_note}")
    return "\n".join(lines)


def compile_failed(fn: types.FunctionType, brk: GraphBreak) -> None:
    """`brk` under `fullgraph=True`: not a graph break (nothing was split), an error; listeners are told."""
    for listener in _LISTENERS:
        listener.compile_failed(fn, brk)


def recompile_wanted() -> bool:
    """Whether anyone reads the reasons of every entry (`recompiling`): they cost a guard walk each."""
    return bool(_LISTENERS) or logs.enabled("recompiles")


def recompiling(fn: types.FunctionType, reasons: list[str]) -> None:
    """`fn` compiles another entry: `reasons[i]` is why entry i (newest first) refused the call."""
    if logs.enabled("recompiles"):
        code = original_code(fn.__code__)
        failures = "\n".join(f"    - entry {len(reasons) - 1 - i}: {reason}" for i, reason in enumerate(reasons))
        logs.log("recompiles", f"Recompiling function {fn.__code__.co_qualname} in "
                               f"{code.co_filename}:{code.co_firstlineno}\n"
                               f"    triggered by the following guard failure(s):\n{failures}")
    for listener in _LISTENERS:
        listener.recompile(fn, reasons)


def entry_built(fn: types.FunctionType, entry: Callable, namespace: dict) -> None:
    """A new entry of `fn`, assembled in `namespace`: its guards and residual code published."""
    if artifacts.wanted("guards"):
        guards = "\n".join(f"- {guard.describe()}" for guard in getattr(entry, "guards", ()))
        artifacts.publish("guards", f"GUARDS of {artifacts.scope_name()}", guards, "guards.txt")
    if artifacts.wanted("bytecode"):
        if logs.enabled("bytecode"):
            logs.log("bytecode", f"RESIDUAL CODE of {artifacts.scope_name()} "
                                 f"(guards, graph call, side effects){_file_of(entry)}\n{entry.source}")
        for code in generated_code(namespace):
            artifacts.publish("bytecode", f"GENERATED CODE {code.co_name} for {artifacts.scope_name()}",
                              listing(code), file_name(code))
    for listener in _LISTENERS:
        listener.entry_built(fn, entry)


def _file_of(entry: Callable) -> str:
    filename = entry.__code__.co_filename
    return "" if filename.startswith("<") else f" (written to {filename})"


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[Listener]:
    _LISTENERS.append(listener)
    try:
        yield listener
    finally:
        _LISTENERS.remove(listener)


def user_function(fn: types.FunctionType) -> types.CodeType:
    """The user's code object behind `fn` (for a resume function, the function it continues)."""
    return original_code(fn.__code__)


def on(graph: Callable | None = None, brk: Callable | None = None) -> Listener:
    """A listener from plain functions of (fn, gm) and (fn, brk)."""
    listener = Listener()
    if graph is not None:
        listener.graph_compiled = graph
    if brk is not None:
        listener.graph_break = brk
    return listener
