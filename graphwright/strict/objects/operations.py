"""Python's operators on symbolic values: arithmetic, comparison, truth, items, iteration.

Tensors go into the graph (the operator function is the node's target);
NumPy arrays too, with NumPy's meaning (`numpy_arrays`); constants are computed now; lists, tuples and dicts are modelled item by
item. A special method that a user class defines in Python (`__getitem__`,
`__add__`, `__iter__`...) is called first, as CPython looks it up on the type;
the `native_*` functions are the builtin behaviour it may reach through
super(). Anything else is a graph break naming the operation and the types.

Iteration is one mechanism for every consumer: `each` pulls an iterator's items
one at a time, as the consumer asks (so it stops where CPython's consumer stops,
and an exception surfaces at the same item); `iterate` takes them all, for the
consumers that CPython too drains first.
"""
from __future__ import annotations

import collections
import functools
import itertools
import operator
import types
from typing import TYPE_CHECKING, Any, Callable, Iterator

import torch

from ..interpreter import graph_breaks as gb
from ..interpreter.graph_breaks import UserException
from ..interpreter.symbolic_sizes import SYMBOLIC_TYPES
from . import deques, dict_views, exceptions, length_protocol, numpy_arrays, slices
from .classes import builtin_base, callable_text, find, is_instance_value, is_user_class, special_method, type_name
from .hashing import hashable_key
from .python_errors import PYTHON_ERRORS, python_raises
from .sequence_comparison import ORDERINGS, sequences_equal, sequences_ordered
from .storages import same_storage
from .tensor_indexing import index_by_symbolic_ints
from .values import (
    ArrayValue,
    ConstantValue,
    DequeValue,
    DictValue,
    DictViewValue,
    FunctionValue,
    IteratorValue,
    LazyIteratorValue,
    ModuleValue,
    ObjectIdentity,
    ObjectValue,
    PartialValue,
    ScalarInstanceValue,
    SequenceValue,
    SliceValue,
    StorageValue,
    TensorValue,
    Value,
    holds_value_keys,
    key_value,
    unboxed,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_INPLACE_SEQUENCE_OPS = {operator.iadd: operator.add, operator.imul: operator.mul}
_PLAIN_OPS = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
              operator.ifloordiv: operator.floordiv, operator.itruediv: operator.truediv,
              operator.imod: operator.mod, operator.ipow: operator.pow, operator.iand: operator.and_,
              operator.ior: operator.or_, operator.ixor: operator.xor, operator.ilshift: operator.lshift,
              operator.irshift: operator.rshift, operator.imatmul: operator.matmul}
# (forward, reflected) special methods of each binary operator
_OPERATOR_METHODS = {
    operator.add: ("__add__", "__radd__"), operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"), operator.truediv: ("__truediv__", "__rtruediv__"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__"), operator.mod: ("__mod__", "__rmod__"),
    operator.pow: ("__pow__", "__rpow__"), operator.matmul: ("__matmul__", "__rmatmul__"),
    operator.and_: ("__and__", "__rand__"), operator.or_: ("__or__", "__ror__"),
    operator.xor: ("__xor__", "__rxor__"), operator.lshift: ("__lshift__", "__rlshift__"),
    operator.rshift: ("__rshift__", "__rrshift__"), operator.eq: ("__eq__", "__eq__"),
    operator.ne: ("__ne__", "__ne__"), operator.lt: ("__lt__", "__gt__"),
    operator.le: ("__le__", "__ge__"), operator.gt: ("__gt__", "__lt__"), operator.ge: ("__ge__", "__le__"),
}
_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
            operator.floordiv: "//", operator.mod: "%", operator.pow: "** or pow()", operator.matmul: "@",
            operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
            operator.rshift: ">>", operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}
_UNARY_METHODS = {operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__",
                  operator.abs: "__abs__"}
_MAX_USER_ITERATION = 100_000


def constant(real: Any) -> Value:
    """The value of a constant in the code: tuples become sequences so they unpack like any."""
    if type(real) is tuple:
        return SequenceValue([constant(item) for item in real], tuple)
    return ConstantValue(real)


def is_constant_tree(value: Value, entered: frozenset[int] = frozenset()) -> bool:
    """Constants all the way down (a container holding itself is not a tree)."""
    if isinstance(value, ConstantValue):
        return True
    if id(value) in entered:
        return False
    if isinstance(value, SequenceValue):
        return all(is_constant_tree(item, entered | {id(value)}) for item in value.items)
    if isinstance(value, DictValue) and value.cls in (None, collections.OrderedDict):  # a defaultdict
        # holds its factory too, an instance of a subclass its attributes
        return all(is_constant_tree(item, entered | {id(value)}) for item in value.items.values())
    return False


