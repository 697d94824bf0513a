"""NumPy arrays in the region: what `ArrayValue` does, as NumPy does it, on tensors of the graph.

An ndarray read from outside is a graph input: the tensor `torch.from_numpy` makes of it (the
same memory: a write in the region reaches the caller's array), guarded on its dtype and shape
and dynamic like a tensor (`wrap.py` makes it). Everything the program does to an array (its
operators, indexing, methods, the NumPy functions of `numpy_calls`) is one node of
`numpy_nodes`, run on fake tensors for the result's metadata; what NumPy answers from metadata
alone (`shape`, `ndim`, `size`, `dtype`, `strides`...) is answered now. Arrays and tensors
turn into each other as they do eagerly, sharing memory: `Tensor.numpy()`, `torch.from_numpy`,
`np.asarray(tensor)`.

NumPy returns a scalar (`np.float64`) where a result has no dimension, except from the
functions and methods that make arrays (`np.asarray`, `np.zeros(())`, `a.copy()`, `a[...]`):
`apply` follows that rule, so a value leaving the region has the type it has eagerly. A NumPy
scalar known while tracing (`np.float32(2)`, an argument) is a constant; meeting an array, it
becomes a 0-d tensor of its dtype, so that NumPy's promotion rules see its dtype.
"""
from __future__ import annotations

import operator
import sys
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..interpreter import graph_breaks as gb
from .values import ArrayValue, ConstantValue, MethodValue, SequenceValue, TensorValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

# The dtypes that NumPy, torch and torch._numpy share.
_DTYPES = {name: getattr(torch, name) for name in ("bool", "uint8", "int8", "int16", "int32", "int64",
                                                   "float16", "float32", "float64", "complex64",
                                                   "complex128")}
# ndarray attributes answered from the fake tensor's metadata
_METADATA = frozenset({"shape", "ndim", "size", "dtype", "itemsize", "nbytes", "strides"})
# views, made in the graph; a NumPy scalar's views are scalars
_VIEWS = frozenset({"T", "mT", "real", "imag"})
# methods whose 0-d result is an array, unless the receiver is a scalar
_SHAPING_METHODS = frozenset({"copy", "astype", "reshape", "view", "squeeze", "transpose", "swapaxes",
                              "flatten", "ravel"})
# methods and attributes that expose memory, or data as Python objects: not modelled
_MEMORY = frozenset({"data", "base", "ctypes", "flags", "flat", "tobytes", "tofile", "dump", "dumps",
                     "__array_interface__", "__array_struct__", "__dlpack__", "setflags", "__reduce__"})
_CAPTURED_SCALARS = frozenset({"item", "tolist"})


def is_array(real: Any) -> bool:
    """An `np.ndarray` (not a subclass: matrices and masked arrays behave differently)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and type(real) is numpy.ndarray


def is_numpy_constant(real: Any) -> bool:
    """A NumPy scalar, a dtype, or the machine limits of one (`np.iinfo`, `np.finfo`):
    immutable, compared by value."""
    module = getattr(type(real), "__module__", "")
    if not module.startswith("numpy"):
        return False
    numpy = sys.modules["numpy"]
    return isinstance(real, (numpy.generic, numpy.dtype, numpy.iinfo, numpy.finfo))


def is_numpy_scalar(real: Any) -> bool:
    """A NumPy scalar of a dtype tensors have (`np.float32(2)`, `np.int64(8)`)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(real, numpy.generic) and real.dtype.name in _DTYPES


def is_machine_limits(real: Any) -> bool:
    """`np.iinfo(...)` or `np.finfo(...)`: equal when their dtypes are."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and type(real) in (numpy.iinfo, numpy.finfo)


def has_tensor_dtype(array: Any) -> bool:
    """Whether a tensor can hold this array's elements (not objects, strings, uint16...)."""
    return array.dtype.isnative and array.dtype.name in _DTYPES


def ndarray_type() -> type:
    import numpy

    return numpy.ndarray


def numpy_dtype(dtype: torch.dtype) -> Any:
    """The `np.dtype` of a tensor dtype that NumPy shares."""
    import numpy

    return numpy.dtype(str(dtype).removeprefix("torch."))


def scalar_type(dtype: torch.dtype) -> type:
    """The NumPy scalar type (`np.float64`...) of a dtype."""
    return numpy_dtype(dtype).type


