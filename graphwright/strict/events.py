"""What compiling reports as it goes: graphs, graph breaks, recompiles and cache entries.

`counters` are updated here, the log channels, the dump and the compile trace
are fed here (see `_core.logs`, `_core.dump`, `_core.structured_trace`), and
listeners (`graphwright.explain`, the `python -m graphwright explain` command,
a report) are told, with the compiled function each event belongs to. Resume
functions and callees compiled for the residual code report under their own
function; `user_function` names the user's function behind a resume function.

Everything here runs on the compile path only; with the channels off, no
dump, no trace and no listener, each event costs a few level checks.
"""
from __future__ import annotations

import contextlib
import time
import traceback
import types
from typing import Any, Callable, Iterator

import torch

from .._core import artifacts, logs, structured_trace
from .._core.counters import counters
from .._core.dump import CompileScope
from .._core.user_stack import format_user_stack, user_frames_of_stack
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
        artifacts.publish_graph("graph_code", f"TRACED GRAPH of {artifacts.scope_name()}", gm, "graph",
                                record="dynamo_output_graph")
    if _compiles:
        _compiles[-1].graph = gm


def graph_compiled(fn: types.FunctionType, gm: torch.fx.GraphModule) -> None:
    counters["stats"]["unique_graphs"] += 1
    for listener in _LISTENERS:
        listener.graph_compiled(fn, gm)


def graph_break(fn: types.FunctionType, brk: GraphBreak) -> None:
    """`brk` split (or gave up on) `fn`: counted under its title, once per compile."""
    counters["graph_break"][brk.kind.title] += 1
    if logs.enabled("graph_breaks"):
        logs.log("graph_breaks", describe_break(brk))
    if structured_trace.on:
        structured_trace.artifact("dynamo_graph_break_reason", describe_break(brk))
    if _compiles:
        _compiles[-1].breaks.append(f"{brk.kind.title}: {brk.explanation} ({brk.kind.gb_id})")
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
    if _compiles:
        _compiles[-1].failed_at = brk.user_stack[-1] if brk.user_stack else None
    for listener in _LISTENERS:
        listener.compile_failed(fn, brk)


def recompile_wanted() -> bool:
    """Whether anyone reads the reasons of every entry (`recompiling`): they cost a guard walk each."""
    return bool(_LISTENERS) or logs.enabled("recompiles") or structured_trace.on


def recompiling(fn: types.FunctionType, reasons: list[str], entries: list[Callable]) -> None:
    """`fn` compiles another entry: `reasons[i]` is why `entries[i]` (newest first) refused the call."""
    if logs.enabled("recompiles"):
        code = original_code(fn.__code__)
        failures = "\n".join(f"    - entry {len(reasons) - 1 - i}: {reason}" for i, reason in enumerate(reasons))
        logs.log("recompiles", f"Recompiling function {fn.__code__.co_qualname} in "
                               f"{code.co_filename}:{code.co_firstlineno}\n"
                               f"    triggered by the following guard failure(s):\n{failures}")
    if structured_trace.on:
        structured_trace.artifact("recompile_reasons", [f"{entry.compile_scope.compile_id}: {reason}"
                                                        for entry, reason in zip(entries, reasons)], "json")
    for listener in _LISTENERS:
        listener.recompile(fn, reasons)


def entry_built(fn: types.FunctionType, entry: Callable, namespace: dict) -> None:
    """A new entry of `fn`, assembled in `namespace`: its guards and residual code published."""
    if artifacts.wanted("guards"):
        guards = "\n".join(f"- {guard.describe()}" for guard in getattr(entry, "guards", ()))
        artifacts.publish("guards", f"GUARDS of {artifacts.scope_name()}", guards, "guards.txt",
                          record=("dynamo_cpp_guards_str", {}))
    if artifacts.wanted("bytecode"):
        if logs.enabled("bytecode"):
            logs.log("bytecode", f"RESIDUAL CODE of {artifacts.scope_name()} "
                                 f"(guards, graph call, side effects){_file_of(entry)}\n{entry.source}")
        if structured_trace.on:
            structured_trace.artifact(f"{fn.__code__.co_name}_RESIDUAL_CODE", entry.source)
        for code in generated_code(namespace):
            artifacts.publish("bytecode", f"GENERATED CODE {code.co_name} for {artifacts.scope_name()}",
                              listing(code), file_name(code),
                              record=("artifact", {"name": f"{code.co_name}_GENERATED_CODE", "encoding": "string"}))
    for listener in _LISTENERS:
        listener.entry_built(fn, entry)


