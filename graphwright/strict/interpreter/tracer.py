"""One compilation: the state shared by every frame of one trace, and its entry point.

`trace_function` interprets a function's bytecode on symbolic values of the
real arguments and returns a `TraceResult`: the graph, its inputs' sources,
the guards collected, the returned value and the side effects to replay.
Graph breaks propagate out as `GraphBreak`; the caller decides what they mean.
Asked to stop at a step of the function's own frame (a re-trace after a graph
break), it returns that frame as it was there instead of a returned value.
Tracing never changes the user's objects or the grad mode it started with.
"""
from __future__ import annotations

import functools
import inspect
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..._core import config
from ..._core.counters import phase
from ..._core.errors import ConstraintViolationError, GraphwrightError
from ..._core.source_lines import Origin
from ..._core.specialised_values import may_specialise
from ..guards.guards import Guard, call_torch_function_state, global_state
from ..marked.markers import errors_on_graph_break
from ..guards.sources import (
    AttrSource,
    ConstantSource,
    FunctionSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    ModuleDictSource,
    NumpyTensorSource,
    Source,
)
from ..objects import exceptions, torch_functions
from ..objects import wrap as wrapping
from ..objects.values import CellValue, ConstantValue, DictValue, SequenceValue, TensorValue, Value
from ..residual.side_effects import SideEffects
from . import contexts
from . import graph_breaks as gb
from .frame import Frame, StopTrace, UnreadArgument
from .graph_breaks import GraphBreak, GraphBreakKind, UserException
from .graph_builder import GraphBuilder
from .symbolic_sizes import NO_DATA_DEPENDENCE, DataDependence, has_marked_tensor

_MAX_DISTINCT_CHECKED = 8


@dataclass
class TraceResult:
    graph: GraphBuilder
    guards: list[Guard]
    output: Value | None
    side_effects: SideEffects
    final_stack: list[traceback.FrameSummary]
    stopped: StopTrace | None = None  # where a re-trace stopped: the frame and its next instruction
    asked_if_compiling: bool = False  # the program asked `torch.compiler.is_compiling()`


