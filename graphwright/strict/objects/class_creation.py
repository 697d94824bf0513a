"""Making a class object without running the Python hooks `type.__new__` would run.

A class statement traced in the region has its hooks (the `__set_name__` of the
namespace's values, the `__init_subclass__` of its bases, the metaclass's
`__new__` and `__init__`) inlined by the tracer, their effects recorded as any
others. The class object itself is still real: `make_class` makes it, with
CPython's layout, MRO and slots, for the trace (and again, with the namespace
it ended with, when residual code rebuilds a class that leaves the region),
without running any of those hooks a second time.

`type.__new__` always calls `super(cls, cls).__init_subclass__`. Where a base
defines one, the class is first made on a stand-in base laid out as the real
one, whose `__init_subclass__` does nothing, and then given its real bases
(`__bases__` assignment, which CPython allows between bases of one layout).
The tracer files what it needs to make a class again as a `MadeClass`,
found by the class object (`made_class`). This module must not import the
tracer: residual code calls it.
"""
from __future__ import annotations

import weakref
from typing import Any

_MANAGED_DICT = 1 << 4  # Py_TPFLAGS_MANAGED_DICT (3.11)
_HEAP_TYPE = 1 << 9
_HAVE_GC = 1 << 14
_POINTER = 8


class MadeClass:
    """A class made by the region (a class statement, `type(name, bases, ns)`): `value` is it as
    a value of the trace; `namespace` what `type.__new__` was given (values of the trace, in
    order), or `factory` the library function that made it for real and its arguments
    (`collections.namedtuple`, an enum's metaclass); `events` what the region did to it
    afterwards, in order: `("store", name, value)` (value None: deleted) and `("call",
    function, args, kwargs)`, a library's setup function run on it for real (a metaclass's
    `__init__`, `dataclasses`), run again on a class made anew."""

    __slots__ = ("value", "meta", "name", "bases", "namespace", "factory", "events", "__weakref__")

    def __init__(self, value: Any, meta: type, name: str, bases: tuple, namespace: dict,
                 factory: tuple | None = None) -> None:
        self.value = value
        self.meta = meta
        self.name = name
        self.bases = bases
        self.namespace = namespace
        self.factory = factory
        self.events: list[tuple] = []


# class -> a weak reference to its MadeClass, which the trace that made it keeps (its
# `SideEffects`): both go with the trace and the entry made from it
_MADE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def file_made_class(cls: type, record: MadeClass) -> None:
    _MADE[cls] = weakref.ref(record)


def made_class(obj: Any) -> MadeClass | None:
    """The record of a class the region made, or None for any other object."""
    if not isinstance(obj, type) or not obj.__flags__ & _HEAP_TYPE:
        return None
    try:
        found = _MADE.get(obj)
    except TypeError:  # a metaclass that makes its classes unhashable
        return None
    return None if found is None else found()


class CannotMakeQuietly(Exception):
    """The bases' layout (a subclass of int, str or tuple with an `__init_subclass__`) allows
    no stand-in base."""


def make_class(meta: type, name: str, bases: tuple, namespace: dict) -> type:
    """`type.__new__(meta, name, bases, namespace)` without `__set_name__` or a base's
    `__init_subclass__` running: a value whose class defines `__set_name__` is stored after
    the class is made, in its place in the namespace."""
    named = {key: value for key, value in namespace.items() if hasattr(type(value), "__set_name__")}
    plain = {key: None if key in named else value for key, value in namespace.items()}
    if not _has_subclass_hook(bases):
        cls = type.__new__(meta, name, bases, plain)
    else:
        cls = type.__new__(meta, name, (_quiet_base(_layout_base(_best_base(bases))),), plain)
        try:
            cls.__bases__ = bases
        except TypeError as error:
            if str(error).startswith("__bases__ assignment"):  # a layout CPython cannot swap
                raise CannotMakeQuietly(str(error)) from None
            raise  # the program's error (an inconsistent MRO...), as type.__new__ raises it
    for key, value in named.items():
        type.__setattr__(cls, key, value)
    return cls


def _has_subclass_hook(bases: tuple) -> bool:
    """Whether `type.__new__` would find an `__init_subclass__` other than object's."""
    return any("__init_subclass__" in klass.__dict__ for base in bases for klass in base.__mro__
               if klass is not object)


def _ignore_subclass(cls: type, **kwargs: Any) -> None:
    """The `__init_subclass__` of a stand-in base: the real one is run by the tracer."""


# -- CPython's layout rules (typeobject.c), to find a base laid out as the real one --------


def _extra_ivars(cls: type, base: type) -> bool:
    size = cls.__basicsize__
    if cls.__itemsize__ or base.__itemsize__:
        return size != base.__basicsize__ or cls.__itemsize__ != base.__itemsize__
    heap = cls.__flags__ & _HEAP_TYPE
    if cls.__weakrefoffset__ and not base.__weakrefoffset__ and cls.__weakrefoffset__ + _POINTER == size and heap:
        size -= _POINTER
    if not cls.__flags__ & _MANAGED_DICT and cls.__dictoffset__ and not base.__dictoffset__ \
            and cls.__dictoffset__ + _POINTER == size and heap:
        size -= _POINTER
    return size != base.__basicsize__


def _solid_base(cls: type) -> type:
    base = _solid_base(cls.__base__) if cls.__base__ is not None else object
    return cls if _extra_ivars(cls, base) else base


def _best_base(bases: tuple) -> type:
    """The base whose layout the class takes (CPython's `best_base`)."""
    winner = chosen = None
    for base in bases:
        candidate = _solid_base(base)
        if winner is None or issubclass(candidate, winner) and not issubclass(winner, candidate):
            winner, chosen = candidate, base
    return chosen


def _layout(cls: type) -> tuple:
    return cls.__basicsize__, cls.__itemsize__, cls.__dictoffset__, cls.__weakrefoffset__, \
        cls.__flags__ & _HAVE_GC


def _layout_base(cls: type) -> type:
    """The class that differs in layout from its own base, walking down from `cls` through
    those laid out as their base (what `__bases__` assignment compares)."""
    while cls.__base__ is not None and cls.__flags__ & _HEAP_TYPE and _layout(cls) == _layout(cls.__base__):
        cls = cls.__base__
    return cls


def _quiet_base(shape: type) -> type:
    """A class derived from `shape`'s base and laid out as `shape`, whose `__init_subclass__`
    does nothing."""
    own = shape.__dict__.get("__slots__", ())
    slots = [own] if isinstance(own, str) else list(own)
    parent = shape.__base__
    if shape.__dictoffset__ and not parent.__dictoffset__ and "__dict__" not in slots:
        slots.append("__dict__")
    if shape.__weakrefoffset__ and not parent.__weakrefoffset__ and "__weakref__" not in slots:
        slots.append("__weakref__")
    namespace = {"__init_subclass__": classmethod(_ignore_subclass)}
    if set(slots) <= {"__dict__", "__weakref__"}:
        plain = make_class(type, "_Quiet", (parent,), namespace)
        if _layout(plain) == _layout(shape):
            return plain
    return make_class(type, "_Quiet", (parent,), {**namespace, "__slots__": tuple(slots)})
