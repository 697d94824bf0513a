"""Symbolic values: what the strict tracer's stack, locals and containers hold.

One class per kind of Python behaviour, not per type:

- `ConstantValue`: an immutable Python value or an opaque object used by
  identity (numbers, strings, dtypes, classes, builtins, torch functions).
- `TensorValue`: an fx node plus the fake tensor that gives it metadata.
- `ArrayValue`: a NumPy ndarray (or a NumPy scalar computed in the region): a tensor
  of the graph with NumPy's face (`numpy_arrays.py` gives it NumPy's behaviour).
- `SequenceValue`: a list or tuple (namedtuples, torch return types, and instances
  of user subclasses of list and tuple: items here, attributes in the overlay).
- `DictValue`: a dict, or a set or frozenset (keys only); instances of user subclasses
  of dict, OrderedDict, set and frozenset keep their items here and their attributes in the
  overlay.
- `DequeValue`: a `collections.deque`, a list with a bound (`maxlen`).
- `DictViewValue`: a live view of a dict's keys, values or items, or a mappingproxy of it.
- `InstanceDictValue`: the `__dict__` of a pre-existing object, a view of its attributes.
- `FunctionValue`: a Python function the tracer inlines, possibly bound.
- `PartialValue`: a `functools.partial`, its function and stored arguments as values.
- `DescriptorValue`: a staticmethod, classmethod or property made in the region around
  values of the trace (the methods of a class statement).
- `ModuleValue`: an `nn.Module`; its parameters and buffers are graph inputs.
- `ObjectValue`: any other user object, read through by source; attribute
  writes are kept in an overlay until replayed.
- `ScalarInstanceValue`: an instance of a user subclass of int, float, complex, str or bytes
  made in the region (an `ObjectValue` with its builtin value).
- `ExceptionValue`: an exception (an `ObjectValue` with the state CPython keeps on every
  exception; its behaviour is in `exceptions.py`), and `TracebackValue`, one entry of its traceback.
- `SuperValue`: `super(cls, receiver)`, whose lookups start after `cls` in the MRO.
- `MethodValue`: a method of a value the tracer models natively (list.append,
  Tensor.add, str.format, Logger.info).
- `IteratorValue`: an iterator over an already known list of values.
- `LazyIteratorValue`: an iterator whose items are made when asked for: a generator
  made in the region (`GeneratorValue`), or map/zip/filter/enumerate over one.
- `ContextValue`: a context manager the tracer models (grad mode, autocast).
- `CellValue`: a closure cell (only on the stack between LOAD_CLOSURE and MAKE_FUNCTION).
- `FrameValue`: a frame of the region, as `sys._getframe()` returns it.
- `StorageValue`: a tensor's `untyped_storage()` (its behaviour is in `storages.py`).

Values read from outside carry a `source`; values created while tracing have none.
Each value's `birth` is its rank in creation order (compared with a `birth_mark()`).
"""
from __future__ import annotations

import collections
import functools
import itertools
import types
from typing import Any, Callable, Protocol

import torch

from ..guards.sources import Source

_BIRTHS = itertools.count()


class Value:
    # `birth` orders values by creation: a function traced as a subgraph may change only
    # the objects made after it started (`SideEffects.scope`)
    __slots__ = ("source", "birth")

    def __init__(self, source: Source | None = None) -> None:
        self.source = source
        self.birth = next(_BIRTHS)

    def python_type(self) -> type:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.python_type().__name__})"


def birth_mark() -> int:
    """A mark in creation order: values made from now on have a greater `birth`."""
    return next(_BIRTHS)


