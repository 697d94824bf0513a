"""Python builtins, and pure functions of `math`/`operator`, on symbolic values.

Each builtin or library function the tracer models has a handler here, keyed
by the function itself (with those of `introspection` and `output_calls`).
Consumers of iterables (`any`, `min`, `sum`, `functools.reduce`...) take each
item when CPython's would (`operations.each`), so they stop where it stops;
iteration helpers (enumerate, zip, map...) are in `iteration`. Pure functions
of constants are simply computed. `print` (when `config.reorderable_print`) is
replayed after the graph.
"""
from __future__ import annotations

import abc
import builtins
import collections
import functools
import operator
import re
import struct
import sys
import types
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..._core import config
from ..interpreter import graph_breaks as gb
from ..interpreter.graph_breaks import UserException
from . import (
    attributes,
    checks,
    class_statements,
    classes,
    copying,
    descriptors,
    deques,
    dict_views,
    dicts,
    exceptions,
    hashing,
    instances,
    introspection,
    iteration,
    length_protocol,
    literal_source,
    number_conversions,
    numpy_arrays,
    operations,
    output_calls,
    sets,
    slices,
    symbolic_numbers,
    text,
    torch_functions,
)
from .class_creation import made_class
from .python_errors import python_raises
from .values import (
    NONE,
    ArrayValue,
    ConstantValue,
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
    SuperValue,
    TensorValue,
    Value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

Handler = Callable[["Tracer", list, dict], Value]
_HANDLERS: dict[Any, Handler] = {**introspection.HANDLERS, **iteration.HANDLERS, **output_calls.HANDLERS,
                                  **exceptions.HANDLERS, **torch_functions.HANDLERS}
_OBJECT_INIT_SUBCLASS = object.__dict__["__init_subclass__"]
_PURE_MODULES = ("math", "cmath", "operator", "_operator", "builtins", "string")


def handles(*targets: Any) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for target in targets:
            _HANDLERS[target] = handler
        return handler
    return register


def handler_for(target: Any) -> Handler | None:
    try:
        found = _HANDLERS.get(target)
    except TypeError:  # unhashable callable
        return None
    if found is None and dicts.is_fromkeys(target):  # `cls.fromkeys` of any dict class
        return lambda tracer, args, kwargs: dicts.fromkeys(tracer, target.__self__, args, kwargs)
    if found is None and _is_object_init_subclass(target):
        return lambda tracer, args, kwargs: _object_init_subclass(tracer, target.__self__, args, kwargs)
    return found


def _is_object_init_subclass(target: Any) -> bool:
    """`object.__init_subclass__` bound to a class (what `super().__init_subclass__` reaches)."""
    return type(target) is types.BuiltinMethodType and isinstance(target.__self__, type) \
        and target == _OBJECT_INIT_SUBCLASS.__get__(None, target.__self__)


def _object_init_subclass(tracer: "Tracer", cls: type, args: list, kwargs: dict) -> Value:
    if kwargs:
        raise tracer.user_error(TypeError(f"{cls.__qualname__}.__init_subclass__() takes no keyword arguments"))
    if args:
        raise tracer.user_error(TypeError(f"{cls.__qualname__}.__init_subclass__() takes no arguments "
                                          f"({len(args)} given)"))
    return NONE


# compiled regular expressions and their matches too: version checks (`packaging.version`)
# match a version string with a class-level `re.Pattern` and read the groups of the match
_IMMUTABLE_BUILTINS = (str, bytes, int, float, complex, bool, tuple, frozenset, re.Pattern, re.Match)


def is_pure_on_constants(target: Any) -> bool:
    """Functions that compute from their arguments alone: those of the pure modules, and the
    methods of immutable builtin types, bound (`"a,b".split`, `pattern.fullmatch`) or not
    (`str.isalnum`), and their class methods (`int.from_bytes`, `float.fromhex`; not `__new__`,
    which may make an instance of a Python subclass)."""
    module = getattr(target, "__module__", None) or ""
    owner = getattr(target, "__self__", None)
    return module in _PURE_MODULES or isinstance(target, types.BuiltinMethodType) and \
        (isinstance(owner, _IMMUTABLE_BUILTINS)
         or any(owner is cls for cls in _IMMUTABLE_BUILTINS) and target.__name__ != "__new__") or \
        isinstance(target, types.MethodDescriptorType) and target.__objclass__ in _IMMUTABLE_BUILTINS


def evaluate(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """Call `target` now on the Python values of its arguments (operators on tensors: a node;
    `operator.ge(a, b)` on objects: `a >= b`, by their special methods)."""
    if getattr(target, "__module__", "") in ("operator", "_operator"):
        if target in (operator.is_, operator.is_not) and len(args) == 2 and not kwargs:
            return ConstantValue(operations.is_same(tracer, args[0], args[1]) is (target is operator.is_))
        if operations.is_operator_of_syntax(target) and len(args) == 2 and not kwargs:
            return operations.binary(tracer, target, args[0], args[1])
        if any(isinstance(arg, TensorValue) for arg in args):
            return tracer.graph.call("call_function", target, args, kwargs)
    symbolic = symbolic_numbers.symbolic_call(tracer, target, args, kwargs)
    if symbolic is not None:
        return symbolic
    overridden = number_conversions.with_python_methods(tracer, target, args, kwargs)
    if overridden is not None:
        return overridden
    name = getattr(target, "__name__", repr(target))
    python_args = [operations.python_value(tracer, arg, f"`{name}`") for arg in args]
    python_kwargs = {key: operations.python_value(tracer, arg, f"`{name}`") for key, arg in kwargs.items()}
    try:
        return operations.constant_result(target(*python_args, **python_kwargs))
    except Exception as error:
        raise tracer.user_error(error, f"{name}(...)")


def _unsupported(tracer: "Tracer", name: str, args: list[Value]) -> Exception:
    types_text = ", ".join(f"`{arg.python_type().__name__}`" for arg in args) or "no arguments"
    return tracer.graph_break(gb.UNSUPPORTED_BUILTIN, f"{name}{args!r}", name=name, types=types_text)


def _pure(*targets: Any) -> None:
    for target in targets:
        _HANDLERS[target] = lambda tracer, args, kwargs, target=target: evaluate(tracer, target, args, kwargs)


_pure(round, divmod, pow, chr, ord, ascii, bin, hex, oct, sys.intern)
_HANDLERS[slice] = slices.call


def _number(target: type) -> Handler:
    def handler(tracer, args, kwargs):
        converted = number_conversions.convert(tracer, target, args, kwargs)
        return converted if converted is not None else evaluate(tracer, target, args, kwargs)
    return handler


for _target in (int, float, complex):
    _HANDLERS[_target] = _number(_target)
_pure(bool.__new__)  # bool has no subclasses: its instances are the two constants
_pure(struct.pack, struct.unpack, struct.calcsize)  # bytes from numbers and back (not `pack_into`: a write)
# `re`'s entry points are Python, but on constant patterns and strings they compute a pattern
# or a match and nothing else (the module's cache of compiled patterns is invisible)
_pure(re.compile, re.escape, re.match, re.fullmatch, re.search, re.findall, re.split)
for _check in checks.CHECKS:
    _HANDLERS[_check] = lambda tracer, args, kwargs, check=_check: checks.call_check(tracer, check, args, kwargs)
for _query in checks.SHAPE_QUERIES:
    _HANDLERS[_query] = lambda tracer, args, kwargs, query=_query: checks.call_query(tracer, query, args, kwargs)


def _text(function: Callable) -> Handler:
    def handler(tracer, args, kwargs):
        if args and not kwargs and len(args) <= (2 if function is format else 1):
            found = text.user_text(tracer, args[0], function, args[1] if len(args) > 1 else None)
            if found is not None:
                return found
        return evaluate(tracer, function, args, kwargs)
    return handler


for _target in (str, repr, format):
    _HANDLERS[_target] = _text(_target)


_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)


def _check_arguments(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value],
                     exactly_one: bool = False) -> None:
    """The checks of a builtin that takes one optional positional argument (`bool`, `list`,
    `tuple`), or exactly one (`any`, `all`): Python's TypeError, worded as Python words it."""
    name = target.__name__
    if kwargs:
        raise tracer.user_error(TypeError(f"{name}() takes no keyword arguments"))
    if exactly_one and len(args) != 1:
        raise tracer.user_error(TypeError(f"{name}() takes exactly one argument ({len(args)} given)"))
    if len(args) > 1:
        raise tracer.user_error(TypeError(f"{name} expected at most 1 argument, got {len(args)}"))