class Tracer:
    def __init__(self, dynamic_all: bool = False,
                 dynamic_dims: dict[Source, frozenset[int]] | None = None, marked: bool = False,
                 data_dependence: DataDependence = NO_DATA_DEPENDENCE) -> None:
        self.graph = GraphBuilder(self.graph_break, dynamic_all, dynamic_dims, marked, data_dependence)
        self.graph.torch_function = functools.partial(torch_functions.run, self)
        self.graph.origin = self.origin
        # nn_module_stack: {key: (path, class)} of the module calls being traced, outermost first;
        # replaced, never changed, so that nodes share it
        self.module_stack: dict[str, tuple[str, type]] = {}
        self.graph.input_value = self.input_value
        self.data_dependence = data_dependence
        self.guards: list[Guard] = []
        self.side_effects = SideEffects()
        self.frames: list = []
        self.memo_by_source: dict[Source, Value] = {}
        self.memo_by_id: dict[int, tuple[Any, Value]] = {}
        self.real_by_value: dict[int, Any] = {}  # id(value) -> the pre-existing object it stands for
        self.real_tensors: dict[int, torch.Tensor] = {}
        self.open_contexts: list = []
        self.switched_flags: set = set()  # the getters of the global flags the region switched
        self.cells_by_id: dict[int, CellValue] = {}
        self.handled = exceptions.HandledExceptions()
        self.generators: list = []  # the GeneratorValues made in the region, in order
        self.asked_if_compiling = False
        # the containers whose text is being made, through any nesting of `__repr__` calls
        # (CPython's Py_ReprEnter list): one met again is shown as `[...]`
        self.shown: set[int] = set()
        # `error_on_graph_break`, as set where the trace is now (`with` blocks switch it)
        self.error_on_graph_break = errors_on_graph_break()

    def answer_is_compiling(self) -> Value:
        """`torch.compiler.is_compiling()` (and its spellings) in the region: True, remembered,
        since code that asked must then run compiled even if it records no operation."""
        self.asked_if_compiling = True
        return ConstantValue(True)

    def graph_break(self, kind: GraphBreakKind, debug_context: str, **details: Any) -> GraphBreak:
        """The exception to raise for a graph break of `kind` at the current instruction."""
        explanation = kind.explanation.format(**details) if details else kind.explanation
        return GraphBreak(kind, explanation, debug_context, self.user_stack())

    def check_marked_sizes(self) -> None:
        """Raise, naming the current line, if the program just forced a `mark_dynamic`
        dimension to one size (PyTorch raises too, with or without fullgraph)."""
        forced = self.graph.forced_marked_size()
        if forced is not None:
            source, dim, size = forced
            raise ConstraintViolationError(
                f"Dimension {dim} of {source.name()} was marked dynamic but the program forces it to {size}",
                explanation="`mark_dynamic` promises that the compiled code serves every size of this "
                            "dimension, but this line only works for one size.",
                hints=["Remove the `mark_dynamic` call, or use `maybe_mark_dynamic` (a hint that may "
                       "specialise).",
                       "Rewrite the line so that it does not depend on the exact size."],
                user_stack=self.user_stack())

    def user_error(self, error: BaseException, debug_context: str = "", *, raised_eagerly: bool = False) -> Exception:
        """The exception to raise when the traced program raises `error` (catchable by it), as
        Python raises it: chained to the exception being handled. A graph break (or another
        error of the tracer's) met while computing the operation is itself, never the program's,
        unless `raised_eagerly`: graphwright's own API called by the program (a leaf function's
        markings checked) raises that error when the program runs eagerly too."""
        if isinstance(error, (GraphBreak, UserException, StopTrace)) \
                or isinstance(error, GraphwrightError) and not raised_eagerly:
            return error
        return exceptions.raised(self, exceptions.from_error(self, error),
                                 debug_context or f"{type(error).__name__}: {error}")

    def user_stack(self) -> list[traceback.FrameSummary]:
        """The interpreted frames, outermost first: the user's and those of the libraries it
        calls (torch's Python code included), so that the innermost line is where capture
        stopped, as torch.compile shows it; graphwright's own frames are left out."""
        return gb.shown_stack(self.positions())

    def positions(self) -> list[tuple[Any, int]]:
        """(code, line) of each interpreted frame: a stack to show later, cheap to take."""
        return [(frame.code, frame.lineno) for frame in self.frames]

    def origin(self) -> Origin:
        """Where a node made now comes from (`source_lines.annotate` formats it)."""
        frames = self.frames
        return Origin(frames[-1].position() if frames else None, self.module_stack)

    def input_value(self, tensor: TensorValue) -> int | bool | None:
        """The value of a small integer tensor input the graph has not written, which an operator
        needs (`specialised_values.py`): read from the real input and guarded from now on."""
        real = self.real_tensors.get(id(tensor))
        if real is None or tensor.source is None or tensor.fake._version != 0 or not may_specialise(real):
            return None  # without a source, no guard could read the value again
        number = real.item()
        self.add_guard(tensor.source, "call", ("item", (), number))
        return number

    def add_guard(self, source: Source | None, kind: str, expected: Any = None) -> None:
        if source is None or kind == "id" and isinstance(source, ConstantSource) and source.value is expected:
            return  # nothing to check: an object held by the guards is itself
        self.guards.append(Guard(source, kind, expected))

    def wrap(self, real: Any, source: Source | None) -> Value:
        return wrapping.wrap(self, real, source)

    def load_global(self, f_globals: dict, name: str, builtins: dict) -> Value:
        stored = self.side_effects.load_global(f_globals, name)
        if stored is not None:
            return stored
        if name in f_globals:
            return self.wrap(f_globals[name], GlobalSource(id(f_globals), name, f_globals))
        if name in builtins:
            return self.wrap(builtins[name], None)
        raise self.user_error(NameError(f"name '{name}' is not defined"))

    def canonical_cell(self, cell: CellValue) -> CellValue:
        """One value per real closure cell, however it was reached (two functions sharing a
        cell must see each other's stores)."""
        if cell.real is None:
            return cell
        return self.cells_by_id.setdefault(id(cell.real), cell)

    def cell_contents(self, cell: CellValue) -> Value:
        if cell.contents is None and cell.real is not None:
            source = wrapping.cell_contents_source(cell)
            cell.contents = self.wrap(cell.real.cell_contents, source)
        if cell.contents is None:
            raise self.user_error(NameError("free variable referenced before assignment"))
        return cell.contents