def is_dtype_like(real: Any) -> bool:
    """A value NumPy can only read as a dtype: `np.dtype(...)`, a NumPy scalar type, or a
    Python number type (`float`, `int`, `bool`, `complex`)."""
    numpy = sys.modules["numpy"]
    if isinstance(real, type):
        return real in (float, int, bool, complex) or issubclass(real, numpy.generic)
    return isinstance(real, numpy.dtype)


def tensor_dtype(tracer: "Tracer", like: Any) -> torch.dtype:
    """The torch dtype of a NumPy dtype-like (`np.float32`, `"float64"`, `int`); a graph break
    for a dtype no tensor has."""
    import numpy

    if isinstance(like, torch.dtype):
        return like
    try:
        name = numpy.dtype(like).name
    except TypeError as error:
        raise tracer.user_error(error, f"np.dtype({like!r})")
    if name not in _DTYPES:
        raise tracer.graph_break(gb.NUMPY_UNTRACEABLE, f"dtype {name}", name=f"dtype {name}",
                                 reason="has no tensor dtype")
    return _DTYPES[name]


def apply(tracer: "Tracer", function: Callable, name: str, args: list[Value], kwargs: dict[str, Value],
          scalars: bool = True) -> Value:
    """`function` (of torch._numpy, or an operator) applied to NumPy values, as one node; the
    tensors it returns as arrays, those without dimension as NumPy scalars when `scalars`."""
    from .numpy_nodes import node_for

    inputs = [_argument(tracer, name, arg) for arg in args]
    keywords = {key: _argument(tracer, name, arg, dtype=key == "dtype") for key, arg in kwargs.items()}
    result = tracer.graph.call("call_function", node_for(function, name), inputs, keywords)
    return _result(result, [*args, *kwargs.values()], scalars)


def _argument(tracer: "Tracer", name: str, value: Value, dtype: bool = False) -> Value:
    """A value as the node takes it: an array as its tensor, a NumPy scalar as a 0-d tensor of
    its dtype, a dtype (or, with `dtype`, anything given as one) as the torch dtype."""
    if isinstance(value, ArrayValue):
        return value.tensor
    if isinstance(value, SequenceValue):
        return SequenceValue([_argument(tracer, name, item) for item in value.items], value.kind)
    if isinstance(value, ConstantValue):
        numpy = sys.modules["numpy"]
        real = value.value
        if isinstance(real, numpy.generic):
            return _scalar_tensor(tracer, real)
        if dtype and real is not None or is_dtype_like(real):
            return ConstantValue(tensor_dtype(tracer, real))
        return value
    if isinstance(value, TensorValue):
        return value
    raise tracer.graph_break(gb.NUMPY_UNTRACEABLE, f"{name} of {value!r}", name=name,
                             reason=f"was given a `{value.python_type().__name__}`, which is not an array "
                                    "a tensor can hold")


def _scalar_tensor(tracer: "Tracer", scalar: Any) -> Value:
    dtype = tensor_dtype(tracer, scalar.dtype)
    return tracer.graph.call("call_function", torch.full, [ConstantValue(()), ConstantValue(scalar.item())],
                             {"dtype": ConstantValue(dtype)})


def _result(value: Value, arguments: list[Value], scalars: bool) -> Value:
    if isinstance(value, TensorValue):
        scalar = scalars and value.fake.dim() == 0
        for argument in arguments:  # the same array back (`np.asarray(a)`, `a += 1`)
            if isinstance(argument, ArrayValue) and argument.tensor is value and argument.scalar == scalar:
                return argument
        return ArrayValue(value, scalar=scalar)
    if isinstance(value, SequenceValue):
        return SequenceValue([_result(item, arguments, scalars) for item in value.items], value.kind, cls=value.cls)
    if isinstance(value, ConstantValue) and type(value.value).__name__ == "DType" \
            and type(value.value).__module__ == "torch._numpy._dtypes":  # `np.result_type(a, b)`
        return ConstantValue(numpy_dtype(value.value.torch_dtype))
    return value