class ConstantValue(Value):
    __slots__ = ("value",)

    def __init__(self, value: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        if isinstance(self.value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return self.value.node.pytype  # a symbol stands for a Python int, float or bool
        return type(self.value)

    def __repr__(self) -> str:
        return f"ConstantValue({self.value!r})"


class SliceValue(Value):
    """A slice made in the region of values that are not all numbers or None (`slice(obj)`):
    its `start`, `stop` and `step`, as `parts` (a tuple's values)."""

    __slots__ = ("parts",)

    def __init__(self, parts: "SequenceValue") -> None:
        super().__init__(None)
        self.parts = parts

    def python_type(self) -> type:
        return slice


class ObjectIdentity(ConstantValue):
    """`id(obj)` (or `hash(obj)` where its class hashes by identity) of an object made in the
    region. While tracing, its value is that of what stands for the object in the trace (alive,
    so distinct from every live object's, and the same for the same object, as `is` decides):
    only `==` and `!=` may read it (`operations.binary`); rebuilt after the graph as `id()` (or
    `hash()`) of the object rebuilt, so that it names the object the program holds."""

    __slots__ = ("of", "function")

    def __init__(self, number: int, of: Value, function: Callable[[Any], int] = id) -> None:
        super().__init__(number)
        self.of = of
        self.function = function


class TensorValue(Value):
    """An fx node and its fake tensor; `overlay` holds the attributes the region stored on the
    tensor (`t.grad = g`, `t.flag = True`), None until it stores one."""

    __slots__ = ("node", "fake", "cls", "overlay")

    def __init__(self, node: torch.fx.Node, fake: torch.Tensor, source: Source | None = None) -> None:
        super().__init__(source)
        self.node = node
        self.fake = fake
        self.cls: type = torch.Tensor
        self.overlay: dict[str, Value | None] | None = None

    def python_type(self) -> type:
        return self.cls


class ArrayValue(Value):
    """A NumPy array: `tensor` holds its data in the graph (an array and the tensor it came
    from, or that came from it, share that value, as they share memory). `scalar`: a NumPy
    scalar (`np.float64`...) computed in the region, a 0-d array with a scalar's face."""

    __slots__ = ("tensor", "scalar")

    def __init__(self, tensor: TensorValue, source: Source | None = None, scalar: bool = False) -> None:
        super().__init__(source)
        self.tensor = tensor
        self.scalar = scalar

    def python_type(self) -> type:
        from .numpy_arrays import scalar_type, ndarray_type

        return scalar_type(self.tensor.fake.dtype) if self.scalar else ndarray_type()


class SequenceValue(Value):
    """A list (`kind` list) or tuple; `cls` is its class when not exactly list or tuple
    (namedtuple, structseq, a user subclass), else None.

    For an instance of a user subclass, `overlay` holds its attributes and `obj` is the
    real object when it was read from outside."""

    __slots__ = ("items", "kind", "cls", "mutated", "overlay", "obj")

    def __init__(self, items: list[Value], kind: type, source: Source | None = None,
                 cls: type | None = None, obj: Any = None) -> None:
        super().__init__(source)
        self.items = list(items)
        self.kind = kind
        self.cls = cls
        self.mutated = False
        self.overlay: dict[str, Value | None] = {}
        self.obj = obj

    def python_type(self) -> type:
        return self.cls or self.kind


class DequeValue(SequenceValue):
    """A `collections.deque`: a list whose `maxlen` (None: unbounded) drops items from the
    other end when it is full."""

    __slots__ = ("maxlen", "state")

    def __init__(self, items: list[Value], maxlen: int | None, source: Source | None = None) -> None:
        super().__init__(items[max(len(items) - maxlen, 0):] if maxlen is not None else items, list, source,
                         cls=collections.deque)
        self.maxlen = maxlen
        self.state = 0  # counts the changes, as CPython's deque does to see one made while it searches


class DictValue(Value):
    """A dict (`kind` dict), or a set (`kind` set or frozenset: each member under its key).
    Keys are Python constants, objects hashed by identity, `ValueKey`s, and tuples and
    frozensets of those.

    `cls` is its class when not exactly dict (OrderedDict, defaultdict, a user subclass),
    else None. For an instance of a subclass, `overlay` holds its attributes and `obj`
    is the real object when it was read from outside.

    A dict read from outside is read as the program reads it: `lookup` reads (and
    guards) one key through `reader`; the first use of `items` reads the whole dict,
    guarded on its keys. `mutated`: the region changed it in place.

    A set's `table` is a real set of its keys, changed with them (`sets`): its order is the
    order CPython iterates the set in."""

    __slots__ = ("_items", "kind", "mutated", "cls", "overlay", "obj", "reader", "table")

    def __init__(self, items: dict[Any, Value], kind: type = dict, source: Source | None = None,
                 cls: type | None = None, obj: Any = None, reader: "DictReader | None" = None) -> None:
        super().__init__(source)
        self._items = dict(items)
        self.kind = kind
        self.mutated = False
        self.cls = cls
        self.overlay: dict[str, Value | None] = {}
        self.obj = obj
        self.reader = reader
        self.table: set | None = None

    @property
    def items(self) -> dict[Any, Value]:
        if self.reader is not None:
            reader, self.reader = self.reader, None
            self._items = reader.read_all()
        return self._items

    @items.setter
    def items(self, items: dict[Any, Value]) -> None:
        self._items, self.reader = items, None

    def lookup(self, key: Any) -> "Value | None":
        """The item under `key` (a Python key), or None when there is none."""
        if self.reader is not None and key not in self._items:
            found = self.reader.read_key(key)
            if found is not None:
                self._items[key] = found
            return found
        return self._items.get(key)

    def python_type(self) -> type:
        return self.cls or self.kind


class InstanceDictValue(DictValue):
    """The `__dict__` of an object that existed before the region: `items` is a live view of
    its attributes (`instance_dicts.InstanceAttributes`), so an item written is an attribute
    stored, replayed as such."""

    __slots__ = ()

    def __init__(self, attributes: Any, source: Source) -> None:
        super().__init__({}, dict, source)
        self.items = attributes


class DictViewValue(Value):
    """`d.keys()`, `d.values()`, `d.items()` (`cls` dict_keys, dict_values, dict_items or the
    odict_ ones) or `types.MappingProxyType(d)`: it holds no items, it reads `mapping`
    whenever it is used, so it sees the dict's later changes, as in Python."""

    __slots__ = ("mapping", "cls")

    def __init__(self, mapping: DictValue, cls: type) -> None:
        super().__init__(None)
        self.mapping = mapping
        self.cls = cls

    def python_type(self) -> type:
        return self.cls


class ValueKey:
    """A key of a modelled dict (or member of a set) that stands for a value of the trace
    rather than a Python constant; `value` is that value (what iterating the dict gives)."""

    __slots__ = ("value",)

    def __init__(self, value: Value) -> None:
        self.value = value


class TensorKey(ValueKey):
    """A tensor used as a dict key. A tensor hashes by identity (`Tensor.__hash__` is `id`), so
    a dict keyed by tensors finds a key exactly when the same tensor is looked up (the
    optimizers' `self.state[param]`): the key is the tensor's identity in the trace, its fake
    tensor, and iterating the dict gives the tensor's value back."""

    __slots__ = ()

    def __hash__(self) -> int:
        return id(self.value.fake)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorKey) and other.value.fake is self.value.fake

    def __repr__(self) -> str:
        return f"TensorKey({self.value.source.name() if self.value.source else 'a tensor made in the region'})"


class ObjectKey(ValueKey):
    """An object of the trace used as a key, hashed and compared as Python does: by identity,
    or by its class's Python `__hash__` (`hash`, what the inlined method returned) and
    `__eq__` (`equal(other key)`, which runs the inlined method when dicts compare keys of
    equal hash, as CPython's lookups do)."""

    __slots__ = ("hash", "equal")

    def __init__(self, value: Value, hash_: int, equal: Callable[[Any], bool] | None = None) -> None:
        super().__init__(value)
        self.hash = hash_
        self.equal = equal

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ValueKey) and other.value is self.value:
            return True
        return self.equal is not None and self.equal(other)

    def __repr__(self) -> str:
        return f"ObjectKey({self.value!r})"


