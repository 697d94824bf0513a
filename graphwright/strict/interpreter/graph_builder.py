"""The torch-level fx graph under construction, and the fake tensors that type it.

One `GraphBuilder` per compilation owns one `FakeTensorMode`: inputs become
placeholders with fake tensors made from the real ones; every tensor operation
runs on fakes first (for its output metadata, and to find data-dependent
operators) and then becomes a node. It knows nothing about bytecode.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import operator
import re
import sys
import types
import weakref
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch.utils._python_dispatch import _disable_current_modes
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)
from torch.fx.experimental.symbolic_shapes import (
    GuardOnDataDependentSymNode,
    PendingUnbackedSymbolNotFound,
    compute_unbacked_bindings,
)

from ..._core.errors import ConstraintViolationError
from ..._core import source_lines
from ..._core.opaque_objects import opaque_kind
from ..._core.jagged import is_jagged, is_jagged_class
from ..._core.specialised_values import VALUE_KEY, carry_value, small_integer
from ..._core.subclass_protocol import exact_fake_runs, is_wrapper_subclass
from ..._core.symbolic_inputs import marked_dims
from ..guards.sources import ItemSource, LocalSource, Source
from ..objects import torch_functions
from ..objects.values import ConstantValue, DictValue, ObjectValue, SequenceValue, TensorValue, Value, unboxed
from . import graph_breaks as gb
from .symbolic_sizes import (
    NO_DATA_DEPENDENCE,
    SCALAR,
    SYMBOLIC_TYPES,
    DataDependence,
    SymbolicSizes,
    holds_symbol,
    may_be_symbolic,
)

BreakFn = Callable[..., Exception]
# torch's functions of symbolic numbers, which a program calls to say the result is one: a node
# even when every argument is a plain number (then a dead one, its result a constant), as in PyTorch
_SYMBOLIC_NUMBER_FUNCTIONS = (torch.sym_int, torch.sym_float, torch.sym_max, torch.sym_min)
# The dtypes torch reads Python's number classes as (`t.to(float)` is `t.to(torch.float64)`).
_PYTHON_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def dataclass_init_fields(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(cls) if field.init)


def is_graph_dataclass(value: Value) -> bool:
    """An instance of a frozen dataclass made in the region from its `__init__` fields alone:
    the graph can make it again from them."""
    if not (isinstance(value, ObjectValue) and value.obj is None and dataclasses.is_dataclass(value.cls)
            and value.cls.__dataclass_params__.frozen):
        return False
    return set(value.overlay) == {field.name for field in dataclasses.fields(value.cls)} \
        == set(dataclass_init_fields(value.cls))


def is_graph_argument(value: Value) -> bool:
    """Whether a graph node can take `value` as an argument (`GraphBuilder.call` converts it):
    tensors, constants, lists, tuples and dicts of them, graph dataclasses."""
    if isinstance(value, (TensorValue, ConstantValue)):
        return True
    if isinstance(value, SequenceValue):
        return all(is_graph_argument(item) for item in value.items)
    if isinstance(value, DictValue) and value.kind is dict:
        return all(is_graph_argument(item) for item in value.items.values())
    return is_graph_dataclass(value)


def _is_structseq(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "n_fields")


def _op_name(kind: str, target: Any) -> str:
    if kind == "call_method":
        return f"Tensor.{target}"
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))


@functools.lru_cache(maxsize=None)
def prepare_fake_tensors() -> None:
    """Load the fake-tensor machinery once (a mode's first use imports much of torch),
    so that `graphwright.compile(...)` pays for it, not the first compiled call. A dispatch mode
    the program has on when it compiles must not see this warm-up."""
    mode = FakeTensorMode()
    with _disable_current_modes(), mode:
        torch.nn.functional.linear(mode.from_tensor(torch.ones(2, 2)), torch.ones(2, 2)).relu()
    torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())


# the receiver of a bound method (an autograd.Function class) -> {its function: the call}
_BOUND_TARGETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bound_method_target(method: types.MethodType) -> Callable:
    """A plain function calling `method` (e.g. `MyFunction.apply`), which fx can name in code;
    one per method, kept while its receiver lives (a class made per call is freed)."""
    receiver, function = method.__self__, method.__func__
    try:
        calls = _BOUND_TARGETS.setdefault(receiver, {})
        bound = weakref.ref(receiver)  # the table's values must not hold its keys
    except TypeError:  # a receiver that cannot be weakly referenced: not kept
        calls, bound = {}, lambda: receiver
    call = calls.get(function)
    if call is None:
        def call(*args: Any, **kwargs: Any) -> Any:
            return function(bound(), *args, **kwargs)

        owner = getattr(receiver, "__name__", type(receiver).__name__)
        call.__name__ = call.__qualname__ = f"{owner}_{method.__name__}"
        calls[function] = call
    return call


def _has_unbacked_symbols(result: Any) -> bool:
    if isinstance(result, torch.Tensor):
        return any(isinstance(size, torch.SymInt) for size in result.shape)
    if isinstance(result, (tuple, list)):
        return any(_has_unbacked_symbols(item) for item in result)
    return isinstance(result, SYMBOLIC_TYPES)


def _sparse_tensor(result: Any) -> torch.Tensor | None:
    """A tensor of `result` (an operator's output) that is not strided, if any (a jagged nested
    tensor is a wrapper subclass around strided ones)."""
    if isinstance(result, torch.Tensor):
        return result if result.layout is not torch.strided and not is_wrapper_subclass(result) else None
    if isinstance(result, (tuple, list)):
        return next((found for item in result if (found := _sparse_tensor(item)) is not None), None)
    return None


def _holds_subclass(fake_args: list) -> bool:
    """Whether an operator's arguments (or the items of a list of them) hold a wrapper subclass."""
    return any(is_wrapper_subclass(arg) or isinstance(arg, (list, tuple)) and any(map(is_wrapper_subclass, arg))
               for arg in fake_args)


def _fake_of(tensor: TensorValue) -> torch.Tensor:
    return tensor.fake


def tensor_kind(tensor: torch.Tensor) -> str:
    """A tensor's kind in the user's terms: its class, layout and device."""
    layout = "nested" if tensor.is_nested else str(tensor.layout).replace("torch.", "")
    return f"{type(tensor).__name__} ({layout}, {tensor.device})"


def _passed_in_arguments(source: Source) -> bool:
    while isinstance(source, ItemSource):
        source = source.base
    return isinstance(source, LocalSource)


def _marked_ranges(real: torch.Tensor, source: Source, marked: set[int]) -> dict[int, tuple[int, int | None]]:
    """The sizes `mark_dynamic(..., min=, max=)` allows for the `marked` dimensions of `real` that
    were given bounds, as {dim: (lowest, highest or None)}; raises if `real` is outside them."""
    ranges = {bounds.dim: (bounds.min or 0, bounds.max) for bounds in getattr(real, "_dynamo_dynamic_range", ())
              if bounds.dim in marked and (bounds.min is not None or bounds.max is not None)}
    for dim, (low, high) in ranges.items():
        size = real.shape[dim]
        if size < low or high is not None and size > high:
            raise ConstraintViolationError(
                f"Dimension {dim} of {source.name()} was marked dynamic for sizes {low} to "
                f"{'any' if high is None else high} but is {size}",
                explanation="`mark_dynamic(..., min=, max=)` promises that every call passes sizes in that range.",
                hints=["Widen the range given to `mark_dynamic`, or pass a tensor whose size is inside it."])
    return ranges


class GraphBuilder:
    """`dynamic_dims` maps an input's source to its symbolic dimensions (None: all of them);
    `dynamic_all` makes every input dimension symbolic (`dynamic=True`)."""

    def __init__(self, on_break: BreakFn, dynamic_all: bool = False,
                 dynamic_dims: dict[Source, frozenset[int]] | None = None, marked: bool = False,
                 data_dependence: DataDependence = NO_DATA_DEPENDENCE) -> None:
        self.dynamic_all = dynamic_all
        # `torch_function(classes, kind, target, args, kwargs)`: the tracer runs the subclasses'
        # `__torch_function__` (`objects/torch_functions.py`), unless switched off
        self.torch_function: Callable[..., Value] | None = None
        # `input_value(tensor)`: the value of a small integer tensor input, guarded by the tracer
        # from then on; None for any other tensor
        self.input_value: Callable[[TensorValue], int | bool | None] | None = None
        # torch's torch-function state as the traced code sees it: blocks that switch subclass
        # dispatch off (`DisableTorchFunctionSubclass`, the tracer's own default hook), and those
        # that switch every override off (`DisableTorchFunction`); the entry guards the state the
        # call starts with (`start_torch_function_state`)
        self._torch_function_off = 0
        self._torch_function_all_off = 0
        # `origin()`: where a node made now comes from (the tracer's frames and module calls)
        self.origin: Callable[[], source_lines.Origin] | None = None
        self.dynamic_dims = dynamic_dims or {}
        captures = data_dependence.scalars or data_dependence.shapes or data_dependence.sizes
        shape_env = data_dependence.new_shape_env() if dynamic_all or self.dynamic_dims or marked or captures \
            else None
        # symbolic sizes from the start; with only data-dependent capture, from the first
        # value that depends on data (a static program keeps its fast static path)
        self.symbolic = SymbolicSizes(shape_env) if dynamic_all or self.dynamic_dims or marked else None
        self._shape_env = shape_env
        self.fake_mode = FakeTensorMode(shape_env=shape_env)
        self.marked_sizes: list[tuple[torch.SymInt, Source, int]] = []  # mark_dynamic dimensions
        self.graph = torch.fx.Graph()
        self.input_sources: list[Source] = []
        self.input_fakes: list[torch.Tensor] = []
        self.example_inputs: list[torch.Tensor] = []
        self._on_break = on_break
        self._names: set[str] = set()
        self._first_op: torch.fx.Node | None = None
        self.call_count = 0
        # grad-mode and autocast switches: a graph of nothing else that ends in the state it
        # began in does nothing (`only_undone_switches`)
        self._switches = 0
        self._grad_mode_at_start = self._grad_mode = torch.is_grad_enabled()
        self._autocast_depth = 0
        self._by_fake: dict[int, TensorValue] = {}
        self.submodules: dict[str, torch.nn.Module] = {}  # subgraphs of higher-order calls
        # opaque reference objects (a DeviceMesh) the graph's calls take: attributes of the graph
        # module, as generated code cannot spell them
        self.opaque_objects: dict[int, tuple[Any, torch.fx.Node]] = {}

    def _placeholder(self, source: Source) -> torch.fx.Node:
        name = self._unique_name(source.name())
        if self._first_op is None:
            return self.graph.placeholder(name)
        with self.graph.inserting_before(self._first_op):
            return self.graph.placeholder(name)

    def wants_symbolic_scalar(self, source: Source, real: int | float) -> bool:
        """An int or float input that changed between calls (dynamic=None) is traced as a
        SymInt or SymFloat; under dynamic=True so is every int passed in the arguments (as an
        argument or an item of one) from the first call, as in PyTorch (an int read from a
        global or an attribute, a module's configuration, stays a constant)."""
        if self.symbolic is None or not may_be_symbolic(real):
            return False
        return self.dynamic_dims.get(source) == SCALAR or \
            self.dynamic_all and type(real) is int and _passed_in_arguments(source)

    def add_scalar_input(self, real: int | float, source: Source) -> ConstantValue:
        """A graph input standing for number `real`: a placeholder typed by a fresh symbol."""
        node = self._placeholder(source)
        make = self.symbolic.symbolic_float if type(real) is float else self.symbolic.symbolic_int
        symbol = make(real, node.name)
        node.meta["example_value"] = symbol
        self.symbolic.register(node, symbol)
        self.input_sources.append(source)
        self.input_fakes.append(symbol)
        self.example_inputs.append(real)
        return ConstantValue(symbol, source)

    def add_input(self, real: torch.Tensor, source: Source) -> TensorValue:
        try:
            fake = self._fake_input(real, source)
        except ConstraintViolationError:
            raise
        except Exception as error:  # a layout fake tensors cannot represent (a strided nested tensor...)
            brk = self._on_break(gb.UNSUPPORTED_TENSOR, f"fake of {source.name()}: {type(error).__name__}",
                                 name=source.name(), tensor=tensor_kind(real),
                                 error=f"{type(error).__name__}: {error}")
            brk.needs_sizes = self._shape_env is None and is_jagged(real)
            raise brk
        node = self._placeholder(source)
        node.meta["example_value"] = fake
        self.input_sources.append(source)
        self.input_fakes.append(fake)
        self.example_inputs.append(real)
        value = TensorValue(node, fake, source)
        self._by_fake[id(fake)] = value
        return value

    def _fake_input(self, real: torch.Tensor, source: Source) -> torch.Tensor:
        dims = set(range(real.dim())) if self.dynamic_all else set(self.dynamic_dims.get(source, ()))
        marked = getattr(real, "_dynamo_dynamic_indices", set())  # mark_dynamic
        dims |= marked_dims(real)
        dims -= getattr(real, "_dynamo_static_indices", set())  # mark_static
        if self.symbolic is None or not dims:
            return self.fake_mode.from_tensor(real, static_shapes=True)
        ranges = _marked_ranges(real, source, marked & dims)
        # under dynamic=True every size of a subclass's inner tensors is symbolic too (a scale's, a
        # jagged tensor's offsets: another batch size runs the same graph)
        fake = self.symbolic.fake_input(self.fake_mode, real, frozenset(dims), ranges, source.name(),
                                        every_inner=self.dynamic_all)
        self.marked_sizes += [(fake.shape[dim], source, dim) for dim in marked if dim < real.dim()
                              and isinstance(fake.shape[dim], torch.SymInt)]
        return fake

    def forced_marked_size(self) -> tuple[Source, int, int] | None:
        """A `mark_dynamic` dimension the program forced to one size: (source, dim, size)."""
        for size, source, dim in self.marked_sizes:
            if self.symbolic.specialised(size):
                return source, dim, int(self.symbolic.shape_env.replace(size.node.expr))
        return None

    def symbolic_dims(self, fake: torch.Tensor) -> frozenset[int]:
        return frozenset(i for i, size in enumerate(fake.shape) if isinstance(size, torch.SymInt))

    def register_sizes(self, value: TensorValue) -> None:
        """Reading `value.shape`: make each symbolic size computable in the graph."""
        if self.symbolic is None:
            return
        for index, size in enumerate(value.fake.shape):
            if isinstance(size, torch.SymInt) and not self.symbolic.knows(size):
                self.symbolic.register(self._create_node("call_method", "size", [value.node, index], {}), size)

    def _unique_name(self, raw: str) -> str:
        base = re.sub(r"\W+", "_", raw).strip("_") or "input"
        if base[0].isdigit():
            base = "_" + base
        name, index = base, 1
        while name in self._names:
            name, index = f"{base}_{index}", index + 1
        self._names.add(name)
        return name

    def call(self, kind: str, target: Any, args: list[Value], kwargs: dict[str, Value],
             effectful: bool = False) -> Value:
        """Run `target` on fakes, then record it; `kind` is call_function or call_method. A call
        returning no tensor is recorded only if it may mutate its inputs, or is `effectful`."""
        if not self._torch_function_off and self.torch_function is not None:
            classes = torch_functions.subclass_classes([*args, *kwargs.values()])
            if classes:  # Python subclasses: their `__torch_function__` decides, as in eager
                return self.torch_function(classes, kind, target, args, kwargs)
        fake_args = [self._fake(arg, target, kind) for arg in args]
        fake_kwargs = {key: self._fake(arg, target, kind) for key, arg in kwargs.items()}
        name = _op_name(kind, target)
        unread = self._value_candidates([*args, *kwargs.values()])
        pending = self._pending_symbols()
        try:
            # The Python dispatcher runs the composite kernels registered in Python: SymInt-aware
            # ones, and those whose C++ version reads data (istft checks its window with
            # `equal`), as PyTorch's own tracer runs them.
            with self.fake_mode, enable_python_dispatcher(), self._jagged_torch_function(fake_args, fake_kwargs), \
                    exact_fake_runs(self.fake_mode, _holds_subclass([*fake_args, *fake_kwargs.values()])):
                if kind == "call_method":
                    result = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    result = target(*fake_args, **fake_kwargs)
        except DynamicOutputShapeException:
            raise self._on_break(gb.DYNAMIC_SHAPE_OPERATOR, f"op {name}", op=name)
        except DataDependentOutputException:
            if self._specialise_values(unread, pending):
                return self.call(kind, target, args, kwargs, effectful)
            raise self._on_break(gb.TENSOR_TO_PYTHON, f"op {name}", what=name)
        except GuardOnDataDependentSymNode as error:
            if self._specialise_values(unread, pending):
                return self.call(kind, target, args, kwargs, effectful)
            raise self._on_break(gb.DATA_DEPENDENT_BRANCH, f"op {name}: {error}".splitlines()[0])
        except Exception as error:  # the operator rejected its inputs: eager would too
            brk = self._on_break(gb.FAKE_TENSOR_ERROR, f"{type(error).__name__}: {error}",
                                 op=name, error=f"{type(error).__name__}: {error}")
            brk.rejected_arguments = isinstance(error, TypeError)
            brk.user_error = error
            # a jagged tensor made of fakes takes its ragged size from the ShapeEnv
            brk.needs_sizes = self._shape_env is None and isinstance(target, type) and is_jagged_class(target)
            raise brk
        sparse = _sparse_tensor(result)
        if sparse is not None:  # as a sparse input is: the backends take strided tensors
            raise self._on_break(gb.UNSUPPORTED_TENSOR, f"op {name} returned a {sparse.layout} tensor",
                                 name=f"the result of {name}", tensor=tensor_kind(sparse),
                                 error="the tracer models strided tensors")
        if self.symbolic is None and self._shape_env is not None and _has_unbacked_symbols(result):
            self.symbolic = SymbolicSizes(self._shape_env)  # the first value that depends on data
        if not self._holds_tensor(result) and not self._may_mutate(kind, target, kwargs) and not effectful:
            if isinstance(result, (str, bytes)) and any(isinstance(arg, TensorValue) for arg in args) or (
                    kind == "call_function" and getattr(target, "__module__", "") in ("_operator", "operator")
                    and not holds_symbol(result)):
                # e.g. `"%s" % tensor`: Python formatted the fake tensor; eager would use its data
                raise self._on_break(gb.TENSOR_TO_PYTHON, f"op {name} on a tensor", what=f"{name} applied to a tensor")
            if self.symbolic is not None and holds_symbol(result) or \
                    any(target is function for function in _SYMBOLIC_NUMBER_FUNCTIONS):
                node = self._create_node(kind, target, [self._node_arg(arg) for arg in args],
                                         {key: self._node_arg(arg) for key, arg in kwargs.items()})
                node.meta["example_value"] = result
                if self.symbolic is not None:
                    self._bind_new_symbols(node, result)
                    self._register_symbolic(node, result)
            return self._constant_result(result)
        node = self._create_node(kind, target, [self._node_arg(arg) for arg in args],
                                 {key: self._node_arg(arg) for key, arg in kwargs.items()})
        self._bind_new_symbols(node, result)
        return self._wrap_result(node, result)

    def _jagged_torch_function(self, fake_args: list, fake_kwargs: dict) -> contextlib.AbstractContextManager:
        """A jagged nested tensor's own `__torch_function__` runs on its fakes, as in eager: it
        sends `scaled_dot_product_attention` to the jagged kernels and validates `rms_norm`
        (other operations it runs with subclass dispatch off, as the tracer does anyway). The
        graph's node is the call: at run time the real tensors take the same path."""
        if self._torch_function_off or not any(is_jagged(leaf) for leaf in pytree.tree_leaves((fake_args, fake_kwargs))):
            return contextlib.nullcontext()
        return torch._C._EnableTorchFunction()

    @contextlib.contextmanager
    def torch_function_off(self):
        """Operations traced inside call no subclass's `__torch_function__` (as under
        `torch._C.DisableTorchFunctionSubclass()`)."""
        self.switch_torch_function(False)
        try:
            yield
        finally:
            self.switch_torch_function(True)

    def switch_torch_function(self, on: bool, every: bool = False) -> None:
        """Enter (`on` False) or leave a block that switches subclass dispatch off, and with
        `every` torch function modes too (`torch._C.DisableTorchFunction`)."""
        step = -1 if on else 1
        self._torch_function_off += step
        if every:
            self._torch_function_all_off += step

    def start_torch_function_state(self, state: tuple[bool, bool]) -> None:
        """The state at the call's start (`torch_function_state()`: enabled, all disabled): a
        call made inside `DisableTorchFunctionSubclass()` traces with subclass dispatch off."""
        enabled, all_disabled = state
        self._torch_function_off = int(not enabled)
        self._torch_function_all_off = int(all_disabled)

    def torch_function_enabled(self) -> bool:
        """What `torch._C._is_torch_function_enabled()` answers at this point of the trace."""
        return not self._torch_function_off

    def torch_function_all_disabled(self) -> bool:
        """What `torch._C._is_torch_function_all_disabled()` answers at this point of the trace."""
        return bool(self._torch_function_all_off)

    def _bind_new_symbols(self, node: torch.fx.Node, result: Any) -> None:
        """The unbacked symbols the call made (`.item()`, `nonzero`) are bound to its node, as a
        tracer must: a symbol left pending breaks the next trace on the same ShapeEnv (ahead-of-
        time autograd's, Inductor's)."""
        shape_env = self.fake_mode.shape_env
        if shape_env is None or not shape_env.pending_fresh_unbacked_symbols:
            return
        try:
            bindings = compute_unbacked_bindings(shape_env, result)
        except PendingUnbackedSymbolNotFound:  # made inside the call, not in its result: unbound
            return
        if bindings:
            node.meta["unbacked_bindings"] = bindings

    def add_submodule(self, prefix: str, module: torch.nn.Module) -> torch.fx.Node:
        """A get_attr node reading `module` (a subgraph), held by the graph as `<prefix>_<n>`."""
        index = 0
        while f"{prefix}_{index}" in self.submodules:
            index += 1
        name = f"{prefix}_{index}"
        self.submodules[name] = module
        node = self.graph.get_attr(name)
        if self._first_op is None:
            self._first_op = node
        return node

    def opaque_object(self, obj: Any) -> torch.fx.Node:
        """A get_attr node reading `obj`, an opaque reference object, held by the graph module."""
        known = self.opaque_objects.get(id(obj))
        if known is not None:
            return known[1]
        node = self.graph.get_attr(self._unique_name(f"_opaque_{type(obj).__name__}"))
        node.meta["example_value"] = obj
        self.opaque_objects[id(obj)] = (obj, node)
        if self._first_op is None:
            self._first_op = node
        return node

    def call_with_result(self, target: Any, args: list[Value | torch.fx.Node], result: Any) -> Value:
        """A node whose fake result the caller computed (nonstrict_trace runs its own fake trace);
        an argument may be a node the caller made (`add_submodule`)."""
        if self.symbolic is None and self._shape_env is not None and _has_unbacked_symbols(result):
            self.symbolic = SymbolicSizes(self._shape_env)  # the first value that depends on data
        node = self._create_node("call_function", target, [self._node_arg(arg) for arg in args], {})
        self._bind_new_symbols(node, result)
        return self._wrap_result(node, result)

    def node_arg(self, value: Value) -> Any:
        """The fx argument standing for `value` (a tensor's node, a symbol's computing node)."""
        return self._node_arg(value)

    def record(self, target: Any, args: list, kwargs: dict | None = None) -> torch.fx.Node:
        """A node run for its effect on global state (grad mode, autocast); no fake run needed."""
        if target is torch._C._set_grad_enabled:
            self._grad_mode = args[0]
        elif target is torch.amp.autocast_mode._enter_autocast:
            self._autocast_depth += 1
        elif target is torch.amp.autocast_mode._exit_autocast:
            self._autocast_depth -= 1
        else:
            return self._create_node("call_function", target, args, kwargs or {})
        self._switches += 1
        return self._create_node("call_function", target, args, kwargs or {})

    def only_undone_switches(self) -> bool:
        """Whether the graph only switches grad mode or autocast and ends as it began (a break
        inside `with torch.no_grad():` before any operation): running it changes nothing."""
        return self.call_count == self._switches and self._grad_mode == self._grad_mode_at_start \
            and self._autocast_depth == 0

    def _create_node(self, kind: str, target: Any, args: list, kwargs: dict) -> torch.fx.Node:
        if kind == "call_function" and isinstance(target, types.MethodType):
            target = _bound_method_target(target)
        node = self.graph.create_node(kind, target, tuple(args), kwargs)
        if self.origin is not None:
            node.meta[source_lines.ORIGIN] = self.origin()
        self.call_count += 1
        if self._first_op is None:
            self._first_op = node
        return node

    def rebind(self, value: TensorValue, replacement: TensorValue) -> None:
        """From now on `value` (the one object every reference in the region shares) stands for
        `replacement`'s node and fake tensor."""
        self._by_fake.pop(id(value.fake), None)
        value.node, value.fake = replacement.node, replacement.fake
        self._by_fake[id(value.fake)] = value

    def _wrap_result(self, node: torch.fx.Node, result: Any) -> Value:
        node.meta["example_value"] = result
        if isinstance(result, torch.Tensor):
            existing = self._by_fake.get(id(result))
            if existing is not None:
                return existing  # an in-place op returns its input: keep the input's identity
            value = TensorValue(node, result)
            if type(result) is not FakeTensor and is_wrapper_subclass(result):
                value.cls = type(result)  # an operation on a tensor subclass (TwoTensor) made one
            self._by_fake[id(result)] = value
            return value
        if isinstance(result, (tuple, list)):
            items = [self._wrap_result(self._create_node("call_function", operator.getitem,
                                                          [node, index], {}), item)
                     for index, item in enumerate(result)]
            cls = type(result) if _is_structseq(result) else None
            return SequenceValue(items, list if isinstance(result, list) else tuple, cls=cls)
        if type(result) is dict:  # e.g. tensors grouped by (device, dtype)
            return DictValue({key: self._wrap_result(self._create_node("call_function", operator.getitem,
                                                                       [node, key], {}), item)
                              for key, item in result.items()})
        if self.symbolic is not None and holds_symbol(result):  # a size the node computes
            self._register_symbolic(node, result)
        return self._constant_result(result)

    def _register_symbolic(self, node: torch.fx.Node, result: Any) -> None:
        if isinstance(result, (tuple, list)):
            for index, item in enumerate(result):
                if holds_symbol(item):
                    self._register_symbolic(self._create_node("call_function", operator.getitem,
                                                              [node, index], {}), item)
        else:
            self.symbolic.register(node, result)

    def _constant_result(self, result: Any) -> Value:
        if isinstance(result, (tuple, list)) and not isinstance(result, torch.Size):
            items = [self._constant_result(item) for item in result]
            cls = type(result) if _is_structseq(result) else None
            return SequenceValue(items, list if isinstance(result, list) else tuple, cls=cls)
        return ConstantValue(result)

    def _value_candidates(self, arguments: list[Value]) -> list[TensorValue]:
        """The 0-dim integer tensors among `arguments` (in containers too) whose fake has no value
        yet, neither given nor symbolic: those an operator may read (`specialised_values.py`)."""
        if self.input_value is None:
            return []
        found, pending = [], list(arguments)
        while pending:
            value = pending.pop()
            if isinstance(value, SequenceValue):
                pending.extend(value.items)
            elif isinstance(value, TensorValue) and small_integer(value.fake) \
                    and getattr(value.fake, "item_memo", None) is None:
                found.append(value)
        return found

    def _pending_symbols(self) -> int:
        shape_env = self.fake_mode.shape_env
        return 0 if shape_env is None else len(shape_env.pending_fresh_unbacked_symbols)

    def _specialise_values(self, tensors: list[TensorValue], pending: int) -> bool:
        """Give each of `tensors` that is a small integer input its value, for an operator that
        read it on fakes; the unbacked symbols that call made are dropped (it runs again). False
        when none could be given."""
        specialised = False
        for value in tensors:
            number = self.input_value(value)
            if number is not None:
                carry_value(value.fake, number)
                value.node.meta[VALUE_KEY] = number
                specialised = True
        if specialised and self.fake_mode.shape_env is not None:
            del self.fake_mode.shape_env.pending_fresh_unbacked_symbols[pending:]
        return specialised

    @staticmethod
    def _holds_tensor(result: Any) -> bool:
        if isinstance(result, torch.Tensor):
            return True
        if isinstance(result, (tuple, list)):
            return any(GraphBuilder._holds_tensor(item) for item in result)
        if type(result) is dict:
            return any(GraphBuilder._holds_tensor(item) for item in result.values())
        return False

    @staticmethod
    def _may_mutate(kind: str, target: Any, kwargs: dict[str, Value]) -> bool:
        # an `out=` list is written and the call returns None (`split_with_sizes_copy`)
        if target is operator.setitem or "out" in kwargs:
            return True
        name = target if kind == "call_method" else getattr(target, "__name__", "")
        return name.endswith("_") and not name.endswith("__")

    def _fake(self, value: Value, target: Any, kind: str) -> Any:
        return self._convert(value, _fake_of, target, kind)

    def _node_arg(self, value: Value | torch.fx.Node) -> Any:
        if isinstance(value, torch.fx.Node):
            return value
        return self._convert(value, lambda tensor: tensor.node, None, "")

    def _convert(self, value: Value, leaf: Callable[[TensorValue], Any], target: Any, kind: str) -> Any:
        if isinstance(value, TensorValue):
            return leaf(value)
        value = unboxed(value)  # an instance of a subclass of int or float: its number
        if isinstance(value, ConstantValue):
            if self.symbolic is not None and leaf is not _fake_of and holds_symbol(value.value):
                try:
                    return self.symbolic.node_arg(value.value)
                except KeyError:
                    raise self._on_break(gb.UNSUPPORTED_OPERATION, f"symbolic size {value.value}",
                                         op="a symbolic size the graph cannot compute",
                                         types="SymInt") from None
            if isinstance(value.value, enum.Enum) and isinstance(value.value, (int, float)):
                # an IntEnum/IntFlag is its number to an operator; fx cannot name `Flag.A|B`
                return int(value.value) if isinstance(value.value, int) else float(value.value)
            numpy = sys.modules.get("numpy")
            if numpy is not None and isinstance(value.value, numpy.generic):
                return value.value.item()  # torch reads a NumPy scalar as the Python number
            if leaf is not _fake_of and type(value.value) is type and value.value in _PYTHON_DTYPES:
                return _PYTHON_DTYPES[value.value]  # `t.to(float)`: fx cannot print a class as an argument
            if leaf is not _fake_of and opaque_kind(type(value.value)) == "reference":
                return self.opaque_object(value.value)
            return value.value
        if isinstance(value, SequenceValue):
            items = [self._convert(item, leaf, target, kind) for item in value.items]
            return items if value.kind is list else tuple(items)
        if isinstance(value, DictValue) and value.kind is dict:
            return {key: self._convert(item, leaf, target, kind) for key, item in value.items.items()}
        if is_graph_dataclass(value):
            # made in the graph from its fields (an allow_in_graph function's argument), as it
            # is made for the fake run
            fields = {name: self._convert(value.overlay[name], leaf, target, kind)
                      for name in dataclass_init_fields(value.cls)}
            if leaf is _fake_of:
                return value.cls(**fields)
            return self._create_node("call_function", value.cls, [], fields)
        name = _op_name(kind, target)
        raise self._on_break(gb.UNSUPPORTED_OPERATION, f"argument {value!r} of {name}",
                             op=name, types=value.python_type().__name__)

    def drop_grad_mode_round_trips(self, grad_enabled: bool) -> None:
        """Remove each grad-mode switch that the next node switches back (`set_grad_enabled(False)`
        then `(True)` with nothing between), as TorchDynamo cleans its graphs; `grad_enabled`
        is the mode the graph starts in."""
        nodes = list(self.graph.nodes)
        for first, second in zip(nodes, nodes[1:]):
            if first.target is torch._C._set_grad_enabled and first.args == (not grad_enabled,) \
                    and not first._erased:
                grad_enabled = first.args[0]
                if second.target is torch._C._set_grad_enabled and second.args == (not grad_enabled,):
                    grad_enabled = second.args[0]
                    self.graph.erase_node(first)
                    self.graph.erase_node(second)

    def float_output(self, value: Value) -> Value:
        """`value` as the graph returns it: a symbolic float as `torch.scalar_tensor(value,
        dtype=torch.float64)`, which the entry turns back into a float, as TorchDynamo does."""
        if isinstance(value, ConstantValue) and isinstance(value.value, torch.SymFloat):
            return self.call("call_function", torch.scalar_tensor, [value], {"dtype": ConstantValue(torch.float64)})
        return value

    def finish(self, outputs: list[Value]) -> torch.fx.GraphModule:
        """The graph module returning `outputs` (tensors, or symbolic sizes). A symbolic float
        leaves as a 0-d float64 tensor (`float_output`): backends return tensors and sizes."""
        self.graph.output(tuple(self._node_arg(self.float_output(value)) for value in outputs))
        self.graph.lint()
        source_lines.annotate(self.graph)
        root = torch.nn.Module()
        for name, module in self.submodules.items():
            root.add_module(name, module)
        for obj, node in self.opaque_objects.values():
            setattr(root, node.target, obj)
        return torch.fx.GraphModule(root, self.graph)

    def op_count(self) -> int:
        return self.call_count
