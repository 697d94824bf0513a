"""Calls of NumPy in the region: its functions, ufuncs and scalar types, and torch's
constructors of tensors from arrays.

Every NumPy callable the program calls is looked up here (`handler_for`) before the tracer
would run or inline it:

- a function with a counterpart of the same name in torch._numpy (`numpy.linalg.norm` and
  `torch._numpy.linalg.norm`) is one node on the graph's tensors (`numpy_arrays.apply`);
- a query answered from dtypes alone (`np.dtype`, `np.iinfo`, `np.issubdtype`...), called on
  constants, runs for real and its answer is a constant; so does a NumPy scalar type called
  on a number (`np.float32(2)`); on an array, a scalar type is a cast;
- anything else of NumPy is a graph break that names it: `numpy.random`, which draws from
  NumPy's global generator (the graph cannot reproduce its numbers), and the functions with
  no tensor counterpart (`np.save`...).

`torch.from_numpy`, `torch.as_tensor`, `torch.tensor` and the legacy constructors
(`torch.LongTensor`...) given arrays take the arrays' tensors.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..interpreter import graph_breaks as gb
from . import numpy_arrays
from .values import ArrayValue, ConstantValue, SequenceValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

Handler = Callable[["Tracer", list, dict], Value | None]

# NumPy functions whose result is an array even when it has no dimension (others give scalars)
_ARRAY_MAKERS = frozenset({"array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "copy",
                           "empty", "empty_like", "full", "full_like", "ones", "ones_like", "zeros",
                           "zeros_like", "squeeze", "transpose", "real", "imag", "real_if_close", "reshape",
                           "broadcast_to", "where", "cov", "i0", "identity", "eye", "expand_dims",
                           "moveaxis", "swapaxes", "atleast_1d", "atleast_2d", "atleast_3d", "ravel"})
# functions that make new arrays from sizes: traced even on constants (their result is an array,
# which may be large)
_CREATORS = frozenset({"arange", "linspace", "logspace", "geomspace", "tri", "indices", "meshgrid", "diag",
                       "diagflat", "vander", "hamming", "hanning", "blackman", "bartlett", "kaiser",
                       "tril_indices", "triu_indices", "diag_indices"}) | _ARRAY_MAKERS
# pure functions of dtypes and Python values: run for real on constants
_QUERIES = ("dtype", "iinfo", "finfo", "issubdtype", "isdtype", "promote_types", "can_cast", "result_type",
            "min_scalar_type", "isscalar", "ndim", "shape", "size", "iscomplexobj", "isrealobj",
            "common_type")
_LEGACY_CONSTRUCTORS = (torch.DoubleTensor, torch.FloatTensor, torch.HalfTensor, torch.BFloat16Tensor,
                        torch.LongTensor, torch.IntTensor, torch.ShortTensor, torch.CharTensor,
                        torch.ByteTensor, torch.BoolTensor)


def handler_for(target: Any) -> Handler | None:
    """What calling `target` means when it belongs to NumPy (or builds a tensor from arrays);
    None for any other callable. The table of NumPy's callables (and torch._numpy) is loaded
    by the first call of one, never by a program that calls none."""
    try:
        found = _TORCH_CONSTRUCTORS.get(target)
    except TypeError:  # an unhashable callable
        return None
    if found is not None:
        return found
    module = getattr(target, "__module__", None)
    if not isinstance(module, str) or not (module == "numpy" or module.startswith("numpy.")):
        return None
    return _table().get(target) or _untraceable(target, module)


@functools.cache
def _table() -> dict[Any, Handler]:
    import numpy
    import torch._numpy as tnp

    table: dict[Any, Handler] = {}
    for module, counterparts, prefix in ((numpy, tnp, "np"), (numpy.linalg, tnp.linalg, "np.linalg"),
                                         (numpy.fft, tnp.fft, "np.fft")):
        for name in dir(counterparts):
            target, counterpart = getattr(module, name, None), getattr(counterparts, name)
            if name.startswith("_") or isinstance(target, type) or not callable(target) \
                    or not callable(counterpart) or isinstance(counterpart, type):
                continue
            table[target] = _function(target, counterpart, f"{prefix}.{name}", name not in _ARRAY_MAKERS,
                                      folds=name not in _CREATORS)
    for name in ("array", "asarray"):
        table[getattr(numpy, name)] = _array_constructor(table[getattr(numpy, name)])
    for name in _QUERIES:
        if hasattr(numpy, name):
            target = getattr(numpy, name)
            table[target] = _query(target, table.get(target))
    for name in dir(numpy):
        target = getattr(numpy, name)
        if isinstance(target, type) and issubclass(target, numpy.generic) and target.__module__ == "numpy":
            table[target] = _scalar_type(target)
    return table


def _function(target: Callable, counterpart: Callable, name: str, scalars: bool, folds: bool) -> Handler:
    """`target` as its torch._numpy `counterpart` on arrays. On constants alone, as Python runs
    it: computed now, when what it gives is no array (`np.sqrt(64)`, `np.prod((2, 3))`); an
    array is made in the graph (a new one at each call, as eagerly)."""
    def handler(tracer, args, kwargs):
        if folds and _all_constant(args, kwargs):
            folded = _fold(tracer, target, args, kwargs)
            if folded is not None:
                return folded
        return numpy_arrays.apply(tracer, counterpart, name, args, kwargs, scalars)
    return handler


def _fold(tracer: "Tracer", target: Callable, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    from .operations import constant_result, python_value

    name = getattr(target, "__name__", "a NumPy function")
    python_args = [python_value(tracer, arg, name) for arg in args]
    python_kwargs = {key: python_value(tracer, arg, name) for key, arg in kwargs.items()}
    try:
        result = target(*python_args, **python_kwargs)
    except Exception as error:
        raise tracer.user_error(error, f"{name}(...)")
    return constant_result(result) if _is_immutable(result) else None


def _is_immutable(result: Any) -> bool:
    """A NumPy scalar, a number, or a tuple or list of them: a result kept as a constant."""
    if type(result) in (tuple, list):
        return all(_is_immutable(item) for item in result)
    return numpy_arrays.is_numpy_constant(result) or type(result) in (int, float, bool, complex, str, type(None))


def _array_constructor(counterpart: Handler) -> Handler:
    """`np.array(data, dtype)`: a list or tuple holding arrays is stacked (`numpy_arrays.array_of`)."""
    def handler(tracer, args, kwargs):
        if args and isinstance(args[0], SequenceValue) and numpy_arrays.holds_array(args[0], loosely=True) \
                and set(kwargs) <= {"dtype"} and len(args) <= 2:
            dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
            return numpy_arrays.array_of(tracer, args[0], {} if dtype is None else {"dtype": dtype})
        return counterpart(tracer, args, kwargs)
    return handler


def _all_constant(args: list[Value], kwargs: dict[str, Value]) -> bool:
    from .operations import is_constant_tree

    return all(is_constant_tree(arg) for arg in [*args, *kwargs.values()])


def _query(target: Any, counterpart: Handler | None) -> Handler:
    """A query of dtypes: computed now on constants, else its torch._numpy counterpart (on
    arrays: `np.result_type(a, b)`, `np.ndim(a)`)."""
    def handler(tracer, args, kwargs):
        if _all_constant(args, kwargs):
            from .builtin_calls import evaluate

            return evaluate(tracer, target, args, kwargs)
        return (counterpart or _untraceable(target, "numpy"))(tracer, args, kwargs)
    return handler


def _scalar_type(cls: type) -> Handler:
    """`np.float32(x)`: a scalar made now from a number, a cast of an array (a scalar from a
    scalar or a 0-d array, an array from an array)."""
    def handler(tracer, args, kwargs):
        if not kwargs and len(args) <= 1 and all(isinstance(arg, ConstantValue) for arg in args):
            from .builtin_calls import evaluate

            return evaluate(tracer, cls, args, kwargs)
        import torch._numpy as tnp

        if len(args) == 1 and not kwargs and isinstance(args[0], ArrayValue):
            return numpy_arrays.apply(tracer, tnp.ndarray.astype, f"np.{cls.__name__}",
                                      [args[0], ConstantValue(cls)], {})
        return numpy_arrays.apply(tracer, tnp.asarray, f"np.{cls.__name__}", args,
                                  {**kwargs, "dtype": ConstantValue(cls)})
    return handler


def _untraceable(target: Any, module: str) -> Handler:
    name = f"{module}.{getattr(target, '__qualname__', None) or getattr(target, '__name__', repr(target))}"
    if module == "numpy.random" or module.startswith("numpy.random."):
        reason = "draws from NumPy's random generator, whose numbers the graph cannot reproduce"
    else:
        reason = "has no counterpart in torch._numpy (NumPy's API written on tensors)"

    def handler(tracer, args, kwargs):
        raise tracer.graph_break(gb.NUMPY_UNTRACEABLE, f"call {name}", name=name, reason=reason)
    return handler


def _from_numpy(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """`torch.from_numpy(array)`: the array's own tensor (the same memory)."""
    if len(args) != 1 or kwargs or not isinstance(args[0], ArrayValue):
        return None
    if args[0].scalar:
        raise tracer.user_error(TypeError(f"expected np.ndarray (got numpy.{args[0].python_type().__name__})"))
    return args[0].tensor