def key_value(key: Any) -> Value:
    """The value of a key of a modelled dict: the value of a `ValueKey`, a tuple of keys as a
    tuple of their values, else the constant."""
    if isinstance(key, ValueKey):
        return key.value
    if type(key) is tuple and holds_value_keys(key):
        return SequenceValue([key_value(item) for item in key], tuple)
    return ConstantValue(key)


def holds_value_keys(key: Any) -> bool:
    """Whether a key is, or contains, a `ValueKey` (it is then no Python constant)."""
    if isinstance(key, ValueKey):
        return True
    return type(key) in (tuple, frozenset) and any(holds_value_keys(item) for item in key)


class DictReader(Protocol):
    """Reads a dict from outside for `DictValue` (made in wrap.py, where guards are chosen)."""

    def read_key(self, key: Any) -> Value | None: ...
    def read_all(self) -> dict[Any, Value]: ...


class CellValue(Value):
    """A closure cell: `real` is the pre-existing cell, or None for one made while tracing."""

    __slots__ = ("contents", "real")

    def __init__(self, contents: Value | None = None, real: types.CellType | None = None,
                 source: Source | None = None) -> None:
        super().__init__(source)
        self.contents = contents
        self.real = real

    def python_type(self) -> type:
        return types.CellType


class FunctionValue(Value):
    """A Python function to inline; `bound_self` makes it a bound method.

    For a function the region made, `attributes` is its `__dict__` and `special` the
    `__name__`, `__qualname__`, `__doc__` and `__module__` stored on it (`functools.wraps`
    sets both); bound methods share them with their function."""

    __slots__ = ("code", "globals", "name", "defaults", "kwdefaults", "closure", "bound_self", "fn",
                 "attributes", "special")

    def __init__(self, code: types.CodeType, f_globals: dict, name: str, defaults: tuple,
                 kwdefaults: dict, closure: tuple[CellValue, ...], *, bound_self: Value | None = None,
                 fn: Any = None, source: Source | None = None, attributes: dict | None = None,
                 special: dict | None = None) -> None:
        super().__init__(source)
        self.code = code
        self.globals = f_globals
        self.name = name
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure
        self.bound_self = bound_self
        self.fn = fn
        self.attributes: dict[Any, Value] = {} if attributes is None else attributes
        self.special: dict[str, Value] = {} if special is None else special

    def bind(self, receiver: Value) -> "FunctionValue":
        return FunctionValue(self.code, self.globals, self.name, self.defaults, self.kwdefaults, self.closure,
                             bound_self=receiver, fn=self.fn, attributes=self.attributes, special=self.special)

    def unbound(self) -> "FunctionValue":
        """The function of a bound method (the same function, attributes and all)."""
        return FunctionValue(self.code, self.globals, self.name, self.defaults, self.kwdefaults, self.closure,
                             fn=self.fn, attributes=self.attributes, special=self.special)

    def python_type(self) -> type:
        return types.MethodType if self.bound_self is not None else types.FunctionType


