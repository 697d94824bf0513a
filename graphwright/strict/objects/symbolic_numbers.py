"""Python's number functions and methods applied to symbolic ints and floats (the SymInt and
SymFloat of symbolic sizes, and of scalar inputs that changed between calls).

A function with a symbolic counterpart in torch (`math.sqrt` -> `torch._sym_sqrt`, `int` ->
`torch.sym_int`, two-argument `max` -> `torch.sym_max`...) or a symbolic special method
(`math.floor`, `round`) becomes a graph node over the symbols, so the compiled code serves
every value; so does `torch.tensor(symbol)` (as `torch.scalar_tensor`), and `torch.tensor` of a
list holding symbols or 0-d tensors (as `torch._refs.tensor`). Any other function is
left to its caller, which specialises the symbols it reads (a guard on their values): slower to
compile again, never a wrong answer. Methods of the number (`m.is_integer()`, `n.bit_length()`)
are those of SymInt and SymFloat, run on the symbols and recorded when the answer is symbolic,
or else the real number's, after specialising it; the symbols' own Python code is never traced.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from ..interpreter.symbolic_sizes import SYMBOLIC_TYPES
from . import operations
from .values import ConstantValue, MethodValue, SequenceValue, TensorValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

# every math function torch defines on symbols, under its own `_sym_<name>`
_ONE_ARGUMENT = {getattr(math, name): getattr(torch, f"_sym_{name}") for name in dir(math)
                 if callable(getattr(math, name)) and hasattr(torch, f"_sym_{name}")}
_ONE_ARGUMENT.update({int: torch.sym_int, float: torch.sym_float,
                      # the symbols' own __floor__, __ceil__, __trunc__, __round__
                      math.floor: math.floor, math.ceil: math.ceil, math.trunc: math.trunc, round: round})
_TWO_ARGUMENTS = {max: torch.sym_max, min: torch.sym_min}


def _is_number(value: Value) -> bool:
    return isinstance(value, ConstantValue) and type(value.value) in (int, float, bool, *SYMBOLIC_TYPES)


def symbolic_call(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """`target(*args)` as a graph node when an argument is symbolic and `target` has a
    symbolic counterpart; None otherwise."""
    if kwargs or not args or not all(_is_number(arg) for arg in args) or \
            not any(isinstance(arg.value, (torch.SymInt, torch.SymFloat)) for arg in args) or \
            any(isinstance(arg.value, torch.SymBool) for arg in args):
        return None
    try:
        if len(args) == 2 and target in _TWO_ARGUMENTS:
            counterpart = _TWO_ARGUMENTS[target]
        elif len(args) == 1 or target is round and len(args) == 2 and type(args[1].value) is int:
            counterpart = _ONE_ARGUMENT.get(target)  # round(x, ndigits) with a constant ndigits
        else:
            return None
    except TypeError:  # an unhashable callable
        return None
    if counterpart is None:
        return None
    return tracer.graph.call("call_function", counterpart, args, {})


_TENSOR_DTYPES = {int: torch.int64, bool: torch.bool}


def _holds_graph_values(value: Value) -> bool:
    """A (nested) list or tuple holding 0-d tensors or symbols, which the graph computes."""
    if isinstance(value, TensorValue):
        return value.fake.dim() == 0  # a tensor of more elements is no number: Python's error
    if isinstance(value, SequenceValue):
        return any(_holds_graph_values(item) for item in value.items) and \
            all(_holds_graph_values(item) or _is_number(item) for item in value.items)
    return _is_number(value) and isinstance(value.value, SYMBOLIC_TYPES)


def tensor_of_a_symbol(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """`torch.tensor(number)` or `torch.as_tensor(number)` of a symbol: `torch.scalar_tensor` with
    the dtype `torch.tensor` would choose; `torch.tensor` of a list of numbers some of which the
    graph computes (0-d tensors, symbols): torch's reference implementation, which builds it
    from them in the graph, as TorchDynamo does. None for any other call."""
    if len(args) == 1 and isinstance(args[0], SequenceValue) and _holds_graph_values(args[0]):
        return tracer.graph.call("call_function", torch._refs.tensor, args, kwargs)
    if len(args) != 1 or not _is_number(args[0]) or not isinstance(args[0].value, SYMBOLIC_TYPES) \
            or set(kwargs) - {"dtype", "device", "requires_grad"}:
        return None
    dtype = kwargs.get("dtype")
    if dtype is None or isinstance(dtype, ConstantValue) and dtype.value is None:
        kind = args[0].python_type()
        dtype = ConstantValue(_TENSOR_DTYPES.get(kind) or torch.get_default_dtype())
    return tracer.graph.call("call_function", torch.scalar_tensor, args, {**kwargs, "dtype": dtype})


def attribute(tracer: "Tracer", number: ConstantValue, name: str) -> Value | None:
    """`number.name` of a symbolic int or float: its methods, called by `call_method`; any
    other attribute (`real`, `numerator`) read on the number it stands for, specialised."""
    if callable(getattr(number.python_type(), name, None)):
        return MethodValue(number, name)
    real = getattr(operations.python_value(tracer, number), name, _MISSING)
    return None if real is _MISSING else ConstantValue(real)


_MISSING = object()


def call_method(tracer: "Tracer", number: ConstantValue, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    """`number.name(*args)`: a method SymInt or SymFloat defines runs on the symbols (a node when
    its answer is symbolic, the guards it takes recorded by the shapes' environment); any other
    runs on the specialised number (as does every method of a symbol a guard has already fixed)."""
    if hasattr(type(number.value), name) and isinstance(tracer.graph.node_arg(number), torch.fx.Node):
        return tracer.graph.call("call_method", name, [number, *args], kwargs)
    real = operations.python_value(tracer, number)
    python_args = [operations.python_value(tracer, arg, f"{type(real).__name__}.{name}") for arg in args]
    python_kwargs = {key: operations.python_value(tracer, arg) for key, arg in kwargs.items()}
    try:
        return operations.constant_result(getattr(real, name)(*python_args, **python_kwargs))
    except Exception as error:
        raise tracer.user_error(error, f"{type(real).__name__}.{name}()")
