"""An object's `__dict__` as the region sees it: one state with its attributes.

Reading `obj.__dict__` gives a dict whose items are the object's own
attributes, and the two stay one: an attribute stored or deleted afterwards
shows in the dict, and a store or deletion through the dict is an attribute
store (Hugging Face configs read `super().__getattribute__("__dict__")` on
every attribute access, and training steps then set `config.problem_type`).

- For an object made in the region, the dict is its overlay itself.
- For an object that existed before, `InstanceAttributes` is a live mapping
  over the real `__dict__` under the region's stores (the object's overlay,
  None for a deleted attribute): a key read is guarded as a dict read by key,
  iterating guards the real keys; writes go to `SideEffects.store_attr`, so
  they are replayed as attribute stores, never as a rewrite of the whole dict.
  Iteration follows CPython's order: an attribute deleted and stored again in
  the region moves to the end.

A store through the `__dict__` is replayed into the `__dict__` (a module's
`__setattr__`, which files parameters and submodules, does not run, as in
eager). Not modelled (a graph break naming it): keys that are not strings.
"""
from __future__ import annotations

import types
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from ..guards.sources import Source
from ..interpreter import graph_breaks as gb
from .values import DictValue, InstanceDictValue, ObjectValue, Value
from .wrap import OutsideDict

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_ABSENT = object()


class InstanceAttributes(MutableMapping):
    """The items of a pre-existing object's `__dict__`: the real entries under the stores
    and deletions made in the region (`instance.overlay`)."""

    __slots__ = ("tracer", "instance", "real", "source", "reader")

    def __init__(self, tracer: "Tracer", instance: Value, real: dict, source: Source) -> None:
        self.tracer = tracer
        self.instance = instance
        self.real = real
        self.source = source
        self.reader = OutsideDict(tracer, real, source)

    def _moved(self, key: Any) -> bool:
        """Deleted and stored again in the region: CPython puts it after the other keys."""
        return self.tracer.side_effects.was_readded(self.instance, key)

    def __getitem__(self, key: Any) -> Value:
        stored = self.instance.overlay.get(key, _ABSENT) if isinstance(key, str) else _ABSENT
        if stored is None:
            raise KeyError(key)
        if stored is not _ABSENT:
            return stored
        found = self.reader.read_key(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[Any]:
        overlay = self.instance.overlay
        self.tracer.add_guard(self.source, "keys", tuple(self.real))
        keys = [key for key in self.real
                if not (isinstance(key, str) and key in overlay and (overlay[key] is None or self._moved(key)))]
        keys += [key for key, stored in overlay.items()
                 if stored is not None and (key not in self.real or self._moved(key))]
        return iter(keys)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __setitem__(self, key: Any, value: Value) -> None:
        self._check_writable(key)
        self.tracer.side_effects.store_attr(self.instance, key, value, through_dict=True)

    def __delitem__(self, key: Any) -> None:
        self._check_writable(key)
        if key not in self:
            raise KeyError(key)
        self.tracer.side_effects.store_attr(self.instance, key, None, through_dict=True)

    def _check_writable(self, key: Any) -> None:
        if not isinstance(key, str):
            kind = self.instance.python_type().__name__
            raise self.tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{kind}.__dict__[{key!r}] = ...",
                                          name=f"a `__dict__` key that is not a string ({key!r})", type=kind)


def made_instance_dict(instance: Value) -> DictValue:
    """The `__dict__` of an object made in the region: its overlay, shared; one dict value
    however often it is read (a plain object's is rebuilt as its `__dict__`)."""
    known = getattr(instance, "own_dict", None)
    if known is not None:
        return known
    view = DictValue({})
    view.items = instance.overlay  # one dict: writes through either are seen by both
    if isinstance(instance, ObjectValue) and _dict_assignable(instance.cls):
        instance.own_dict = view
    return view


def _dict_assignable(cls: type) -> bool:
    """Whether `obj.__dict__ = d` works on the class's instances (a SimpleNamespace's
    `__dict__` is read-only)."""
    for klass in cls.__mro__:
        if "__dict__" in vars(klass):
            return type(vars(klass)["__dict__"]) is types.GetSetDescriptorType
    return False


def assign_made_instance_dict(tracer: "Tracer", instance: Value, mapping: Value) -> None:
    """`obj.__dict__ = mapping` on a plain object made in the region: the dict becomes its
    attributes, the same dict (a store on either shows in the other)."""
    if not (isinstance(mapping, DictValue) and mapping.kind is dict):
        raise tracer.user_error(TypeError(
            f"__dict__ must be set to a dictionary, not a '{mapping.python_type().__name__}'"))
    if not isinstance(instance, ObjectValue) or mapping.source is not None or mapping.cls is not None \
            or not all(isinstance(key, str) for key in mapping.items):
        kind = instance.python_type().__name__
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{kind}.__dict__ = {mapping!r}",
                                 name="setting __dict__ to a dict read from outside, a dict subclass, "
                                      "a dict with keys that are not strings, or on a container", type=kind)
    instance.overlay = mapping.items
    instance.own_dict = mapping


def outside_instance_dict(tracer: "Tracer", instance: Value, real: dict, source: Source | None) -> Value:
    """The `__dict__` of a pre-existing object, one value per object however often it is read."""
    if source is None:  # reached without a path (an attribute of a constant): only reads
        return tracer.wrap(real, None)
    known = tracer.memo_by_source.get(source)
    if known is not None:
        return known
    view = InstanceDictValue(InstanceAttributes(tracer, instance, real, source), source)
    tracer.memo_by_source[source] = view
    tracer.memo_by_id[id(real)] = (real, view)
    tracer.real_by_value[id(view)] = real
    return view
