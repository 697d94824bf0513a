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

from ..._core.opaque_objects import opaque_kind
from ..._core.subclass_protocol import (
    context_pattern,
    flatten_signature,
    inner_tensors,
    is_wrapper_subclass,
    metadata_guard,
    opaque_attributes,
)
from ..guards.guards import TensorMeta
from ..guards.sources import (
    AttrSource,
    CellContentsSource,
    ClosureCellSource,
    ConstantSource,
    ContentsSource,
    ItemSource,
    KeyListSource,
    ModuleDictSource,
    NumpyTensorSource,
    OwnItemSource,
    Source,
    array_as_tensor,
    own_item,
)
from ..interpreter import graph_breaks as gb
from ..interpreter.graph_builder import tensor_kind
from ..interpreter.symbolic_sizes import SCALAR
from . import numpy_arrays
from .values import (
    ArrayValue,
    CellValue,
    ConstantValue,
    DequeValue,
    DictValue,
    FunctionValue,
    IteratorValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    PartialValue,
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
                          types.MemberDescriptorType, type, *_TORCH_OPERATOR_TYPES)
# Modules whose objects are immutable descriptions of types (`typing.List[int]`, a TypeVar):
# constants, whose operations (subscription, `|`, hashing) run for real.
_TYPING_MODULES = frozenset({"typing", "typing_extensions"})
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
        # torch's operators live in `torch`, `torch._C` and its flat namespaces (`torch._C._nn`,
        # `torch._C._linalg`...); a C function of a package nested deeper in `torch._C` (a frame
        # hook's machinery: `<package>.eval_frame`, `<package>.guards`) is no operator
        return module.startswith("torch") and not (module.startswith("torch._C.") and module.count(".") > 2)
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
    if type(real) is frozenset:  # of objects whose state the region may change: a container
        return not any(hasattr(item, "__dict__") and not callable(item) and not is_constant(item) for item in real)
    return type(real) in CONSTANT_TYPES or isinstance(real, (enum.Enum, str)) or numpy_arrays.is_numpy_constant(real) \
        or opaque_kind(type(real)) is not None


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
    if source is not None and tracer.graph.dynamic_dims.get(source) == SCALAR and numpy_arrays.is_numpy_scalar(real):
        # a NumPy scalar that changed between calls: a 0-d tensor input, which keeps its dtype
        tracer.add_guard(source, "type", type(real))
        return ArrayValue(_wrap_tensor(tracer, array_as_tensor(real), NumpyTensorSource(source)), source, scalar=True)
    if type(real) in _IDENTITY_CONSTANT_TYPES or isinstance(real, enum.Enum) or opaque_kind(type(real)) == "reference":
        tracer.add_guard(source, "id", real)
    elif numpy_arrays.is_machine_limits(real):  # `np.iinfo(...)` makes a new one each time
        tracer.add_guard(source, "type", type(real))
        tracer.add_guard(_attr(source, "dtype"), "const", real.dtype)
    else:
        tracer.add_guard(source, "const", real)
    return ConstantValue(real, source)


def _wrap_object(tracer: "Tracer", real: Any, source: Source | None) -> Value:
    if isinstance(real, torch.Tensor):
        return _wrap_tensor(tracer, real, source)
    cls = type(real)
    if numpy_arrays.is_array(real) and source is not None and numpy_arrays.has_tensor_dtype(real):
        # a graph input: the tensor sharing the array's memory, guarded and dynamic as tensors are
        tracer.add_guard(source, "type", cls)
        return ArrayValue(_wrap_tensor(tracer, array_as_tensor(real), NumpyTensorSource(source)), source)
    if getattr(cls, "_graphwright_compiled", False) or cls.__module__ in _TYPING_MODULES:
        return _opaque(tracer, real, source)
    if cls is list or cls is tuple or (isinstance(real, tuple) and _is_named_tuple(cls)):
        tracer.add_guard(source, "type", cls)
        tracer.add_guard(source, "len", len(real))
        items = [wrap(tracer, item, _item(source, index)) for index, item in enumerate(real)]
        kind = list if cls is list else tuple
        if cls in (list, tuple):
            return SequenceValue(items, kind, source)
        return SequenceValue(items, kind, source, cls=cls, obj=real)  # obj: its own attributes
    if cls in _SEQUENCE_ITERATORS:
        return _outside_iterator(tracer, real, source)
    if cls is collections.deque:
        tracer.add_guard(source, "type", cls)
        tracer.add_guard(source, "len", len(real))
        wrap(tracer, real.maxlen, _attr(source, "maxlen"))  # guarded: a different bound recompiles
        items = [wrap(tracer, item, _item(source, index)) for index, item in enumerate(real)]
        return DequeValue(items, real.maxlen, source)
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
    if isinstance(real, (set, frozenset)) and not isinstance(real, torch.nn.Module):
        value = _wrap_set(tracer, real, cls, source)
        if value is not None:
            return value
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
        known = tracer.memo_by_id.get(id(real.__func__))
        if known is not None and isinstance(known[1], FunctionValue) and known[0] is real.__func__:
            return known[1].bind(receiver)  # a function of the trace held by a class it made
        function = compiled_original(real.__func__) or real.__func__  # a compiled method: its original
        if type(function) is types.FunctionType and not is_graph_operator(real):
            return function_value(function, None).bind(receiver)
        if is_cached_function(real.__func__):  # transformers' Logger.warning_once
            return cached_function_value(real.__func__).bind(receiver)
        if isinstance(receiver, TensorValue):
            return MethodValue(receiver, real.__func__.__name__)
        return ConstantValue(real, source)
    if cls is functools.partial:
        return _wrap_partial(tracer, real, source)
    if cls in (types.BuiltinMethodType, types.MethodWrapperType) \
            and not isinstance(real.__self__, (types.ModuleType, type(None))):
        # `cls.__subclasses__`, `"sep".join`, `descriptor.__get__`: made anew at each read; what
        # it binds is what stays
        tracer.add_guard(source, "type", cls)
        tracer.add_guard(_attr(source, "__self__"), "id", real.__self__)
        return ConstantValue(real, source)
    if isinstance(real, _OPAQUE_CALLABLE_TYPES) or callable(real) and not _is_user_instance(real):
        return _opaque(tracer, real, source)
    tracer.add_guard(source, "type", cls)
    if isinstance(real, BaseException):
        from .exceptions import from_outside

        return from_outside(tracer, real, source)
    return ObjectValue(real, cls, source)


