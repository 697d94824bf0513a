"""Corpus programs for consumers of iterators: each takes items exactly where CPython's takes
them, so an iterator with side effects (a generator that logs, a user `__next__`) shows the
same log, and leaves the same items behind, compiled and eager. `any`/`all` and the set
methods stop at the deciding item, unpacking takes one item more than it needs, an exception
from the iterator, a key function or the consumer stops it at the same item. A builtin
iterator has no `len()` (TypeError naming its own class) and `operator.length_hint` counts
the items it has left. A list's iterator reads the list at each step: a loop reaches the
items appended meanwhile and skips those removed, and an exhausted one stays exhausted;
`itertools.filterfalse` pulls as `filter` does."""
from __future__ import annotations

import collections
import itertools

import torch

from .harness import program_decorator, rand
from .markers import graph_break

PROGRAMS = []


program = program_decorator(PROGRAMS)


def _logged(log, count=5, fail_at=None):
    for number in range(count):
        log.append(number)
        if number == fail_at:
            raise KeyError(number)
        yield number


class _Counting:
    """A user iterator: `__next__` written in Python, logging each item it makes."""

    def __init__(self, log, count=5):
        self.log, self.count, self.next = log, count, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.next == self.count:
            raise StopIteration
        self.log.append(self.next)
        self.next += 1
        return self.next - 1


@program("any_stops_at_the_first_true_item_of_a_generator", lambda: rand(3))
def _(x):
    log = []
    numbers = _logged(log)
    found = any(n == 1 for n in numbers)
    return x + 1, found, log, list(numbers)


@program("all_of_a_user_iterator_stops_at_the_first_false_item", lambda: rand(3))
def _(x):
    log = []
    numbers = _Counting(log)
    every = all(n < 2 for n in numbers)
    return x * 2, every, log, list(numbers)


@program("set_isdisjoint_and_issubset_stop_where_cpython_stops", lambda: rand(3))
def _(x):
    log = []
    numbers = _logged(log)
    disjoint = {2, 7}.isdisjoint(numbers)
    taken = list(log)
    subset = frozenset({0}).issubset(map(lambda n: n * 2, numbers))
    return x - 1, disjoint, taken, subset, log, list(numbers)


@program("set_issuperset_stops_at_the_first_item_not_in_the_set", lambda: rand(3),
         reference={"why": "TorchDynamo's set.issuperset takes every item of the iterator",
                    "xfail": "issuperset drains the generator"})
def _(x):
    log = []
    numbers = _logged(log)
    superset = {0, 1}.issuperset(numbers)
    return x + 3, superset, log, list(numbers)


@program("unpacking_an_iterator_takes_one_item_more_than_it_needs", lambda: rand(3),
         reference={"why": "TorchDynamo unpacks a generator by taking all its items",
                    "xfail": "the generator is drained"})
def _(x):
    log = []
    numbers = _logged(log)
    try:
        first, second = numbers
        message = ""
    except ValueError as error:
        message = str(error)
    return x + 1, message, log, list(numbers)


@program("an_unhashable_item_stops_set_at_that_item", lambda: rand(3))
def _(x):
    log = []
    numbers = _logged(log)
    try:
        made = set([] if n == 2 else n for n in numbers)
    except TypeError as error:
        made = str(error)
    return x + 1, made, log, list(numbers)


@program("dict_update_keeps_the_pairs_before_a_bad_one", lambda: rand(3),
         reference={"why": "TorchDynamo's dict.update stores no pair when one is bad",
                    "xfail": "partial update lost"})
def _(x):
    log = []
    numbers = _logged(log)
    table = {"kept": x}
    try:
        table.update((n, x * n) if n < 2 else (n,) for n in numbers)
    except ValueError as error:
        table["error"] = str(error)
    return table, log, list(numbers)


@program("zip_strict_pulls_each_input_in_order_and_loses_the_extra_item", lambda: rand(3),
         reference={"why": "TorchDynamo's zip(strict=True) checks lengths before pulling as CPython does",
                    "xfail": "zip strict pulls differently"})
def _(x):
    log = []
    numbers = _logged(log)
    try:
        pairs = list(zip([10], numbers, strict=True))
    except ValueError as error:
        pairs = str(error)
    return x + 1, pairs, log, list(numbers)


@program("max_stops_where_the_key_function_raises", lambda: rand(3),
         reference={"why": "TorchDynamo's max() takes no `key` in a full graph",
                    "xfail": "Encountered TypeError when trying to handle op max"})