@handles(bool)
def _bool(tracer, args, kwargs):
    _check_arguments(tracer, bool, args, kwargs)
    if not args:
        return ConstantValue(False)
    return operations.symbolic_truth(tracer, args[0]) or ConstantValue(operations.truth(tracer, args[0]))


@handles(len)
def _len(tracer, args, kwargs):
    if kwargs:
        raise tracer.user_error(TypeError("len() takes no keyword arguments"))
    if len(args) != 1:
        raise tracer.user_error(TypeError(f"len() takes exactly one argument ({len(args)} given)"))
    value = args[0]
    length_protocol.blocked(tracer, value, "__len__")
    method = classes.special_method(tracer, value, "__len__")
    if method is not None:
        from ..interpreter import calls

        return length_protocol.length_result(tracer, calls.call_value(tracer, method, [], {}))
    if isinstance(value, ScalarInstanceValue):
        return _len(tracer, [value.builtin], kwargs)
    if classes.is_instance_value(value) and isinstance(value, ObjectValue) \
            or isinstance(value, (IteratorValue, LazyIteratorValue)):  # an iterator's only a length hint
        raise tracer.user_error(TypeError(f"object of type '{value.python_type().__name__}' has no len()"))
    if isinstance(value, TensorValue):
        if value.fake.dim() == 0:
            raise tracer.user_error(TypeError("len() of a 0-d tensor"))
        tracer.graph.register_sizes(value)  # a symbolic length is computed in the graph, as `.shape` is
        return ConstantValue(value.fake.shape[0])
    if isinstance(value, (SequenceValue, DictValue)):
        return ConstantValue(len(value.items))
    if isinstance(value, DictViewValue):
        return ConstantValue(dict_views.size(tracer, value))
    if isinstance(value, ArrayValue):
        return numpy_arrays.length(tracer, value)
    if isinstance(value, ConstantValue):
        return evaluate(tracer, len, args, kwargs)
    if isinstance(value, ModuleValue):
        return ConstantValue(len(operations.iterate(tracer, value)))
    raise _unsupported(tracer, "len", args)


