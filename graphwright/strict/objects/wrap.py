"""Turning a real Python object read from outside into a symbolic value, with its guards.

This is the one place that decides how an outside value is modelled and what
the graph depends on about it: tensors become graph inputs guarded on their
metadata; constants are guarded by value; lists, tuples and dicts by type and
length (their items by their own guards); modules and user objects by class
only (so instances of one class share a graph); functions and opaque objects
by identity. A value reached twice is modelled once.
"""
from __future__ import annotations

import collections
import enum
import functools
import types
from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental import symbolic_shapes

from ..guards.guards import TensorMeta
from ..guards.sources import (
    AttrSource,
    CellContentsSource,
    ClosureCellSource,
    ConstantSource,
    ContentsSource,
    ItemSource,
    ModuleDictSource,
    OwnItemSource,
    Source,
    own_item,
)
from ..interpreter import graph_breaks as gb
from ..interpreter.graph_builder import tensor_kind
from .values import (
    CellValue,
    ConstantValue,
    DictValue,
    FunctionValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    SequenceValue,
    TensorKey,
    TensorValue,
    Value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

CONSTANT_TYPES = frozenset({int, float, bool, str, bytes, complex, type(None), type(Ellipsis),
                            type(NotImplemented), torch.dtype, torch.device, torch.Size, slice,
                            range, torch.layout, torch.memory_format, frozenset, types.CodeType})
# Constants compared by identity in guards: cheaper than `==` and exact for these.
_IDENTITY_CONSTANT_TYPES = (torch.dtype, torch.layout, torch.memory_format, types.CodeType)
# Operators of `torch.ops` (their `__call__` is Python, but each is one operator).
_TORCH_OPERATOR_TYPES = (torch._ops.OperatorBase, torch._ops.OpOverloadPacket)
_C_CALLABLE_TYPES = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                     types.MethodWrapperType, types.ClassMethodDescriptorType)
_OPAQUE_CALLABLE_TYPES = (*_C_CALLABLE_TYPES, types.ModuleType, types.GetSetDescriptorType,
                          types.MemberDescriptorType, functools.partial, type, *_TORCH_OPERATOR_TYPES)
# `autograd.Function.apply` enters C++ autograd: the graph calls it, AOT traces into it.
_AUTOGRAD_APPLY = torch.autograd.function.Function.apply.__func__


def _python_operators() -> frozenset:
    """The Python functions of torch that are operators: those `torch.overrides` lists as
    overridable (torch.*, torch.nn.functional.*, ...), the Python methods of Tensor, and the
    logic of symbolic booleans (`sym_and`, `sym_or`, beside `torch.sym_not`)."""
    tables = [*torch.overrides.get_overridable_functions().values(), vars(torch.Tensor).values(),
              (symbolic_shapes.sym_and, symbolic_shapes.sym_or)]
    return frozenset(fn for table in tables for fn in table if type(fn) is types.FunctionType)


# Built at import (a few milliseconds), not by the first compiled call.
_PYTHON_OPERATORS = _python_operators()


def is_graph_operator(target: Any) -> bool:
    """A torch operator, which becomes one graph node: a function written in C, an operator of
    `torch.ops`, a Tensor method, or a Python function PyTorch lets `__torch_function__`
    override. Every other Python function of torch is traced into like user code."""
    cls = type(target)
    if cls is types.FunctionType:
        return target in _PYTHON_OPERATORS
    if cls is types.MethodType:
        return target.__func__ is _AUTOGRAD_APPLY or target.__func__ in _PYTHON_OPERATORS
    if isinstance(target, _TORCH_OPERATOR_TYPES):
        return True
    if isinstance(target, _C_CALLABLE_TYPES):
        if getattr(target, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor):
            return True
        module = getattr(target, "__module__", None) or ""
        # TorchDynamo's C extension holds its frame hook's machinery, no operator
        return module.startswith("torch") and not module.startswith("torch._C._dynamo")
    return False


def compiled_original(real: Any) -> Any:
    """The function a compiled wrapper (`graphwright.compile`'s) compiles, which a trace calls in
    its place, as it traces into a compiled module's original; None for anything else."""
    return real._graphwright_original if getattr(type(real), "_graphwright_compiled", False) else None


def is_cached_function(real: Any) -> bool:
    """A Python function under `functools.lru_cache`/`cache`."""
    return isinstance(real, functools._lru_cache_wrapper) and type(real.__wrapped__) is types.FunctionType


