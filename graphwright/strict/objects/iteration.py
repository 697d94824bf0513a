"""Iterators and the helpers that make them: iter, next, enumerate, zip, map, filter, filterfalse,
and `itertools`, as Python runs them.

An iterator is an `IteratorValue` (its items already known), a `LazyIteratorValue`
(a generator made in the region, or a helper over one: items are made when the
consumer asks), or an instance of a user class with `__next__`. Each helper is
Python's own helper (`map`, `zip`, `itertools.islice`...) run over the values its
inputs produce (`operations.pull`, which like a C iterator is asked again after an
exception), so it takes items in exactly the order and number Python's would: an
infinite `count()` or `cycle()` is fine, `zip` stops at the shortest, a function
given to `map` runs when its result is asked for, interleaving its side effects
with the consumer's, and a helper whose input raised goes on where Python's goes on. Restructuring helpers over containers whose items are all
known (and no iterator the program holds) give an `IteratorValue` right away (it
can leave the region).
"""
from __future__ import annotations

import collections
import itertools
import operator
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..interpreter import graph_breaks as gb
from ..interpreter.graph_breaks import UserException
from . import classes, exceptions, operations
from .operations import Steps, iterator_of, next_item, pull
from .values import (
    NONE,
    ConstantValue,
    DictValue,
    IteratorValue,
    LazyIteratorValue,
    ObjectValue,
    SequenceValue,
    Value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

Handler = Callable[["Tracer", list, dict], Value]
HANDLERS: dict[Any, Handler] = {}


def _handles(*targets: Any) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for target in targets:
            HANDLERS[target] = handler
        return handler
    return register


def _call(tracer: "Tracer", function: Value, args: list[Value]) -> Value:
    from ..interpreter import calls

    return calls.call_value(tracer, function, args, {})


def _result(items: Iterator[Value], cls: type, lazy: bool, inputs: list[Value] | None = None) -> Value:
    """`items` as the helper's iterator: all made now, or each when the consumer asks.
    `inputs`: the values `cls(*inputs)` is made of (the helper's own state is no more than
    theirs: zip, map, filter, chain), so that residual code can make it again."""
    if not lazy:
        return IteratorValue(list(items), cls=cls)
    return LazyIteratorValue(lambda: next(items, None), cls, None if inputs is None else (cls, inputs))


def _iterators(tracer: "Tracer", values: list[Value]) -> tuple[list[Value], bool]:
    """The inputs as iterators, and whether the helper must make its items lazily: unless every
    input is a container whose items are known (its iterator made here, seen by no one else),
    taking them all now would show, in an iterator the program holds or in side effects."""
    iterators = [iterator_of(tracer, value) for value in values]
    return iterators, not all(isinstance(iterator, IteratorValue) and iterator is not value
                              and not classes.is_instance_value(value) and not _changeable(value)
                              for iterator, value in zip(iterators, values))


def _changeable(value: Value) -> bool:
    """A list, dict, set or deque: the consumer's work may change it between two items, which
    its iterator then shows (or raises for), so its items are not all known up front."""
    return isinstance(value, SequenceValue) and value.kind is list or \
        isinstance(value, DictValue) and value.kind is not frozenset


def _python(tracer: "Tracer", value: Value | None, default: Any = None) -> Any:
    return default if value is None else operations.python_value(tracer, value)


_CALLABLE_ITERATOR = type(iter(lambda: None, None))


@_handles(iter)
def _iter(tracer, args, kwargs):
    if kwargs:
        raise tracer.user_error(TypeError("iter() takes no keyword arguments"))
    if len(args) not in (1, 2):
        raise tracer.user_error(TypeError(f"iter expected at most 2 arguments, got {len(args)}"))
    if len(args) == 2:
        return _calling_iterator(tracer, *args)
    return iterator_of(tracer, args[0])


def _calling_iterator(tracer: "Tracer", function: Value, sentinel: Value) -> Value:
    """`iter(function, sentinel)`: calls `function()` at each step until it returns a value equal
    to `sentinel` (or raises StopIteration); after that it is exhausted for good."""
    if not operations.is_callable(tracer, function):
        raise tracer.user_error(TypeError("iter(v, w): v must be callable"))

    def items() -> Iterator[Value]:
        while True:
            try:
                item = _call(tracer, function, [])
            except UserException as raised:
                if exceptions.caught(raised, StopIteration):
                    return
                raise
            # CPython compares `sentinel == item`, with the sentinel on the left
            if operations.is_same(tracer, sentinel, item) \
                    or operations.truth(tracer, operations.binary(tracer, operator.eq, sentinel, item)):
                return
            yield item

    return _result(items(), _CALLABLE_ITERATOR, lazy=True)


@_handles(next)
def _next(tracer, args, kwargs):
    item = next_item(tracer, args[0])
    if item is not None:
        return item
    if len(args) > 1:
        return args[1]
    raise tracer.user_error(StopIteration())


@_handles(enumerate)
def _enumerate(tracer, args, kwargs):
    (iterator,), lazy = _iterators(tracer, args[:1])
    start = _python(tracer, args[1] if len(args) > 1 else kwargs.get("start"), 0)
    inputs = [iterator, ConstantValue(start)]

    def row(item: Value, index: int) -> Value:
        inputs[1] = ConstantValue(index + 1)  # from here on it is `enumerate(iterator, index + 1)`
        return SequenceValue([ConstantValue(index), item], tuple)
    # the count after the item: an item that raises takes no number, as in CPython's enumerate
    return _result(map(row, pull(tracer, iterator), itertools.count(start)), enumerate, lazy, inputs)


@_handles(zip)
def _zip(tracer, args, kwargs):
    iterators, lazy = _iterators(tracer, list(args))
    pulls = [pull(tracer, it) for it in iterators]
    strict = _python(tracer, kwargs.get("strict"), False)
    rows = Steps(lambda: _strict_row(tracer, pulls)) if strict and pulls else zip(*pulls)
    return _result(_tuples(rows), zip, lazy, None if strict else iterators)


def _strict_row(tracer: "Tracer", pulls: list[Iterator[Value]]) -> list[Value] | None:
    """The next row of zip(strict=True), pulled as CPython's does: from the first input on; an
    input that ends after the first is shorter; when the first ends, each other input is asked
    once more, and the first that gives an item is longer (that item is lost). None at the end."""
    row = []
    for position, items in enumerate(pulls):
        item = next(items, None)
        if item is None:
            break
        row.append(item)
    else:
        return row
    if position:
        raise tracer.user_error(ValueError(f"zip() argument {position + 1} is shorter than argument"
                                           f"{'s 1-' if position > 1 else ' '}{position}"))
    for position, items in enumerate(pulls[1:], 2):
        if next(items, None) is not None:
            raise tracer.user_error(ValueError(f"zip() argument {position} is longer than argument"
                                               f"{'s 1-' if position > 2 else ' '}{position - 1}"))
    return None


@_handles(map)
def _map(tracer, args, kwargs):
    iterators, _ = _iterators(tracer, list(args[1:]))
    rows = zip(*(pull(tracer, it) for it in iterators))
    return _result(map(lambda row: _call(tracer, args[0], list(row)), rows), map, lazy=True,
                   inputs=[args[0], *iterators])


def _truth_of(tracer: "Tracer", predicate: Value) -> Callable[[Value], bool]:
    if operations.is_none(predicate):
        return lambda item: operations.truth(tracer, item)
    return lambda item: operations.truth(tracer, _call(tracer, predicate, [item]))


def _filter_handler(target: Callable) -> Handler:
    """`filter(predicate, iterable)` or `itertools.filterfalse`: the same pull, the test kept or
    inverted by the real helper."""
    def handler(tracer, args, kwargs):
        if kwargs:
            raise tracer.user_error(TypeError(f"{target.__name__}() takes no keyword arguments"))
        if len(args) != 2:
            raise tracer.user_error(TypeError(f"{target.__name__} expected 2 arguments, got {len(args)}"))
        keep = _truth_of(tracer, args[0])
        iterator = iterator_of(tracer, args[1])
        return _result(target(keep, pull(tracer, iterator)), target, lazy=True, inputs=[args[0], iterator])
    return handler


HANDLERS[filter] = _filter_handler(filter)
HANDLERS[itertools.filterfalse] = _filter_handler(itertools.filterfalse)


@_handles(reversed)
def _reversed(tracer, args, kwargs):
    (value,) = args
    method = classes.special_method(tracer, value, "__reversed__")
    if method is not None:
        return _call(tracer, method, [])
    cls = value.python_type()
    blocked = classes.find(tracer, cls, "__reversed__")  # `__reversed__ = None` (Mapping's) refuses
    if isinstance(value, (IteratorValue, LazyIteratorValue)) or isinstance(value, ObjectValue) \
            and not hasattr(cls, "__reversed__") and not (hasattr(cls, "__len__") and hasattr(cls, "__getitem__")) \
            or blocked is not None and blocked[1] is None:
        raise tracer.user_error(TypeError(f"'{cls.__name__}' object is not reversible"))
    length = classes.special_method(tracer, value, "__len__")
    if isinstance(value, ObjectValue) and length is not None \
            and classes.special_method(tracer, value, "__getitem__") is not None:
        count = _python(tracer, _call(tracer, length, []))
        return _result(_items_backwards(tracer, value, count), reversed, lazy=True)
    return IteratorValue(list(reversed(operations.iterate(tracer, value))),
                         cls=operations.iterator_class(value, reversed))


def _items_backwards(tracer: "Tracer", sequence: Value, count: int) -> Iterator[Value]:
    """`reversed()` of a user sequence: `sequence[i]` for i from `count - 1` down, each when
    asked for; an IndexError or StopIteration from `__getitem__` ends it."""
    for index in range(count - 1, -1, -1):
        try:
            yield operations.getitem(tracer, sequence, ConstantValue(index))
        except UserException as raised:
            if exceptions.caught(raised, (IndexError, StopIteration)):
                return
            raise


# -- itertools ------------------------------------------------------------------------------

def _tuples(rows: Iterator[tuple]) -> Iterator[Value]:
    return map(lambda row: SequenceValue(list(row), tuple), rows)


@_handles(itertools.product)
def _product(tracer, args, kwargs):
    pools = [operations.iterate(tracer, arg) for arg in args]  # product takes every input at once
    return _result(_tuples(itertools.product(*pools, repeat=_python(tracer, kwargs.get("repeat"), 1))),
                   itertools.product, lazy=False)


def _choices(target: Callable) -> Handler:
    def handler(tracer, args, kwargs):
        pool = operations.iterate(tracer, args[0])
        sizes = [_python(tracer, arg) for arg in [*args[1:], *kwargs.values()]]  # the one size, `r`
        return _result(_tuples(target(pool, *sizes)), target, lazy=False)
    return handler


for _target in (itertools.combinations, itertools.permutations, itertools.combinations_with_replacement):
    HANDLERS[_target] = _choices(_target)


@_handles(itertools.chain)
def _chain(tracer, args, kwargs):
    iterators, lazy = _iterators(tracer, list(args))
    return _result(itertools.chain(*(pull(tracer, it) for it in iterators)), itertools.chain, lazy, iterators)


@_handles(itertools.chain.from_iterable)
def _chain_from_iterable(tracer, args, kwargs):
    groups = iterator_of(tracer, args[0])
    items = itertools.chain.from_iterable(map(lambda group: operations.each(tracer, group), pull(tracer, groups)))
    return _result(items, itertools.chain, lazy=True)


@_handles(itertools.accumulate)
def _accumulate(tracer, args, kwargs):
    function = args[1] if len(args) > 1 else kwargs.get("func")
    initial = kwargs.get("initial")
    iterator = iterator_of(tracer, args[0])
    if function is None or operations.is_none(function):
        def combine(total: Value, item: Value) -> Value:
            return operations.binary(tracer, operator.add, total, item)
    else:
        def combine(total: Value, item: Value) -> Value:
            return _call(tracer, function, [total, item])
    start = None if initial is None or operations.is_none(initial) else initial
    # always lazy: adding runs when the total is asked for (a user `__add__`, a TypeError)
    return _result(itertools.accumulate(pull(tracer, iterator), combine, initial=start),
                   itertools.accumulate, lazy=True)


@_handles(itertools.islice)
def _islice(tracer, args, kwargs):
    (iterator,), lazy = _iterators(tracer, args[:1])
    bounds = [_python(tracer, arg) for arg in args[1:]]
    return _result(itertools.islice(pull(tracer, iterator), *bounds), itertools.islice, lazy)


@_handles(itertools.zip_longest)
def _zip_longest(tracer, args, kwargs):
    iterators, lazy = _iterators(tracer, list(args))
    rows = itertools.zip_longest(*(pull(tracer, it) for it in iterators), fillvalue=kwargs.get("fillvalue", NONE))
    return _result(_tuples(rows), itertools.zip_longest, lazy)


@_handles(itertools.count)
def _count(tracer, args, kwargs):
    start = _python(tracer, args[0] if args else kwargs.get("start"), 0)
    step = _python(tracer, args[1] if len(args) > 1 else kwargs.get("step"), 1)
    return _result(map(ConstantValue, itertools.count(start, step)), itertools.count, lazy=True)


@_handles(itertools.repeat)
def _repeat(tracer, args, kwargs):
    times = args[1] if len(args) > 1 else kwargs.get("times")
    if times is None:
        return _result(itertools.repeat(args[0]), itertools.repeat, lazy=True)
    return _result(itertools.repeat(args[0], _python(tracer, times)), itertools.repeat, lazy=False)


@_handles(itertools.cycle)
def _cycle(tracer, args, kwargs):
    return _result(itertools.cycle(pull(tracer, iterator_of(tracer, args[0]))), itertools.cycle, lazy=True)


def _while_handler(target: Callable) -> Handler:
    def handler(tracer, args, kwargs):
        keep = _truth_of(tracer, args[0])
        return _result(target(keep, pull(tracer, iterator_of(tracer, args[1]))), target, lazy=True)
    return handler


HANDLERS[itertools.takewhile] = _while_handler(itertools.takewhile)
HANDLERS[itertools.dropwhile] = _while_handler(itertools.dropwhile)


@_handles(itertools.starmap)
def _starmap(tracer, args, kwargs):
    rows = pull(tracer, iterator_of(tracer, args[1]))
    return _result(map(lambda row: _call(tracer, args[0], operations.iterate(tracer, row)), rows),
                   itertools.starmap, lazy=True)


@_handles(itertools.compress)
def _compress(tracer, args, kwargs):
    (data, selectors), lazy = _iterators(tracer, list(args[:2]))
    truths = map(lambda selector: operations.truth(tracer, selector), pull(tracer, selectors))
    # always lazy (a selector's truth may run its `__bool__`), and made again from its inputs
    return _result(itertools.compress(pull(tracer, data), truths), itertools.compress, lazy=True,
                   inputs=[data, selectors])


@_handles(itertools.pairwise)
def _pairwise(tracer, args, kwargs):
    (iterator,), lazy = _iterators(tracer, args[:1])
    return _result(_tuples(itertools.pairwise(pull(tracer, iterator))), itertools.pairwise, lazy)


class _TeeReader:
    """One of `tee`'s iterators: its position in the buffer its copies share, which pulls from
    the input only for the copy furthest ahead (an exhausted input is asked again, as CPython's)."""

    def __init__(self, tracer: "Tracer", source: Value, buffer: list[Value], index: int = 0) -> None:
        self.tracer, self.source, self.buffer, self.index = tracer, source, buffer, index

    def advance(self) -> Value | None:
        if self.index == len(self.buffer):
            item = next_item(self.tracer, self.source)
            if item is None:
                return None
            self.buffer.append(item)
        self.index += 1
        return self.buffer[self.index - 1]

    def copy(self) -> Value:
        reader = _TeeReader(self.tracer, self.source, self.buffer, self.index)
        return LazyIteratorValue(reader.advance, _TEE_TYPE)


_TEE_TYPE = type(itertools.tee(())[0])


@_handles(itertools.tee)
def _tee(tracer, args, kwargs):
    """`tee(iterable, n)`: the first iterator is a tee of the input (the input itself when it is
    one), the others copies of it."""
    count = _python(tracer, args[1] if len(args) > 1 else kwargs.get("n"), 2)
    if not isinstance(count, int) or count < 0:
        raise tracer.user_error(ValueError("n must be >= 0"))
    if count == 0:
        return SequenceValue([], tuple)
    source = iterator_of(tracer, args[0])
    reader = getattr(getattr(source, "advance", None), "__self__", None)
    if not isinstance(reader, _TeeReader):
        reader = _TeeReader(tracer, source, [])
        source = LazyIteratorValue(reader.advance, _TEE_TYPE)
    return SequenceValue([source, *(reader.copy() for _ in range(count - 1))], tuple)


@_handles(itertools.groupby)
def _groupby(tracer, args, kwargs):
    key = args[1] if len(args) > 1 else kwargs.get("key")
    iterator = iterator_of(tracer, args[0])

    def python_key(item: Value) -> Any:  # groupby compares keys with ==: they must be known
        found = item if key is None or operations.is_none(key) else _call(tracer, key, [item])
        return operations.python_value(tracer, found, "itertools.groupby keys")

    def group_of(pair: tuple[Any, Iterator[Value]]) -> Value:
        group_key, group = pair
        members = LazyIteratorValue(lambda: next(group, None), type(group))
        return SequenceValue([operations.constant_result(group_key), members], tuple)
    return _result(map(group_of, itertools.groupby(pull(tracer, iterator), python_key)), itertools.groupby, lazy=True)


@_handles(collections._count_elements)
def _count_elements(tracer, args, kwargs):
    """collections.Counter's tally (a C helper): `mapping[item] = mapping.get(item, 0) + 1`."""
    from . import attributes

    mapping, iterable = args
    get = attributes.load_attr(tracer, mapping, "get")
    for item in operations.each(tracer, iterable):
        count = _call(tracer, get, [item, ConstantValue(0)])
        operations.setitem(tracer, mapping, item, operations.binary(tracer, operator.add, count, ConstantValue(1)))
    return NONE