@handles(operator.length_hint)
def _length_hint(tracer, args, kwargs):
    """`operator.length_hint(value, default=0)`: `len()` where the value has one, else its
    `__length_hint__`: an iterator's is the count of the items it has left."""
    if kwargs:
        raise tracer.user_error(TypeError("_operator.length_hint() takes no keyword arguments"))
    if not 1 <= len(args) <= 2:
        raise tracer.user_error(TypeError(
            f"length_hint expected {'at least 1 argument' if not args else 'at most 2 arguments'}, got {len(args)}"))
    value, default = args[0], args[1] if len(args) > 1 else ConstantValue(0)
    default_number = operations.python_value(tracer, default)
    if not isinstance(default_number, int):
        raise tracer.user_error(TypeError(
            f"'{type(default_number).__name__}' object cannot be interpreted as an integer"))
    if isinstance(value, (IteratorValue, LazyIteratorValue)):
        if not hasattr(value.python_type(), "__length_hint__"):  # zip, map, a generator...
            return default
        if isinstance(value, LazyIteratorValue):  # its items are made on demand
            raise _unsupported(tracer, "operator.length_hint", args)
        return ConstantValue(max(len(value.items) - value.position, 0))
    if isinstance(value, ConstantValue):
        return evaluate(tracer, operator.length_hint, args, kwargs)
    if isinstance(value, TensorValue) and value.fake.dim() == 0:
        return default  # len() raises TypeError, which length_hint passes over
    if classes.special_method(tracer, value, "__len__") is not None \
            or isinstance(value, (SequenceValue, DictValue, DictViewValue, TensorValue)):
        return _len(tracer, [value], {})
    method = classes.special_method(tracer, value, "__length_hint__")
    if method is None:
        return default
    from ..interpreter import calls

    hint = operations.python_value(tracer, calls.call_value(tracer, method, [], {}))
    if hint is NotImplemented:
        return default
    if not isinstance(hint, int):
        raise tracer.user_error(TypeError(f"__length_hint__ must be an integer, not {type(hint).__name__}"))
    if hint < 0:
        raise tracer.user_error(ValueError("__length_hint__() should return >= 0"))
    return ConstantValue(hint)


