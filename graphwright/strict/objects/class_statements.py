"""Class statements in the region: `__build_class__`, `type.__new__`, and the classes they make.

A `class` statement runs as CPython runs it (`builtins.__build_class__`): its
bases' `__mro_entries__`, the metaclass (the most derived of the bases'
metaclasses, or the one given), the namespace its `__prepare__` returns, the
body run as a function whose names live in that namespace (`Frame.namespace`),
then the metaclass called on (name, bases, namespace), its `__classcell__`
(what zero-argument `super()` reads) checked. Python code met on the way (a
`__prepare__`, a metaclass's `__new__` and `__init__`, the bases'
`__init_subclass__`, the namespace values' `__set_name__`) is inlined.

`type.__new__` itself is modelled here: the class object is made for real
(`class_creation.make_class`, no hook run twice) from a namespace whose values
are the real counterparts of the trace's (`realize`: constants as they are, a
function made in the region as a stand-in of the same code, anything else a
placeholder), so that the object model finds CPython's layout, MRO and slots.
What the class holds, as the trace sees it, is its overlay in `SideEffects`
(the namespace's values, then the region's stores), read first by `classes.find`.

A class statement makes a new class on every call: the one made while tracing
is the trace's own and never leaves it. Guards never ask for it; where it (or
an instance of it) leaves the region, the residual code makes a new one from
its `MadeClass` record (`rebuild.py`): the namespace, then the region's stores
and setup calls, in order.
"""
from __future__ import annotations

import abc
import dataclasses
import enum
import types
from typing import TYPE_CHECKING, Any

import torch

