"""Sources: where a value read from outside the compiled function came from.

A source can do two things: write the Python expression that re-reads the
value at call time (`gen`, used by guards and residual code), and name it in
the user's terms (`name`, used in recompile reasons and errors). Sources are
hashable, so one value read twice is guarded once.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import torch


class ExprWriter(Protocol):
    """What a source needs from the code generator."""

    def ref(self, obj: Any) -> str: ...
    def expr(self, source: "Source") -> str: ...


class Source:
    def gen(self, writer: ExprWriter) -> str:
        raise NotImplementedError

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        """The value now, computed directly (the slow path that explains a cache miss)."""
        raise NotImplementedError

    def name(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class LocalSource(Source):
    """A parameter of the compiled function."""

    local: str

    def gen(self, writer: ExprWriter) -> str:
        return self.local

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return local_values[self.local]

    def name(self) -> str:
        return self.local


@dataclass(frozen=True)
class FunctionSource(Source):
    """The compiled function object itself (to reach its closure cells)."""

    def gen(self, writer: ExprWriter) -> str:
        return "___gw_fn"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return fn

    def name(self) -> str:
        return "<function>"


@dataclass(frozen=True)
class GlobalSource(Source):
    """`name` in a module's globals dict."""

    globals_id: int
    key: str
    globals_dict: dict = field(compare=False, hash=False, repr=False)

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.ref(self.globals_dict)}[{self.key!r}]"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return self.globals_dict[self.key]

    def name(self) -> str:
        return f"global '{self.key}'"


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.expr(self.base)}.{self.attr}"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return getattr(self.base.read(fn, local_values), self.attr)

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"


@dataclass(frozen=True)
class StorageSource(Source):
    """The untyped storage of the tensor `base` reads (one object per storage, as in eager)."""

    base: Source

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.expr(self.base)}.untyped_storage()"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return self.base.read(fn, local_values).untyped_storage()

    def name(self) -> str:
        return f"{self.base.name()}.untyped_storage()"


@dataclass(frozen=True)
class InstanceDictSource(Source):
    """An object's own `__dict__`, read without its class's `__getattribute__` (a Python one
    would run on every guard check)."""

    base: Source

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.ref(object.__getattribute__)}({writer.expr(self.base)}, '__dict__')"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return object.__getattribute__(self.base.read(fn, local_values), "__dict__")

    def name(self) -> str:
        return f"{self.base.name()}.__dict__"


@dataclass(frozen=True)
class ModuleDictSource(Source):
    """An entry of an nn.Module's `_parameters`, `_buffers` or `_modules`: fast to re-read."""

    base: Source
    table: str
    key: str

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.expr(self.base)}.{self.table}[{self.key!r}]"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return getattr(self.base.read(fn, local_values), self.table)[self.key]

    def name(self) -> str:
        return f"{self.base.name()}.{self.key}"


def key_text(key: Any, writer: ExprWriter) -> str:
    """A dict key as Python text: a key that is itself a source (a tensor key, re-read by
    its own source: `state[param]`) is that source's expression, any other a literal."""
    return writer.expr(key) if isinstance(key, Source) else literal(key, writer.ref)


def read_key(key: Any, fn: Any, local_values: dict[str, Any]) -> Any:
    return key.read(fn, local_values) if isinstance(key, Source) else key


def key_name(key: Any) -> str:
    return key.name() if isinstance(key, Source) else repr(key)


def literal(value: Any, ref: Callable[[Any], str]) -> str:
    """`value` as Python text: a literal where its repr is one, else a reference to the object."""
    if type(value) in (int, str, bytes) or (type(value) is float and value == value
                                            and value not in (float("inf"), float("-inf"))):
        return repr(value)
    if type(value) is tuple:
        return "(" + "".join(literal(item, ref) + ", " for item in value) + ")"
    return ref(value)


@dataclass(frozen=True)
class ItemSource(Source):
    base: Source
    key: Any

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.expr(self.base)}[{key_text(self.key, writer)}]"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return self.base.read(fn, local_values)[read_key(self.key, fn, local_values)]

    def name(self) -> str:
        return f"{self.base.name()}[{key_name(self.key)}]"


@dataclass(frozen=True)
class ClosureCellSource(Source):
    """The i-th closure cell of a function (the cell, not its contents)."""

    function: Source
    index: int
    var: str

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.expr(self.function)}.__closure__[{self.index}]"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return self.function.read(fn, local_values).__closure__[self.index]

    def name(self) -> str:
        return f"closure variable '{self.var}'"