class PartialValue(Value):
    """`functools.partial(func, *args, **keywords)`: made in the region, or read from outside
    (then its function and stored arguments are read by source)."""

    __slots__ = ("func", "args", "keywords")

    def __init__(self, func: Value, args: list[Value], keywords: dict[str, Value],
                 source: Source | None = None) -> None:
        super().__init__(source)
        self.func = func
        self.args = args
        self.keywords = keywords

    def python_type(self) -> type:
        return functools.partial


class DescriptorValue(Value):
    """`staticmethod(f)`, `classmethod(f)` or `property(fget, fset, fdel, doc)` made in the region
    (`cls` is which) around values of the trace: `parts` holds them by the descriptor's own
    attribute names (`__func__`; `fget`, `fset`, `fdel`, `__doc__`), NONE where unset."""

    __slots__ = ("cls", "parts")

    def __init__(self, cls: type, parts: dict[str, Value]) -> None:
        super().__init__(None)
        self.cls = cls
        self.parts = parts

    def python_type(self) -> type:
        return self.cls


class ModuleValue(Value):
    __slots__ = ("module", "overlay")

    def __init__(self, module: torch.nn.Module, source: Source | None = None) -> None:
        super().__init__(source)
        self.module = module
        self.overlay: dict[str, Value] = {}

    def python_type(self) -> type:
        return type(self.module)


