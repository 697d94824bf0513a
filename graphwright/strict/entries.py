"""Building cache entries: trace, hand the graph to the backend, generate the entry.

`build_entry` returns the generated entry function for one call's inputs: the
guards, the captured graph and the residual code. After a graph break under
`fullgraph=False` it asks `residual.split` where to split, traces again up to
that point, and generates an entry that runs the graph so far and continues
in Python (a resume function, or the rest of the function uncompiled); when
no split is possible the entry runs the whole function in Python.
`failure_reason` explains a miss.
"""
from __future__ import annotations


import inspect
import types
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch
from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

from .._core import config, dump
from .._core.counters import phase
from .._core.errors import BackendError, BackendRefusal, GraphwrightError
from .._core.tracing_context import compiling_with
from .._core.jagged import make_view_dummy
from .._core.subclass_protocol import overrides_torch_function
from .._core.user_stack import warn_at_user_line
from . import events
from .guards.codegen import EntryWriter, assemble, signature_text
from .guards.guards import STATE_KINDS, ordered, torch_function_state
from .guards.sources import AttrSource
from .interpreter import graph_breaks as gb
from .interpreter.graph_breaks import GraphBreak
from .interpreter.symbolic_sizes import SCALAR, DataDependence
from .interpreter.tracer import TraceResult, describe, trace_function
from .objects.numpy_arrays import is_numpy_scalar
from .objects.values import TensorValue
from .residual.call_routing import CallRouter
from .residual.rebuild import ResidualWriter
from .residual.split import (
    CannotResume,
    Continuation,
    SplitPlan,
    checkpoint_plan,
    exit_open_contexts,
    plan_split,
)


@dataclass(frozen=True)
class CompileSettings:
    """How a function is compiled; resume functions and callees inherit them (never fullgraph)."""

    backend: Callable
    fullgraph: bool = False
    dynamic: bool | None = False
    backend_specialises: bool = False  # the backend's output serves only the sizes it saw
    # a user's callable: compiled under a TracingContext holding the trace's fake mode, as
    # torch.compile calls backends (PyTorch's own compilers find the symbolic sizes there)
    users_backend: bool = False

    def for_residual_calls(self) -> "CompileSettings":
        return replace(self, fullgraph=False)


CompileFunction = Callable[[types.FunctionType], Callable]


class PerShapeCompiled:
    """A graph with symbolic sizes, for a backend that bakes the example sizes into what it
    compiles: the backend compiles once per distinct input layout; capture happens once."""

    def __init__(self, backend: Callable, gm: torch.fx.GraphModule, example_inputs: list) -> None:
        self.backend = backend
        self.gm = gm
        self.scope = dump.current()  # later compiles are the entry's too
        self.by_layout = {self._layout(example_inputs): backend(gm, example_inputs)}

    @staticmethod
    def _layout(inputs: Any) -> tuple:
        return tuple((tuple(t.shape), t.stride()) if isinstance(t, torch.Tensor) else t for t in inputs)

    def __call__(self, *inputs: Any) -> Any:
        layout = self._layout(inputs)
        compiled = self.by_layout.get(layout)
        if compiled is None:
            with dump.within(self.scope), phase("backend"):
                compiled = self.by_layout[layout] = self.backend(self.gm, list(inputs))
        return compiled(*inputs)


def build_entry(fn: Callable, args: tuple, kwargs: dict, settings: CompileSettings,
                dynamic_dims: dict | None, compile_function: CompileFunction) -> Callable:
    """The entry for `fn(*args, **kwargs)`; `compile_function` compiles resume functions and
    callees that the residual code calls."""
    dynamic_all = settings.dynamic is True
    dependence = data_dependence(settings)
    try:
        try:
            result = trace_function(fn, args, kwargs, dynamic_all, dynamic_dims, data_dependence=dependence)
        except GraphBreak as brk:
            if not brk.needs_sizes or dependence.sizes:
                raise
            # a jagged tensor made in the region: its ragged size is a symbol, traced again with a ShapeEnv
            dependence = replace(dependence, sizes=True)
            make_view_dummy()
            result = trace_function(fn, args, kwargs, dynamic_all, dynamic_dims, data_dependence=dependence)
        if not settings.fullgraph and _runs_no_operation(result):
            return _python_entry(fn, result.guards, CallRouter(compile_function))
        return _internal_errors_as_breaks(result, lambda: _graph_entry(fn, result, settings))
    except GraphBreak as brk:
        errors = settings.fullgraph or brk.error_on_graph_break
        if errors and isinstance(brk.user_error, ImportError):
            raise import_error(brk) from None
        if errors:
            events.compile_failed(fn, brk)
            raise brk.to_unsupported() from brk.user_error  # the program's own exception, if any
        if brk.kind is gb.INTERNAL_ERROR:
            warnings.warn(f"graphwright could not compile {fn.__qualname__}, running it eagerly:\n"
                          f"{brk.to_unsupported()}", stacklevel=5)
            return _eager_entry(fn, brk)
        return _split_entry(fn, args, kwargs, settings, dynamic_dims, CallRouter(compile_function), brk, dependence)