def is_dict_key(key: Any) -> bool:
    """A key a modelled dict can hold: a constant, an object compared and hashed by identity
    (a class, `typing.Union`...), which a guard on the keys can compare exactly, or a tensor
    (hashed by identity: looked up by the tensor's own source, see `TensorKey`)."""
    return is_constant(key) or is_identity_key(key) or isinstance(key, torch.Tensor)


def is_constant(real: Any) -> bool:
    # str subclasses (torch.__version__ is a TorchVersion) compare and hash as their text
    return type(real) in CONSTANT_TYPES or isinstance(real, (enum.Enum, str))


def is_identity_key(real: Any) -> bool:
    """An object that hashes and compares by identity (a class, a function, a typing form):
    as a dict key it is found exactly when the same object is looked up (registries keyed by
    class)."""
    cls = type(real)
    return cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__


def wrap(tracer: "Tracer", real: Any, source: Source | None) -> Value:
    if source is not None:
        known = tracer.memo_by_source.get(source)
        if known is not None:
            return known
    if is_constant(real):
        value = _wrap_constant(tracer, real, source)
    else:
        known = tracer.memo_by_id.get(id(real))
        if known is not None:
            if source is not None and known[1].source is not None and source != known[1].source:
                tracer.add_guard(source, "alias", known[1].source)
            value = known[1]
        else:
            value = _wrap_object(tracer, real, source)
            tracer.memo_by_id[id(real)] = (real, value)
            tracer.real_by_value[id(value)] = real
    if source is not None:
        tracer.memo_by_source[source] = value
    return value


def _wrap_constant(tracer: "Tracer", real: Any, source: Source | None) -> Value:
    if type(real) in (int, float) and source is not None and tracer.graph.wants_symbolic_scalar(source, real):
        tracer.add_guard(source, "type", type(real))
        return tracer.graph.add_scalar_input(real, source)
    if type(real) in _IDENTITY_CONSTANT_TYPES or isinstance(real, enum.Enum):
        tracer.add_guard(source, "id", real)
    else:
        tracer.add_guard(source, "const", real)
    return ConstantValue(real, source)


def _wrap_object(tracer: "Tracer", real: Any, source: Source | None) -> Value:
    if isinstance(real, torch.Tensor):
        return _wrap_tensor(tracer, real, source)
    cls = type(real)
    if getattr(cls, "_graphwright_compiled", False):
        return _opaque(tracer, real, source)
    if cls is list or cls is tuple or (isinstance(real, tuple) and _is_named_tuple(cls)):
        tracer.add_guard(source, "type", cls)
        tracer.add_guard(source, "len", len(real))
        items = [wrap(tracer, item, _item(source, index)) for index, item in enumerate(real)]
        kind = list if cls is list else tuple
        return SequenceValue(items, kind, source, cls=None if cls in (list, tuple) else cls)
    if cls is dict or cls is collections.OrderedDict:
        if not all(is_dict_key(key) for key in real):
            return _opaque(tracer, real, source)
        tracer.add_guard(source, "type", cls)
        return DictValue({}, dict, source, cls=None if cls is dict else cls,
                         reader=OutsideDict(tracer, real, source))
    if cls is types.MappingProxyType and all(is_constant(key) for key in real):
        # a class's __dict__: read-only, its items read by source
        tracer.add_guard(source, "type", cls)
        return DictValue({}, dict, source, cls=cls, obj=real, reader=OutsideDict(tracer, real, source))
    if isinstance(real, (dict, list, tuple)) and not isinstance(real, torch.nn.Module):
        value = _wrap_container_subclass(tracer, real, cls, source)
        if value is not None:
            return value
    if cls is set and all(is_constant(item) for item in real):
        # the order too: code that iterates the set must see the order it was traced with
        tracer.add_guard(source, "type", set)
        tracer.add_guard(source, "keys", tuple(real))
        return DictValue({item: ConstantValue(item) for item in real}, set, source)
    if isinstance(real, torch.nn.Module):
        tracer.add_guard(source, "type", cls)
        if getattr(cls, "_graphwright_compiled_module", False):
            # a module compiled on its own, called from compiled code: its original is traced
            # into, so that its work joins the caller's graph (as a compiled function's does)
            return wrap(tracer, real._orig_mod, _attr(source, "_orig_mod"))
        return ModuleValue(real, source)
    if cls is types.FunctionType:
        if is_graph_operator(real):
            return _opaque(tracer, real, source)
        if real.__closure__:
            # a closure is made anew by each call of its maker: the code is what stays (the
            # cells it reads are guarded when read), as TorchDynamo guards closures
            tracer.add_guard(_attr(source, "__code__"), "code", real.__code__)
        else:
            tracer.add_guard(source, "id", real)
        return function_value(real, source)
    if cls is types.MethodType:
        # a bound method is made anew at each read: guard what it binds, not its identity
        tracer.add_guard(_attr(source, "__func__"), "id", real.__func__)
        receiver = wrap(tracer, real.__self__, _attr(source, "__self__"))
        function = compiled_original(real.__func__) or real.__func__  # a compiled method: its original
        if type(function) is types.FunctionType and not is_graph_operator(real):
            return function_value(function, None).bind(receiver)
        if is_cached_function(real.__func__):  # transformers' Logger.warning_once
            return cached_function_value(real.__func__).bind(receiver)
        if isinstance(receiver, TensorValue):
            return MethodValue(receiver, real.__func__.__name__)
        return ConstantValue(real, source)
    if cls is types.BuiltinMethodType and not isinstance(real.__self__, (types.ModuleType, type(None))):
        # `cls.__subclasses__`, `"sep".join`: made anew at each read; what it binds is what stays
        tracer.add_guard(source, "type", cls)
        tracer.add_guard(_attr(source, "__self__"), "id", real.__self__)
        return ConstantValue(real, source)
    if isinstance(real, _OPAQUE_CALLABLE_TYPES) or callable(real) and not _is_user_instance(real):
        return _opaque(tracer, real, source)
    tracer.add_guard(source, "type", cls)
    return ObjectValue(real, cls, source)