def bind_root_arguments(tracer: Tracer, fn: Callable, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The compiled function's parameters, each sourced by its name: `*args` and `**kwargs` as
    containers of values, the others read (wrapped and guarded) when the code first reads them."""
    signature = inspect.signature(fn, follow_wrapped=False)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    values: dict[str, Value] = {}
    for name, real in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            tracer.add_guard(LocalSource(name), "len", len(real))
            values[name] = SequenceValue([tracer.wrap(item, ItemSource(LocalSource(name), i))
                                          for i, item in enumerate(real)], tuple)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            tracer.add_guard(LocalSource(name), "keys", tuple(real))
            values[name] = DictValue({key: tracer.wrap(item, ItemSource(LocalSource(name), key))
                                      for key, item in real.items()})
        else:
            values[name] = UnreadArgument(real, LocalSource(name))
    return values


def trace_function(fn: Callable, args: tuple, kwargs: dict, dynamic_all: bool = False,
                   dynamic_dims: dict[Source, frozenset[int]] | None = None,
                   stop_at: int | None = None,
                   data_dependence: DataDependence = NO_DATA_DEPENDENCE) -> TraceResult:
    """Interpret `fn(*args, **kwargs)` symbolically; raises GraphBreak where capture stops.

    `dynamic_all` / `dynamic_dims` choose the input dimensions traced as symbolic sizes;
    `stop_at` is a step of `fn`'s frame to stop before (see `Frame.checkpoint`);
    `data_dependence` whether values computed from data are captured (else they break)."""
    with phase("trace"):
        return _trace(fn, args, kwargs, dynamic_all, dynamic_dims, stop_at, data_dependence)


def _trace(fn: Callable, args: tuple, kwargs: dict, dynamic_all: bool, dynamic_dims: dict[Source, frozenset[int]] | None,
           stop_at: int | None, data_dependence: DataDependence) -> TraceResult:
    tracer = Tracer(dynamic_all, dynamic_dims, has_marked_tensor((args, kwargs)), data_dependence)
    grad_enabled, flags = torch.is_grad_enabled(), contexts.saved_torch_flags()
    tracer.add_guard(FunctionSource(), "grad_mode", grad_enabled)
    tracer.add_guard(FunctionSource(), "global_state", global_state())
    state = call_torch_function_state()
    tracer.add_guard(FunctionSource(), "torch_function", state)
    tracer.graph.start_torch_function_state(state)
    # functions sharing this code share the cache; `fn.__code__ = ...` is another function
    tracer.add_guard(AttrSource(FunctionSource(), "__code__"), "code", fn.__code__)
    try:
        local_values = bind_root_arguments(tracer, fn, args, kwargs)
        closure = wrapping.closure_cells(fn, FunctionSource())
        frame = Frame(tracer, fn.__code__, fn.__globals__, local_values, closure)
        frame.is_root = True
        frame.stop_at = stop_at
        stopped = None
        try:
            output = frame.run()
        except StopTrace as stop:
            output, stopped = None, stop
        add_distinct_input_guards(tracer)
        add_size_guards(tracer)
    except GraphBreak as brk:
        brk.guards = tracer.guards
        brk.error_on_graph_break = tracer.error_on_graph_break
        raise
    except GraphwrightError:
        raise
    except UserException as raised:
        brk = raised.to_graph_break(exceptions.describe(tracer, raised.value),
                                    exceptions.as_real(tracer, raised.value))
        brk.guards = tracer.guards
        brk.error_on_graph_break = tracer.error_on_graph_break
        raise brk from None
    except Exception as error:
        stack = getattr(error, "graphwright_user_stack", None) or tracer.user_stack()
        brk = GraphBreak(gb.INTERNAL_ERROR, gb.INTERNAL_ERROR.explanation.format(error=describe(error)),
                         f"{type(error).__name__} inside the tracer", stack)
        brk.guards = tracer.guards
        raise brk from error
    finally:
        for context in reversed(tracer.open_contexts):
            context.__exit__(None, None, None)
        torch._C._set_grad_enabled(grad_enabled)
        contexts.restore_torch_flags(flags)
        # the graph raises its breaks through the tracer: no cycle may keep the inputs it
        # holds alive once the caller drops the result
        graph, tracer.graph = tracer.graph, None
    return TraceResult(graph, tracer.guards, output, tracer.side_effects, [frame.frame_summary()], stopped,
                       tracer.asked_if_compiling)


def add_size_guards(tracer: Tracer) -> None:
    """What the traced code assumed about symbolic sizes, as one guard over the inputs."""
    graph = tracer.graph
    if graph.symbolic is not None:
        code = graph.symbolic.guard_expression(graph.input_fakes)
        if code:
            tracer.add_guard(FunctionSource(), "sizes", (code, tuple(graph.input_sources)))


def add_distinct_input_guards(tracer: Tracer) -> None:
    """Tensors passed as distinct arguments must stay distinct: aliasing changes what in-place
    operations mean. Parameters and buffers are left out (they cannot alias arguments cheaply)."""
    # an array's tensor is made anew by every read: its array is what must stay distinct
    sources = [source.base if isinstance(source, NumpyTensorSource) else source
               for source in tracer.graph.input_sources if not isinstance(source, ModuleDictSource)]
    if len(sources) > _MAX_DISTINCT_CHECKED:
        return
    for index, source in enumerate(sources):
        for other in sources[index + 1:]:
            tracer.add_guard(source, "distinct", other)


def describe(error: BaseException) -> str:
    """An internal error for a message: the type and text, or the whole traceback when verbose."""
    if config.verbose:
        return "".join(traceback.format_exception(error))
    return f"{type(error).__name__}: {error}"