def _constructor(target: Callable, copy: bool) -> Handler:
    """`torch.tensor(data)` (a copy) or `torch.as_tensor(data)` of arrays, or of a NumPy scalar
    (the graph takes it as a Python number: its dtype is given); None for other data (the call
    is then an ordinary operator, or a symbol's tensor)."""
    def handler(tracer, args, kwargs):
        if len(args) == 1 and numpy_arrays.holds_array(args[0]) and set(kwargs) <= {"dtype", "device"} \
                and _on_cpu(tracer, kwargs.get("device")):
            return numpy_arrays.tensor_of(tracer, args[0], kwargs.get("dtype"), copy)
        if len(args) == 1 and isinstance(args[0], ConstantValue) and numpy_arrays.is_numpy_scalar(args[0].value) \
                and "dtype" not in kwargs:
            dtype = numpy_arrays.tensor_dtype(tracer, args[0].value.dtype)
            return tracer.graph.call("call_function", target, args, {**kwargs, "dtype": ConstantValue(dtype)})
        from .symbolic_numbers import tensor_of_a_symbol

        return tensor_of_a_symbol(tracer, args, kwargs)
    return handler


def _on_cpu(tracer: "Tracer", device: Value | None) -> bool:
    from .operations import python_value

    return device is None or torch.device(python_value(tracer, device) or "cpu").type == "cpu"


def _legacy_constructor(dtype: torch.dtype) -> Handler:
    """`torch.LongTensor(data)` of arrays: a new tensor of the class's dtype."""
    def handler(tracer, args, kwargs):
        if len(args) == 1 and not kwargs and numpy_arrays.holds_array(args[0]):
            return numpy_arrays.tensor_of(tracer, args[0], ConstantValue(dtype), copy=True)
        return None
    return handler


_TORCH_CONSTRUCTORS: dict[Any, Handler] = {
    torch.from_numpy: _from_numpy,
    torch.as_tensor: _constructor(torch.as_tensor, copy=False),
    torch.tensor: _constructor(torch.tensor, copy=True),
    **{legacy: _legacy_constructor(legacy.dtype) for legacy in _LEGACY_CONSTRUCTORS},
}
