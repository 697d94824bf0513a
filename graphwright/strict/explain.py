"""`graphwright.explain`: what compiling a function on given inputs captured and where it broke.

Runs the function once through a fresh cache with a recording backend and
reports the graphs (its own, its resume functions' and its callees'), their
operators and every graph break with the user stack, what runs instead when
the function could not be split there, and, for a break inside a function
called with tensors and pytrees, advice: mark that function with
`nonstrict_trace`, or with `leaf_function` when it prints or has side effects.
"""
from __future__ import annotations

import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .._core.counters import compile_times, counters
from .._core.flat_call import nonstrict_call_sites
from .._core.source_lines import innermost_line
from .._core.user_stack import format_user_stack, is_user_file
from . import events
from .cache import CompiledFunction
from .entries import CompileSettings
from .interpreter import graph_breaks as gb
from .interpreter.frame import UnreadArgument
from .interpreter.graph_breaks import GraphBreak
from .objects.values import ConstantValue, DictValue, SequenceValue, TensorValue, Value
from .residual.call_routing import CallRouter

_SIDE_EFFECT_KINDS = (gb.PRINT_CALL, gb.TENSOR_TO_PYTHON)


@dataclass
class BreakReason:
    reason: str
    user_stack: list[traceback.FrameSummary]
    graph_break_id: str = ""
    advice: str = ""  # which function to mark, and how, to remove the break
    note: str = ""  # what runs instead when the function could not be split here


@dataclass
class ExplainOutput:
    """`graph_count`: graphs compiled; `graph_break_count`: the graph breaks met (PyTorch's
    explain counts `graph_count - 1` instead, and lists only breaks that ended a graph)."""

    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    break_reasons: list[BreakReason] = field(default_factory=list)
    ops_per_graph: list[list[Any]] = field(default_factory=list)
    compile_times: dict[str, float] = field(default_factory=dict)  # seconds per phase of this call

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
            if brk.note:
                lines.append(f"    Instead: {brk.note}")
            if brk.advice:
                lines.append(f"    Advice: {brk.advice}")
            lines.append("    User Stack:")
            lines.append("      " + format_user_stack(brk.user_stack).replace("\n", "\n      "))
        lines.append("Ops per Graph:")
        for index, gm in enumerate(self.graphs, 1):
            lines.append(f"  Ops {index}:")
            lines.extend(_op_line(node) for node in gm.graph.nodes if node.op.startswith("call"))
        sites = [site for gm in self.graphs for site in nonstrict_call_sites(gm)]
        if sites:
            lines.append("Nonstrict Trace Calls:")
            lines.extend(f"  {site.describe()}" for site in sites)
        if self.compile_times:
            lines.append(format_compile_times(self.compile_times))
        return "\n".join(lines)

    def record_graph(self, fn: Any, gm: torch.fx.GraphModule) -> None:
        self.graphs.append(gm)
        self.ops_per_graph.append([node.target for node in gm.graph.nodes if node.op.startswith("call")])

    def record_break(self, fn: Any, brk: GraphBreak) -> None:
        self.break_reasons.append(BreakReason(f"{brk.kind.title}: {brk.explanation}", brk.user_stack,
                                              brk.kind.gb_id, advice(brk), brk.split_note))


def explain_call(fn: Callable, args: tuple, kwargs: dict) -> ExplainOutput:
    """Compile `fn` (a Python function; for a method, its function with self in `args`) and run it."""
    return _explaining(lambda compile_function: compile_function(fn)(*args, **kwargs))


def explain_wrapper_call(wrapper: torch.nn.Module, args: tuple, kwargs: dict) -> ExplainOutput:
    """Call a module wrapper (`DistributedDataParallel`) as `graphwright.compile` runs it: its
    forward as Python, the module it wraps compiled."""
    def run(compile_function: Callable) -> Any:
        return CallRouter(compile_function).wrapper_call(type(wrapper))(wrapper, *args, **kwargs)
    return _explaining(run)


def _explaining(run: Callable[[Callable[[Callable], CompiledFunction]], Any]) -> ExplainOutput:
    """Run `run(compile_function)` through a fresh cache whose graphs and breaks are recorded."""
    output = ExplainOutput()

    def recording_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return gm.forward

    settings = CompileSettings(recording_backend)
    before = compile_times()
    with events.listening(events.on(output.record_graph, output.record_break)):
        run(lambda fn: CompiledFunction(fn, settings))
    output.compile_times = {phase: seconds - before.get(phase, 0.0) for phase, seconds in compile_times().items()}
    return output