@handles(isinstance)
def _isinstance(tracer, args, kwargs):
    _two_arguments(tracer, "isinstance", args, kwargs)
    return ConstantValue(_is_instance(tracer, args[0], operations.python_value(tracer, args[1])))


def _is_instance(tracer: "Tracer", value: Value, classinfo: Any) -> bool:
    """`isinstance(value, classinfo)`: by the value's class, or by the `__instancecheck__` a
    metaclass defines in Python (ABCMeta's asks the class, as `issubclass` does)."""
    if isinstance(classinfo, tuple):
        return any(_is_instance(tracer, value, item) for item in classinfo)
    cls = value.python_type()
    if cls is classinfo:
        return True
    if type(classinfo) is _LEGACY_TENSOR_TYPE:
        # `torch.FloatTensor` and its kind are no classes of tensors: their instance check asks
        # the tensor's dtype and device, which the fake tensor has
        return isinstance(value, TensorValue) and isinstance(value.fake, classinfo)
    check = classes.find(tracer, type(classinfo), "__instancecheck__") if isinstance(classinfo, type) else None
    if check is not None and classes.is_python_function(check[1]) and check[1] is not abc.ABCMeta.__instancecheck__:
        from ..interpreter import calls

        method = classes.bind(tracer, *check, "__instancecheck__", classes.class_value(classinfo), type(classinfo))
        return operations.truth(tracer, calls.call_value(tracer, method, [value], {}))
    return issubclass(cls, classinfo)


@handles(issubclass)
def _issubclass(tracer, args, kwargs):
    _two_arguments(tracer, "issubclass", args, kwargs)
    return evaluate(tracer, issubclass, args, kwargs)


def _two_arguments(tracer: "Tracer", name: str, args: list[Value], kwargs: dict[str, Value]) -> None:
    if kwargs:
        raise tracer.user_error(TypeError(f"{name}() takes no keyword arguments"))
    if len(args) != 2:
        raise tracer.user_error(TypeError(f"{name} expected 2 arguments, got {len(args)}"))


@handles(type)
def _type(tracer, args, kwargs):
    if len(args) != 1 or kwargs:  # type(name, bases, namespace): a new class
        return instances.type_call(tracer, type, args, kwargs)
    return classes.class_value(args[0].python_type())


@handles(callable)
def _callable(tracer, args, kwargs):
    return ConstantValue(operations.is_callable(tracer, args[0]))


def _guard_lacks(tracer: "Tracer", owner: Value, name: str) -> None:
    """The real object has no `name`: guarded, unless the region deleted it (then it has it now),
    or its lookup guarded that already (instances of user classes and modules)."""
    if classes.is_instance_value(owner) or isinstance(owner, ModuleValue):
        return
    if name not in (getattr(owner, "overlay", None) or {}):
        tracer.add_guard(owner.source, "lacks", name)


def _lookup_or_none(tracer: "Tracer", owner: Value, name: str) -> Value | None:
    """The attribute, or None where reading it raises AttributeError (what `hasattr` and
    `getattr` with a default catch, a property's or `__getattr__`'s included)."""
    try:
        return attributes.lookup(tracer, owner, name)
    except UserException as raised:
        if exceptions.caught(raised, AttributeError):
            return None
        raise


@handles(getattr)
def _getattr(tracer, args, kwargs):
    if kwargs or not 2 <= len(args) <= 3:
        raise tracer.user_error(TypeError(f"getattr expected 2 or 3 arguments, got {len(args) + len(kwargs)}"))
    name = operations.python_value(tracer, args[1])
    if len(args) == 2:
        return attributes.load_attr(tracer, args[0], name)
    found = _lookup_or_none(tracer, args[0], name)
    if found is not None:
        return found
    _guard_lacks(tracer, args[0], name)
    return args[2]


@handles(hasattr)
def _hasattr(tracer, args, kwargs):
    name = operations.python_value(tracer, args[1])
    found = _lookup_or_none(tracer, args[0], name) is not None
    if not found:
        _guard_lacks(tracer, args[0], name)
    return ConstantValue(found)


@handles(setattr)
def _setattr(tracer, args, kwargs):
    attributes.store_attr(tracer, args[0], operations.python_value(tracer, args[1]), args[2])
    return NONE