def import_error(brk: GraphBreak) -> ImportError:
    """An import that failed while tracing: the user's own ImportError (an environment's
    problem, not a limit of capture), with a note naming the line of the import."""
    error = brk.user_error
    if brk.user_stack:
        frame = brk.user_stack[-1]
        error.add_note(f"raised by the import at {frame.filename}:{frame.lineno}, in a function compiled "
                       "by graphwright")
    return error


def data_dependence(settings: CompileSettings) -> DataDependence:
    """What the config asks to capture of values that depend on data; everything under fullgraph."""
    return DataDependence(scalars=settings.fullgraph or config.capture_scalar_outputs,
                          shapes=settings.fullgraph or config.capture_dynamic_output_shape_ops)


def _split_entry(fn: Callable, args: tuple, kwargs: dict, settings: CompileSettings, dynamic_dims: dict | None,
                 router: CallRouter, brk: GraphBreak, dependence: DataDependence) -> Callable:
    try:
        return _split(fn, args, kwargs, settings, dynamic_dims, router, brk, dependence)
    except GraphwrightError:
        raise  # typed already (a backend's failure)
    except Exception as error:  # a bug while splitting is never the user's crash: eager, with a warning
        warnings.warn(f"graphwright could not split {fn.__qualname__} at a graph break, running it eagerly:\n"
                      f"{describe(error)}", stacklevel=5)
        return _eager_entry(fn, brk)
    finally:
        events.graph_break(fn, brk)
        brk.frames = []  # the tracer's frames: not kept alive by the entry that keeps `brk`


def _split(fn: Callable, args: tuple, kwargs: dict, settings: CompileSettings, dynamic_dims: dict | None,
           router: CallRouter, brk: GraphBreak, dependence: DataDependence) -> Callable:
    if brk.rejected_arguments:
        brk.split_note = "an operator rejected its arguments: the function runs as eager Python, uncompiled"
        return _eager_entry(fn, brk)
    plan = plan_split(brk)
    while plan.kind != "skip":
        try:
            result = trace_function(fn, args, kwargs, settings.dynamic is True, dynamic_dims, stop_at=plan.step,
                                    data_dependence=dependence)
        except GraphBreak:
            break  # the trace did not repeat itself: keep to plain Python
        if result.stopped is None:
            break
        try:
            entry = _internal_errors_as_breaks(result, lambda: _stopped_entry(
                fn, result, settings, router, plan, route_callee=_routes_callee(brk)))
            entry.graph_break = brk
            return entry
        except (CannotResume, GraphBreak) as why:
            if isinstance(why, GraphBreak) and why.kind is gb.INTERNAL_ERROR:
                warnings.warn(f"graphwright could not split {fn.__qualname__} at a graph break, running it "
                              f"eagerly:\n{why.to_unsupported()}", stacklevel=6)
                break
            plan = checkpoint_plan(result.stopped.frame) if plan.kind == "resume" else SplitPlan("skip")
    brk.split_note = plan.reason or "the function runs in plain Python, the functions it calls are compiled"
    return _eager_entry(fn, brk, router)


def _internal_errors_as_breaks(result: TraceResult, make: Callable[[], Callable]) -> Callable:
    """A bug after tracing is never the user's crash: it becomes an internal-error break."""
    try:
        return make()
    except (GraphBreak, BackendError, CannotResume):
        raise
    except Exception as error:
        brk = GraphBreak(gb.INTERNAL_ERROR, gb.INTERNAL_ERROR.explanation.format(error=describe(error)),
                         f"{type(error).__name__} while generating the entry", result.final_stack)
        brk.guards = result.guards
        raise brk from error


def _routes_callee(brk: GraphBreak) -> bool:
    """Whether the call the trace stopped at goes through the router: the break happened inside
    the callee, or at a module call whose hooks or lazy initialization run in Python around
    its compiled parts."""
    return len(brk.frames) > 1 or brk.kind in (gb.MODULE_HOOKS, gb.LAZY_MODULE)


def _stopped_entry(fn: Callable, result: TraceResult, settings: CompileSettings, router: CallRouter,
                   plan: SplitPlan, route_callee: bool) -> Callable:
    writer = ResidualWriter(fn.__code__, _late_break(result))
    guard_lines = writer.guard_lines(result.guards)
    stop = result.stopped
    continuation = Continuation(writer, stop.frame, stop.inst, router, route_callee)
    tail = continuation.resume_tail() if plan.kind == "resume" else continuation.rest_tail()
    exit_open_contexts(result.graph, continuation.contexts)
    return _graph_entry(fn, result, settings, tail, writer, guard_lines)