class OutsideDict:
    """Reads a dict found outside the region as the program reads it. A lookup guards what it
    saw: the value under the key, or the key's absence (`os.environ.get("X")` must not
    recompile when another variable is set); using the dict as a whole guards all its keys.

    For an instance of a dict subclass, `builtin` is its builtin base (dict, OrderedDict,
    defaultdict): the items are read, and guarded, through the base's own methods, so that no
    overridden `__getitem__`, `__contains__` or `__iter__` runs."""

    __slots__ = ("tracer", "real", "source", "builtin")

    def __init__(self, tracer: "Tracer", real: Any, source: Source | None, builtin: type | None = None) -> None:
        self.tracer = tracer
        self.real = real
        self.source = source
        self.builtin = builtin

    def _keys_source(self) -> Source | None:
        if self.builtin is None or self.source is None:
            return self.source
        return ContentsSource(self.source, self.builtin)

    def _item_source(self, key: Any) -> Source | None:
        if self.builtin is None or self.source is None:
            return _item(self.source, key)
        return OwnItemSource(self.source, key)

    def _item(self, key: Any) -> Value:
        real = self.real[key] if self.builtin is None else own_item(self.real, key)
        return wrap(self.tracer, real, self._item_source(key))

    def _has(self, key: Any) -> bool:
        return key in self.real if self.builtin is None else dict.__contains__(self.real, key)

    def read_key(self, key: Any) -> Value | None:
        if isinstance(key, TensorKey):
            return self._read_tensor_key(key.value)
        # re-reading the value fails the guards once the key is gone
        if self._has(key):
            return self._item(key)
        self.tracer.add_guard(self._keys_source(), "contains", (key, False))
        return None

    def _read_tensor_key(self, tensor: Value) -> Value | None:
        """The item under a tensor (`state[param]`), re-read at call time under the tensor as
        its own source reads it; a tensor made in the region is no key of a dict from before."""
        real_key = self.tracer.real_tensors.get(id(tensor))
        if real_key is None or tensor.source is None:
            return None
        if self._has(real_key):
            real = self.real[real_key] if self.builtin is None else own_item(self.real, real_key)
            return wrap(self.tracer, real, self._item_source(tensor.source))
        self.tracer.add_guard(self._keys_source(), "lacks_item", tensor.source)
        return None

    def read_all(self) -> dict[Any, Value]:
        keys = tuple(self.real if self.builtin is None else self.builtin.__iter__(self.real))
        if any(isinstance(key, torch.Tensor) for key in keys):
            raise self.tracer.graph_break(
                gb.UNSUPPORTED_OPERATION, f"all the items of {self.source.name() if self.source else 'a dict'}",
                op="reading every item of a dict keyed by tensors (iteration, `len`, a store)",
                types="dict with tensor keys")
        self.tracer.add_guard(self._keys_source(), "keys", keys)
        return {key: self._item(key) for key in keys}