@handles(delattr)
def _delattr(tracer, args, kwargs):
    attributes.delete_attr(tracer, args[0], operations.python_value(tracer, args[1]))
    return NONE


@handles(vars)
def _vars(tracer, args, kwargs):
    if len(args) != 1:
        raise _reads_caller_frame(_unsupported(tracer, "vars", args), args, kwargs)
    found = attributes.lookup(tracer, args[0], "__dict__")
    if found is None:
        raise tracer.user_error(TypeError("vars() argument must have __dict__ attribute"))
    return found


@handles(range)
def _range(tracer, args, kwargs):
    bounds = [operations.python_value(tracer, arg, "range()") for arg in args]
    named = {key: operations.python_value(tracer, arg, "range()") for key, arg in kwargs.items()}
    with python_raises(tracer, "range()"):  # a zero step, a float bound: Python's error
        return ConstantValue(range(*bounds, **named))


@handles(sorted)
def _sorted(tracer, args, kwargs):
    items = operations.iterate(tracer, args[0])
    keys = _sort_keys(tracer, items, kwargs.get("key"))
    reverse = operations.python_value(tracer, kwargs.get("reverse", ConstantValue(False)))
    return SequenceValue([items[i] for i in sort_order(tracer, keys, reverse)], list)


def sort_order(tracer: "Tracer", keys: list[Value], reverse: bool) -> list[int]:
    """The positions of `keys` in sorted order, stable, comparing with `<` as list.sort does."""
    if all(operations.is_constant_tree(key) for key in keys):
        python_keys = [operations.python_value(tracer, key, "sorted()") for key in keys]
        try:
            return sorted(range(len(keys)), key=python_keys.__getitem__, reverse=reverse)
        except TypeError as error:  # keys that do not compare: the program's own TypeError
            raise tracer.user_error(error, "comparison")

    def order(i: int, j: int) -> int:
        if _compare(tracer, operator.lt, keys[i], keys[j]):
            return -1
        return 1 if _compare(tracer, operator.lt, keys[j], keys[i]) else 0
    return sorted(range(len(keys)), key=functools.cmp_to_key(order), reverse=reverse)


def _min_max(function: Callable) -> Handler:
    def handler(tracer, args, kwargs):
        symbolic = symbolic_numbers.symbolic_call(tracer, function, args, kwargs)
        if symbolic is not None:
            return symbolic
        if len(args) > 1 and not kwargs and _scalar_tensors_and_numbers(args):
            return functools.reduce(lambda lhs, rhs: _elementwise_min_max(tracer, function, lhs, rhs), args)
        if not args or len(args) > 1 and "default" in kwargs:
            raise tracer.user_error(TypeError(
                f"Cannot specify a default for {function.__name__}() with multiple positional arguments"
                if args else f"{function.__name__} expected at least 1 argument, got 0"))
        key = kwargs.get("key")
        # max keeps the first of equal items: it replaces only when an item is greater
        better = operator.gt if function is max else operator.lt
        best = best_key = None
        for item in operations.each(tracer, args[0]) if len(args) == 1 else args:
            item_key = _sort_key(tracer, item, key)
            if isinstance(item_key, TensorValue):
                raise tracer.graph_break(gb.DATA_DEPENDENT_BRANCH, f"{function.__name__}() comparing tensors")
            if best is None or _compare(tracer, better, item_key, best_key):
                best, best_key = item, item_key
        if best is not None:
            return best
        if "default" in kwargs:
            return kwargs["default"]
        raise tracer.user_error(ValueError(f"{function.__name__}() arg is an empty sequence"))
    return handler


def _scalar_tensors_and_numbers(items: list[Value]) -> bool:
    """0-d tensors (one at least) and numbers: what `max(a, 0)` on a loss or a norm compares."""
    return any(isinstance(item, TensorValue) for item in items) and all(
        isinstance(item, TensorValue) and item.fake.dim() == 0
        or isinstance(item, ConstantValue) and isinstance(item.value, (int, float)) for item in items)


