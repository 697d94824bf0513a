"""Iterators with side effects, consumed by the builtins and C methods that take an iterable.

A source hands out items and logs each one to the module-level list `TRACE` (observed
after every call), so that how far a consumer went is visible: a generator function at
module level or inside `f`, a user iterator class (`__iter__` returning itself, and
`__next__`), a user iterable class whose `__iter__` is a generator, a generator
expression over a logging generator, `map`/`filter` over one, or `iter()` of a list.
A source may raise the program's own `Halt` at a given item. Items are Python ints
(literals, the int argument, sizes), tensors of one shape, or tensors of different
ranks whose predicates (`t.dim()`, sizes) the tracer can decide.

One statement draws a source, sometimes binds it to a name, consumes it (one consumer of
`iterator_consumers`) and, for a named iterator, logs what is left of it (`list(it)`):
CPython stops at the deciding item, and so must the compiled program. Whatever can
raise (the source, a predicate, `zip(strict=True)`, an unpacking) is caught, in `f` or
by a module-level function the call is passed to as a lambda: eager never raises.
"""
from __future__ import annotations

import dataclasses

from .builder import Builder
from .expressions import expression, promoted, some_shape
from .iterator_consumers import CONSUMERS, Consumer
from .shapes import Shape, derivations

DEFINITIONS = '''TRACE = []


class Halt(Exception):
    """Raised by a source at a chosen item."""


def produce(tag, items, halt_at=-1):
    """A generator: logs each item it hands out."""
    for index, item in enumerate(items):
        if index == halt_at:
            raise Halt(tag, index)
        TRACE.append((tag, index))
        yield item


class Feed:
    """An iterator of its own: `__iter__` returns itself, `__next__` logs each item."""

    def __init__(self, tag, items, halt_at=-1):
        self.tag = tag
        self.items = list(items)
        self.halt_at = halt_at
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.index == self.halt_at:
            raise Halt(self.tag, self.index)
        if self.index >= len(self.items):
            raise StopIteration
        TRACE.append((self.tag, self.index))
        self.index += 1
        return self.items[self.index - 1]


class Shelf:
    """An iterable (not an iterator): each `iter()` is a new logging generator."""

    def __init__(self, tag, items, halt_at=-1):
        self.tag = tag
        self.items = items
        self.halt_at = halt_at

    def __iter__(self):
        for index, item in enumerate(self.items):
            if index == self.halt_at:
                raise Halt(self.tag, index)
            TRACE.append((self.tag, index))
            yield item


def attempt(thunk, fallback):
    """`thunk()`, or `fallback` when it raises what the sources and predicates raise."""
    try:
        return thunk()
    except (Halt, ZeroDivisionError, ValueError) as error:
        TRACE.append(("caught", type(error).__name__))
        return fallback'''


@dataclasses.dataclass
class Item:
    """One item of a tensor source: its code, shape and dtype."""

    code: str
    shape: Shape
    dtype: str
    grad: bool


@dataclasses.dataclass
class Source:
    """An iterable drawn for a consumer.

    `kind` is "int", "tensor" (items of one shape) or "mixed" (tensors of different
    ranks); `items` the tensor items as they come out (None for ints); `length` the
    number of items when known; `iterator` whether `next()` takes it; `halts` whether it
    may raise `Halt`."""

    code: str
    kind: str
    items: list[Item] | None
    length: int | None
    iterator: bool
    halts: bool = False
    named: bool = False

    @property
    def shape(self) -> Shape:
        return self.items[0].shape

    @property
    def dtype(self) -> str:
        return promoted(*(item.dtype for item in self.items))

    @property
    def grad(self) -> bool:
        return any(item.grad for item in self.items)


def _int_items(b: Builder) -> list[str]:
    readings = ["0", "1", "2", "3", "4"]
    if "n" in b.ints:
        readings.append("n")
    for var, dim, _ in b.symbolic_sizes()[:2]:
        readings.append(f"{var.name}.shape[{dim}]")
    return [b.choice(readings) for _ in range(b.integer(2, 4))]


def _tensor_items(b: Builder) -> list[Item]:
    shape = some_shape(b)
    items = []
    for _ in range(b.integer(2, 3)):
        expr = expression(b, shape, b.integer(0, 1))
        items.append(Item(expr.code, shape, expr.dtype, expr.grad))
    return items


def _mixed_items(b: Builder) -> list[Item] | None:
    """Readings of one variable with different ranks (the variable itself first)."""
    ranked = [t for t in b.tensors if t.shape]
    if not ranked:
        return None
    var = b.choice(ranked)
    b.read(var)
    by_rank: dict[int, list] = {}
    for derivation in derivations(var.name, var.shape):
        by_rank.setdefault(len(derivation.shape), []).append(derivation)
    ranks = sorted(by_rank)
    chosen = [b.choice(by_rank[rank]) for rank in ranks]
    order = [chosen.pop(b.integer(0, len(chosen) - 1)) for _ in range(min(len(chosen), b.integer(2, 4)))]
    return [Item(d.code, d.shape, var.dtype, var.grad) for d in order]


INT_MAPS = ("v + 1", "v * 2", "v - 1")
TENSOR_MAPS = ("v * 2", "v.sin()", "-v")
INT_FILTERS = ("v % 2 == 0", "v > 1", "v != 2")