class ObjectValue(Value):
    """A user object; `obj` is the real one, or None for one created while tracing."""

    __slots__ = ("obj", "cls", "overlay", "own_dict")

    def __init__(self, obj: Any, cls: type, source: Source | None = None) -> None:
        super().__init__(source)
        self.obj = obj
        self.cls = cls
        self.overlay: dict[str, Value] = {}
        # of an object made in the region: the dict the program holds as its `__dict__` (read,
        # or assigned), whose items are the overlay; None until the program holds one
        self.own_dict: DictValue | None = None

    def python_type(self) -> type:
        return self.cls


class ScalarInstanceValue(ObjectValue):
    """An instance of a user subclass of int, float, complex, str or bytes made in the region:
    `builtin` is its value as the base sees it (a constant), on which every operation its class
    does not define in Python acts; its attributes are in the overlay."""

    __slots__ = ("builtin",)

    def __init__(self, cls: type, builtin: ConstantValue) -> None:
        super().__init__(None, cls)
        self.builtin = builtin


def unboxed(value: Value) -> Value:
    """An instance of a subclass of a scalar builtin as its base: its builtin value."""
    return value.builtin if isinstance(value, ScalarInstanceValue) else value


class ExceptionValue(ObjectValue):
    """An exception: its class, `args`, and what CPython keeps on every exception
    (`cause`, `context`, `suppress_context`, `traceback`: values, NONE when unset). A user
    subclass's own attributes are in the overlay. `obj` is the real exception when it was made
    outside the trace: read from outside (by `source`), or raised by a real call."""

    __slots__ = ("args", "cause", "context", "suppress_context", "traceback")

    def __init__(self, cls: type, args: list[Value], obj: Any = None, source: Source | None = None) -> None:
        super().__init__(obj, cls, source)
        self.args = list(args)
        self.cause: Value = NONE
        self.context: Value = NONE
        self.suppress_context = False
        self.traceback: Value = NONE

    def __repr__(self) -> str:
        return f"ExceptionValue({self.cls.__name__})"


class TracebackValue(Value):
    """One entry of an exception's `__traceback__`: the code and line a frame of the trace
    was running when the exception passed through it, and the entry of the next (inner)
    frame."""

    __slots__ = ("code", "lineno", "next")

    def __init__(self, code: types.CodeType, lineno: int, next_entry: Value) -> None:
        super().__init__(None)
        self.code = code
        self.lineno = lineno
        self.next = next_entry

    def python_type(self) -> type:
        return types.TracebackType


class SuperValue(Value):
    """`super(cls, receiver)`: `receiver` is an instance of `cls`, or (in a classmethod or
    `__new__`) a `ConstantValue` holding a subclass of it."""

    __slots__ = ("cls", "receiver")

    def __init__(self, cls: type, receiver: Value) -> None:
        super().__init__(None)
        self.cls = cls
        self.receiver = receiver

    def python_type(self) -> type:
        return super


# What reading a method from a class's `__dict__` through an instance gives.
BOUND_METHOD_TYPES = {types.MethodDescriptorType: types.BuiltinMethodType,
                      types.ClassMethodDescriptorType: types.BuiltinMethodType,
                      types.WrapperDescriptorType: types.MethodWrapperType,
                      types.FunctionType: types.MethodType}


class MethodValue(Value):
    """A method of a value the tracer models natively, bound to it (`d.clear`, `t.add`)."""

    __slots__ = ("receiver", "name")

    def __init__(self, receiver: Value, name: str) -> None:
        super().__init__(None)
        self.receiver = receiver
        self.name = name

    def python_type(self) -> type:
        for klass in self.receiver.python_type().__mro__:
            if self.name in klass.__dict__:
                return BOUND_METHOD_TYPES.get(type(klass.__dict__[self.name]), types.MethodType)
        return types.MethodType


