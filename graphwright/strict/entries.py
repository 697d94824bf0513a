"""Building cache entries: trace, hand the graph to the backend, generate the entry.

`build_entry` returns the generated entry function for one call's inputs:
the captured graph plus residual code, or, after a graph break under
`fullgraph=False`, the guards met so far in front of the original function
(the whole function runs eagerly). `failure_reason` explains a miss.
"""
from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable

import torch
from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

from .._core import config
from .._core.counters import counters
from .._core.errors import BackendError
from .guards.codegen import EntryWriter, assemble, signature_text
from .guards.guards import Guard, ordered
from .interpreter import graph_breaks as gb
from .interpreter.graph_breaks import GraphBreak
from .interpreter.symbolic_sizes import SCALAR
from .interpreter.tracer import describe, trace_function


class PerShapeCompiled:
    """A graph with symbolic sizes, for a backend that bakes the example sizes into what it
    compiles: the backend compiles once per distinct input layout; capture happens once."""

    def __init__(self, backend: Callable, gm: torch.fx.GraphModule, example_inputs: list) -> None:
        self.backend = backend
        self.gm = gm
        self.by_layout = {self._layout(example_inputs): backend(gm, example_inputs)}

    @staticmethod
    def _layout(inputs: Any) -> tuple:
        return tuple((tuple(t.shape), t.stride()) if isinstance(t, torch.Tensor) else t for t in inputs)

    def __call__(self, *inputs: Any) -> Any:
        layout = self._layout(inputs)
        compiled = self.by_layout.get(layout)
        if compiled is None:
            compiled = self.by_layout[layout] = self.backend(self.gm, list(inputs))
        return compiled(*inputs)


def build_entry(fn: Callable, args: tuple, kwargs: dict, backend: Callable, fullgraph: bool,
                dynamic_all: bool = False, dynamic_dims: dict | None = None,
                backend_specialises: bool = False) -> Callable:
    """`backend_specialises`: the backend's output only serves the sizes it was compiled for."""
    try:
        result = trace_function(fn, args, kwargs, dynamic_all, dynamic_dims)
        try:
            return _graph_entry(fn, result, backend, backend_specialises)
        except (GraphBreak, BackendError):
            raise
        except Exception as error:  # a bug after tracing: never the user's crash
            brk = GraphBreak(gb.INTERNAL_ERROR, gb.INTERNAL_ERROR.explanation.format(error=describe(error)),
                             f"{type(error).__name__} while generating the entry", result.final_stack)
            brk.guards = result.guards
            raise brk from error
    except GraphBreak as brk:
        if fullgraph:
            raise brk.to_unsupported() from None
        if brk.kind is gb.INTERNAL_ERROR:
            warnings.warn(f"graphwright could not compile {fn.__qualname__}, running it eagerly:\n"
                          f"{brk.to_unsupported()}", stacklevel=4)
        else:
            counters["graph_break"][brk.kind.title] += 1
        entry = _eager_entry(fn, getattr(brk, "guards", []))
        entry.graph_break = brk
        return entry


def _graph_entry(fn: Callable, result: Any, backend: Callable, backend_specialises: bool) -> Callable:
    writer = EntryWriter(fn.__code__, _late_break(result))
    guard_lines = writer.guard_lines(result.guards)
    writer.lines = pre = []
    replays = writer.replay_lines(result.side_effects)
    returned = writer.rebuild(result.output)
    graph = result.graph
    body = list(pre)
    if graph.op_count() or writer.rebuilt_tensor:
        inputs = [writer.expr(source) for source in graph.input_sources]
        body = list(pre)
        gm = graph.finish(writer.outputs)
        try:
            if graph.symbolic is not None and backend_specialises:
                compiled = PerShapeCompiled(backend, gm, list(graph.example_inputs))
            else:
                compiled = backend(gm, list(graph.example_inputs))
        except Exception as error:
            raise BackendError(
                f"Backend {getattr(backend, '__name__', type(backend).__name__)} failed to compile a graph",
                explanation=f"{type(error).__name__}: {error}",
                hints=["Try `backend=\"eager\"` to check that capture itself works."]) from error
        counters["stats"]["unique_graphs"] += 1
        writer.namespace["___graph"] = compiled
        body.append(f"___out = ___graph({', '.join(inputs)})")
    body += replays
    body.append(f"return {returned}")
    entry = assemble(writer, fn, guard_lines, body, fn.__qualname__)
    entry.guards = result.guards
    return entry


