"""`__torch_function__` of Python tensor subclasses, run as eager runs it.

In eager, an operation on an instance of a Python tensor subclass that
overrides `__torch_function__` calls the most derived such class's
`__torch_function__(func, types, args, kwargs)` instead. The graph builder
finds those classes among an operation's tensors (`subclass_of_operation`);
this module runs the hook: a class's own `__torch_function__` (logging,
rewriting the call) is inlined like any user Python; torch's default one
(`Tensor.__torch_function__`, reached directly or through `super()`) is
modelled: the operation with subclass dispatch off, then the tensor results
made instances of the class, as its `_convert` does.

`torch._C.DisableTorchFunctionSubclass()` (and `DisableTorchFunction`) turn
subclass dispatch off while the tracer traces their block. The class of a
value is the tracer's knowledge (`TensorValue.cls`): the graph computes plain
tensors and runs with subclass dispatch off (`entries.py`); the residual code
gives outputs their class back.

Not handled here: nn.Parameter (its `__torch_function__` is disabled) and
traceable wrapper subclasses (TwoTensor), whose `__torch_dispatch__` runs on
the fakes and decides their results' class.
"""
from __future__ import annotations

import operator
from types import GetSetDescriptorType
from typing import TYPE_CHECKING, Any

import torch

from ..._core.subclass_protocol import overrides_torch_function
from .values import ConstantValue, DictValue, SequenceValue, TensorValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_DEFAULT = torch.Tensor.__torch_function__.__func__
_T = torch.Tensor
# What eager passes as `func` for a Python operator whose first operand is a tensor, and when only
# the second is (`1 - x` passes `Tensor.__rsub__` with `(x, 1)`).
_OPERATOR_FUNCS = {
    operator.add: (_T.add, _T.add), operator.sub: (_T.sub, _T.__rsub__), operator.mul: (_T.mul, _T.mul),
    operator.truediv: (_T.div, _T.__rdiv__), operator.floordiv: (_T.__floordiv__, _T.__rfloordiv__),
    operator.mod: (_T.remainder, _T.__rmod__), operator.pow: (_T.pow, _T.__rpow__),
    operator.matmul: (_T.matmul, _T.__rmatmul__), operator.and_: (_T.__and__, _T.__rand__),
    operator.or_: (_T.__or__, _T.__ror__), operator.xor: (_T.__xor__, _T.__rxor__),
    operator.lshift: (_T.__lshift__, _T.__rlshift__), operator.rshift: (_T.__rshift__, _T.__rrshift__),
    operator.lt: (_T.lt, _T.gt), operator.le: (_T.le, _T.ge), operator.gt: (_T.gt, _T.lt),
    operator.ge: (_T.ge, _T.le), operator.eq: (_T.__eq__, _T.__eq__), operator.ne: (_T.__ne__, _T.__ne__),
    operator.neg: (_T.neg, None), operator.pos: (_T.positive, None), operator.abs: (_T.abs, None),
    operator.invert: (_T.__invert__, None), operator.getitem: (_T.__getitem__, None),
    operator.setitem: (_T.__setitem__, None), operator.iadd: (_T.add_, None), operator.isub: (_T.sub_, None),
    operator.imul: (_T.mul_, None), operator.itruediv: (_T.div_, None), operator.ipow: (_T.pow_, None),
}


def has_default_torch_function(cls: type) -> bool:
    return getattr(cls.__torch_function__, "__func__", None) is _DEFAULT


def tensor_values(args: list[Value]) -> list[TensorValue]:
    """The tensors among an operation's arguments, and in its lists and tuples (`torch.cat`)."""
    found = []
    for arg in args:
        if isinstance(arg, TensorValue):
            found.append(arg)
        elif isinstance(arg, SequenceValue):
            found.extend(item for item in arg.items if isinstance(item, TensorValue))
    return found


def subclass_classes(args: list[Value]) -> list[type]:
    """The classes whose `__torch_function__` an operation on `args` would call, in eager's order
    (subclasses before their bases, else first seen first): Python tensor subclasses, and any
    other class that defines one (an object standing in for a tensor, as `torch.overrides`
    allows), among the arguments and the items of their lists and tuples."""
    found: list[type] = []
    for value in _arguments(args):
        cls = _class_of(value)
        if _dispatches_torch_function(cls) and cls not in found:
            found.append(cls)
    return sorted(found, key=lambda cls: -sum(issubclass(cls, other) for other in found))


def _class_of(value: Value) -> type:
    return value.cls if isinstance(value, TensorValue) else value.python_type()


def _arguments(args: list[Value]) -> list[Value]:
    found = []
    for arg in args:
        found.extend(arg.items if isinstance(arg, SequenceValue) else [arg])
    return found


def _dispatches_torch_function(cls: type) -> bool:
    if issubclass(cls, torch.Tensor):
        return overrides_torch_function(cls)
    hook = getattr(cls, "__torch_function__", None)
    return hook is not None and hook is not torch._C._disabled_torch_function_impl


def tensor_getter(name: str) -> Any:
    """`Tensor.<name>.__get__` for a property torch defines in C (`ndim`, `shape`, `T`): what eager
    passes to `__torch_function__` as `func` when the property is read on a subclass instance."""
    descriptor = torch._C.TensorBase.__dict__.get(name)
    return descriptor.__get__ if type(descriptor) is GetSetDescriptorType else None