def _(x):
    log = []
    numbers = _Counting(log)
    try:
        largest = max(numbers, key=lambda n: 1 // (2 - n))
    except ZeroDivisionError:
        largest = -1
    return x + largest, log, list(numbers)


@program("sorted_keys_that_do_not_compare_raise_the_programs_type_error", lambda: rand(3))
def _(x):
    log = []
    try:
        ordered = sorted(n if n != 2 else "two" for n in _logged(log))
    except TypeError as error:
        ordered = str(error)
    return x + 1, ordered, log


@program("enumerate_over_a_held_iterator_takes_only_what_is_asked", lambda: rand(3))
def _(x):
    numbers = iter([1, 2, 3, 4])
    counted = enumerate(numbers)
    first = next(counted)
    return x + first[1], first, list(numbers)


@program("for_loop_over_a_user_iterator_left_early_leaves_the_rest", lambda: rand(3))
def _(x):
    log = []
    numbers = _Counting(log)
    for n in numbers:
        x = x + n
        if n == 1:
            break
    return x, log, list(numbers)


@program("in_on_a_user_iterator_stops_at_the_equal_item", lambda: rand(3))
def _(x):
    log = []
    numbers = _Counting(log)
    found = 2 in numbers
    return x + 1, found, log, list(numbers)


@program("deque_extend_keeps_the_items_before_a_failing_generator_item", lambda: rand(3))
def _(x):
    log = []
    queue = collections.deque([-1])
    try:
        queue.extend(_logged(log, fail_at=2))
    except KeyError:
        pass
    return x * 2, list(queue), log


@program("dropping_a_generator_in_yield_from_closes_the_iterator_it_delegates_to", lambda: rand(3),
         reference={"why": "TorchDynamo does not close the generator a yield from delegates to",
                    "xfail": "delegate not closed"})
def _(x):
    log = []
    numbers = _logged(log)

    def forward():
        yield from numbers

    forwarding = forward()
    first = next(forwarding)
    del forwarding  # collected: closing it closes `numbers`
    return x + first, log, list(numbers)


@program("reversed_of_a_generator_is_a_type_error", lambda: rand(3),
         reference={"why": "TorchDynamo reverses a generator's items instead of raising TypeError",
                    "xfail": "no TypeError"})
def _(x):
    log = []
    numbers = _logged(log)
    try:
        backwards = list(reversed(numbers))
    except TypeError as error:
        backwards = str(error)
    return torch.flip(x, [0]), backwards, log, list(numbers)


class Indexed:
    """Iterable only through `__getitem__` (Python's old sequence protocol)."""

    def __init__(self, items):
        self.items = items
        self.reads = 0

    def __getitem__(self, index):
        self.reads += 1
        return self.items[index]


class CountsToThree:
    def __getitem__(self, index):
        if index == 3:
            raise StopIteration
        return index * 10


@program("getitem_only_objects_iterate_until_index_error_or_stop_iteration", lambda: rand(3))
def _(x):
    indexed = Indexed([x, x * 2])
    first, second = list(indexed)
    total = 0
    for value in CountsToThree():
        total += value
    return first + second, tuple(Indexed("ab")), total, 2 in Indexed([1, 2, 3]), indexed.reads


@program("regular_expressions_on_constant_strings", lambda: rand(3))
def _(x):
    import re

    match = re.compile(r"(\d+)\.(\d+)").fullmatch("2.13")
    return x * int(match.group(2)), re.split(",", "a,b"), re.escape("a.b"), re.search("z", "abc") is None


@program("iter_of_a_callable_and_a_sentinel_and_explicit_dunder_next", lambda: rand(3),
         reference={"xfail": "a callable iterator ended by StopIteration calls the function again",
                    "why": "PyTorch 2.13 does not drop the callable once the iterator is exhausted"})
def _(x):
    pending = [1, 2, None, 3]
    until_none = list(iter(lambda: pending.pop(0), None))
    calls = [0]

    def counter():
        calls[0] += 1
        if calls[0] == 3:
            raise StopIteration
        return calls[0]

    counted = iter(counter, 99)
    first = list(counted)
    step = iter((x, x + 1)).__next__
    stepped = [step(), step()]
    try:
        step()
    except StopIteration:
        stepped.append("stop")
    return x + sum(until_none), first, list(counted), calls[0], pending, stepped


def _len_or_error(value):
    try:
        return len(value)
    except TypeError as error:
        return str(error)


@program("builtin_iterators_have_a_length_hint_and_no_len", lambda: rand(3),
         reference={"xfail": "`operator.length_hint` of a list iterator is an unsupported builtin",
                    "why": "PyTorch 2.13 does not trace operator.length_hint on iterators"})
def _(x):
    import operator

    table, items = {"a": 1, "b": 2}, [x, x * 2, x * 3]
    iterators = [iter(items), reversed(items), iter(range(4)), iter(table), iter(table.items()),
                 iter({1, 2}), iter("ab"), iter((1,)), zip(items, items), enumerate(items), map(abs, [1])]
    lengths = [_len_or_error(it) for it in iterators]
    next(iterators[0])
    hints = [operator.length_hint(it, -1) for it in iterators]
    return x + 1, lengths, hints, operator.length_hint(items), operator.length_hint(x), \
        type(iterators[1]).__name__, isinstance(iterators[8], zip)


@program("list_iterators_read_the_list_at_each_step", lambda: rand(3))
def _(x):
    work = [1]
    for item in work:  # a work list: what the loop appends, it reaches
        if item < 5:
            work.append(item + 1)
    seen, shrinking = [], [1, 2, 3, 4]
    for item in shrinking:
        seen.append(item)
        if item == 2:
            shrinking.remove(item)
    late = []
    early = iter(late)
    late.append(x)
    pairs = zip(work, late)  # zip asks the lists when it is consumed
    late.append(x * 2)
    done = iter(work)
    rest = list(done)
    work.append(6)  # after the end: an exhausted iterator stays exhausted
    return next(early) * 2, work, seen, [p[0] for p in pairs], len(rest), list(done), \
        list(itertools.filterfalse(lambda n: n % 2, work)), list(itertools.filterfalse(None, [0, 1, "", "a"]))


@program("a_list_iterator_crossing_a_graph_break_still_reads_the_list", lambda: rand(3), fullgraph=False,
         frames=1, reference={"xfail": "AssertionError", "why": "PyTorch 2.13 rebuilds the iterator after the break "
                                                               "over a copy of the items it had not reached"})
def _(x):
    queue = [10, 20, 30]
    pending = iter(queue)
    first = next(pending)
    queue.append(40)  # before the break: the region's own iterator reads it
    graph_break()  # `pending` is rebuilt over the list itself, one item in
    queue.append(50)  # after the break: the rebuilt iterator reads it too
    queue.remove(20)
    return x + first, list(pending), queue