def _elementwise_min_max(tracer: "Tracer", function: Callable, lhs: Value, rhs: Value) -> Value:
    """`max(lhs, rhs)` of a 0-d tensor and a tensor or number, computed in the graph as TorchDynamo
    does (`torch.maximum`, or `torch.clamp` against a number): the same value as Python's
    comparison picks, which would need the tensor's data."""
    if isinstance(lhs, TensorValue) and isinstance(rhs, TensorValue):
        return tracer.graph.call("call_function", torch.maximum if function is max else torch.minimum,
                                 [lhs, rhs], {})
    tensor, number = (lhs, rhs) if isinstance(lhs, TensorValue) else (rhs, lhs)
    return tracer.graph.call("call_function", torch.clamp, [tensor],
                             {"min" if function is max else "max": number})


def _sort_keys(tracer: "Tracer", items: list[Value], key: Value | None) -> list[Value]:
    return [_sort_key(tracer, item, key) for item in items]


def _sort_key(tracer: "Tracer", item: Value, key: Value | None) -> Value:
    from ..interpreter import calls

    if key is None or operations.is_none(key):
        return item
    return calls.call_value(tracer, key, [item], {})


def _compare(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> bool:
    """`lhs op rhs` as a Python bool: computed for constants, by special methods for objects."""
    if operations.is_constant_tree(lhs) and operations.is_constant_tree(rhs):
        try:
            return bool(op(operations.python_value(tracer, lhs, "sorting"),
                           operations.python_value(tracer, rhs, "sorting")))
        except TypeError as error:
            raise tracer.user_error(error, "comparison")
    return operations.truth(tracer, operations.binary(tracer, op, lhs, rhs))


_HANDLERS[min] = _min_max(min)
_HANDLERS[max] = _min_max(max)


@handles(sum)
def _sum(tracer, args, kwargs):
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstantValue(0))
    for item in operations.each(tracer, args[0]):
        total = operations.binary(tracer, operator.add, total, item)
    return total


@handles(abs)
def _abs(tracer, args, kwargs):
    return operations.unary(tracer, operator.abs, args[0])


def _deciding(target: Callable) -> Handler:
    """`any` or `all`: items pulled until one decides."""
    def handler(tracer, args, kwargs):
        _check_arguments(tracer, target, args, kwargs, exactly_one=True)
        return ConstantValue(target(operations.truth(tracer, item) for item in operations.each(tracer, args[0])))
    return handler


def _sequence_of(kind: type) -> Handler:
    """`list(iterable)` and `tuple(iterable)`, with their argument errors; `tuple(t)` of an exact
    tuple is `t` itself."""
    def handler(tracer, args, kwargs):
        _check_arguments(tracer, kind, args, kwargs)
        if kind is tuple and args and operations.is_exact_tuple(args[0]):
            return args[0]
        return SequenceValue(operations.iterate(tracer, args[0]) if args else [], kind)
    return handler


for _target in (any, all):
    _HANDLERS[_target] = _deciding(_target)
for _target in (list, tuple):
    _HANDLERS[_target] = _sequence_of(_target)


_HANDLERS.update({new: instances.handle_builtin_new for new in instances.BUILTIN_NEW})
_HANDLERS.update(copying.HANDLERS)
_HANDLERS[torch.tensor] = _HANDLERS[torch.as_tensor] = symbolic_numbers.tensor_of_a_symbol


_HANDLERS[set] = lambda tracer, args, kwargs: sets.build(tracer, set, args, kwargs)
_HANDLERS[frozenset] = lambda tracer, args, kwargs: sets.build(tracer, frozenset, args, kwargs)
_HANDLERS[dict] = dicts.build
_HANDLERS[collections.deque] = deques.make
_HANDLERS[types.MappingProxyType] = dict_views.mapping_proxy
_HANDLERS[hash] = hashing.hash_of


@handles(functools.partial)
def _partial(tracer, args, kwargs):
    if not args:
        raise tracer.user_error(TypeError("type 'partial' takes at least one argument"))
    function = args[0]
    if not operations.is_callable(tracer, function):
        raise tracer.user_error(TypeError("the first argument must be callable"))
    if isinstance(function, PartialValue):  # as functools.partial flattens a partial of a partial
        return PartialValue(function.func, [*function.args, *args[1:]], {**function.keywords, **kwargs})
    return PartialValue(function, list(args[1:]), dict(kwargs))


