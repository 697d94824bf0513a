"""`graphwright.explain`: what compiling a function on given inputs captured and where it broke.

Runs the function once through a fresh cache with a recording backend and
reports the graphs, their operators and the graph breaks with user stacks.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .._core.flat_call import nonstrict_call_sites
from .._core.user_stack import format_user_stack
from .cache import CompiledFunction
from .entries import CompileSettings
from .interpreter import graph_breaks as gb


@dataclass
class BreakReason:
    reason: str
    user_stack: list[traceback.FrameSummary]
    graph_break_id: str = ""


@dataclass
class ExplainOutput:
    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    break_reasons: list[BreakReason] = field(default_factory=list)
    ops_per_graph: list[list[Any]] = field(default_factory=list)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.break_reasons)

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {sum(len(ops) for ops in self.ops_per_graph)}", "Break Reasons:"]
        for index, brk in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {index}:")
            lines.append(f"    Reason: {brk.reason} ({brk.graph_break_id})")
            lines.append("    User Stack:")
            lines.append("      " + format_user_stack(brk.user_stack).replace("\n", "\n      "))
        lines.append("Ops per Graph:")
        for index, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Ops {index}:")
            lines.extend(f"    {getattr(op, '__name__', op)}" for op in ops)
        sites = [site for gm in self.graphs for site in nonstrict_call_sites(gm)]
        if sites:
            lines.append("Nonstrict Trace Calls:")
            lines.extend(f"  {site.describe()}" for site in sites)
        return "\n".join(lines)


def explain_call(fn: Callable, args: tuple, kwargs: dict) -> ExplainOutput:
    """Compile `fn` (a Python function; for a method, its function with self in `args`) and run it."""
    output = ExplainOutput()

    def recording_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        output.graphs.append(gm)
        output.ops_per_graph.append([node.target for node in gm.graph.nodes if node.op.startswith("call")])
        return gm.forward

    def record_break(brk: gb.GraphBreak) -> None:
        output.break_reasons.append(BreakReason(f"{brk.kind.title}: {brk.explanation}", brk.user_stack,
                                                brk.kind.gb_id))

    compiled = CompiledFunction(fn, CompileSettings(recording_backend))
    with gb.listening(record_break):
        compiled(*args, **kwargs)
    return output