def _wrap_partial(tracer: "Tracer", real: functools.partial, source: Source | None) -> Value:
    """A partial read from outside: its function and stored arguments are read by source and
    guarded as values of their own, so that partials of one function over like arguments
    share a graph (a partial is often made anew for each call)."""
    tracer.add_guard(source, "type", functools.partial)
    args_source, keywords_source = _attr(source, "args"), _attr(source, "keywords")
    tracer.add_guard(args_source, "len", len(real.args))
    tracer.add_guard(keywords_source, "keys", tuple(real.keywords))
    function = wrap(tracer, real.func, _attr(source, "func"))
    args = [wrap(tracer, arg, _item(args_source, index)) for index, arg in enumerate(real.args)]
    keywords = {key: wrap(tracer, arg, _item(keywords_source, key)) for key, arg in real.keywords.items()}
    return PartialValue(function, args, keywords, source)


# iterators over immutable sequences: their state (`__reduce__`) is a constant to guard
_SEQUENCE_ITERATORS = frozenset(type(iter(kind)) for kind in ((), range(0), "", "\u00e9"))


def _outside_iterator(tracer: "Tracer", real: Any, source: Source | None) -> Value:
    """An iterator over a range, a string, or a tuple of constants, passed in: its remaining
    items, from its state (`__reduce__` tells them without stepping it), guarded; the items the
    region takes from it are taken from the real one after the graph."""
    state = real.__reduce__()
    sequence, position = state[1][0], state[2] if len(state) > 2 else 0
    remaining = list(sequence)[position:]
    if source is None or not all(_is_constant_tree(item) for item in remaining):
        return _opaque(tracer, real, source)
    tracer.add_guard(source, "type", type(real))
    tracer.add_guard(source, "call", ("__reduce__", (), state))
    iterator = IteratorValue([_constant_tree(item) for item in remaining], source)
    tracer.side_effects.step_outside_iterator(iterator)
    return iterator


def _is_constant_tree(real: Any) -> bool:
    return is_constant(real) or type(real) is tuple and all(_is_constant_tree(item) for item in real)


def _constant_tree(real: Any) -> Value:
    if type(real) is tuple:
        return SequenceValue([_constant_tree(item) for item in real], tuple)
    return ConstantValue(real)


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
        return wrap(self.tracer, self._real_item(key), self._item_source(key))

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
            return wrap(self.tracer, self._real_item(real_key), self._item_source(tensor.source))
        self.tracer.add_guard(self._keys_source(), "lacks_item", tensor.source)
        return None

    def read_all(self) -> dict[Any, Value]:
        keys = tuple(self.real if self.builtin is None else self.builtin.__iter__(self.real))
        self.tracer.add_guard(self._keys_source(), "keys", keys)
        items: dict[Any, Value] = {}
        for index, key in enumerate(keys):
            if isinstance(key, torch.Tensor):  # a tensor key is an input, read by its position
                tensor = self._tensor_key(key, index)
                items[TensorKey(tensor)] = wrap(self.tracer, self._real_item(key), self._item_source(tensor.source))
            else:
                items[key] = self._item(key)
        return items

    def _tensor_key(self, key: torch.Tensor, index: int) -> Value:
        if self.source is None:
            raise self.tracer.graph_break(gb.UNSUPPORTED_OPERATION, "tensor keys of a dict without a source",
                                          op="reading the tensor keys of a dict reached without a path",
                                          types="dict with tensor keys")
        return wrap(self.tracer, key, ItemSource(KeyListSource(self._keys_source()), index))

    def _real_item(self, key: Any) -> Any:
        return self.real[key] if self.builtin is None else own_item(self.real, key)


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