@handles(super)
def _super(tracer, args, kwargs):
    if args:
        if len(args) != 2:
            raise _unsupported(tracer, "super", args)
        cls, receiver = operations.python_value(tracer, args[0]), args[1]
    else:  # the class the method was defined in, and the method's first argument
        frame = tracer.frames[-1]
        if "__class__" not in frame.cells or not frame.code.co_argcount:
            raise tracer.user_error(RuntimeError("super(): no arguments"))
        cls = operations.python_value(tracer, tracer.cell_contents(frame.cells["__class__"]))
        first = frame.code.co_varnames[0]
        receiver = frame.local(first)
        if receiver is None and first in frame.cells:  # the argument is captured by a closure
            receiver = tracer.cell_contents(frame.cells[first])
        if receiver is None:
            raise tracer.user_error(RuntimeError("super(): arg[0] deleted"))
    is_class = isinstance(receiver, ConstantValue) and isinstance(receiver.value, type)
    if not issubclass(receiver.python_type(), cls) and not (is_class and issubclass(receiver.value, cls)):
        raise tracer.user_error(TypeError("super(type, obj): obj must be an instance or subtype of type"))
    return SuperValue(cls, receiver)


@handles(functools.reduce)
def _reduce(tracer, args, kwargs):
    from ..interpreter import calls

    items = operations.each(tracer, args[1])
    total = args[2] if len(args) > 2 else next(items, None)
    if total is None:
        raise tracer.user_error(TypeError("reduce() of empty iterable with no initial value"))
    for item in items:
        total = calls.call_value(tracer, args[0], [total, item], {})
    return total


GETTER_TYPES = (operator.attrgetter, operator.itemgetter, operator.methodcaller)


