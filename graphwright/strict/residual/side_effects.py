"""Side effects: what the traced code did to the world outside the graph.

Tracing never mutates the user's objects. Instead this records, as data,
mutations of pre-existing lists, dicts, sets and deques, attribute and
global stores, closure-cell stores, how far iterators passed in were
stepped, and calls to replay (logging, warnings, print), in program order. `codegen` replays them after the graph runs, so the compiled
call leaves the world in the same state as the eager one.

Inside a `scope` (a function traced as a subgraph: a `torch.cond` branch, a
vmapped or checkpointed function) nothing outside may change: only objects
made inside the scope may be mutated, and any other effect is refused.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from ..objects.values import CellValue, InstanceDictValue, IteratorValue, Value, birth_mark

_ABSENT = object()


class SideEffects:
    def __init__(self) -> None:
        self.mutated: dict[int, Value] = {}
        self.attribute_stores: dict[tuple[int, str], tuple[Value, str, Value | None]] = {}
        self.global_stores: dict[tuple[int, str], tuple[dict, str, Value]] = {}
        self.cell_stores: dict[int, CellValue] = {}
        self.replayed_calls: list[tuple[Any, list[Value], dict[str, Value]]] = []
        self.shared_overlays: dict[int, dict[str, Value]] = {}  # classes and Python modules
        self._scopes: list[tuple[int, Callable[[str], Exception]]] = []
        self.readded: set[tuple[int, str]] = set()  # attributes deleted, then stored again
        self.through_dict: set[tuple[int, str]] = set()  # stored as `obj.__dict__[name] = value`
        self.outside_iterators: list[IteratorValue] = []  # passed in: how far the region stepped them
        self.made_classes: list = []  # the `MadeClass` of each class the region made, kept with the trace

    @contextlib.contextmanager
    def scope(self, refuse: Callable[[str], Exception]) -> Iterator[None]:
        """Within it, an effect on anything made before it raises `refuse(what it was)`."""
        self._scopes.append((birth_mark(), refuse))
        try:
            yield
        finally:
            self._scopes.pop()

    def _check(self, owner: Value | None, what: str) -> None:
        if self._scopes:
            mark, refuse = self._scopes[-1]
            if owner is None or owner.source is not None or owner.birth < mark or \
                    getattr(owner, "real", None) is not None or getattr(owner, "obj", None) is not None:
                raise refuse(what)

    def mutate(self, container: Value) -> None:
        """`container` (a list or dict value) is about to change in place."""
        self._check(container, f"a mutation of a {container.python_type().__name__} made outside it")
        container.mutated = True
        if container.source is not None and not isinstance(container, InstanceDictValue):
            self.mutated[id(container)] = container

    def store_attr(self, owner: Value, name: str, value: Value | None, through_dict: bool = False) -> None:
        """`owner.name = value` (None: `del owner.name`); reads see it through the overlay.
        `through_dict`: written into the object's `__dict__` (no `__setattr__` of its class
        runs when it is replayed, a module's neither).

        An attribute deleted in the region and stored again moves to the end of the object's
        `__dict__`, as in CPython: its store is recorded anew (after the others) and marked,
        so that the replay removes it before storing it."""
        self._check(owner, f"setting `{name}` on a {owner.python_type().__name__} made outside it")
        key = (id(owner), name)
        if through_dict:
            self.through_dict.add(key)
        if value is not None and owner.overlay.get(name, _ABSENT) is None:
            del owner.overlay[name]
            self.attribute_stores.pop(key, None)
            self.readded.add(key)
        owner.overlay[name] = value
        if owner.source is not None:
            self.attribute_stores[key] = (owner, name, value)

    def was_readded(self, owner: Value, name: str) -> bool:
        return (id(owner), name) in self.readded

    def store_shared_attr(self, owner: Value, name: str, value: Value) -> None:
        """`cls.name = value` or `module.name = value` on a class or module read by source."""
        self._check(None, f"setting `{name}` on {owner.value!r}")
        self.shared_overlays.setdefault(id(owner.value), {})[name] = value
        self.attribute_stores[(id(owner.value), name)] = (owner, name, value)

    def load_shared_attr(self, obj: Any, name: str) -> Value | None:
        return self.shared_overlays.get(id(obj), {}).get(name)

    def store_global(self, f_globals: dict, name: str, value: Value) -> None:
        self._check(None, f"a store to the global `{name}`")
        self.global_stores[(id(f_globals), name)] = (f_globals, name, value)

    def load_global(self, f_globals: dict, name: str) -> Value | None:
        stored = self.global_stores.get((id(f_globals), name))
        return None if stored is None else stored[2]

    def store_cell(self, cell: CellValue, value: Value) -> None:
        self._check(cell, "a store to a variable of an enclosing function")
        cell.contents = value
        if cell.real is not None:
            self.cell_stores[id(cell)] = cell

    def step_outside_iterator(self, iterator: IteratorValue) -> None:
        """An iterator passed in: whatever the region takes from it is taken from the real one
        after the graph (its `position` then)."""
        self.outside_iterators.append(iterator)

    def stepped_iterators(self) -> list[IteratorValue]:
        return [iterator for iterator in self.outside_iterators if iterator.position]

    def replay_call(self, function: Any, args: list[Value], kwargs: dict[str, Value]) -> None:
        """Call `function` (a real callable) after the graph, with these arguments rebuilt."""
        self._check(None, f"a call of {getattr(function, '__qualname__', function)} (replayed after the graph)")
        self.replayed_calls.append((function, args, kwargs))

    def counts(self) -> tuple[int, ...]:
        """How many effects of each kind are recorded (replayed calls first): what a call added."""
        return (len(self.replayed_calls), len(self.mutated), len(self.attribute_stores),
                len(self.global_stores), len(self.cell_stores),
                sum(iterator.position for iterator in self.outside_iterators))

    def is_empty(self) -> bool:
        return not (self.mutated or self.attribute_stores or self.global_stores
                    or self.cell_stores or self.replayed_calls or self.stepped_iterators())