def _wrap_set(tracer: "Tracer", real: Any, cls: type, source: Source | None) -> Value | None:
    """A set of constants and objects hashed by identity, or an instance of a subclass of set or
    frozenset holding them: its members, read through the builtin base (no overridden `__iter__` runs), guarded in their
    order too (code that iterates the set must see the order it was traced with)."""
    from .classes import builtin_base

    base = builtin_base(cls)
    if base not in (set, frozenset):
        return None
    members = list(base.__iter__(real))
    objects = [not _is_constant_member(item) for item in members]
    if any(objects) and (source is None or not all(
            not is_object or is_identity_key(item) or _is_module_builtin(item)
            for item, is_object in zip(members, objects))):
        return None
    tracer.add_guard(source, "type", cls)
    contents = source if cls is base or source is None else ContentsSource(source, base)
    tracer.add_guard(contents, "keys", tuple(members))
    # a member that is an object is the same value as the object reached any other way
    items = {item: wrap(tracer, item, ItemSource(KeyListSource(contents), index)) if is_object
             else ConstantValue(item) for index, (item, is_object) in enumerate(zip(members, objects))}
    return DictValue(items, base, source, cls=None if cls is base else cls, obj=real)


def _is_constant_member(real: Any) -> bool:
    """A constant, or a tuple of constants (`{(0, "zero")}`): a member that is its own key."""
    return is_constant(real) or type(real) is tuple and all(_is_constant_member(item) for item in real)


def _is_module_builtin(real: Any) -> bool:
    """A builtin function of a module (`operator.add`): it hashes and compares as itself."""
    return isinstance(real, types.BuiltinFunctionType) and \
        isinstance(getattr(real, "__self__", None), (types.ModuleType, type(None)))


def _wrap_tensor(tracer: "Tracer", real: torch.Tensor, source: Source | None) -> Value:
    if source is None:
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, "tensor without a source",
                                 name="a tensor reached without a path from the inputs",
                                 type="Tensor")
    if (real.is_nested or real.layout is not torch.strided) and not is_wrapper_subclass(real):
        # sparse tensors too, as in PyTorch: ahead-of-time autograd and Inductor take strided ones
        # (a jagged nested tensor is a wrapper subclass around strided ones)
        raise tracer.graph_break(gb.UNSUPPORTED_TENSOR, f"{source.name()}: {real.layout}", name=source.name(),
                                 tensor=tensor_kind(real), error="the tracer models strided tensors")
    value = tracer.graph.add_input(real, source)
    module_state = isinstance(source, ModuleDictSource)
    tracer.add_guard(source, "tensor", TensorMeta.of(real, tracer.graph.symbolic_dims(value.fake),
                                                     check_dispatch_keys=not module_state))
    if is_wrapper_subclass(real):
        _guard_subclass(tracer, real, value.fake, source)
    value.cls = type(real)
    tracer.real_tensors[id(value)] = real
    return value


def _guard_subclass(tracer: "Tracer", real: torch.Tensor, fake: torch.Tensor, source: Source) -> None:
    """What a graph specialises on in a tensor subclass input beyond its own metadata: its inner
    attributes and flatten context, each inner tensor's metadata, and the identity of each inner
    object that is not a tensor (a DTensor's device mesh, a constant of the graph)."""
    # the fake's context: equal to the real one's, but where sizes are symbolic, any size matches
    attributes, context = flatten_signature(fake)
    custom = metadata_guard(type(real))
    tracer.add_guard(source, "flatten", (attributes, context_pattern(context)) if custom is None
                     else (attributes, flatten_signature(real)[1], custom))
    from ..operators import dtensor

    if dtensor.is_dtensor(real):
        dtensor.guard_dispatch_state(tracer)
    for name, opaque in opaque_attributes(real):
        tracer.add_guard(AttrSource(source, name), "id", opaque)
    for name, inner in inner_tensors(real):
        inner_source = AttrSource(source, name)
        inner_fake = getattr(fake, name)
        tracer.add_guard(inner_source, "tensor", TensorMeta.of(inner, tracer.graph.symbolic_dims(inner_fake)))
        if is_wrapper_subclass(inner):
            _guard_subclass(tracer, inner, inner_fake, inner_source)


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