class IteratorValue(Value):
    """An iterator over known items: made in the region, or (with a `source`) one passed in whose
    remaining items its state tells (`wrap`); stepping one passed in is replayed on it. `over`:
    the list whose own storage `items` is, read at each step as CPython's list iterator reads the
    list (what the program appends meanwhile is reached, what it removes is skipped), until the
    end is reached once; residual code rebuilds such an iterator over that same list."""

    __slots__ = ("cls", "items", "position", "watch", "over")

    def __init__(self, items: list[Value], source: Source | None = None, cls: type = type(iter(())),
                 over: Value | None = None) -> None:
        super().__init__(source)
        self.items = items
        self.over = over
        self.position = 0
        self.cls = cls  # the class CPython's iterator has (`list_iterator`, `dict_keyiterator`...)
        # for an iterator over a dict or set: raises (as the program's RuntimeError) at each
        # step once the container changed size, until the iterator is exhausted
        self.watch: Callable[[], None] | None = None

    def next_item(self) -> Value | None:
        if self.watch is not None:
            self.watch()
        if self.position >= len(self.items):
            self.watch = None
            self.exhaust()
            return None
        self.position += 1
        return self.items[self.position - 1]

    def exhaust(self) -> None:
        """Past the end for good: a list's iterator reads the list itself (`items` is the
        list's own) until it finds it exhausted, and then never again (CPython drops the list)."""
        self.position = max(self.position, len(self.items))
        self.items = list(self.items)
        self.over = None

    def python_type(self) -> type:
        return self.cls


class LazyIteratorValue(Value):
    """An iterator whose items are made on demand, in the consumer's order, so that side
    effects interleave as in Python: `advance()` returns the next item, or None at the end.
    `parts`, when known, is (a callable, the values it is called on) that makes the same
    iterator from its inputs as they are now (`zip(a, b)`): what residual code rebuilds."""

    __slots__ = ("advance", "cls", "done", "parts")

    def __init__(self, advance: Callable[[], Value | None], cls: type,
                 parts: tuple[Callable, list[Value]] | None = None) -> None:
        super().__init__(None)
        self.advance = advance
        self.cls = cls
        self.done = False
        self.parts = parts

    def next_item(self) -> Value | None:
        if self.done:
            return None
        item = self.advance()
        self.done = item is None
        return item

    def python_type(self) -> type:
        return self.cls


class GeneratorValue(LazyIteratorValue):
    """A generator made in the region: `frame` runs its code and is suspended at each `yield`
    (`interpreter/generators.py` resumes it); `returned` is its return value once done."""

    __slots__ = ("frame", "started", "returned", "handled", "running")

    def __init__(self, frame: Any) -> None:
        from ..interpreter.generators import resume

        super().__init__(lambda: resume(self, NONE), types.GeneratorType)
        self.frame = frame
        self.started = False
        self.returned: Value = NONE
        self.handled: Value = NONE  # the exception its suspended frame is handling (gi_exc_state)
        self.running = False


class ContextValue(Value):
    """A context manager the tracer models: `kind` is "grad" (`args`: the mode), "autocast",
    "torch_function" (subclasses' `__torch_function__` off; `args`: whether every override is),
    "warnings" (replayed), or "lock" and "profiler" (no-ops); `cls` is the class the program made
    it from (what `type()` answers)."""

    __slots__ = ("kind", "args", "saved", "cls")

    def __init__(self, kind: str, args: tuple, cls: type) -> None:
        super().__init__(None)
        self.kind = kind
        self.args = args
        self.saved: Any = None
        self.cls = cls

    def python_type(self) -> type:
        return self.cls


class FrameValue(Value):
    """A frame of the region as `sys._getframe()` gives it: `frame` is the interpreter's frame
    of an inlined function (its globals, code, line and locals, read when asked)."""

    __slots__ = ("frame",)

    def __init__(self, frame: Any) -> None:
        super().__init__(None)
        self.frame = frame

    def python_type(self) -> type:
        return types.FrameType


class StorageValue(Value):
    """`tensor.untyped_storage()`: the storage the tensor's fake shares with its views; its size
    is the fake storage's, which the graph's `resize_` calls change as they run."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: TensorValue, source: Source | None = None) -> None:
        super().__init__(source)
        self.tensor = tensor

    def python_type(self) -> type:
        return torch.UntypedStorage


class NullValue(Value):
    """The NULL that CPython 3.11 pushes below a callable (PUSH_NULL)."""

    __slots__ = ()

    def python_type(self) -> type:
        return type(None)


NULL = NullValue()
NONE = ConstantValue(None)