def _graph_entry(fn: Callable, result: TraceResult, settings: CompileSettings, tail: list[str] = (),
                 writer: ResidualWriter | None = None, guard_lines: list[str] | None = None) -> Callable:
    """Guards, the graph, the rebuilt values and replayed side effects, then `tail` (or, for a
    finished trace, the return of its output)."""
    finished = writer is None
    if finished:
        writer = ResidualWriter(fn.__code__, _late_break(result))
        guard_lines = writer.guard_lines(result.guards)
        tail = [f"return {writer.rebuild(result.output)}"]
    replays = writer.replay_lines(result.side_effects)
    graph = result.graph
    call = []
    # As in PyTorch: a graph when there are operations or computed values; under fullgraph,
    # also for a function that returns one tensor and does nothing else.
    returns_tensor_alone = finished and settings.fullgraph and isinstance(result.output, TensorValue) \
        and result.side_effects.is_empty()
    if graph.op_count() and not graph.only_undone_switches() or writer.outputs or returns_tensor_alone:
        inputs = [writer.expr(source) for source in graph.input_sources]
        graph.drop_grad_mode_round_trips(torch.is_grad_enabled())  # the trace is over: the entry's mode
        gm = graph.finish(writer.outputs)
        call = [f"___out = {writer.ref(_compiled_graph(fn, settings, gm, graph))}({', '.join(inputs)})"]
    body = [*writer.reads, *call, *writer.rebuilt, *replays, *tail]
    entry = assemble(writer, fn, guard_lines, body, fn.__qualname__)
    entry.guards = result.guards
    return entry


def _compiled_graph(fn: Callable, settings: CompileSettings, gm: torch.fx.GraphModule, graph: Any) -> Callable:
    backend = settings.backend
    events.graph_captured(fn, gm)
    try:
        with phase("backend"), compiling_with(graph.fake_mode if settings.users_backend else None):
            if graph.symbolic is not None and settings.backend_specialises:
                compiled = PerShapeCompiled(backend, gm, list(graph.example_inputs))
            else:
                compiled = backend(gm, list(graph.example_inputs))
    except BackendRefusal as refusal:
        if settings.fullgraph:
            raise
        warn_at_user_line(f"graphwright runs a graph of {fn.__qualname__} as captured, without its "
                          f"backend:\n{refusal}", refusal.user_stack)
        compiled = gm.forward  # as the `eager` backend runs it
    except Exception as error:
        raise BackendError(
            f"Backend {getattr(backend, '__name__', type(backend).__name__)} failed to compile a graph",
            explanation=f"{type(error).__name__}: {error}",
            hints=["Try `backend=\"eager\"` to check that capture itself works."]) from error
    events.graph_compiled(fn, gm)
    if any(isinstance(value, torch.Tensor) and overrides_torch_function(type(value)) for value in graph.example_inputs):
        compiled = _without_torch_function(compiled)
    return compiled


def _without_torch_function(compiled: Callable) -> Callable:
    """The graph run with tensor subclasses' `__torch_function__` off: the tracer ran them (and the
    side effects they had are replayed), the graph computes plain tensors."""
    def run(*args):
        with torch._C.DisableTorchFunctionSubclass():
            return compiled(*args)
    return run


def _late_break(result: TraceResult) -> Callable[..., Exception]:
    def on_break(kind: gb.GraphBreakKind, debug_context: str, **details: Any) -> Exception:
        brk = GraphBreak(kind, kind.explanation.format(**details), debug_context, result.final_stack)
        brk.guards = result.guards
        return brk
    return on_break


def _runs_no_operation(result: TraceResult) -> bool:
    """The trace recorded nothing a graph would run. As in PyTorch, such a function is not
    compiled: it runs as Python, and its calls are compiled. Unless it asked
    `torch.compiler.is_compiling()`: then the answer it acted on must stay True (a helper that
    returns a tensor when compiling and a float otherwise feeds compiled code)."""
    graph = result.graph
    return not result.asked_if_compiling and (graph.op_count() == 0 or graph.only_undone_switches())


def _eager_entry(fn: Callable, brk: GraphBreak, router: CallRouter | None = None) -> Callable:
    """The whole function in Python after the break `brk`: its calls routed to compiled
    wrappers by `router` (none after an internal error: then the original runs untouched)."""
    entry = _python_entry(fn, getattr(brk, "guards", []), router)
    entry.graph_break = brk
    return entry