def call_getter(tracer: "Tracer", getter: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """An `operator.attrgetter`/`itemgetter`/`methodcaller` applied to a value: the attribute
    reads, item reads or method call it stands for, read off the getter's own arguments."""
    from ..interpreter import calls

    if len(args) != 1 or kwargs:
        raise tracer.user_error(TypeError(f"{type(getter).__name__} expected 1 argument, got {len(args)}"))
    (target,) = args
    made_by, stored = getter.__reduce__()[:2]
    if type(getter) is operator.attrgetter:
        found = []
        for path in stored:
            value = target
            for name in path.split("."):
                value = attributes.load_attr(tracer, value, name)
            found.append(value)
        return found[0] if len(found) == 1 else SequenceValue(found, tuple)
    if type(getter) is operator.itemgetter:
        found = [operations.getitem(tracer, target, tracer.wrap(key, None)) for key in stored]
        return found[0] if len(found) == 1 else SequenceValue(found, tuple)
    if isinstance(made_by, functools.partial):  # methodcaller with keywords
        name, call_args, call_kwargs = made_by.args[0], stored, made_by.keywords
    else:
        name, call_args, call_kwargs = stored[0], stored[1:], {}
    method = attributes.load_attr(tracer, target, name)
    return calls.call_value(tracer, method, [tracer.wrap(arg, None) for arg in call_args],
                            {key: tracer.wrap(arg, None) for key, arg in call_kwargs.items()})


@handles(torch.autograd._is_checkpoint_valid)
def _autograd_state_query(tracer, args, kwargs):
    """Whether checkpointed recomputation may run now (not inside a backward pass): asked of
    autograd now, and again before each call."""
    from ..guards.sources import FunctionSource

    answer = torch.autograd._is_checkpoint_valid()
    tracer.add_guard(FunctionSource(), "query", (torch.autograd._is_checkpoint_valid, answer))
    return ConstantValue(answer)


@handles(torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling)
def _is_compiling(tracer, args, kwargs):
    return tracer.answer_is_compiling()


@handles(builtins.__build_class__)
def _build_class(tracer, args, kwargs):
    return class_statements.build_class(tracer, args, kwargs)


@handles(type.__dict__["__new__"])
def _type_new(tracer, args, kwargs):
    return class_statements.type_new(tracer, args, kwargs)


@handles(type.__dict__["__setattr__"], type.__dict__["__delattr__"])
def _type_setattr(tracer, args, kwargs):
    """`type.__setattr__(cls, name, value)` on a class the region made (a metaclass's own
    `__setattr__` reaches it through super())."""
    deleting = len(args) == 2
    if kwargs or len(args) != (2 if deleting else 3) or not class_statements.is_class(args[0]) \
            or made_class(args[0].value) is None:
        raise _unsupported(tracer, "type.__delattr__" if deleting else "type.__setattr__", args)
    name = operations.python_value(tracer, args[1])
    class_statements.store(tracer, args[0], name, None if deleting else args[2])
    return NONE


for _cls in (staticmethod, classmethod, property):
    _HANDLERS[_cls] = lambda tracer, args, kwargs, cls=_cls: descriptors.make_descriptor(tracer, cls, args, kwargs)


def _setup(function: Callable) -> Handler:
    def handler(tracer, args, kwargs):
        made = class_statements.run_setup(tracer, function, args, kwargs)
        if made is None:
            raise _unsupported(tracer, getattr(function, "__qualname__", repr(function)), args)
        return made
    return handler


for _function in class_statements.SETUP_FUNCTIONS:
    _HANDLERS[_function] = _setup(_function)
for _function in class_statements.FACTORIES:
    _HANDLERS[_function] = lambda tracer, args, kwargs, factory=_function: \
        class_statements.run_factory(tracer, factory, args, kwargs)


@handles(print)
def _print(tracer, args, kwargs):
    if not config.reorderable_print:
        raise tracer.graph_break(gb.PRINT_CALL, f"print with {len(args)} arguments")
    tracer.side_effects.replay_call(print, args, kwargs)
    return NONE


@handles(id)
def _id(tracer, args, kwargs):
    """`id(obj)` of an object read from outside: its identity now, guarded on the object being
    the same one (another object recompiles). An object made in the region has no address
    until it is rebuilt: an `ObjectIdentity` stands for it."""
    if len(args) != 1 or kwargs:
        raise tracer.user_error(TypeError(f"id() takes exactly one argument ({len(args)} given)"))
    value = args[0]
    identity = made_identity(value)
    if identity is not None:
        return ObjectIdentity(id(identity), value)
    real = value.value if isinstance(value, ConstantValue) else tracer.real_by_value.get(id(value))
    if real is None or value.source is None or operations.is_symbolic(value):
        raise _unsupported(tracer, "id (of an object made in the region)", args)
    tracer.add_guard(value.source, "id", real)
    return ConstantValue(id(real))


def made_identity(value: Value) -> Any:
    """What makes an object made in the region the one it is, as `operations.is_same` decides
    (a tensor's fake tensor, a made function's own state, else the value itself); None for
    constants, values read from outside, and bound methods (each read makes a new one)."""
    if value.source is not None or isinstance(value, (ConstantValue, ModuleValue)):
        return None
    if isinstance(value, TensorValue):
        return value.fake
    if isinstance(value, FunctionValue):
        return value.attributes if value.fn is None and value.bound_self is None else None
    if isinstance(value, ObjectValue):
        return value if value.obj is None else value.obj
    if isinstance(value, (SequenceValue, DictValue)):
        return value
    return None


@handles(builtins.input, builtins.open)
def _not_modelled(tracer, args, kwargs):
    raise _unsupported(tracer, "a builtin that inspects or changes the interpreter", args)


@handles(builtins.globals, builtins.locals, builtins.dir)
def _namespace_query(tracer, args, kwargs):
    raise _reads_caller_frame(_unsupported(tracer, "a builtin that inspects or changes the interpreter", args),
                              args, kwargs)


@handles(builtins.exec)
def _exec(tracer, args, kwargs):
    literal_source.check_exec_source(tracer, args)
    raise _reads_caller_frame(_unsupported(tracer, "a builtin that inspects or changes the interpreter", args),
                              args[1:], kwargs)


@handles(builtins.eval)
def _eval(tracer, args, kwargs):
    found = literal_source.evaluate(tracer, args, kwargs)
    if found is None:
        raise _reads_caller_frame(_unsupported(tracer, "eval (of text that is not a literal)", args),
                                  args[1:], kwargs)
    return found


def _reads_caller_frame(brk: gb.GraphBreak, namespaces: list, kwargs: dict) -> gb.GraphBreak:
    """`eval`/`exec` without a namespace (`namespaces`: the arguments after the text) and
    `locals()`/`globals()`/`dir()` read the frame that calls them: run from the code that
    continues the function after the break, they would see its frame, so the whole function
    runs in plain Python instead (its calls of them made for its own frame, `call_routing`)."""
    if not namespaces and "globals" not in kwargs:
        brk.unsplittable = ("the call reads the names of the frame that makes it: the function runs in plain "
                            "Python (the functions it calls are compiled)")
    return brk