def draw_source(b: Builder, tag: str) -> Source:
    """A logging iterable of ints, same-shape tensors or tensors of several ranks."""
    kind = b.choice(["int", "tensor", "int", "mixed"])
    items = None
    if kind == "tensor":
        items = _tensor_items(b)
    elif kind == "mixed":
        items = _mixed_items(b)
        if items is None:
            kind = "int"
    codes = _int_items(b) if kind == "int" else [item.code for item in items]
    listed = "[" + ", ".join(codes) + "]"
    length = len(codes)
    wrapper = b.choice(["generator", "class", "iterable", "genexp", "map", "filter", "list_iterator",
                        "local_generator"])
    halt = ""
    if wrapper not in ("list_iterator", "local_generator") and b.chance(35):
        halt = f", {b.integer(0, length - 1)}"
    logged = b.choice(["produce", "Feed"])
    inner = f'{logged}("{tag}", {listed}{halt})'
    b.feature(f"iter_source_{wrapper}")
    b.feature(f"iter_items_{kind}")
    if halt:
        b.feature("iter_source_halts")
    iterator = wrapper != "iterable"
    if wrapper == "generator":
        code = f'produce("{tag}", {listed}{halt})'
    elif wrapper == "class":
        code = f'Feed("{tag}", {listed}{halt})'
    elif wrapper == "iterable":
        code = f'Shelf("{tag}", {listed}{halt})'
    elif wrapper == "genexp":
        code = f"({b.choice(INT_MAPS if kind == 'int' else TENSOR_MAPS)} for v in {inner})"
    elif wrapper == "map":
        code = f"map(lambda v: {b.choice(INT_MAPS if kind == 'int' else TENSOR_MAPS)}, {inner})"
    elif wrapper == "filter":
        if kind == "int":
            code = f"filter(lambda v: {b.choice(INT_FILTERS)}, {inner})"
            length = None
        elif kind == "tensor":
            code = f"filter(lambda v: v.dim() == {len(items[0].shape)}, {inner})"
        else:
            code = f"filter(lambda v: v.dim() > 0, {inner})"
            items = [item for item in items if item.shape]
            length = len(items)
    elif wrapper == "list_iterator":
        code = f"iter({listed})"
    else:
        code = f"{_local_generator(b, tag, halt)}({listed})"
    return Source(code, kind, items, length, iterator, halts=bool(halt))


def _local_generator(b: Builder, tag: str, halt: str) -> str:
    """A generator function defined in `f` (it reads `TRACE` through the module's globals)."""
    name = b.fresh("gen")
    b.emit(f"def {name}(values):")
    b.emit("    for index, value in enumerate(values):")
    b.emit(f'        TRACE.append(("{tag}", index))')
    b.emit("        yield value")
    return name


def consume(b: Builder) -> None:
    """Draw a source, consume it (a named iterator of ints maybe twice: the second consumer
    takes what the first left), log the results and what is left."""
    b.define("iterators", DEFINITIONS)
    b.observe("TRACE")
    source = draw_source(b, b.fresh("s"))
    if source.iterator and b.chance(45):
        name = b.fresh("it")
        b.emit(f"{name} = {source.code}")
        source = dataclasses.replace(source, code=name, named=True)
        if not source.halts and (source.length or 0) > 1 and b.chance(25):
            b.emit(f"TRACE.append(next({name}, None))")
            source.length -= 1
            source.items = source.items and source.items[1:]
            b.feature("iter_next_before")
    _consume_once(b, source)
    if source.named and source.kind == "int" and b.chance(50):
        _consume_once(b, dataclasses.replace(source, length=None))
        b.feature("iter_consumed_twice")
    if source.named:
        rest = f"list({source.code})"
        if source.halts:
            b.emit(f"TRACE.append(attempt(lambda: {rest}, None))")
        else:
            b.emit(f"TRACE.append({rest})")
        b.feature("iter_rest_observed")


def _consume_once(b: Builder, source: Source) -> None:
    consumer: Consumer = b.choice([c for c in CONSUMERS if c.fits(source, b)])
    result = b.fresh("r")
    written = consumer.write(b, source, result)
    raises = set(written.raises) | ({"Halt"} if source.halts else set())
    b.feature(f"iter_{consumer.name}")
    b.feature(f"iter_call_{written.name}")
    if raises:
        _guarded(b, written, result, sorted(raises))
    else:
        for line in written.lines:
            b.emit(line)
        b.emit(f"{result} = {written.value}")
    _keep_result(b, written, result)


def _guarded(b: Builder, written, result: str, raises: list[str]) -> None:
    """The consumer's lines under `try`, or its value passed to `attempt` as a lambda."""
    fallback = written.default(b)
    if not written.lines and b.chance(30):
        b.emit(f"{result} = attempt(lambda: {written.value}, {fallback})")
        b.feature("iter_caught_in_callee")
        return
    b.emit("try:")
    for line in written.lines:
        b.emit(f"    {line}")
    b.emit(f"    {result} = {written.value}")
    kinds = raises[0] if len(raises) == 1 else f"({', '.join(raises)})"
    b.emit(f"except {kinds} as error:")
    b.emit(f'    TRACE.append(("caught", type(error).__name__, error.args))')
    b.emit(f"    {result} = {fallback}")
    b.feature("iter_caught_in_f")


def _keep_result(b: Builder, written, result: str) -> None:
    """A tensor result joins the scope; any other is logged (and sometimes returned)."""
    if written.shape is not None:
        b.add_tensor(result, written.shape, written.dtype, True)
        return
    b.emit(f'TRACE.append(("{written.name}", {result}))')
    if b.chance(20):
        b.output(result)
