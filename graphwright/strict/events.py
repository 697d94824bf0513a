"""What compiling reports as it goes: each graph compiled and each graph break.

`counters` are updated here, and listeners (`graphwright.explain`, the
`python -m graphwright explain` command) are told, with the compiled
function each event belongs to. Resume functions and callees compiled for
the residual code report under their own function; `user_function` names the
user's function behind a resume function.
"""
from __future__ import annotations

import contextlib
import types
from typing import Callable, Iterator

import torch

from .._core.counters import counters
from .interpreter.graph_breaks import GraphBreak
from .residual.resume import original_code


class Listener:
    """Receives the events of the compilations made while it listens."""

    def graph_compiled(self, fn: types.FunctionType, gm: torch.fx.GraphModule) -> None:
        pass

    def graph_break(self, fn: types.FunctionType, brk: GraphBreak) -> None:
        pass


_LISTENERS: list[Listener] = []


def graph_compiled(fn: types.FunctionType, gm: torch.fx.GraphModule) -> None:
    counters["stats"]["unique_graphs"] += 1
    for listener in _LISTENERS:
        listener.graph_compiled(fn, gm)


def graph_break(fn: types.FunctionType, brk: GraphBreak) -> None:
    """`brk` split (or gave up on) `fn`: counted under its title, once per compile."""
    counters["graph_break"][brk.kind.title] += 1
    for listener in _LISTENERS:
        listener.graph_break(fn, brk)


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