def read_tensor_property(tracer: "Tracer", getter: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """`Tensor.<name>.__get__(x)`, called by `__torch_function__` as it calls any `func`: the
    attribute read (through `x`'s `__torch_function__` unless dispatch is off, as in eager)."""
    from .attributes import load_attr

    descriptor = getattr(getter, "__self__", None)
    if type(descriptor) is not GetSetDescriptorType or descriptor.__objclass__ is not torch._C.TensorBase \
            or getter.__name__ != "__get__" or kwargs or len(args) != 1 or not isinstance(args[0], TensorValue):
        return None
    return load_attr(tracer, args[0], descriptor.__name__)


def func_and_args(kind: str, target: Any, args: list[Value]) -> tuple[Any, list[Value]]:
    """What eager passes to `__torch_function__` as `func` and `args` for a graph call."""
    if kind == "call_method":
        return getattr(torch.Tensor, target, target), args
    funcs = _OPERATOR_FUNCS.get(target) if not isinstance(target, type) else None
    if funcs is None:
        return target, args
    forward, reflected = funcs
    if reflected is not None and len(args) == 2 and not isinstance(args[0], TensorValue):
        return reflected, [args[1], args[0]]
    return forward, args


def run(tracer: "Tracer", classes: list[type], kind: str, target: Any, args: list[Value],
        kwargs: dict[str, Value]) -> Value:
    """The operation `target(*args, **kwargs)` on subclass instances, through the first of
    `classes` whose `__torch_function__` does not return NotImplemented (a TypeError if none)."""
    from ..interpreter import calls
    from .classes import bind, class_value, find

    function, args = func_and_args(kind, target, args)
    func = ConstantValue(function)
    types = ConstantValue(tuple(classes))
    call_args = SequenceValue(list(args), tuple)
    call_kwargs = DictValue(dict(kwargs), dict)
    for cls in classes:
        owner, raw = find(tracer, cls, "__torch_function__")
        # read on the argument, as torch reads it: a plain method binds to that instance
        instance = next(value for value in _arguments([*args, *kwargs.values()]) if _class_of(value) is cls)
        hook = bind(tracer, owner, raw, "__torch_function__", instance, cls, class_value(cls))
        result = calls.call_value(tracer, hook, [func, types, call_args, call_kwargs], {})
        if not (isinstance(result, ConstantValue) and result.value is NotImplemented):
            return result
    names = ", ".join(f"'{cls.__qualname__}'" for cls in classes)
    raise tracer.user_error(TypeError(f"no implementation found for '{getattr(func.value, '__name__', func.value)}' "
                                      f"on types that implement __torch_function__: [{names}]"))


def default_torch_function(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`Tensor.__torch_function__(cls, func, types, args, kwargs)`, torch's default hook: the
    operation with subclass dispatch off, its new tensor results made instances of `cls`."""
    from . import operations

    bound = dict(zip(("cls", "func", "types", "args", "kwargs"), args))
    bound.update(kwargs)
    cls = operations.python_value(tracer, bound["cls"])
    types = operations.python_value(tracer, bound["types"])
    if not all(issubclass(cls, t) for t in types):
        return ConstantValue(NotImplemented)
    call_args, keywords = _call_arguments(tracer, bound)
    arguments = {id(value) for value in tensor_values(call_args)}
    result = _call_without_torch_function(tracer, bound["func"], call_args, keywords)
    if operations.python_value(tracer, bound["func"]) not in torch.overrides.get_default_nowrap_functions():
        made_instances(result, cls, arguments)
    return result


def disabled_torch_function(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`torch._C._disabled_torch_function_impl(func, types, args, kwargs)`, the hook of classes
    that turn `__torch_function__` off (nn.Parameter), reached through `super()` from a
    subclass's own: the operation with subclass dispatch off, its results as it makes them."""
    bound = dict(zip(("func", "types", "args", "kwargs"), args))
    bound.update(kwargs)
    call_args, keywords = _call_arguments(tracer, bound)
    return _call_without_torch_function(tracer, bound["func"], call_args, keywords)


def _call_arguments(tracer: "Tracer", bound: dict[str, Value]) -> tuple[list[Value], dict[str, Value]]:
    from . import operations

    call_args = operations.iterate(tracer, bound["args"]) if "args" in bound else []
    call_kwargs = bound.get("kwargs")
    keywords = {} if call_kwargs is None or isinstance(call_kwargs, ConstantValue) else dict(call_kwargs.items)
    return call_args, keywords


def _call_without_torch_function(tracer: "Tracer", func: Value, args: list[Value],
                                 kwargs: dict[str, Value]) -> Value:
    from ..interpreter import calls

    with tracer.graph.torch_function_off():
        return calls.call_value(tracer, func, args, kwargs)


def made_instances(value: Value, cls: type, arguments: set[int]) -> None:
    """Torch's `_convert`: tensor results (in tuples and lists too) become instances of `cls`; an
    argument an in-place operation returns keeps its own class."""
    if isinstance(value, TensorValue) and id(value) not in arguments and not issubclass(value.cls, cls):
        value.cls = cls
    elif isinstance(value, SequenceValue):
        for item in value.items:
            made_instances(item, cls, arguments)


def as_subclass(tracer: "Tracer", tensor: TensorValue, cls_value: Value) -> Value:
    """`tensor.as_subclass(cls)`: an alias of `tensor` (no `__torch_function__` runs) whose
    class is `cls`, a Python subclass (or Tensor itself)."""
    from . import operations

    cls = operations.python_value(tracer, cls_value)
    if not (cls is torch.Tensor or isinstance(cls, type) and overrides_torch_function(cls)):
        from ..interpreter import graph_breaks as gb

        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, "Tensor.as_subclass(...)",
                                 name=f"{getattr(cls, '__qualname__', cls)} (a tensor subclass made with as_subclass)")
    with tracer.graph.torch_function_off():
        made = tracer.graph.call("call_function", torch.ops.aten.alias.default, [tensor], {})
    made.cls = cls
    return made


HANDLERS = {_DEFAULT: default_torch_function, torch._C._disabled_torch_function_impl: disabled_torch_function}