def python_value(tracer: "Tracer", value: Value, purpose: str = "") -> Any:
    """The real Python value of a fully known value (no tensors inside).

    A symbolic size used as a plain Python value is specialised (and guarded)."""
    if isinstance(value, ConstantValue):
        if isinstance(value.value, SYMBOLIC_TYPES):
            return value.value.node.pytype(value.value)
        return value.value
    if isinstance(value, ScalarInstanceValue):  # a real call on it sees what its base holds
        return python_value(tracer, value.builtin, purpose)
    if isinstance(value, ObjectValue) and value.obj is not None and not value.overlay \
            and id(value) not in tracer.side_effects.mutated:
        tracer.add_guard(value.source, "id", value.obj)  # the object itself is what is used
        return value.obj
    if is_instance_value(value) and not isinstance(value, ObjectValue) or \
            isinstance(value, DictValue) and value.cls not in (None, collections.OrderedDict):
        # an instance of a subclass: only the unchanged real object is known to be equal
        if value.obj is not None and not value.overlay and value.source is not None \
                and id(value) not in tracer.side_effects.mutated:
            return value.obj
        raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"python value of {value!r}",
                                 op=purpose or "a Python-level operation",
                                 types=value.python_type().__name__)
    if isinstance(value, DequeValue):
        return collections.deque([python_value(tracer, item, purpose) for item in value.items], value.maxlen)
    if isinstance(value, SequenceValue):
        items = [python_value(tracer, item, purpose) for item in value.items]
        if value.cls is not None:
            return value.cls(*items) if hasattr(value.cls, "_fields") else value.cls(items)
        return value.kind(items)
    if isinstance(value, DictValue):
        if any(holds_value_keys(key) for key in value.items):
            kind = "set of" if value.kind is not dict else "dict keyed by"
            what = f"using a {kind} tensors or objects of the region in {purpose}" if purpose else \
                f"converting a {kind} tensors or objects of the region to a Python value"
            raise tracer.graph_break(gb.TENSOR_TO_PYTHON, what, what=what)
        if value.kind is not dict:
            return value.kind(value.items)
        items = {key: python_value(tracer, item, purpose) for key, item in value.items.items()}
        return items if value.cls is None else value.cls(items)
    if isinstance(value, ModuleValue):
        return value.module
    if isinstance(value, FunctionValue) and value.fn is not None and value.bound_self is None:
        return value.fn
    if isinstance(value, DictViewValue):
        return dict_views.python_value(tracer, value, purpose)
    if isinstance(value, PartialValue):
        real = tracer.real_by_value.get(id(value))
        if real is not None:
            return real
        return functools.partial(python_value(tracer, value.func, purpose),
                                 *(python_value(tracer, arg, purpose) for arg in value.args),
                                 **{key: python_value(tracer, arg, purpose) for key, arg in value.keywords.items()})
    if isinstance(value, (IteratorValue, LazyIteratorValue)):
        # converted as the real function takes each item: it stops where CPython's stops
        return (python_value(tracer, item, purpose) for item in pull(tracer, value))
    if isinstance(value, (TensorValue, ArrayValue)):
        kind = "a tensor" if isinstance(value, TensorValue) else "a NumPy array"
        what = f"using {kind} in {purpose}" if purpose else f"converting {kind} to a Python value"
        raise tracer.graph_break(gb.TENSOR_TO_PYTHON, what, what=what)
    raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"python value of {value!r}",
                             op=purpose or "a Python-level operation",
                             types=value.python_type().__name__)


def index_value(tracer: "Tracer", key: Value) -> Any:
    """`key` as the index of a list, tuple or Size. A tensor computed from constants alone
    (`torch.tensor(1)`, whose fake tensor carries its value) is its `__index__`, as Python
    takes it; any other tensor's value is unknown."""
    constant = getattr(key.fake, "constant", None) if isinstance(key, TensorValue) else None
    if constant is None:
        return python_value(tracer, key, "an index")
    try:
        return operator.index(constant)
    except TypeError as error:  # a float tensor, or one of several elements: Python's error
        raise _user_error(tracer, error, "an index")


def _user_error(tracer: "Tracer", error: Exception, what: str) -> Exception:
    return tracer.user_error(error, what)


def _unsupported(tracer: "Tracer", op: Callable, *values: Value) -> Exception:
    name = getattr(op, "__name__", repr(op))
    untraceable = numpy_arrays.untraceable_array_break(tracer, name, values)
    if untraceable is not None:
        return untraceable
    types = ", ".join(f"`{value.python_type().__name__}`" for value in values)
    return tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"{name}{values!r}", op=name, types=types)


def is_symbolic(value: Value) -> bool:
    return isinstance(value, ConstantValue) and isinstance(value.value, SYMBOLIC_TYPES)