def _python_entry(fn: Callable, guards: list, router: CallRouter | None) -> Callable:
    """Under `guards`, the whole function in Python, its calls routed by `router` (if any)."""
    writer = EntryWriter(fn.__code__)
    guard_lines = writer.guard_lines(guards)
    _, call = signature_text(fn.__code__)
    function = "___gw_fn"
    if router is not None:
        writer.namespace["___function_type"] = types.FunctionType
        function = (f"___function_type({writer.ref(router.routed_code(fn.__code__))}, ___gw_fn.__globals__, "
                    "None, ___gw_fn.__defaults__, ___gw_fn.__closure__)")
        if fn.__kwdefaults__:
            writer.namespace["___with_kwdefaults"] = _with_kwdefaults
            function = f"___with_kwdefaults({function}, ___gw_fn.__kwdefaults__)"
    entry = assemble(writer, fn, guard_lines, [f"return {function}({call})"], fn.__qualname__)
    entry.guards = guards
    return entry


def _with_kwdefaults(function: types.FunctionType, kwdefaults: dict) -> types.FunctionType:
    function.__kwdefaults__ = kwdefaults
    return function


def failure_reason(entry: Callable, fn: Callable, args: tuple, kwargs: dict) -> str:
    """The first guard of `entry` that the call `fn(*args, **kwargs)` fails, in user terms."""
    state = torch_function_state()
    with torch._C.DisableTorchFunctionSubclass():  # reading tensors runs no subclass's Python
        return _failure_reason(entry, fn, args, kwargs, state)


def _failure_reason(entry: Callable, fn: Callable, args: tuple, kwargs: dict, state: tuple[bool, bool]) -> str:
    try:
        bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError as error:
        return f"arguments do not match: {error}"
    bound.apply_defaults()
    for guard in ordered(entry.guards):
        try:
            actual = state if guard.kind == "torch_function" else None if guard.kind in STATE_KINDS \
                else guard.source.read(fn, bound.arguments)
            if guard.kind == "sizes":
                code, sources = guard.expected
                inputs = {f"t{i}": source.read(fn, bound.arguments) for i, source in enumerate(sources)}
                reason = None if eval(code, dict(SYMPY_INTERP), {"L": inputs}) else \
                    f"sizes no longer satisfy: {code}"
            elif guard.kind == "lacks_item":
                reason = None if guard.expected.read(fn, bound.arguments) not in actual else \
                    f"'{guard.source.name()}' has an item under '{guard.expected.name()}' now"
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
    """Input dimensions whose size alone differs from what `entry` was traced for, and ints and
    floats read by source whose value alone differs: the candidates for symbols under
    `dynamic=None`."""
    with torch._C.DisableTorchFunctionSubclass():  # reading tensors runs no subclass's Python
        return _changed_sizes(entry, fn, args, kwargs)


def _changed_sizes(entry: Callable, fn: Callable, args: tuple, kwargs: dict) -> dict[Any, frozenset[int]]:
    try:
        bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError:
        return {}
    bound.apply_defaults()
    changed = {}
    for guard in entry.guards:
        if guard.kind not in ("const", "tensor"):
            continue
        try:  # the inputs are the user's: reading one may fail (a nested tensor has no sizes)
            _note_changed_size(guard, guard.source.read(fn, bound.arguments), changed, fn, bound.arguments)
        except Exception:
            continue
    return changed


def _module_int(guard: Any, fn: Callable, arguments: dict) -> bool:
    """Whether the guard reads an int attribute of an `nn.Module`, which stays a constant unless
    `config.allow_unspec_int_on_nn_module`."""
    source = guard.source
    if config.allow_unspec_int_on_nn_module or type(guard.expected) is not int or not isinstance(source, AttrSource):
        return False
    return isinstance(source.base.read(fn, arguments), torch.nn.Module)


def _note_changed_size(guard: Any, actual: Any, changed: dict, fn: Callable, arguments: dict) -> None:
    if guard.kind == "const" and (type(guard.expected) in (int, float) or is_numpy_scalar(guard.expected)):
        if type(actual) is type(guard.expected) and actual != guard.expected and not _module_int(guard, fn, arguments):
            changed[guard.source] = SCALAR
    if guard.kind != "tensor":
        return
    meta = guard.expected
    if type(actual) is not meta.cls or actual.layout is not torch.strided or actual.is_nested \
            or actual.dim() != len(meta.shape) or actual.dtype != meta.dtype or actual.device != meta.device:
        return
    dims = frozenset(i for i, size in enumerate(actual.shape) if size != meta.shape[i])
    if dims:
        changed[guard.source] = dims


def cache_limit_warning(fn: Callable, reason: str) -> str:
    code = fn.__code__
    return (f"graphwright hit config.cache_size_limit ({config.cache_size_limit})\n"
            f"   function: '{code.co_name}' ({code.co_filename}:{code.co_firstlineno})\n"
            f"   last reason: {reason}\n"
            "To avoid recompiling, check why the inputs change (see the reason above), or raise "
            "`graphwright.config.cache_size_limit`. Calls that miss the cache now run eagerly.")
