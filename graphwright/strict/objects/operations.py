"""Python's operators on symbolic values: arithmetic, comparison, truth, items, iteration.

Tensors go into the graph (the operator function is the node's target);
constants are computed now; lists, tuples and dicts are modelled item by
item. Anything else is a graph break naming the operation and the types.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..interpreter import graph_breaks as gb
from ..interpreter.symbolic_sizes import SYMBOLIC_TYPES
from .values import (
    ConstantValue,
    DictValue,
    FunctionValue,
    IteratorValue,
    ModuleValue,
    ObjectValue,
    SequenceValue,
    TensorValue,
    Value,
)
from .wrap import is_identity_key

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_INPLACE_SEQUENCE_OPS = {operator.iadd: operator.add, operator.imul: operator.mul}
_PLAIN_OPS = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
              operator.ifloordiv: operator.floordiv, operator.itruediv: operator.truediv,
              operator.imod: operator.mod, operator.ipow: operator.pow, operator.iand: operator.and_,
              operator.ior: operator.or_, operator.ixor: operator.xor, operator.ilshift: operator.lshift,
              operator.irshift: operator.rshift}
_DUNDERS = {operator.add: "__add__", operator.sub: "__sub__", operator.mul: "__mul__",
            operator.truediv: "__truediv__", operator.matmul: "__matmul__", operator.eq: "__eq__",
            operator.lt: "__lt__", operator.getitem: "__getitem__"}


def constant(real: Any) -> Value:
    """The value of a constant in the code: tuples become sequences so they unpack like any."""
    if type(real) is tuple:
        return SequenceValue([constant(item) for item in real], tuple)
    return ConstantValue(real)


def is_constant_tree(value: Value) -> bool:
    if isinstance(value, ConstantValue):
        return True
    if isinstance(value, SequenceValue):
        return all(is_constant_tree(item) for item in value.items)
    if isinstance(value, DictValue):
        return all(is_constant_tree(item) for item in value.items.values())
    return False


def python_value(tracer: "Tracer", value: Value, purpose: str = "") -> Any:
    """The real Python value of a fully known value (no tensors inside).

    A symbolic size used as a plain Python value is specialised (and guarded)."""
    if isinstance(value, ConstantValue):
        if isinstance(value.value, SYMBOLIC_TYPES):
            return value.value.node.pytype(value.value)
        return value.value
    if isinstance(value, SequenceValue):
        items = [python_value(tracer, item, purpose) for item in value.items]
        if value.cls is not None:
            return value.cls(*items) if hasattr(value.cls, "_fields") else value.cls(items)
        return value.kind(items)
    if isinstance(value, DictValue):
        if value.kind is not dict:
            return value.kind(value.items)
        return {key: python_value(tracer, item, purpose) for key, item in value.items.items()}
    if isinstance(value, ModuleValue):
        return value.module
    if isinstance(value, IteratorValue):
        return iter([python_value(tracer, item, purpose) for item in iterate(tracer, value)])
    if isinstance(value, TensorValue):
        what = f"using a tensor in {purpose}" if purpose else "converting a tensor to a Python value"
        raise tracer.graph_break(gb.TENSOR_TO_PYTHON, what, what=what)
    raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"python value of {value!r}",
                             op=purpose or "a Python-level operation",
                             types=value.python_type().__name__)


def hashable_key(tracer: "Tracer", value: Value) -> Any:
    if isinstance(value, (ConstantValue, SequenceValue)) and is_constant_tree(value):
        return python_value(tracer, value)
    if isinstance(value, ModuleValue):
        return value.module
    if isinstance(value, ObjectValue) and value.obj is not None and is_identity_key(value.obj):
        tracer.add_guard(value.source, "id", value.obj)  # found by identity: the same object
        return value.obj
    raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"dict key {value!r}", op="using as a dict key",
                             types=value.python_type().__name__)


def _user_error(tracer: "Tracer", error: Exception, what: str) -> Exception:
    return tracer.user_error(error, what)


def _unsupported(tracer: "Tracer", op: Callable, *values: Value) -> Exception:
    name = getattr(op, "__name__", repr(op))
    types = ", ".join(f"`{value.python_type().__name__}`" for value in values)
    return tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"{name}{values!r}", op=name, types=types)


def is_symbolic(value: Value) -> bool:
    return isinstance(value, ConstantValue) and isinstance(value.value, SYMBOLIC_TYPES)


def binary(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value:
    if isinstance(lhs, TensorValue) or isinstance(rhs, TensorValue):
        if isinstance(lhs, ConstantValue):  # a number has no in-place form: `n += t` is `n = n + t`
            op = _PLAIN_OPS.get(op, op)
        return tracer.graph.call("call_function", op, [lhs, rhs], {})
    if (is_symbolic(lhs) or is_symbolic(rhs)) and not isinstance(lhs, SequenceValue) \
            and not isinstance(rhs, SequenceValue):  # ints are immutable: `n += 1` is `n + 1`
        return tracer.graph.call("call_function", _PLAIN_OPS.get(op, op), [lhs, rhs], {})
    if isinstance(lhs, SequenceValue) and op in (operator.add, operator.iadd) \
            and isinstance(rhs, SequenceValue) and (lhs.kind is rhs.kind or op is operator.iadd):
        if op is operator.iadd and lhs.kind is list:
            tracer.side_effects.mutate(lhs)
            lhs.items.extend(rhs.items)
            return lhs
        return SequenceValue(lhs.items + rhs.items, lhs.kind)
    if isinstance(lhs, SequenceValue) and op in (operator.mul, operator.imul) \
            and isinstance(rhs, ConstantValue) and isinstance(rhs.value, (int, torch.SymInt)):
        return SequenceValue(lhs.items * int(rhs.value), lhs.kind)  # a symbolic count is specialised
    if is_constant_tree(lhs) and is_constant_tree(rhs):
        op = _INPLACE_SEQUENCE_OPS.get(op, op) if isinstance(lhs, SequenceValue) else op
        try:
            return constant_result(op(python_value(tracer, lhs), python_value(tracer, rhs)))
        except Exception as error:
            raise _user_error(tracer, error, getattr(op, "__name__", "operator"))
    if op in (operator.eq, operator.ne) and not isinstance(lhs, ObjectValue):
        same = is_same(tracer, lhs, rhs)
        return ConstantValue(same if op is operator.eq else not same)
    dunder = _DUNDERS.get(op)
    if dunder is not None and isinstance(lhs, (ObjectValue, ModuleValue)):
        return _call_dunder(tracer, lhs, dunder, [rhs], op)
    raise _unsupported(tracer, op, lhs, rhs)


def constant_result(real: Any) -> Value:
    """A computed Python value: containers of constants stay containers of values."""
    if type(real) in (list, tuple):
        return SequenceValue([constant_result(item) for item in real], type(real))
    if type(real) is dict:
        return DictValue({key: constant_result(item) for key, item in real.items()})
    if type(real) is set:
        return DictValue({item: ConstantValue(item) for item in real}, set)
    return ConstantValue(real)


def _call_dunder(tracer: "Tracer", receiver: Value, name: str, args: list[Value], op: Callable) -> Value:
    from ..interpreter import calls
    from . import attributes

    method = attributes.lookup(tracer, receiver, name)
    if not isinstance(method, FunctionValue):
        raise _unsupported(tracer, op, receiver, *args)
    return calls.call_value(tracer, method, args, {})


def unary(tracer: "Tracer", op: Callable, value: Value) -> Value:
    if isinstance(value, TensorValue) or is_symbolic(value):
        return tracer.graph.call("call_function", op, [value], {})
    if isinstance(value, ConstantValue):
        try:
            return ConstantValue(op(value.value))
        except Exception as error:
            raise _user_error(tracer, error, op.__name__)
    raise _unsupported(tracer, op, value)


def truth(tracer: "Tracer", value: Value) -> bool:
    if isinstance(value, ConstantValue):
        return bool(value.value)
    if isinstance(value, TensorValue):
        raise tracer.graph_break(gb.DATA_DEPENDENT_BRANCH, "Tensor.__bool__ on a traced tensor")
    if isinstance(value, (SequenceValue, DictValue)):
        return bool(value.items)
    if isinstance(value, ModuleValue):
        return len(iterate(tracer, value)) > 0 if hasattr(value.module, "__len__") else True
    if isinstance(value, ObjectValue):
        for name in ("__bool__", "__len__"):
            if hasattr(value.cls, name):
                return truth(tracer, _call_dunder(tracer, value, name, [], bool))
    return True


def is_none(value: Value) -> bool:
    return isinstance(value, ConstantValue) and value.value is None


def is_same(tracer: "Tracer", lhs: Value, rhs: Value) -> bool:
    if lhs is rhs:
        return True
    if isinstance(lhs, ConstantValue) and isinstance(rhs, ConstantValue):
        return lhs.value is rhs.value
    if isinstance(lhs, TensorValue) and isinstance(rhs, TensorValue):
        return lhs.fake is rhs.fake
    if isinstance(lhs, ModuleValue) and isinstance(rhs, ModuleValue):
        return lhs.module is rhs.module
    if isinstance(lhs, ObjectValue) and isinstance(rhs, ObjectValue):
        return lhs.obj is not None and lhs.obj is rhs.obj
    if isinstance(lhs, FunctionValue) and isinstance(rhs, FunctionValue):
        return lhs.fn is not None and lhs.fn is rhs.fn and lhs.bound_self is rhs.bound_self
    return False


def contains(tracer: "Tracer", container: Value, item: Value) -> bool:
    if isinstance(container, DictValue):
        return hashable_key(tracer, item) in container.items
    if isinstance(container, ModuleValue) and isinstance(container.module, torch.nn.ModuleDict):
        return python_value(tracer, item) in container.module._modules
    if isinstance(container, ConstantValue):
        return python_value(tracer, item) in container.value
    for element in iterate(tracer, container):
        if is_same(tracer, element, item):
            return True
        if isinstance(element, TensorValue) or isinstance(item, TensorValue):
            raise tracer.graph_break(gb.DATA_DEPENDENT_BRANCH, "`in` comparing tensors by value")
        if is_constant_tree(element) and is_constant_tree(item) \
                and python_value(tracer, element) == python_value(tracer, item):
            return True
    return False


def iterate(tracer: "Tracer", value: Value) -> list[Value]:
    """The items iteration would produce, all at once (tracing runs the loop unrolled)."""
    from . import attributes

    if isinstance(value, SequenceValue):
        return list(value.items)
    if isinstance(value, DictValue):
        return [ConstantValue(key) for key in value.items]
    if isinstance(value, IteratorValue):
        items = value.items[value.position:]
        value.position = len(value.items)
        return items
    if isinstance(value, ConstantValue) and type(value.value) in (range, str, bytes, torch.Size,
                                                                   frozenset, tuple):
        return [constant(item) for item in value.value]
    if isinstance(value, TensorValue):
        if value.fake.dim() == 0:
            raise tracer.user_error(TypeError("iteration over a 0-d tensor"))
        unbound = tracer.graph.call("call_method", "unbind", [value], {})
        return list(unbound.items)
    if isinstance(value, ModuleValue):
        return attributes.module_children_for_iteration(tracer, value)
    raise tracer.graph_break(gb.UNSUPPORTED_ITERATION, f"iter({value!r})",
                             type=value.python_type().__name__)


def dict_items(tracer: "Tracer", value: Value) -> dict[Any, Value]:
    if isinstance(value, DictValue) and value.kind is dict:
        return dict(value.items)
    raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"** on {value!r}", op="`**` unpacking",
                             types=value.python_type().__name__)


def getitem(tracer: "Tracer", container: Value, key: Value) -> Value:
    from . import attributes

    if isinstance(container, TensorValue):
        return tracer.graph.call("call_function", operator.getitem, [container, key], {})
    if isinstance(container, SequenceValue):
        index = python_value(tracer, key, "an index")
        try:
            if isinstance(index, slice):
                return SequenceValue(container.items[index], container.kind)
            return container.items[index]
        except (IndexError, TypeError) as error:
            raise _user_error(tracer, error, "getitem")
    if isinstance(container, DictValue):
        try:
            return container.items[hashable_key(tracer, key)]
        except KeyError as error:
            raise _user_error(tracer, error, "getitem")
    if isinstance(container, ConstantValue):
        try:
            return constant_result(container.value[python_value(tracer, key, "an index")])
        except Exception as error:
            raise _user_error(tracer, error, "getitem")
    if isinstance(container, ModuleValue):
        return attributes.module_item(tracer, container, python_value(tracer, key, "an index"))
    if isinstance(container, ObjectValue):
        return _call_dunder(tracer, container, "__getitem__", [key], operator.getitem)
    raise _unsupported(tracer, operator.getitem, container, key)


def setitem(tracer: "Tracer", container: Value, key: Value, value: Value) -> None:
    if isinstance(container, TensorValue):
        tracer.graph.call("call_function", operator.setitem, [container, key, value], {})
        return
    if isinstance(container, SequenceValue) and container.kind is list:
        index = python_value(tracer, key, "an index")
        tracer.side_effects.mutate(container)
        if isinstance(index, slice):
            container.items[index] = iterate(tracer, value)
        else:
            container.items[index] = value
        return
    if isinstance(container, DictValue) and container.kind is dict:
        tracer.side_effects.mutate(container)
        container.items[hashable_key(tracer, key)] = value
        return
    raise _unsupported(tracer, operator.setitem, container, key, value)


def delitem(tracer: "Tracer", container: Value, key: Value) -> None:
    if isinstance(container, (SequenceValue, DictValue)) and container.kind in (list, dict):
        tracer.side_effects.mutate(container)
        try:
            del container.items[hashable_key(tracer, key) if container.kind is dict
                                else python_value(tracer, key, "an index")]
        except (KeyError, IndexError) as error:
            raise _user_error(tracer, error, "delitem")
        return
    raise _unsupported(tracer, operator.delitem, container, key)