def _wrap_container_subclass(tracer: "Tracer", real: Any, cls: type, source: Source | None) -> Value | None:
    """An instance of a subclass of dict, OrderedDict, defaultdict, list or tuple: its items
    are read through the builtin base (no overridden method runs), a dict's as the program
    reads them; its attributes by source."""
    from .classes import builtin_base

    base = builtin_base(cls)
    if base not in (dict, collections.OrderedDict, collections.defaultdict, list, tuple):
        return None
    if isinstance(real, dict):
        if not all(is_dict_key(key) for key in base.__iter__(real)):
            return None
        tracer.add_guard(source, "type", cls)
        return DictValue({}, dict, source, cls=cls, obj=real, reader=OutsideDict(tracer, real, source, base))
    contents = None if source is None else ContentsSource(source, base)
    tracer.add_guard(source, "type", cls)
    elements = list(base.__iter__(real))
    tracer.add_guard(contents, "len", len(elements))
    items = [wrap(tracer, item, _item(contents, index)) for index, item in enumerate(elements)]
    return SequenceValue(items, list if base is list else tuple, source, cls=cls, obj=real)


def _wrap_tensor(tracer: "Tracer", real: torch.Tensor, source: Source | None) -> Value:
    if source is None:
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, "tensor without a source",
                                 name="a tensor reached without a path from the inputs",
                                 type="Tensor")
    if real.is_nested or real.layout is not torch.strided:
        # sparse tensors too, as in PyTorch: ahead-of-time autograd and Inductor take strided ones
        raise tracer.graph_break(gb.UNSUPPORTED_TENSOR, f"{source.name()}: {real.layout}", name=source.name(),
                                 tensor=tensor_kind(real), error="the tracer models strided tensors")
    value = tracer.graph.add_input(real, source)
    module_state = isinstance(source, ModuleDictSource)
    tracer.add_guard(source, "tensor", TensorMeta.of(real, tracer.graph.symbolic_dims(value.fake),
                                                     check_dispatch_keys=not module_state))
    value.cls = type(real)
    tracer.real_tensors[id(value)] = real
    return value


def _opaque(tracer: "Tracer", real: Any, source: Source | None) -> Value:
    tracer.add_guard(source, "id", real)
    return ConstantValue(real, source)


def _is_named_tuple(cls: type) -> bool:
    return hasattr(cls, "_fields") or hasattr(cls, "n_fields")


def _is_user_instance(real: Any) -> bool:
    """An instance of a user class with `__call__` is read through, not called opaquely."""
    call = getattr(type(real), "__call__", None)
    return type(call) is types.FunctionType and not is_graph_operator(call)


def _item(source: Source | None, key: Any) -> Source | None:
    return None if source is None else ItemSource(source, key)


def _attr(source: Source | None, name: str) -> Source | None:
    return None if source is None else AttrSource(source, name)


def function_value(fn: types.FunctionType, source: Source | None) -> FunctionValue:
    """The inlinable value of a real Python function; its closure cells (and, when called, its
    code and defaults) read through by source. A function found without a path (a method found
    on a class, a callee of a constant) is its own source: what it holds can still change."""
    source = source or ConstantSource(id(fn), fn)
    return FunctionValue(fn.__code__, fn.__globals__, fn.__name__, tuple(fn.__defaults__ or ()),
                         dict(fn.__kwdefaults__ or {}), closure_cells(fn, source), fn=fn,
                         source=source)


def state_source(function: FunctionValue) -> Source | None:
    """Where the code, defaults and closure of a real Python function are re-read (a bound
    method's are its function's); None for a function made in the region."""
    if type(function.fn) is not types.FunctionType:
        return None
    return function.source or ConstantSource(id(function.fn), function.fn)


def cached_function_value(cached: Any) -> FunctionValue:
    """A function under `functools.lru_cache`: its code is the wrapped function's, the real
    object (`fn`) the cache, whose calls `calls.modelled_call` gives their meaning."""
    wrapped = cached.__wrapped__
    return FunctionValue(wrapped.__code__, wrapped.__globals__, wrapped.__name__, tuple(wrapped.__defaults__ or ()),
                         dict(wrapped.__kwdefaults__ or {}), closure_cells(wrapped, None), fn=cached)


def closure_cells(fn: Any, source: Source | None) -> tuple[CellValue, ...]:
    cells = getattr(fn, "__closure__", None) or ()
    names = fn.__code__.co_freevars
    return tuple(CellValue(None, cell, None if source is None else ClosureCellSource(source, i, names[i]))
                 for i, cell in enumerate(cells))


def cell_contents_source(cell: CellValue) -> Source | None:
    return None if cell.source is None else CellContentsSource(cell.source)