def binary(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value:
    if isinstance(lhs, ObjectIdentity) or isinstance(rhs, ObjectIdentity):
        return _identity_binary(tracer, op, lhs, rhs)
    if _has_python_methods(lhs) or _has_python_methods(rhs):
        result = _binary_special_methods(tracer, op, lhs, rhs)
        if result is not None:
            return result
    lhs, rhs = unboxed(lhs), unboxed(rhs)  # a subclass of int or str, as its base
    if isinstance(lhs, SliceValue) or isinstance(rhs, SliceValue):
        compared = slices.compare(tracer, op, lhs, rhs)
        if compared is not None:
            return compared
    if isinstance(lhs, ArrayValue) or isinstance(rhs, ArrayValue):
        return numpy_arrays.binary(tracer, op, lhs, rhs)
    if isinstance(lhs, TensorValue):
        return tracer.graph.call("call_function", op, [lhs, rhs], {})
    if isinstance(rhs, TensorValue):  # `n += t` on a number: only the tensor's reflected operator runs
        return tracer.graph.call("call_function", _PLAIN_OPS.get(op, op), [lhs, rhs], {})
    if (is_symbolic(lhs) or is_symbolic(rhs)) and not isinstance(lhs, SequenceValue) \
            and not isinstance(rhs, SequenceValue):  # ints are immutable: `n += 1` is `n + 1`
        return tracer.graph.call("call_function", _PLAIN_OPS.get(op, op), [lhs, rhs], {})
    if _is_container(lhs) or _is_container(rhs):
        return _container_binary(tracer, op, lhs, rhs)
    kept = _tuple_kept(op, lhs, rhs)
    if kept is not None:
        return kept
    if op is operator.iadd and isinstance(lhs, SequenceValue) and lhs.kind is list:
        extend(tracer, lhs, rhs)  # list's += takes any iterable
        return lhs
    if isinstance(lhs, SequenceValue) and op in (operator.add, operator.iadd) \
            and isinstance(rhs, SequenceValue) and lhs.kind is rhs.kind:
        return SequenceValue(lhs.items + rhs.items, lhs.kind)
    if op in (operator.mul, operator.imul) and _is_repeat(lhs, rhs) or op is operator.mul and _is_repeat(rhs, lhs):
        sequence, count = (lhs, rhs) if isinstance(lhs, SequenceValue) else (rhs, lhs)
        with python_raises(tracer, "repeat"):  # a count too large for memory: Python's error
            repeated = sequence.items * int(count.value)  # a symbolic count is specialised
        if op is operator.imul and sequence.kind is list:
            tracer.side_effects.mutate(sequence)
            sequence.items[:] = repeated
            return sequence
        return SequenceValue(repeated, sequence.kind)
    if _is_subclass_sequence(lhs) or _is_subclass_sequence(rhs):
        # no Python method of the subclass took it: the list's or tuple's own operator
        return binary(tracer, op, _as_builtin(lhs), _as_builtin(rhs))
    if is_constant_tree(lhs) and is_constant_tree(rhs):
        op = _INPLACE_SEQUENCE_OPS.get(op, op) if isinstance(lhs, SequenceValue) else op
        try:
            return constant_result(op(python_value(tracer, lhs), python_value(tracer, rhs)))
        except Exception as error:
            raise _user_error(tracer, error, getattr(op, "__name__", "operator"))
    if isinstance(lhs, SequenceValue) and isinstance(rhs, SequenceValue):
        if op in (operator.eq, operator.ne):
            equal = sequences_equal(tracer, lhs, rhs)
            return ConstantValue(equal if op is operator.eq else not equal)
        if op in ORDERINGS:
            return sequences_ordered(tracer, op, lhs, rhs)
    if op in (operator.eq, operator.ne):
        same = is_same(tracer, lhs, rhs)
        return ConstantValue(same if op is operator.eq else not same)
    raise _unsupported(tracer, op, lhs, rhs)


def _identity_binary(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value:
    """`id(a) == id(b)` where one is an object made in the region: equal exactly where the two
    name the same object (a made object's stand-in is distinct from every live object). Any
    other arithmetic would compute with a number the object will not have after the graph."""
    if op in (operator.eq, operator.ne) and isinstance(lhs, ConstantValue) and isinstance(rhs, ConstantValue) \
            and not is_symbolic(lhs) and not is_symbolic(rhs):
        return ConstantValue(op(lhs.value, rhs.value))
    raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"{getattr(op, '__name__', op)} on an object's id",
                             op=getattr(op, "__name__", repr(op)),
                             types="`int` (the `id()` or `hash()` of an object made in the region, unknown until "
                                   "the object is made after the graph)")


def _is_subclass_sequence(value: Value) -> bool:
    return isinstance(value, SequenceValue) and is_user_class(value.cls)


def _as_builtin(value: Value) -> Value:
    """An instance of a list or tuple subclass as its base sees it (the same items)."""
    return SequenceValue(value.items, value.kind) if _is_subclass_sequence(value) else value


def is_exact_tuple(value: Value) -> bool:
    return isinstance(value, SequenceValue) and value.kind is tuple and value.cls is None


def _tuple_kept(op: Callable, lhs: Value, rhs: Value) -> Value | None:
    """The tuple itself, where CPython returns an exact tuple unchanged rather than a copy:
    `t * 1`, `1 * t`, `t + ()` and `() + t`; None for any other operation."""
    if op in (operator.mul, operator.imul):
        for sequence, count in ((lhs, rhs), (rhs, lhs)):
            if is_exact_tuple(sequence) and _is_repeat(sequence, count) and type(count.value) is int \
                    and count.value == 1:
                return sequence
    if op in (operator.add, operator.iadd):
        if is_exact_tuple(lhs) and _is_empty_tuple(rhs):
            return lhs
        if _is_empty_tuple(lhs) and is_exact_tuple(rhs):
            return rhs
    return None


def _is_empty_tuple(value: Value) -> bool:
    return is_exact_tuple(value) and not value.items or \
        isinstance(value, ConstantValue) and type(value.value) is tuple and not value.value


def _is_repeat(sequence: Value, count: Value) -> bool:
    """`[x] * n`: a list or tuple (of a subclass too: the repetition is a plain one) and an int."""
    return isinstance(sequence, SequenceValue) and isinstance(count, ConstantValue) \
        and isinstance(count.value, (int, torch.SymInt)) and not isinstance(count.value, bool)


def _is_container(value: Value) -> bool:
    """A dict, a set, a dict view or a deque: their operators are their modules'."""
    return isinstance(value, (DictValue, DictViewValue, DequeValue))


def _container_binary(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value:
    """`lhs op rhs` where a dict, set, view or deque takes part: the operator its class defines
    (on either side), else Python's fallbacks: identity for `==`, else a TypeError."""
    from . import deques, dicts, sets

    for module in (sets, dicts, deques):
        result = module.binary(tracer, op, lhs, rhs)
        if result is not None:
            return result
    if op in (operator.eq, operator.ne):
        same = is_same(tracer, lhs, rhs)
        return ConstantValue(same if op is operator.eq else not same)
    plain = _PLAIN_OPS.get(op, op)
    if plain in (operator.lt, operator.le, operator.gt, operator.ge):
        raise tracer.user_error(TypeError(f"'{_SYMBOLS[plain]}' not supported between instances of "
                                          f"'{type_name(lhs.python_type())}' and '{type_name(rhs.python_type())}'"))
    if plain in _SYMBOLS:
        symbol = _SYMBOLS[plain] + ("=" if plain is not op else "")
        raise tracer.user_error(TypeError(f"unsupported operand type(s) for {symbol}: "
                                          f"'{type_name(lhs.python_type())}' and '{type_name(rhs.python_type())}'"))
    raise _unsupported(tracer, op, lhs, rhs)


def is_operator_of_syntax(op: Any) -> bool:
    """Whether `op` (from the `operator` module) is what a binary operator or comparison of
    Python syntax computes (`operator.ge` for `>=`): called as a function it means the same."""
    try:
        return op in _OPERATOR_METHODS or op in _PLAIN_OPS
    except TypeError:  # an unhashable callable
        return False


def _compares_by_identity(value: Value) -> bool:
    return isinstance(value, ObjectValue) and not isinstance(value, ScalarInstanceValue)


def _own_method(tracer: "Tracer", cls: type, name: str) -> Any:
    found = find(tracer, cls, name)
    return None if found is None else found[1]


def _native_equality(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value | None:
    """`==` or `!=` with an object whose class compares in C, not by identity (a
    `types.UnionType` read from a module against one the region built): Python's answer, from
    the objects themselves, when both are known as they are; None where identity decides."""
    if not any(_compares_by_identity(value) and value.python_type().__eq__ is not object.__eq__
               for value in (lhs, rhs)):
        return None
    if not all(_known_as_is(tracer, value) for value in (lhs, rhs)):
        raise _unsupported(tracer, op, lhs, rhs)
    try:
        return constant_result(op(python_value(tracer, lhs), python_value(tracer, rhs)))
    except Exception as error:
        raise _user_error(tracer, error, getattr(op, "__name__", "operator"))


def _known_as_is(tracer: "Tracer", value: Value) -> bool:
    """A constant, or an object read from outside that the region has not changed."""
    if isinstance(value, ConstantValue):
        return not is_symbolic(value)
    return isinstance(value, ObjectValue) and value.obj is not None and not value.overlay \
        and id(value) not in tracer.side_effects.mutated


def _has_python_methods(value: Value) -> bool:
    return is_instance_value(value) or isinstance(value, ModuleValue)


def _call(tracer: "Tracer", method: Value, args: list[Value]) -> Value:
    from ..interpreter import calls

    return calls.call_value(tracer, method, args, {})


def _builtin_compares(value: Value) -> bool:
    """Whether `value`'s class compares by its builtin base's C methods (a dict's, a set's),
    not by identity, where no Python method of it is found."""
    cls = builtin_base(value.python_type()) if is_instance_value(value) else value.python_type()
    return cls.__eq__ is not object.__eq__


def _is_not_implemented(value: Value) -> bool:
    return isinstance(value, ConstantValue) and value.value is NotImplemented


def _binary_special_methods(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value | None:
    """`lhs op rhs` by the operands' special methods, as CPython tries them: the in-place
    method, the forward one, the reflected one (first when the right operand's class is a
    subclass of the left's). None when neither operand defines one in Python."""
    plain = _PLAIN_OPS.get(op)
    if plain is not None:
        method = special_method(tracer, lhs, f"__i{_OPERATOR_METHODS[plain][0][2:]}")
        if method is not None:
            result = _call(tracer, method, [rhs])
            if not _is_not_implemented(result):
                return result
        op = plain
    if op not in _OPERATOR_METHODS:
        return None
    forward_name, reflected_name = _OPERATOR_METHODS[op]
    lhs_type, rhs_type = lhs.python_type(), rhs.python_type()
    forward = special_method(tracer, lhs, forward_name)
    # arithmetic skips the reflected method of the same type; comparisons always try it
    comparison = op in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)
    reflected = special_method(tracer, rhs, reflected_name) if comparison or rhs_type is not lhs_type else None
    attempts = [(forward, rhs), (reflected, lhs)]
    if reflected is not None and rhs_type is not lhs_type and issubclass(rhs_type, lhs_type) and (
            comparison or _own_method(tracer, rhs_type, reflected_name) is not _own_method(tracer, lhs_type,
                                                                                          reflected_name)):
        attempts.reverse()  # a subclass first: always to compare, where it overrides the method for arithmetic
    tried = False
    for method, argument in attempts:
        if method is not None:
            tried = True
            result = _call(tracer, method, [argument])
            if not _is_not_implemented(result):
                return result
    if tried and op in (operator.eq, operator.ne) and any(method is None and _builtin_compares(operand) for method, operand
                                    in ((forward, lhs), (reflected, rhs))):
        return None  # every Python method declined: the builtin base's own comparison decides
    if op is operator.ne:
        for subject, other in ((lhs, rhs), (rhs, lhs)):  # object.__ne__ inverts __eq__, each way
            equal = special_method(tracer, subject, "__eq__")
            if equal is not None:
                tried = True
                result = _call(tracer, equal, [other])
                if not _is_not_implemented(result):
                    return ConstantValue(not truth(tracer, result))
    if op in (operator.eq, operator.ne) and not tried:
        native = _native_equality(tracer, op, lhs, rhs)
        if native is not None:
            return native
    if op in (operator.eq, operator.ne):
        same = is_same(tracer, lhs, rhs)
        return ConstantValue(same if op is operator.eq else not same) if tried or \
            _compares_by_identity(lhs) or _compares_by_identity(rhs) else None
    if not tried:
        return None
    if op in (operator.lt, operator.le, operator.gt, operator.ge):
        message = f"'{_SYMBOLS[op]}' not supported between instances of '{lhs_type.__name__}' and " \
                  f"'{rhs_type.__name__}'"
    else:
        message = f"unsupported operand type(s) for {_SYMBOLS[op]}: '{lhs_type.__name__}' and " \
                  f"'{rhs_type.__name__}'"
    raise tracer.user_error(TypeError(message))


def constant_result(real: Any) -> Value:
    """A computed Python value: containers of constants stay containers of values."""
    if type(real) in (list, tuple):
        return SequenceValue([constant_result(item) for item in real], type(real))
    if type(real) is dict:
        return DictValue({key: constant_result(item) for key, item in real.items()})
    if type(real) is set:
        from . import sets

        return sets.new_set(set, {item: ConstantValue(item) for item in real}, real.copy())
    return ConstantValue(real)


def call_special(tracer: "Tracer", receiver: Value, name: str, args: list[Value], op: Callable) -> Value:
    """Call the special method `name` the receiver's class defines in Python, or break."""
    method = special_method(tracer, receiver, name)
    if method is None:
        raise _unsupported(tracer, op, receiver, *args)
    return _call(tracer, method, args)


def unary(tracer: "Tracer", op: Callable, value: Value) -> Value:
    name = _UNARY_METHODS.get(op)
    method = special_method(tracer, value, name) if name is not None else None
    if method is not None:
        return _call(tracer, method, [])
    value = unboxed(value)
    if isinstance(value, TensorValue) or is_symbolic(value):
        return tracer.graph.call("call_function", op, [value], {})
    if isinstance(value, ArrayValue):
        return numpy_arrays.unary(tracer, op, value)
    if isinstance(value, ObjectIdentity):
        return _identity_binary(tracer, op, value, value)
    if isinstance(value, ConstantValue):
        try:
            return ConstantValue(op(value.value))
        except Exception as error:
            raise _user_error(tracer, error, op.__name__)
    raise _unsupported(tracer, op, value)


def truth(tracer: "Tracer", value: Value) -> bool:
    if isinstance(value, ConstantValue):
        if isinstance(value.value, (torch.SymInt, torch.SymFloat)):
            return bool(value.value != 0)  # a guard on the number being zero, not on its value
        return bool(value.value)
    if isinstance(value, TensorValue):
        raise tracer.graph_break(gb.DATA_DEPENDENT_BRANCH, "Tensor.__bool__ on a traced tensor")
    if isinstance(value, ArrayValue):
        raise tracer.graph_break(gb.DATA_DEPENDENT_BRANCH, "ndarray.__bool__ on a traced array")
    length_protocol.blocked(tracer, value, "__bool__")
    method = special_method(tracer, value, "__bool__")
    if method is not None:
        result = _call(tracer, method, [])
        if result.python_type() is not bool:
            raise tracer.user_error(TypeError(f"__bool__ should return bool, returned "
                                              f"{result.python_type().__name__}"))
        return truth(tracer, result)
    length_protocol.blocked(tracer, value, "__len__")
    method = special_method(tracer, value, "__len__")
    if method is not None:
        return truth(tracer, length_protocol.length_result(tracer, _call(tracer, method, [])))
    if isinstance(value, ScalarInstanceValue):
        return truth(tracer, value.builtin)
    if isinstance(value, (SequenceValue, DictValue)):
        return bool(value.items)
    if isinstance(value, DictViewValue):
        return dict_views.size(tracer, value) > 0
    if isinstance(value, ModuleValue):
        return len(iterate(tracer, value)) > 0 if hasattr(value.module, "__len__") else True
    return True


def is_callable(tracer: "Tracer", value: Value) -> bool:
    """`callable(value)`: whether its type defines `__call__` (a class's metaclass does not
    make its instances callable); a class the region stored `__call__` on counts too."""
    if isinstance(value, ConstantValue):
        return callable(value.value)
    return find(tracer, value.python_type(), "__call__") is not None


def symbolic_truth(tracer: "Tracer", value: Value) -> Value | None:
    """`bool(value)` as a symbolic boolean the graph computes: of a symbol, and of a tensor when
    scalars are captured (its `item()`, as TorchDynamo does); None for any other value, whose
    truth `truth` decides now."""
    if isinstance(value, TensorValue) and tracer.data_dependence.scalars:
        value = tracer.graph.call("call_method", "item", [value], {})
    if not is_symbolic(value):
        return None
    if isinstance(value.value, torch.SymBool):
        return value
    return tracer.graph.call("call_function", operator.ne, [value, ConstantValue(0)], {})


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
    if isinstance(lhs, StorageValue) and isinstance(rhs, StorageValue):
        return same_storage(lhs, rhs)
    if isinstance(lhs, ObjectValue) and isinstance(rhs, ObjectValue):
        return lhs.obj is not None and lhs.obj is rhs.obj
    if isinstance(lhs, ObjectValue) != isinstance(rhs, ObjectValue) and (isinstance(lhs, ConstantValue)
                                                                         or isinstance(rhs, ConstantValue)):
        # an object read from outside, and the same object held as a constant (a dict key)
        obj, constant = (lhs, rhs) if isinstance(lhs, ObjectValue) else (rhs, lhs)
        return obj.obj is not None and obj.obj is constant.value
    if isinstance(lhs, FunctionValue) and isinstance(rhs, FunctionValue):
        # a function made in the region is its `__dict__`, which its bound methods share
        same = lhs.fn is rhs.fn if lhs.fn is not None else lhs.attributes is rhs.attributes
        return same and lhs.bound_self is rhs.bound_self
    return False


def contains(tracer: "Tracer", container: Value, item: Value) -> bool:
    method = special_method(tracer, container, "__contains__")
    if method is not None:
        return truth(tracer, _call(tracer, method, [item]))
    return native_contains(tracer, container, item)


def native_contains(tracer: "Tracer", container: Value, item: Value) -> bool:
    from . import sets

    container = unboxed(container)
    if isinstance(container, DequeValue):
        return deques.contains(tracer, container, item)
    if isinstance(container, DictValue) and container.kind is not dict:
        return sets.contains(tracer, container, item)
    if isinstance(container, DictValue):
        return container.lookup(hashable_key(tracer, item)) is not None
    if isinstance(container, DictViewValue):
        return dict_views.contains(tracer, container, item)
    if isinstance(container, ModuleValue) and isinstance(container.module, torch.nn.ModuleDict):
        return python_value(tracer, item) in container.module._modules
    if isinstance(container, ConstantValue):
        return python_value(tracer, item) in container.value
    # an iterator gives items up to the one found, no further
    return any(items_equal(tracer, element, item, "`in`") for element in each(tracer, container))


def items_equal(tracer: "Tracer", element: Value, wanted: Value, purpose: str) -> bool:
    """CPython's `PyObject_RichCompareBool(element, wanted, Py_EQ)`, as `in`, `count`, `index`
    and `remove` compare a sequence's items: the same object, else `element == wanted` (the
    element's `__eq__` first, then the wanted value's reflected one)."""
    if is_same(tracer, element, wanted):
        return True
    if isinstance(element, (TensorValue, ArrayValue)) or isinstance(wanted, (TensorValue, ArrayValue)):
        raise tracer.graph_break(gb.DATA_DEPENDENT_BRANCH, f"{purpose} comparing tensors by value")
    if is_constant_tree(element) and is_constant_tree(wanted):
        return python_value(tracer, element) == python_value(tracer, wanted)
    return truth(tracer, binary(tracer, operator.eq, element, wanted))


# -- iteration: how every consumer takes items -------------------------------------------------

def iterator_of(tracer: "Tracer", value: Value) -> Value:
    """`iter(value)`: an iterator is itself; a user iterable's `__iter__` is called (what it
    returns must be an iterator, as CPython checks); any other iterable gives an iterator over
    its items as they are now."""
    if isinstance(value, (IteratorValue, LazyIteratorValue)):
        return value
    method = special_method(tracer, value, "__iter__")
    if method is None and not hasattr(value.python_type(), "__iter__"):
        getter = special_method(tracer, value, "__getitem__")
        if getter is not None:
            return _indexing_iterator(tracer, getter)
    if method is None and is_instance_value(value) and not _iterable_type(value.python_type()):
        raise tracer.user_error(TypeError(f"'{type_name(value.python_type())}' object is not iterable"))
    if method is None and isinstance(value, DequeValue):
        return deques.iterator(tracer, value)
    if method is None and isinstance(unboxed(value), SequenceValue) and unboxed(value).kind is list:
        # a list's iterator reads the list as it is at each step (items appended are seen)
        return IteratorValue(unboxed(value).items, cls=iterator_class(value), over=value)
    if method is None:
        iterator = IteratorValue(native_iterate(tracer, value), cls=iterator_class(value))
        if _is_plain_dict(value):
            iterator.watch = _dict_watch(tracer, value, "keys", iterator)
        elif isinstance(value, DictViewValue) and _is_plain_dict(value.mapping) \
                and dict_views.kind_of(value) in ("keys", "values", "items"):
            iterator.watch = _dict_watch(tracer, value.mapping, dict_views.kind_of(value), iterator)
        elif isinstance(value, DictValue):
            iterator.watch = _size_watch(tracer, value, iterator)
        return iterator
    iterator = _call(tracer, method, [])
    if isinstance(iterator, (IteratorValue, LazyIteratorValue)) \
            or special_method(tracer, iterator, "__next__") is not None:
        return iterator
    if isinstance(iterator, (SequenceValue, DictValue, ConstantValue, TensorValue)) \
            or is_instance_value(iterator) and not hasattr(iterator.python_type(), "__next__"):
        raise tracer.user_error(TypeError(
            f"iter() returned non-iterator of type '{iterator.python_type().__name__}'"))
    return IteratorValue(native_iterate(tracer, iterator))


def _iterable_type(cls: type) -> bool:
    """Whether `iter()` accepts an instance of `cls` at all: its nearest `__iter__`, unless that
    is None (which refuses iteration outright), or else the old sequence protocol's `__getitem__`."""
    for klass in cls.__mro__:
        if "__iter__" in vars(klass):
            return vars(klass)["__iter__"] is not None
    return hasattr(cls, "__getitem__")


_ITERATED_BUILTINS = (list, tuple, dict, collections.OrderedDict, set, frozenset, str, bytes, bytearray, range)


_VIEW_ITERATORS = {(making, type(view)): type(making(view)) for making in (iter, reversed)
                   for mapping in ({}, collections.OrderedDict())
                   for view in (mapping.keys(), mapping.values(), mapping.items())}


def iterator_class(value: Value, making: Callable = iter) -> type:
    """The class of the iterator `iter()` (or `reversed()`) gives for a builtin iterable, or an
    instance of a subclass of one: `list_iterator`, `dict_keyiterator`, `list_reverseiterator`..."""
    if isinstance(value, ConstantValue) and type(value.value) in _ITERATED_BUILTINS:
        return type(making(value.value))  # a str's or a range's depends on its contents
    if isinstance(value, DictViewValue):
        return _VIEW_ITERATORS.get((making, value.cls), type(iter(())))
    base = builtin_base(value.python_type())
    if base not in _ITERATED_BUILTINS or making is reversed and base in (set, frozenset):
        return type(iter(()))
    return type(making(base()))


def _is_plain_dict(value: Value) -> bool:
    """A dict, defaultdict or subclass of one, iterated as dict's own iterator does (not an
    OrderedDict's, which keeps its own order)."""
    return isinstance(value, DictValue) and value.kind is dict and \
        (value.cls is None or builtin_base(value.cls) is not collections.OrderedDict)


def _dict_watch(tracer: "Tracer", container: DictValue, kind: str, iterator: IteratorValue) -> Callable[[], None]:
    """A dict's iterator (of its keys, values or items) as CPython's: each step is taken by a
    real iterator over the dict of the container's items, which CPython changes as the
    program changes the container; so the item each step gives, and its RuntimeErrors (the
    size changed, or the keys changed at the same size), are the ones Python gives."""
    items = container.items
    real = iter({"keys": items.keys, "values": items.values, "items": items.items}[kind]())

    def watch() -> None:
        try:
            step = next(real)
        except StopIteration:
            del iterator.items[iterator.position:]
            return
        except RuntimeError as error:
            raise tracer.user_error(RuntimeError(str(error)))
        if kind == "keys":
            step = key_value(step)
        elif kind == "items":
            step = SequenceValue([key_value(step[0]), step[1]], tuple)
        if iterator.position < len(iterator.items):
            iterator.items[iterator.position] = step
        else:
            iterator.items.append(step)

    return watch


def _size_watch(tracer: "Tracer", container: DictValue, iterator: IteratorValue) -> Callable[[], None]:
    """What a set's or an OrderedDict's iterator checks at each step: that the set kept its
    size, that the OrderedDict kept its keys in their order (once it did not, every later step
    raises too, as CPython's iterator does). An OrderedDict's iterator knows its next key
    before the step: past the last key it stops without checking."""
    size, changed = len(container.items), False
    ordered = container.kind is dict and container.cls is not None \
        and builtin_base(container.cls) is collections.OrderedDict
    order = list(container.items) if ordered else None  # a key added, removed or moved changes it
    if container.kind is not dict:
        message = "Set changed size during iteration"
    elif ordered:
        message = "OrderedDict mutated during iteration"
    else:
        message = "dictionary changed size during iteration"

    def watch() -> None:
        nonlocal changed
        if ordered and iterator.position >= len(iterator.items):
            return
        keys = list(container.items) if ordered else ()
        changed = changed or len(container.items) != size or ordered and (
            len(keys) != len(order) or any(key is not known for key, known in zip(keys, order)))
        if changed:
            raise tracer.user_error(RuntimeError(message))

    return watch


class _Indexed:
    def __getitem__(self, index: int) -> Any:
        raise IndexError(index)


_INDEXING_ITERATOR = type(iter(_Indexed()))


def _indexing_iterator(tracer: "Tracer", getter: Value) -> LazyIteratorValue:
    """`iter()` of an object with `__getitem__` and no `__iter__` (Python's old sequence
    protocol): items 0, 1, 2... until `__getitem__` raises IndexError or StopIteration."""
    position = 0

    def advance() -> Value | None:
        nonlocal position
        try:
            item = _call(tracer, getter, [ConstantValue(position)])
        except UserException as raised:
            if exceptions.caught(raised, (IndexError, StopIteration)):
                return None
            raise
        position += 1
        return item

    return LazyIteratorValue(advance, _INDEXING_ITERATOR)


def next_item(tracer: "Tracer", iterator: Value) -> Value | None:
    """`next(iterator)`: its next item, or None once it is exhausted (a user `__next__` raised
    StopIteration)."""
    if isinstance(iterator, (IteratorValue, LazyIteratorValue)):
        return iterator.next_item()
    method = special_method(tracer, iterator, "__next__")
    if method is None and not hasattr(iterator.python_type(), "__next__"):
        raise tracer.user_error(TypeError(f"'{iterator.python_type().__name__}' object is not an iterator"))
    if method is None:
        raise tracer.graph_break(gb.UNSUPPORTED_BUILTIN, f"next({iterator!r})", name="next",
                                 types=f"`{iterator.python_type().__name__}`")
    try:
        return _call(tracer, method, [])
    except UserException as raised:
        if exceptions.caught(raised, StopIteration):
            return None
        raise


def each(tracer: "Tracer", value: Value) -> Iterator[Value]:
    """The items `for item in value` takes, each pulled from the iterator only when the consumer
    asks for it, as CPython's consumers (`any`, `set.isdisjoint`, `a, b = it`...) pull them: the
    iterator's side effects interleave with the consumer's work, an exception stops both at the
    same item, and what the consumer does not take stays in the iterator."""
    if isinstance(value, SequenceValue) and not is_instance_value(value):
        return iter(list(value.items))  # a list's or tuple's items as they are now
    return pull(tracer, iterator_of(tracer, value))


class Steps:
    """The iterator of `step()`'s results, until it returns None. Unlike a generator, it
    survives an exception from `step`: the next `next()` calls `step` again, as CPython's own
    iterators (map, zip, islice...) ask their input again after it raised. Built on it, the
    tracer's models of those helpers are those helpers themselves."""

    __slots__ = ("step",)

    def __init__(self, step: Callable[[], Value | None]) -> None:
        self.step = step

    def __iter__(self) -> "Steps":
        return self

    def __next__(self) -> Value:
        item = self.step()
        if item is None:
            raise StopIteration
        return item


def pull(tracer: "Tracer", iterator: Value) -> Iterator[Value]:
    """The items of an iterator (see `iterator_of`), each pulled when asked for."""
    if isinstance(iterator, (IteratorValue, LazyIteratorValue)):
        return Steps(iterator.next_item)
    return Steps(lambda: next_item(tracer, iterator))


def extend(tracer: "Tracer", target: SequenceValue, iterable: Value) -> None:
    """`target.extend(iterable)` of a list: each item appended before the next is pulled (a
    generator reading the list sees it grow, an exception leaves what came before it); the
    list's own items as they were."""
    tracer.side_effects.mutate(target)
    for item in each(tracer, iterable):
        target.items.append(item)


def iterate(tracer: "Tracer", value: Value) -> list[Value]:
    """Every item, at once: for consumers that CPython too drains before using any item
    (`list()`, `tuple()`, `sorted()`, `str.join`, `f(*it)`, `a, *rest = it`); a consumer that
    works item by item, or may stop early, takes `each`."""
    if isinstance(value, SequenceValue) and not is_instance_value(value):
        return list(value.items)
    iterator = iterator_of(tracer, value)
    if isinstance(iterator, IteratorValue):
        items = iterator.items[iterator.position:]
        iterator.exhaust()
        return items
    if isinstance(iterator, LazyIteratorValue):
        return list(pull(tracer, iterator))
    items = list(itertools.islice(pull(tracer, iterator), _MAX_USER_ITERATION + 1))
    if len(items) > _MAX_USER_ITERATION:
        raise tracer.graph_break(gb.UNSUPPORTED_ITERATION, "endless user iterator",
                                 type=f"{iterator.python_type().__name__}` (more than "
                                      f"{_MAX_USER_ITERATION} items)")
    return items


def native_iterate(tracer: "Tracer", value: Value) -> list[Value]:
    from . import attributes

    value = unboxed(value)
    if isinstance(value, SequenceValue):
        return list(value.items)
    if isinstance(value, DictValue) and value.kind is not dict:
        from . import sets

        return sets.in_order(value)
    if isinstance(value, DictValue):
        return [key_value(key) for key in value.items]
    if isinstance(value, DictViewValue):
        return dict_views.elements(tracer, value)
    if isinstance(value, ConstantValue) and type(value.value) in (range, str, bytes, torch.Size,
                                                                   frozenset, tuple):
        return [constant(item) for item in value.value]
    if isinstance(value, ConstantValue) and not hasattr(type(value.value), "__iter__") \
            and not hasattr(type(value.value), "__getitem__"):
        raise tracer.user_error(TypeError(f"'{type_name(type(value.value))}' object is not iterable"))
    if isinstance(value, TensorValue):
        if value.fake.dim() == 0:
            raise tracer.user_error(TypeError("iteration over a 0-d tensor"))
        length = python_value(tracer, ConstantValue(value.fake.shape[0]))  # a symbolic length is specialised
        return [tracer.graph.call("call_function", operator.getitem, [value, ConstantValue(index)], {})
                for index in range(length)]
    if isinstance(value, ArrayValue):
        return numpy_arrays.iterate(tracer, value)
    if isinstance(value, ModuleValue):
        return attributes.module_children_for_iteration(tracer, value)
    if isinstance(value, ObjectValue) and not _iterable_type(value.python_type()):
        # a class with neither protocol (in Python or in C): not iterable, whatever else it defines
        raise tracer.user_error(TypeError(f"'{type_name(value.python_type())}' object is not iterable"))
    raise tracer.graph_break(gb.UNSUPPORTED_ITERATION, f"iter({value!r})",
                             type=value.python_type().__name__)


def dict_items(tracer: "Tracer", value: Value, callee: Value | None = None) -> dict[Any, Value]:
    """The items `**value` takes from a mapping: a dict's own storage, unless its class iterates
    differently, then through its `keys()` and `__getitem__`; a mappingproxy's dict's. `callee`:
    the function called with `**value`, which the error for a non-mapping names."""
    if isinstance(value, DictViewValue) and dict_views.kind_of(value) == "proxy":
        return dict_items(tracer, value.mapping)
    if isinstance(value, DictValue) and value.kind is dict:
        cls = value.python_type()
        if cls is dict or cls.__iter__ is dict.__iter__:
            return dict(value.items)
    if not hasattr(value.python_type(), "keys"):
        kind = type_name(value.python_type())
        raise tracer.user_error(TypeError(f"'{kind}' object is not a mapping" if callee is None else
                                          f"{callable_text(callee)} argument after ** must be a mapping, not {kind}"))
    from . import attributes  # any mapping: its keys(), and an item read for each

    keys = iterate(tracer, _call(tracer, attributes.load_attr(tracer, value, "keys"), []))
    return {hashable_key(tracer, key): getitem(tracer, value, key) for key in keys}


def getitem(tracer: "Tracer", container: Value, key: Value) -> Value:
    if isinstance(container, ObjectValue) and type(container.obj).__module__ == "typing" \
            and is_constant_tree(key):
        # `Union[int, str]`, `Optional[T]`: typing's forms of constants are pure, made for real
        form = python_value(tracer, container)
        try:
            return constant_result(form[python_value(tracer, key)])
        except Exception as error:
            raise _user_error(tracer, error, "typing subscription")
    method = special_method(tracer, container, "__getitem__")
    if method is not None:
        return _call(tracer, method, [key])
    return native_getitem(tracer, container, key)


def native_getitem(tracer: "Tracer", container: Value, key: Value) -> Value:
    from . import attributes

    container = unboxed(container)
    if isinstance(container, TensorValue):
        selected = index_by_symbolic_ints(tracer, container, key)
        if selected is not None:
            return selected
        key = numpy_arrays.as_tensor_index(key)
        return tracer.graph.call("call_function", operator.getitem, [container, key], {})
    if isinstance(container, DequeValue):
        return deques.getitem(tracer, container, key)
    if isinstance(container, DictViewValue):
        return dict_views.getitem(tracer, container, key)
    if isinstance(container, ArrayValue):
        return numpy_arrays.getitem(tracer, container, key)
    if isinstance(container, SequenceValue):
        index = index_value(tracer, key)
        try:
            if isinstance(index, slice):
                if is_exact_tuple(container) and index.indices(len(container.items)) == (0, len(container.items), 1):
                    return container  # CPython's whole slice of an exact tuple is the tuple
                return SequenceValue(container.items[index], container.kind)
            return container.items[index]
        except PYTHON_ERRORS:
            # the error Python gives for this kind of sequence, from one of the same length
            with python_raises(tracer, "getitem"):
                container.kind(range(len(container.items)))[index]
            raise
    if isinstance(container, DictValue):
        python_key = hashable_key(tracer, key)
        found = container.lookup(python_key)
        return found if found is not None else _missing(tracer, container, key, python_key)
    if isinstance(container, ConstantValue):
        try:
            return constant_result(container.value[index_value(tracer, key)])
        except Exception as error:
            raise _user_error(tracer, error, "getitem")
    if isinstance(container, ModuleValue):
        return attributes.module_item(tracer, container, index_value(tracer, key))
    raise _unsupported(tracer, operator.getitem, container, key)


def _missing(tracer: "Tracer", container: DictValue, key: Value, python_key: Any) -> Value:
    """A missing key of a dict: `__missing__` of a subclass (defaultdict's fills the key in)."""
    method = special_method(tracer, container, "__missing__")
    if method is not None:
        return _call(tracer, method, [key])
    if container.cls is not None and builtin_base(container.cls) is collections.defaultdict:
        from . import dicts

        return dicts.default_missing(tracer, container, key)
    raise _user_error(tracer, KeyError(python_key), "getitem")


def setitem(tracer: "Tracer", container: Value, key: Value, value: Value) -> None:
    method = special_method(tracer, container, "__setitem__")
    if method is not None:
        _call(tracer, method, [key, value])
        return
    native_setitem(tracer, container, key, value)


def native_setitem(tracer: "Tracer", container: Value, key: Value, value: Value) -> None:
    _check_supports(tracer, container, "__setitem__", "does not support item assignment")
    if isinstance(container, TensorValue):
        key, value = numpy_arrays.as_tensor_index(key), numpy_arrays.as_tensor_index(value)
        tracer.graph.call("call_function", operator.setitem, [container, key, value], {})
        return
    if isinstance(container, DequeValue):
        deques.call_method(tracer, container, "__setitem__", [key, value], {})
    if isinstance(container, ArrayValue):
        numpy_arrays.setitem(tracer, container, key, value)
        return
    if isinstance(container, SequenceValue) and container.kind is list:
        index = python_value(tracer, key, "an index")
        replacement = iterate(tracer, value) if isinstance(index, slice) else value
        tracer.side_effects.mutate(container)
        with python_raises(tracer, "setitem"):
            container.items[index] = replacement
        return
    if isinstance(container, DictValue) and container.kind is dict:
        _check_writable(tracer, container)
        tracer.side_effects.mutate(container)
        container.items[hashable_key(tracer, key)] = value
        return
    if isinstance(container, (SequenceValue, DictValue, DictViewValue)) or \
            isinstance(container, ConstantValue) and not hasattr(type(container.value), "__setitem__"):
        raise tracer.user_error(TypeError(
            f"'{type_name(container.python_type())}' object does not support item assignment"))
    raise _unsupported(tracer, operator.setitem, container, key, value)


def _check_writable(tracer: "Tracer", container: Value) -> None:
    """A mappingproxy (a class's `__dict__`) reads like a dict but refuses writes, as in Python."""
    if isinstance(container, DictValue) and container.cls is types.MappingProxyType:
        raise tracer.user_error(TypeError("'mappingproxy' object does not support item assignment"))


def delitem(tracer: "Tracer", container: Value, key: Value) -> None:
    method = special_method(tracer, container, "__delitem__")
    if method is not None:
        _call(tracer, method, [key])
        return
    native_delitem(tracer, container, key)


def _check_supports(tracer: "Tracer", container: Value, method: str, message: str) -> None:
    """A read-only mapping (a class's `__dict__`) refuses stores, as Python does."""
    if isinstance(container, DictValue) and container.cls is not None and not hasattr(container.cls, method):
        raise tracer.user_error(TypeError(f"'{container.cls.__name__}' object {message}"))


def native_delitem(tracer: "Tracer", container: Value, key: Value) -> None:
    if isinstance(container, DequeValue):
        deques.call_method(tracer, container, "__delitem__", [key], {})
        return
    _check_supports(tracer, container, "__delitem__", "doesn't support item deletion")
    if isinstance(container, (SequenceValue, DictValue)) and container.kind in (list, dict):
        _check_writable(tracer, container)
        tracer.side_effects.mutate(container)
        python_key = hashable_key(tracer, key) if container.kind is dict else python_value(tracer, key, "an index")
        with python_raises(tracer, "delitem"):
            del container.items[python_key]
        return
    raise _unsupported(tracer, operator.delitem, container, key)