from ..interpreter import graph_breaks as gb
from ..interpreter.graph_breaks import UserException
from . import classes, exceptions, operations
from .classes import builtin_base
from .class_creation import CannotMakeQuietly, MadeClass, file_made_class, made_class, make_class
from .instances import fill, make_empty
from .values import (
    NONE,
    CellValue,
    ConstantValue,
    DescriptorValue,
    DictValue,
    FunctionValue,
    ModuleValue,
    ObjectValue,
    SequenceValue,
    Value,
    holds_value_keys,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_TYPE_PREPARE = type.__dict__["__prepare__"]
_OBJECT_INIT_SUBCLASS = object.__dict__["__init_subclass__"]
# Functions of libraries that set up a class they are given, reading only it and constants
# (one made in the region is given to them for real, and again when it is made anew)
SETUP_FUNCTIONS = (torch.autograd.function.FunctionMeta.__init__, abc._abc_init, dataclasses._process_class)
# Functions of libraries that make a class from constants with machinery the tracer does not
# follow (an enum's members made by its metaclass)
FACTORIES = (enum.EnumType.__new__,)


class Unrealized:
    """What the real `__dict__` of a class made in the region holds for a value of the trace
    with no real counterpart (a tensor, an object made in the region)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<a value of the trace>"


def _call(tracer: "Tracer", function: Value, args: list[Value], kwargs: dict[str, Value] | None = None) -> Value:
    from ..interpreter import calls

    return calls.call_value(tracer, function, args, kwargs or {})


def _type_error(tracer: "Tracer", message: str) -> Exception:
    return tracer.user_error(TypeError(message))


def is_class(value: Value) -> bool:
    return isinstance(value, ConstantValue) and isinstance(value.value, type)


# -- __build_class__ ------------------------------------------------------------------------


def build_class(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`__build_class__(body, name, *bases, metaclass=..., **kwargs)`: a class statement."""
    if len(args) < 2:
        raise _type_error(tracer, "__build_class__: not enough arguments")
    body, name, *original = args
    if not isinstance(body, FunctionValue) or body.bound_self is not None:
        raise _type_error(tracer, "__build_class__: func must be a function")
    if not isinstance(operations.python_value(tracer, name), str):
        raise _type_error(tracer, "__build_class__: name is not a string")
    kwargs = dict(kwargs)
    meta = kwargs.pop("metaclass", None)
    bases = _resolve_bases(tracer, original)
    if meta is None:
        meta = classes.class_value(type(bases[0].value)) if bases and is_class(bases[0]) else ConstantValue(type)
    if is_class(meta):
        meta = classes.class_value(calculate_meta(tracer, meta.value, bases))
    namespace = _prepare(tracer, meta, name, bases, kwargs)
    cell = run_body(tracer, body, namespace)
    if len(bases) != len(original) or any(new is not old for new, old in zip(bases, original)):
        operations.setitem(tracer, namespace, ConstantValue("__orig_bases__"), SequenceValue(original, tuple))
    made = _call(tracer, meta, [name, SequenceValue(bases, tuple), namespace], kwargs)
    if isinstance(cell, CellValue) and is_class(made) and not (
            cell.contents is not None and operations.is_same(tracer, cell.contents, made)):
        shown = operations.python_value(tracer, name)
        if cell.contents is None:
            raise tracer.user_error(RuntimeError(
                f"__class__ not set defining {shown!r} as {made.value!r}. "
                "Was __classcell__ propagated to type.__new__?"))
        raise _type_error(tracer, f"__class__ set to {cell.contents!r} defining {shown!r} as {made.value!r}")
    return made


def _resolve_bases(tracer: "Tracer", original: list[Value]) -> list[Value]:
    """The bases after `__mro_entries__` (`typing.Generic[T]` stands for `Generic`)."""
    bases: list[Value] = []
    for base in original:
        if is_class(base):
            bases.append(base)
            continue
        if isinstance(base, ConstantValue) and all(isinstance(item, ConstantValue) for item in original):
            entries = getattr(base.value, "__mro_entries__", None)
            if entries is None:
                bases.append(base)
                continue
            try:  # typing's forms are constants: their entries are computed for real
                found = operations.constant(entries(tuple(item.value for item in original)))
            except Exception as error:
                raise tracer.user_error(error) from None
        else:
            from . import attributes

            method = attributes.lookup(tracer, base, "__mro_entries__")
            if method is None:
                bases.append(base)
                continue
            found = _call(tracer, method, [SequenceValue(original, tuple)])
        if not (isinstance(found, SequenceValue) and found.kind is tuple and found.cls is None):
            raise _type_error(tracer, "__mro_entries__ must return a tuple")
        bases.extend(found.items)
    return bases


def calculate_meta(tracer: "Tracer", meta: type, bases: list[Value]) -> type:
    """The most derived of `meta` and the bases' metaclasses (`_PyType_CalculateMetaclass`)."""
    winner = meta
    for base in bases:
        kind = base.value.__class__ if is_class(base) else base.python_type()
        if issubclass(winner, kind):
            continue
        if issubclass(kind, winner):
            winner = kind
            continue
        raise _type_error(tracer, "metaclass conflict: the metaclass of a derived class must be a (non-strict) "
                                  "subclass of the metaclasses of all its bases")
    return winner


def _prepare(tracer: "Tracer", meta: Value, name: Value, bases: list[Value], kwargs: dict[str, Value]) -> Value:
    """The namespace the body runs in: a new dict, or what the metaclass's `__prepare__` gives."""
    from . import attributes

    if is_class(meta):
        found = classes.find(tracer, meta.value, "__prepare__")
        if found is not None and found[1] is _TYPE_PREPARE:
            return DictValue({})
    prepare = attributes.lookup(tracer, meta, "__prepare__")
    if prepare is None:
        return DictValue({})
    namespace = _call(tracer, prepare, [name, SequenceValue(bases, tuple)], kwargs)
    if not hasattr(namespace.python_type(), "__getitem__"):
        shown = meta.value.__name__ if is_class(meta) else "<metaclass>"
        raise _type_error(tracer, f"{shown}.__prepare__() must return a mapping, not "
                                  f"{namespace.python_type().__name__}")
    return namespace


def run_body(tracer: "Tracer", body: FunctionValue, namespace: Value) -> Value:
    """Run a class body with its names in `namespace`: its value is its `__class__` cell, or None."""
    from ..interpreter.frame import Frame

    frame = Frame(tracer, body.code, body.globals, {}, body.closure)
    frame.namespace = namespace
    return frame.run()


# -- names of a class body -------------------------------------------------------------------


def load_name(tracer: "Tracer", frame: Any, name: str) -> Value:
    """LOAD_NAME: the namespace, then the globals and builtins."""
    found = namespace_item(tracer, frame.namespace, name)
    if found is not None:
        return found
    return tracer.load_global(frame.globals, name, frame.builtins())


def namespace_item(tracer: "Tracer", namespace: Value, name: str) -> Value | None:
    """`namespace[name]`, or None where that raises KeyError (the mapping's own `__getitem__`
    runs, as CPython calls it for a namespace that is not exactly a dict)."""
    if isinstance(namespace, DictValue) and namespace.cls is None:
        return namespace.lookup(name)
    try:
        return operations.getitem(tracer, namespace, ConstantValue(name))
    except UserException as raised:
        if exceptions.caught(raised, KeyError):
            return None
        raise


def delete_name(tracer: "Tracer", frame: Any, name: str) -> None:
    try:
        operations.delitem(tracer, frame.namespace, ConstantValue(name))
    except UserException as raised:
        if exceptions.caught(raised, KeyError):
            raise tracer.user_error(NameError(f"name '{name}' is not defined")) from None
        raise


# -- type.__new__ ---------------------------------------------------------------------------


def type_new(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`type.__new__(meta, name, bases, namespace, **kwargs)`: a new class, its namespace's
    `__set_name__` and its bases' `__init_subclass__` run (`type.__new__(type, x)`: x's class)."""
    if not args or not is_class(args[0]) or not issubclass(args[0].value, type):
        raise _type_error(tracer, "type.__new__(X): X is not a type object")
    meta = args[0].value
    if len(args) == 2 and meta is type and not kwargs:
        return classes.class_value(args[1].python_type())
    if len(args) != 4:
        raise _type_error(tracer, "type() takes 1 or 3 arguments")
    name, bases, namespace = args[1:]
    real_name = operations.python_value(tracer, name)
    if not isinstance(real_name, str):
        raise _type_error(tracer, f"type.__new__() argument 1 must be str, not {type(real_name).__name__}")
    if not (isinstance(bases, SequenceValue) and bases.kind is tuple and bases.cls is None):
        raise _type_error(tracer, f"type.__new__() argument 2 must be tuple, not {bases.python_type().__name__}")
    if not (isinstance(namespace, DictValue) and namespace.kind is dict and issubclass(namespace.python_type(), dict)):
        raise _type_error(tracer, f"type.__new__() argument 3 must be dict, not "
                                  f"{namespace.python_type().__name__}")
    if not all(is_class(base) for base in bases.items):
        raise _type_error(tracer, "bases must be types")
    winner = calculate_meta(tracer, meta, bases.items)
    if winner is not meta:
        new = classes.find(tracer, winner, "__new__")
        if new is not None and classes.static_function(new[1]) is not type.__dict__["__new__"]:
            from . import attributes

            return _call(tracer, attributes.load_attr(tracer, classes.class_value(winner), "__new__"),
                         [classes.class_value(winner), *args[1:]], kwargs)
    return _make(tracer, winner, real_name, tuple(base.value for base in bases.items), namespace, kwargs)


_IMPLICIT_CLASSMETHODS = ("__init_subclass__", "__class_getitem__")


def _make(tracer: "Tracer", meta: type, name: str, bases: tuple, namespace: DictValue,
          kwargs: dict[str, Value]) -> Value:
    entries: dict[str, Value] = {}
    for key, item in namespace.items.items():
        if holds_value_keys(key) or not isinstance(key, str):
            raise tracer.graph_break(gb.CLASS_STATEMENT, f"class {name} with a key {key!r}", name=name,
                                     reason=f"its namespace has a key that is not a string ({key!r})")
        entries[key] = item
    for key in ("__new__", *_IMPLICIT_CLASSMETHODS):  # type.__new__ wraps these plain functions
        if isinstance(entries.get(key), FunctionValue):
            wrapper = staticmethod if key == "__new__" else classmethod
            entries[key] = DescriptorValue(wrapper, {"__func__": entries[key]})
    cell = entries.pop("__classcell__", None)
    real = {key: realize(tracer, item) for key, item in entries.items()}
    if "__qualname__" in entries and not isinstance(real["__qualname__"], str):
        shown = entries["__qualname__"].python_type().__name__
        raise _type_error(tracer, f"type __qualname__ must be a str, not {shown}")
    if cell is not None and not isinstance(cell, CellValue):
        raise _type_error(tracer, f"__classcell__ must be a nonlocal cell, not {cell.python_type()!r}")
    entries.pop("__qualname__", None)  # kept by the class itself, not in its __dict__
    try:
        cls = make_class(meta, name, bases, real)
    except CannotMakeQuietly as error:
        raise tracer.graph_break(gb.CLASS_STATEMENT, f"class {name}", name=name,
                                 reason=f"its bases' `__init_subclass__` would run twice ({error})") from None
    except Exception as error:  # CPython's own checks: an MRO conflict, a final base, bad __slots__
        raise tracer.user_error(error) from None
    value = ConstantValue(cls)
    kept = dict(entries)  # what a class made anew is given (its __qualname__ is given to type.__new__)
    if "__qualname__" in real:
        kept["__qualname__"] = ConstantValue(real["__qualname__"])
    _file(tracer, cls, MadeClass(value, meta, name, bases, kept))
    tracer.memo_by_id[id(cls)] = (cls, value)
    tracer.side_effects.shared_overlays[id(cls)] = dict(entries)
    if cell is not None:
        cell.contents = value  # a cell of the class body, made in the region
    _set_names(tracer, value, entries)
    _init_subclass(tracer, value, kwargs)
    return value


def _file(tracer: "Tracer", cls: type, record: MadeClass) -> None:
    tracer.side_effects.made_classes.append(record)
    file_made_class(cls, record)


def _set_names(tracer: "Tracer", cls: ConstantValue, entries: dict[str, Value]) -> None:
    """Each value's `__set_name__(cls, name)`, as `type.__new__` calls them (errors wrapped)."""
    for key, item in list(entries.items()):
        if isinstance(item, ConstantValue):
            if hasattr(type(item.value), "__set_name__"):
                raise tracer.graph_break(gb.CLASS_STATEMENT, f"__set_name__ of {item!r}", name=cls.value.__name__,
                                         reason=f"its `{key}` has a `__set_name__` written in C")
            continue
        method = classes.special_method(tracer, item, "__set_name__")
        if method is None:
            continue
        try:
            _call(tracer, method, [cls, ConstantValue(key)])
        except UserException as raised:
            wrapped = exceptions.from_error(tracer, RuntimeError(
                f"Error calling __set_name__ on '{item.python_type().__name__}' instance {key!r} "
                f"in '{cls.value.__name__}'"))
            wrapped.cause = raised.value
            raise exceptions.raised(tracer, wrapped, "__set_name__") from None


def _init_subclass(tracer: "Tracer", cls: ConstantValue, kwargs: dict[str, Value]) -> None:
    """`super(cls, cls).__init_subclass__(**kwargs)`."""
    owner, raw = classes.find(tracer, cls.value, "__init_subclass__", after=cls.value)
    if raw is _OBJECT_INIT_SUBCLASS:
        if kwargs:
            raise _type_error(tracer, f"{cls.value.__qualname__}.__init_subclass__() takes no keyword arguments")
        return
    _call(tracer, classes.bind(tracer, owner, raw, "__init_subclass__", None, cls.value, cls), [], kwargs)


# -- the real counterparts of the trace's values --------------------------------------------


def realize(tracer: "Tracer", value: Value) -> Any:
    """The real object a class made in the region holds for `value` in its `__dict__`: a
    constant itself; a container or a plain instance made in the region, a copy; a function
    made in the region, a function of the same code (never called: read back from the class,
    it is `value`, `tracer.memo_by_id`); an `Unrealized` placeholder for a value with no real
    counterpart."""
    if isinstance(value, ConstantValue) and not operations.is_symbolic(value):
        return value.value
    if isinstance(value, ObjectValue) and value.obj is not None:
        return value.obj
    if isinstance(value, ModuleValue):
        return value.module
    if isinstance(value, FunctionValue) and value.bound_self is None and value.fn is not None:
        return value.fn
    if isinstance(value, SequenceValue) and value.cls is None:  # copies, as a setup function may change them
        return value.kind(realize(tracer, item) for item in value.items)
    if isinstance(value, DictValue) and value.kind is dict and value.cls is None \
            and not any(holds_value_keys(key) for key in value.items):
        return {key: realize(tracer, item) for key, item in value.items.items()}
    if _is_plain_instance(value):  # made in the region (a dataclass `field()`, an enum's namespace)
        base = builtin_base(value.cls)
        real = make_empty(value.cls, base, None)
        contents = {key: realize(tracer, item) for key, item in value.items.items()} \
            if isinstance(value, DictValue) else None
        fill(real, base, contents, {name: realize(tracer, item) for name, item in value.overlay.items()
                                    if item is not None})
        return real
    if isinstance(value, (SequenceValue, DictValue)) and operations.is_constant_tree(value):
        try:  # a namedtuple, an OrderedDict of constants
            return operations.python_value(tracer, value)
        except gb.GraphBreak:
            pass
    if isinstance(value, FunctionValue) and value.bound_self is None:
        real = _stand_in(tracer, value)
    elif isinstance(value, DescriptorValue):
        parts = {key: realize(tracer, part) for key, part in value.parts.items()}
        if value.cls is property:
            real = property(parts["fget"], parts["fset"], parts["fdel"], parts["__doc__"])
        else:
            real = value.cls(parts["__func__"])
    else:
        real = Unrealized()
    tracer.memo_by_id[id(real)] = (real, value)  # read back from the class, it is the trace's value
    return real


def _is_plain_instance(value: Value) -> bool:
    """An instance made in the region of a class from outside, laid out by object or dict."""
    if getattr(value, "obj", True) is not None or getattr(value, "source", None) is not None:
        return False
    if type(value) is ObjectValue:
        base = builtin_base(value.cls)
    elif type(value) is DictValue and value.cls is not None and value.kind is dict:
        base = builtin_base(value.cls)
        if base is not dict or any(holds_value_keys(key) for key in value.items):
            return False
    else:
        return False
    return base in (object, dict) and made_class(value.cls) is None


def _stand_in(tracer: "Tracer", function: FunctionValue) -> types.FunctionType:
    code = function.code
    closure = tuple(types.CellType() for _ in code.co_freevars) or None
    defaults = tuple(realize(tracer, default) for default in function.defaults) or None
    stand_in = types.FunctionType(code, function.globals, code.co_name, defaults, closure)
    stand_in.__kwdefaults__ = {key: realize(tracer, item) for key, item in function.kwdefaults.items()} or None
    for name, item in {**function.special, **function.attributes}.items():
        setattr(stand_in, name, realize(tracer, item))
    return stand_in


def is_realized(cls: type) -> bool:
    """Whether every value a made class holds has a real counterpart in its `__dict__`."""
    return not any(_holds_unrealized(item) for item in vars(cls).values())


def _holds_unrealized(real: Any) -> bool:
    if isinstance(real, Unrealized):
        return True
    if type(real) in (list, tuple):
        return any(_holds_unrealized(item) for item in real)
    if type(real) is dict:
        return any(_holds_unrealized(item) for item in real.values())
    return False


# -- the region changing a class it made ----------------------------------------------------


def store(tracer: "Tracer", cls: ConstantValue, name: str, value: Value | None) -> None:
    """`cls.name = value` (None: `del cls.name`) on a class made in the region, by
    `type.__setattr__`: the trace's view and the class object change, the store is filed for
    a class made anew."""
    real = cls.value
    overlay = tracer.side_effects.shared_overlays.setdefault(id(real), {})
    if value is None:
        if name not in overlay and name not in real.__dict__:
            raise tracer.user_error(AttributeError(f"type object '{real.__name__}' has no attribute '{name}'"))
        overlay.pop(name, None)
        if name in real.__dict__:
            type.__delattr__(real, name)
    else:
        overlay[name] = value
        type.__setattr__(real, name, realize(tracer, value))
    made_class(real).events.append(("store", name, value))


def run_factory(tracer: "Tracer", factory: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """A library function that makes a class (`FACTORIES`, `collections.namedtuple`), run for
    real on the real counterparts of its arguments; the class it makes is filed to be made
    again by calling it again."""
    real_args = [realize(tracer, arg) for arg in args]
    real_kwargs = {key: realize(tracer, arg) for key, arg in kwargs.items()}
    name = getattr(factory, "__qualname__", repr(factory))
    if any(_holds_unrealized(arg) for arg in [*real_args, *real_kwargs.values()]):
        raise tracer.graph_break(gb.CLASS_STATEMENT, f"{name}(...)", name=name,
                                 reason=f"`{name}` runs for real, on arguments that hold values of the trace "
                                        "(a tensor, an object made in the region)")
    try:
        made = factory(*real_args, **real_kwargs)
    except Exception as error:
        raise tracer.user_error(error, f"{name}(...)") from None
    if not isinstance(made, type):
        return tracer.wrap(made, None)
    value = ConstantValue(made)
    _file(tracer, made, MadeClass(value, type(made), made.__name__, made.__bases__, {},
                                  factory=(factory, list(args), dict(kwargs))))
    tracer.memo_by_id[id(made)] = (made, value)
    tracer.side_effects.shared_overlays.setdefault(id(made), {})
    return value


def run_setup(tracer: "Tracer", function: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """A library's setup of a class (`SETUP_FUNCTIONS`) on a class made in the region: run for
    real on it (the class must then hold real counterparts of all its values), filed to run
    again on a class made anew; what it changed is read back into the trace's view. None
    for a class from outside."""
    if not args or not is_class(args[0]) or made_class(args[0].value) is None:
        return None
    cls = args[0].value
    real_args = [realize(tracer, arg) for arg in args[1:]]
    real_kwargs = {key: realize(tracer, arg) for key, arg in kwargs.items()}
    if not is_realized(cls) or any(_holds_unrealized(arg) for arg in [*real_args, *real_kwargs.values()]):
        name = getattr(function, "__qualname__", repr(function))
        raise tracer.graph_break(gb.CLASS_STATEMENT, f"{name} on class {cls.__name__}", name=cls.__name__,
                                 reason=f"`{name}` runs on the real class, which would need the values it "
                                        "holds (a tensor, an object made in the region) for real")
    before = dict(cls.__dict__)
    try:
        result = function(cls, *real_args, **real_kwargs)
    except Exception as error:
        raise tracer.user_error(error) from None
    overlay = tracer.side_effects.shared_overlays[id(cls)]
    for name in list(overlay):
        if name not in cls.__dict__:
            del overlay[name]
        elif cls.__dict__[name] is not before.get(name):
            overlay[name] = tracer.wrap(cls.__dict__[name], None)
    made_class(cls).events.append(("call", function, list(args), dict(kwargs)))
    if result is None:
        return NONE
    if result is cls:
        return args[0]
    raise tracer.graph_break(gb.CLASS_STATEMENT, f"{function.__qualname__} on class {cls.__name__}",
                             name=cls.__name__, reason=f"`{function.__qualname__}` made another class of it")