def _late_break(result: Any) -> Callable[..., Exception]:
    def on_break(kind: gb.GraphBreakKind, debug_context: str, **details: Any) -> Exception:
        brk = GraphBreak(kind, kind.explanation.format(**details), debug_context, result.final_stack)
        brk.guards = result.guards
        return brk
    return on_break


def _eager_entry(fn: Callable, guards: list[Guard]) -> Callable:
    writer = EntryWriter(fn.__code__, _no_break)
    guard_lines = writer.guard_lines(guards)
    _, call = signature_text(fn.__code__)
    entry = assemble(writer, fn, guard_lines, [f"return ___gw_fn({call})"], fn.__qualname__)
    entry.guards = guards
    return entry


def _no_break(kind: gb.GraphBreakKind, debug_context: str, **details: Any) -> Exception:
    return AssertionError(debug_context)


def failure_reason(entry: Callable, fn: Callable, args: tuple, kwargs: dict) -> str:
    """The first guard of `entry` that the call `fn(*args, **kwargs)` fails, in user terms."""
    try:
        bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError as error:
        return f"arguments do not match: {error}"
    bound.apply_defaults()
    for guard in ordered(entry.guards):
        try:
            actual = None if guard.kind in ("grad_mode", "global_state", "sizes") \
                else guard.source.read(fn, bound.arguments)
            if guard.kind == "sizes":
                code, sources = guard.expected
                inputs = {f"t{i}": source.read(fn, bound.arguments) for i, source in enumerate(sources)}
                reason = None if eval(code, dict(SYMPY_INTERP), {"L": inputs}) else \
                    f"sizes no longer satisfy: {code}"
            elif guard.kind in ("alias", "distinct"):
                same = actual is guard.expected.read(fn, bound.arguments)
                reason = None if same == (guard.kind == "alias") else \
                    f"'{guard.source.name()}' and '{guard.expected.name()}' " + \
                    ("are no longer the same object" if guard.kind == "alias" else "are now the same object")
            else:
                reason = guard.failure(actual)
        except Exception as error:
            reason = f"could not read '{guard.source.name()}': {type(error).__name__}: {error}"
        if reason is not None:
            return reason
    return "a guard failed"


def changed_sizes(entry: Callable, fn: Callable, args: tuple, kwargs: dict) -> dict[Any, frozenset[int]]:
    """Input dimensions whose size alone differs from what `entry` was traced for: the
    candidates for symbolic sizes under `dynamic=None`."""
    try:
        bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError:
        return {}
    bound.apply_defaults()
    changed = {}
    for guard in entry.guards:
        if guard.kind == "const" and type(guard.expected) is int:
            try:
                actual = guard.source.read(fn, bound.arguments)
            except Exception:
                continue
            if type(actual) is int and actual != guard.expected:
                changed[guard.source] = SCALAR
        if guard.kind != "tensor":
            continue
        meta = guard.expected
        try:
            actual = guard.source.read(fn, bound.arguments)
        except Exception:
            continue
        if not isinstance(actual, torch.Tensor) or actual.dim() != len(meta.shape) \
                or actual.dtype != meta.dtype or actual.device != meta.device:
            continue
        dims = frozenset(i for i, size in enumerate(actual.shape) if size != meta.shape[i])
        if dims:
            changed[guard.source] = dims
    return changed


def cache_limit_warning(fn: Callable, reason: str) -> str:
    code = fn.__code__
    return (f"graphwright hit config.cache_size_limit ({config.cache_size_limit})\n"
            f"   function: '{code.co_name}' ({code.co_filename}:{code.co_firstlineno})\n"
            f"   last reason: {reason}\n"
            "To avoid recompiling, check why the inputs change (see the reason above), or raise "
            "`graphwright.config.cache_size_limit`. Calls that miss the cache now run eagerly.")