@dataclass(frozen=True)
class CellContentsSource(Source):
    cell: ClosureCellSource

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.expr(self.cell)}.cell_contents"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return self.cell.read(fn, local_values).cell_contents

    def name(self) -> str:
        return self.cell.name()


@dataclass(frozen=True)
class WeakrefSource(Source):
    """The object a weak reference points to (None once it is gone)."""

    ref: Source

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.expr(self.ref)}()"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return self.ref.read(fn, local_values)()

    def name(self) -> str:
        return f"{self.ref.name()}()"


@dataclass(frozen=True)
class WeakReferenceSource(Source):
    """`weakref.ref(obj)` made in the region for an object read by source: CPython keeps one
    callback-less reference per object, so making it again at call time gives the same one."""

    target: Source

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.ref(weakref.ref)}({writer.expr(self.target)})"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return weakref.ref(self.target.read(fn, local_values))

    def name(self) -> str:
        return f"weakref.ref({self.target.name()})"


@dataclass(frozen=True)
class ConstantSource(Source):
    """An object the guards hold directly (a class whose attributes are re-read)."""

    value_id: int
    value: Any = field(compare=False, hash=False, repr=False)

    def gen(self, writer: ExprWriter) -> str:
        return writer.ref(self.value)

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return self.value

    def name(self) -> str:
        return getattr(self.value, "__qualname__", repr(self.value))


@dataclass(frozen=True)
class KeyListSource(Source):
    """The keys of a dict as a list, in its order: its i-th key, re-read as `ItemSource(this, i)`,
    is how a key that is itself an input (a tensor) is read again."""

    base: Source

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.ref(list)}({writer.expr(self.base)})"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return list(self.base.read(fn, local_values))

    def name(self) -> str:
        return f"the keys of {self.base.name()}"


def builtin_contents(container: Any, base: type) -> Any:
    """The items of an instance of a dict, list or tuple subclass as its builtin base keeps them
    (so that no overridden `__iter__` or `__getitem__` runs): a dict's keys, as a live view of
    the base (`in`, `len` and iteration, no copy), a list's or tuple's items, as a list."""
    if issubclass(base, dict):
        return base.keys(container)
    return list(base.__iter__(container))


@dataclass(frozen=True)
class ContentsSource(Source):
    """The contents of an instance of a user subclass of dict, list or tuple (`builtin_contents`)."""

    base: Source
    builtin: type

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.ref(builtin_contents)}({writer.expr(self.base)}, {writer.ref(self.builtin)})"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return builtin_contents(self.base.read(fn, local_values), self.builtin)

    def name(self) -> str:
        return f"the items of {self.base.name()}"


def own_item(container: dict, key: Any) -> Any:
    """`container[key]` as `dict` keeps it: no overridden `__getitem__` runs, and no `__missing__`
    either (a defaultdict's would insert the key); KeyError when the key is absent."""
    if not dict.__contains__(container, key):
        raise KeyError(key)
    return dict.__getitem__(container, key)


@dataclass(frozen=True)
class OwnItemSource(Source):
    """An item of an instance of a dict subclass, as the builtin dict keeps it (`own_item`)."""

    base: Source
    key: Any

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.ref(own_item)}({writer.expr(self.base)}, {key_text(self.key, writer)})"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return own_item(self.base.read(fn, local_values), read_key(self.key, fn, local_values))

    def name(self) -> str:
        return f"{self.base.name()}[{key_name(self.key)}]"


def array_as_tensor(array: Any) -> Any:
    """The tensor a NumPy array argument is to the graph: `torch.from_numpy`, which shares the
    array's memory (a write in the region reaches the caller's array). A read-only array, or
    one with negative strides, is copied first: a tensor made from it would be writable (PyTorch
    warns), or cannot be made. A NumPy scalar (read-only) is a 0-d tensor of its dtype."""
    if array.flags.writeable:
        try:
            return torch.from_numpy(array)
        except ValueError:  # negative strides
            pass
    return torch.as_tensor(array.copy())


@dataclass(frozen=True)
class NumpyTensorSource(Source):
    """The tensor standing for the NumPy array `base` reads (`array_as_tensor`), made anew at
    each read: the graph's input for that array, and what its tensor guard checks."""

    base: Source

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.ref(array_as_tensor)}({writer.expr(self.base)})"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return array_as_tensor(self.base.read(fn, local_values))

    def name(self) -> str:
        return self.base.name()