def _file_of(entry: Callable) -> str:
    filename = entry.__code__.co_filename
    return "" if filename.startswith("<") else f" (written to {filename})"


class _Compile:
    """What the compile trace's metrics of one compile collect while it goes on."""

    def __init__(self) -> None:
        self.entry: Callable | None = None
        self.graph: torch.fx.GraphModule | None = None
        self.breaks: list[str] = []
        self.failed_at: traceback.FrameSummary | None = None


_compiles: list[_Compile] = []  # the compiles going on now, innermost last (traced ones only)


@contextlib.contextmanager
def compiling(fn: types.FunctionType, scope: CompileScope, reasons: list[str],
              entries: list[Callable]) -> Iterator[_Compile]:
    """The compile of a new entry of `fn`, which `entries` (newest first) refused for `reasons`
    (none for a first compile). In the compile trace: where it started (the user's stack), why
    it recompiles, and at the end its metrics; set `.entry` on what this yields."""
    compile_record = _Compile()
    if not structured_trace.on:
        if reasons:
            recompiling(fn, reasons, entries)
        yield compile_record
        return
    started, clock = time.time(), time.perf_counter()
    code = fn.__code__
    here = traceback.FrameSummary(code.co_filename, code.co_firstlineno, code.co_name, lookup_line=False)
    structured_trace.emit("dynamo_start", {"stack": structured_trace.stack([*user_frames_of_stack(), here])})
    if reasons:
        recompiling(fn, reasons, entries)
    _compiles.append(compile_record)
    error = None
    try:
        yield compile_record
    except BaseException as raised:
        error = raised
        raise
    finally:
        _compiles.pop()
        structured_trace.emit("compilation_metrics", _metrics(
            fn, scope, compile_record, error, started, time.perf_counter() - clock, len(entries)))


def _metrics(fn: types.FunctionType, scope: CompileScope, compile_record: _Compile, error: BaseException | None,
             started: float, seconds: float, cache_size: int) -> dict[str, Any]:
    """A compile's `compilation_metrics` record, in the fields tlparse reads."""
    code, gm, entry = fn.__code__, compile_record.graph, compile_record.entry
    nodes = list(gm.graph.nodes) if gm is not None else []
    failed_at = compile_record.failed_at
    return {
        "compile_id": str(scope.compile_id), "frame_key": str(scope.compile_id.frame_id),
        "co_name": code.co_name, "co_filename": code.co_filename, "co_firstlineno": code.co_firstlineno,
        "cache_size": cache_size, "accumulated_cache_size": cache_size,
        "guard_count": len(getattr(entry, "guards", ())), "shape_env_guard_count": 0,
        "graph_op_count": sum(node.op.startswith("call_") for node in nodes),
        "graph_node_count": len(nodes), "graph_input_count": sum(node.op == "placeholder" for node in nodes),
        "start_time": started, "entire_frame_compile_time_s": seconds,
        "backend_compile_time_s": scope.times.get("backend", 0.0) + scope.times.get("aot", 0.0),
        "fail_type": None if error is None else type(error).__name__,
        "fail_reason": None if error is None else str(error).split("\n")[0],
        "fail_user_frame_filename": None if failed_at is None else failed_at.filename,
        "fail_user_frame_lineno": None if failed_at is None else failed_at.lineno,
        "restart_reasons": compile_record.breaks, "has_guarded_code": entry is not None,
        "graphwright_phase_times_s": dict(scope.times),
    }


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
