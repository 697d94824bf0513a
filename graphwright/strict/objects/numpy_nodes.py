"""What a NumPy operation of the region is in the graph: a node calling `torch._numpy`.

The graph holds tensors only. A NumPy function, method, operator or attribute read becomes one
node whose target is made here (`node_for`): it wraps the tensors standing for arrays as
`torch._numpy.ndarray`s (NumPy's API written on tensors), calls torch._numpy's counterpart of
what the program called, and returns the tensors of the arrays it got back. Backends see
through the node: the `eager` backend runs it, ahead-of-time autograd and Inductor trace into
it down to aten operators. `as_array` and `as_scalar` turn a graph output back into what the
caller gets, an `np.ndarray` or a NumPy scalar.

This module runs inside compiled graphs and must not read tracer state. Importing it sets
torch._numpy's default dtypes to NumPy's (float64, int64, complex128): torch._numpy would
otherwise read them, on first use, from TorchDynamo's config, importing torch._dynamo.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import torch
import torch._numpy as tnp
from torch._numpy import _dtypes_impl

_dtypes_impl._default_dtypes = _dtypes_impl.DefaultDTypes(
    float_dtype=torch.float64, complex_dtype=torch.complex128, int_dtype=torch.int64)

# Functions whose result is floating even for integer operands: NumPy computes them in float64,
# torch in its default dtype (float32), so integer operands are made float64 first.
_FLOAT_OF_INTEGERS = {tnp.true_divide, tnp.divide, tnp.arctan2, tnp.hypot, tnp.logaddexp,
                      tnp.logaddexp2, operator.truediv}
_NODES: dict[Any, Callable] = {}


def node_for(function: Callable, name: str) -> Callable:
    """The graph target that applies `function` (of torch._numpy, or an operator applied to
    torch._numpy arrays) to tensors standing for arrays; one per function, named `numpy_<name>`
    in printed graphs."""
    node = _NODES.get(function)
    if node is not None:
        return node
    floats = function in _FLOAT_OF_INTEGERS

    def node(*args: Any, **kwargs: Any) -> Any:
        arrays = [_as_numpy(arg) for arg in args]
        if floats and _all_integral(arrays):
            arrays = [_as_float(arg) for arg in arrays]
        result = function(*arrays, **{key: _as_numpy(arg) for key, arg in kwargs.items()})
        return _as_tensors(result)

    node.__name__ = node.__qualname__ = f"numpy_{name}".replace(".", "_")
    node.__module__ = __name__
    _NODES[function] = node
    return node


def store_items(array: Any, index: Any, value: Any) -> Any:
    """`array[index] = value` on a torch._numpy array, returning the array: the node's result
    is the tensor it wrote to, which keeps the node (and its write) in the graph."""
    array[index] = value
    return array


def array_of(data: Any, dtype: torch.dtype | None = None) -> Any:
    """`np.array(data)` where `data` nests arrays among numbers: the items stacked, of NumPy's
    promoted dtype (torch._numpy's own `array` reads every item as a Python number, which an
    array traced as a tensor is not)."""
    tensor = _stacked(data)
    return tnp.ndarray(tensor if dtype is None else tensor.to(dtype))


def _stacked(data: Any) -> torch.Tensor:
    if isinstance(data, tnp.ndarray):
        return data.tensor
    if type(data) in (tuple, list) and any(isinstance(item, (tnp.ndarray, tuple, list)) for item in data):
        items = [_stacked(item) for item in data]
        dtype = _dtypes_impl.result_type_impl(*items)
        return torch.stack([item.to(dtype) for item in items])
    return tnp.array(data).tensor  # numbers, or lists of them


def _as_numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tnp.ndarray(value)
    if type(value) in (tuple, list):
        return type(value)(_as_numpy(item) for item in value)
    return value


def _as_tensors(value: Any) -> Any:
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if type(value) in (tuple, list):
        return type(value)(_as_tensors(item) for item in value)
    return value


def _all_integral(arrays: list[Any]) -> bool:
    for value in arrays:
        if isinstance(value, tnp.ndarray):
            if value.tensor.dtype.is_floating_point or value.tensor.dtype.is_complex:
                return False
        elif not isinstance(value, (int, bool)):
            return False
    return True


def _as_float(value: Any) -> Any:
    return tnp.ndarray(value.tensor.to(torch.float64)) if isinstance(value, tnp.ndarray) else value


def as_array(tensor: torch.Tensor) -> Any:
    """A graph output as the `np.ndarray` the caller gets (sharing the tensor's memory)."""
    return tensor.numpy(force=True)


def as_scalar(tensor: torch.Tensor) -> Any:
    """A 0-d graph output as the NumPy scalar (`np.float64`...) the caller gets."""
    return tensor.numpy(force=True)[()]