def attribute(tracer: "Tracer", array: ArrayValue, name: str) -> Value | None:
    """`array.name`: metadata now, views as nodes, methods bound; None when NumPy has no such
    attribute."""
    if name in _METADATA:
        return ConstantValue(_metadata(tracer, array.tensor, name))
    if name in _MEMORY:
        raise _memory_break(tracer, name)
    if name in _VIEWS:
        import torch._numpy as tnp

        return apply(tracer, getattr(tnp.ndarray, name).fget, f"ndarray.{name}", [array], {}, array.scalar)
    if callable(getattr(ndarray_type(), name, None)):
        return MethodValue(array, name)
    return None


def _metadata(tracer: "Tracer", tensor: TensorValue, name: str) -> Any:
    fake = tensor.fake
    if name in ("shape", "size", "nbytes"):
        tracer.graph.register_sizes(tensor)  # symbolic sizes are computed in the graph
    if name == "shape":
        return tuple(fake.shape)
    if name == "ndim":
        return fake.dim()
    if name == "size":
        return fake.numel()
    if name == "dtype":
        return numpy_dtype(fake.dtype)
    if name == "itemsize":
        return fake.element_size()
    if name == "nbytes":
        return fake.numel() * fake.element_size()
    return tuple(stride * fake.element_size() for stride in fake.stride())


def _memory_break(tracer: "Tracer", name: str) -> Exception:
    return tracer.graph_break(gb.NUMPY_UNTRACEABLE, f"ndarray.{name}", name=f"ndarray.{name}",
                              reason="exposes the array's memory or data as Python objects")