def _op_line(node: torch.fx.Node) -> str:
    """An operation of a graph, with the user's line it came from."""
    where = innermost_line(node)
    name = getattr(node.target, "__name__", node.target)
    return f"    {name}  ({where})" if where else f"    {name}"


def format_compile_times(times: dict[str, float]) -> str:
    """`Compile Time: 0.123 s (trace 0.100, guards 0.001, ...)`, phases in the order they run."""
    phases = ", ".join(f"{phase} {seconds:.3f}" for phase, seconds in times.items())
    return f"Compile Time: {sum(times.values()):.3f} s ({phases})"


def advice(brk: GraphBreak) -> str:
    """For a break inside a user function called with tensors and pytrees: mark that function."""
    if len(brk.frames) < 2:
        return ""
    frame = brk.frames[0][0]
    code = frame.code
    if not is_user_file(code.co_filename) or code.co_name.startswith("<"):
        return ""
    parameters = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    if not all(_is_pytree(frame.locals.get(name)) for name in parameters):
        return ""
    where = f"`{code.co_qualname}` ({code.co_filename}:{code.co_firstlineno}) has only tensor and pytree inputs"
    if brk.kind in _SIDE_EFFECT_KINDS or not frame.tracer.side_effects.is_empty():
        return (f"{where}: mark it with `graphwright.leaf_function` (and "
                "register its fake implementation), which keeps its Python running as it is")
    return (f"{where}: mark it with `graphwright.nonstrict_trace` to "
            "capture it without a graph break")


def _is_pytree(value: Value | None) -> bool:
    if value is None:
        return False
    if isinstance(value, UnreadArgument):
        return _is_pytree_object(value.real)
    if isinstance(value, (TensorValue, ConstantValue)):
        return True
    if isinstance(value, SequenceValue):
        return all(_is_pytree(item) for item in value.items)
    if isinstance(value, DictValue):
        return value.kind is dict and all(_is_pytree(item) for item in value.items.values())
    return False


def _is_pytree_object(real: Any) -> bool:
    if isinstance(real, (torch.Tensor, int, float, bool, str, type(None))):
        return True
    if type(real) in (list, tuple):
        return all(_is_pytree_object(item) for item in real)
    if type(real) is dict:
        return all(_is_pytree_object(item) for item in real.values())
    return False


class ScriptReport(events.Listener):
    """Every compiled function of a run (`python -m graphwright explain`), grouped by the
    user's function behind it."""

    def __init__(self) -> None:
        self.by_function: dict[types.CodeType, ExplainOutput] = {}

    def _output(self, fn: Any) -> ExplainOutput:
        return self.by_function.setdefault(events.user_function(fn), ExplainOutput())

    def graph_compiled(self, fn: Any, gm: torch.fx.GraphModule) -> None:
        self._output(fn).record_graph(fn, gm)

    def graph_break(self, fn: Any, brk: GraphBreak) -> None:
        self._output(fn).record_break(fn, brk)

    def __str__(self) -> str:
        if not self.by_function:
            return "graphwright explain: nothing was compiled."
        parts = []
        for code, output in self.by_function.items():
            parts.append(f"=== {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) ===")
            parts.append(f"Graph Count: {output.graph_count}")
            parts.append(f"Graph Break Count: {output.graph_break_count}")
            for index, brk in enumerate(output.break_reasons, 1):
                frame = brk.user_stack[-1] if brk.user_stack else None
                place = f" at {frame.filename}:{frame.lineno}" if frame else ""
                parts.append(f"  Break {index}: {brk.reason.splitlines()[0]} ({brk.graph_break_id}){place}")
                if frame is not None and frame.line:
                    parts.append(f"      {frame.line}")
                if brk.note:
                    parts.append(f"    Instead: {brk.note}")
                if brk.advice:
                    parts.append(f"    Advice: {brk.advice}")
        parts.append(f"=== all functions ===\n{format_compile_times(compile_times())}")
        for title, group in (("AOT Cache", "aot_cache"), ("Inductor Caches", "inductor")):
            caches = ", ".join(f"{name} {count}" for name, count in sorted(counters[group].items()))
            if caches:
                parts.append(f"{title}: {caches}")
        return "\n".join(parts)