def call_method(tracer: "Tracer", array: ArrayValue, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    """`array.name(*args, **kwargs)`, as torch._numpy's ndarray method of that name."""
    import torch._numpy as tnp

    if name in _CAPTURED_SCALARS and not args and not kwargs:
        from . import methods  # the rules of `Tensor.item()` and `Tensor.tolist()`

        return methods.call_method(tracer, array.tensor, name, [], {})
    if name in _MEMORY:
        raise _memory_break(tracer, name)
    function = getattr(tnp.ndarray, name, None)
    if not callable(function):
        raise tracer.graph_break(gb.NUMPY_UNTRACEABLE, f"ndarray.{name}", name=f"ndarray.{name}",
                                 reason="has no counterpart in torch._numpy (NumPy's API on tensors)")
    if name in ("astype", "view") and args:
        args = [_as_dtype(tracer, args[0]), *args[1:]]
    scalars = array.scalar if name in _SHAPING_METHODS else True
    return apply(tracer, function, f"ndarray.{name}", [array, *args], kwargs, scalars)


def _as_dtype(tracer: "Tracer", value: Value) -> Value:
    if isinstance(value, ConstantValue) and value.value is not None:
        return ConstantValue(tensor_dtype(tracer, value.value))
    return value


def binary(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value:
    """`lhs op rhs` where a side is an array (and neither is an instance of a user class). A
    tensor on the left applies its own operator, converting the array as torch does (a NumPy
    scalar as a Python number); an array on the left of a tensor is left to Python."""
    if isinstance(lhs, TensorValue):
        return tracer.graph.call("call_function", op, [lhs, _tensor_operand(tracer, lhs, rhs)], {})
    if isinstance(rhs, TensorValue):
        raise tracer.graph_break(gb.NUMPY_UNTRACEABLE, f"{op.__name__}(ndarray, Tensor)",
                                 name=f"{op.__name__}(ndarray, Tensor)",
                                 reason="mixes a NumPy array (on the left) with a tensor")
    return apply(tracer, op, op.__name__, [lhs, rhs], {})


def _tensor_operand(tracer: "Tracer", tensor: TensorValue, value: ArrayValue) -> Value:
    """The right operand of a tensor's operator: an array as its tensor; a NumPy scalar as torch
    reads it, a Python number (so of the dtype a number of its kind gives with this tensor)."""
    if not value.scalar:
        return value.tensor
    dtype = value.tensor.fake.dtype
    number = True if dtype is torch.bool else 1j if dtype.is_complex else 1.0 if dtype.is_floating_point else 1
    wanted = torch.result_type(tensor.fake, number)
    if wanted == dtype:
        return value.tensor
    return tracer.graph.call("call_method", "to", [value.tensor, ConstantValue(wanted)], {})


def unary(tracer: "Tracer", op: Callable, array: ArrayValue) -> Value:
    return apply(tracer, op, op.__name__, [array], {})


def getitem(tracer: "Tracer", array: ArrayValue, key: Value) -> Value:
    """`array[key]`: NumPy's basic, advanced and boolean indexing; an index with `...` keeps a
    0-d result an array."""
    parts = key.items if isinstance(key, SequenceValue) and key.kind is tuple else [key]
    ellipsis = any(isinstance(part, ConstantValue) and part.value is Ellipsis for part in parts)
    return apply(tracer, operator.getitem, "getitem", [array, key], {}, scalars=not ellipsis)


def setitem(tracer: "Tracer", array: ArrayValue, key: Value, value: Value) -> None:
    from .numpy_nodes import store_items

    apply(tracer, store_items, "setitem", [array, key, value], {})


def as_tensor_index(key: Value) -> Value:
    """An index (or a stored value) of a tensor holding arrays: torch reads an array as the
    tensor of its elements."""
    if isinstance(key, ArrayValue):
        return key.tensor
    if isinstance(key, SequenceValue) and holds_array(key):
        return SequenceValue([as_tensor_index(item) for item in key.items], key.kind)
    return key


def iterate(tracer: "Tracer", array: ArrayValue) -> list[Value]:
    """The rows of an array (views), scalars for a 1-d array's items."""
    if array.tensor.fake.dim() == 0:
        raise tracer.user_error(TypeError("iteration over a 0-d array"))
    rows = tracer.graph.call("call_method", "unbind", [array.tensor], {})
    return [ArrayValue(row, scalar=row.fake.dim() == 0) for row in rows.items]


def length(tracer: "Tracer", array: ArrayValue) -> Value:
    if array.tensor.fake.dim() == 0:
        raise tracer.user_error(TypeError("len() of unsized object"))
    tracer.graph.register_sizes(array.tensor)
    return ConstantValue(array.tensor.fake.shape[0])


def from_tensor(tracer: "Tracer", tensor: TensorValue, kwargs: dict[str, Value]) -> ArrayValue:
    """`tensor.numpy(force=False)`: an array sharing the tensor's memory, without its autograd."""
    from .operations import python_value

    force = python_value(tracer, kwargs.get("force", ConstantValue(False)), "Tensor.numpy(force=...)")
    if tensor.fake.requires_grad and not force:
        raise tracer.user_error(RuntimeError("Can't call numpy() on Tensor that requires grad. "
                                             "Use tensor.detach().numpy() instead."))
    if tensor.fake.dtype not in _DTYPES.values():
        raise tracer.user_error(TypeError(f"Got unsupported ScalarType {str(tensor.fake.dtype)[6:]}"))
    detached = tracer.graph.call("call_method", "detach", [tensor], {})
    if force and detached.fake.device.type != "cpu":
        detached = tracer.graph.call("call_method", "cpu", [detached], {})
    return ArrayValue(detached)


def holds_array(value: Value, loosely: bool = False) -> bool:
    """Whether `value` is, or nests in lists and tuples, an array (or, `loosely`, anything
    NumPy reads as one: a tensor, a NumPy scalar)."""
    if isinstance(value, ArrayValue) or loosely and (isinstance(value, TensorValue) or isinstance(
            value, ConstantValue) and isinstance(value.value, sys.modules["numpy"].generic)):
        return True
    return isinstance(value, SequenceValue) and any(holds_array(item, loosely) for item in value.items)


def tensor_of(tracer: "Tracer", data: Value, dtype: Value | None, copy: bool) -> Value:
    """A tensor made from `data` holding arrays (`torch.tensor`, `torch.as_tensor`,
    `torch.LongTensor`...): an array's own tensor, the same memory unless `copy`; a list of
    arrays and numbers stacked as `np.array` stacks them."""
    if isinstance(data, ArrayValue):
        tensor = data.tensor
    else:
        tensor = array_of(tracer, data, {}).tensor
        copy = False  # a new tensor already
    if dtype is not None and not (isinstance(dtype, ConstantValue) and dtype.value is None):
        tensor = tracer.graph.call("call_method", "to", [tensor, dtype], {})
    if copy:
        tensor = tracer.graph.call("call_method", "clone", [tensor], {})
    return tensor


def array_of(tracer: "Tracer", data: Value, kwargs: dict[str, Value]) -> Value:
    """`np.array(data, dtype=...)` of a list or tuple nesting arrays: their items stacked."""
    from .numpy_nodes import array_of as stacked

    return apply(tracer, stacked, "np.array", [data], kwargs, scalars=False)
