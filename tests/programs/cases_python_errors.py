"""Corpus programs for the errors Python's builtin containers raise, caught by the program
itself: an index out of range, a zero slice step, a slice assignment of the wrong size, a
pop from an empty list, a builtin method called with the wrong arguments, a range with a
zero step, a repetition too large for memory. Compiled, each raises the same exception at
the same point, and the program's handler sees it (as eager Python, and torch.compile).
Iterating an object whose class is not iterable, or whose `__iter__` returns a non-iterator,
raises Python's TypeError; `eval`/`exec` of source that does not compile raises its
SyntaxError, and `eval` of a literal is its value. Also lists and tuples ordered item by item (`<` on lists of objects), and a defaultdict's
factory set after it is made, its `__missing__` called directly, and its factory checked."""
from __future__ import annotations

import collections
import sys

import torch

from .harness import program_decorator, rand

PROGRAMS = []

program = program_decorator(PROGRAMS)


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except (IndexError, ValueError, TypeError, MemoryError, OverflowError) as error:
        return type(error).__name__, str(error)


@program("list_pop_and_index_errors_are_the_programs", lambda: rand(3))
def _(x):
    items = [x, x + 1]
    outcomes = [_outcome(items.pop, 5), _outcome(lambda: items[7]), _outcome(items.pop)]
    items.pop()
    outcomes.append(_outcome(items.pop))
    return x * 2, [o[0] for o in outcomes], len(items)


@program("zero_slice_step_raises_value_error", lambda: rand(3))
def _(x):
    items, pair = [x, x * 2, x * 3], (x, x)
    return x + 1, _outcome(lambda: items[::0])[0], _outcome(lambda: pair[1::0])[0]


@program("slice_assignment_and_deletion_errors", lambda: rand(3))
def _(x):
    items = [x, x * 2, x * 3]

    def assign_extended():
        items[::2] = [x, x, x]

    def delete_far():
        del items[10]

    def assign_far():
        items[5] = x

    kinds = [_outcome(assign_extended)[0], _outcome(delete_far)[0], _outcome(assign_far)[0]]
    return sum(items), kinds, len(items)


@program("builtin_list_methods_check_their_arguments", lambda: rand(3))
def _(x):
    items = [x, x + 1]
    kinds = [_outcome(items.clear, 1)[0], _outcome(items.copy, 1)[0], _outcome(items.count)[0],
             _outcome(items.sort, 1)[0], _outcome(items.insert)[0], _outcome(items.reverse, 1)[0]]
    return items[0] + items[1], kinds, len(items)


@program("list_index_honours_start_and_stop", lambda: rand(3))
def _(x):
    items = [1, 2, 1, 2]
    return x + items.index(1, 1), items.index(2, -2), _outcome(items.index, 1, 3, 4)[0]


@program("range_with_zero_step_and_huge_repeat_raise", lambda: rand(3),
         reference={"xfail": "`range(1, 5, 0)` returns a range instead of raising ValueError",
                    "why": "PyTorch 2.13 builds the range without Python's check of the step"})
def _(x):
    return x - 1, _outcome(range, 1, 5, 0)[0], _outcome(lambda: [x] * sys.maxsize)[0]


class Version:
    def __init__(self, number):
        self.number = number

    def __eq__(self, other):
        return isinstance(other, Version) and self.number == other.number

    def __lt__(self, other):
        return self.number < other.number


@program("lists_of_objects_are_ordered_item_by_item", lambda: rand(3))
def _(x):
    older, newer = [Version(1), Version(2)], [Version(1), Version(3)]
    shorter = [Version(1)]
    return (x * 3, older < newer, older > newer, shorter <= older, (Version(2),) > (Version(1),),
            _outcome(lambda: shorter < (Version(1),))[0])


@program("dicts_and_sets_changed_during_iteration_raise_runtime_error", lambda: rand(3))
def _(x):
    import collections

    counts, seen, ordered = {0: x}, {1}, collections.OrderedDict(a=x, c=x)

    def grow_dict():
        for key in counts:
            counts[key + 1] = x + key

    def grow_set():
        for item in seen:
            seen.add(item + 1)

    def grow_ordered():
        for key in ordered:
            ordered[key + "b"] = x

    def rewrite_values():
        for key in counts:
            counts[key] = counts[key] * 2

    outcomes = [_outcome_runtime(grow_dict), _outcome_runtime(grow_set), _outcome_runtime(grow_ordered),
                _outcome_runtime(rewrite_values)]
    return sum(counts.values()), sorted(seen), list(ordered), outcomes


def _outcome_runtime(fn):
    try:
        fn()
        return "ok"
    except RuntimeError as error:
        return type(error).__name__


@program("builtin_dict_methods_check_their_arguments", lambda: rand(3))
def _(x):
    table = {"a": x}
    kinds = [_outcome(table.get)[0], _outcome(table.get, "a", 1, 2)[0], _outcome(table.setdefault)[0],
             _outcome(table.items, 1)[0], _outcome(table.popitem, 1)[0], _outcome(table.copy, 1)[0]]
    return table.get("a", x) * 2, kinds, len(table)


class _Recording(collections.defaultdict):
    def __setitem__(self, key, value):
        super().__setitem__(key, [value, "recorded"])


@program("defaultdict_factory_missing_and_its_errors", lambda: rand(3),
         reference={"xfail": "calling a subclass of defaultdict is an unsupported function call",
                    "why": "PyTorch 2.13 does not construct user subclasses of defaultdict under fullgraph"})
def _(x):
    table = collections.defaultdict()
    table.default_factory = list
    table["a"].append(x)
    filled = table.__missing__("b")
    bare = collections.defaultdict()

    def missing_key():
        try:
            return bare.__missing__("k")
        except KeyError as error:
            return "KeyError", error.args

    recording = _Recording(int)
    recording["n"]
    kinds = [_outcome(collections.defaultdict, 1), _outcome(collections.defaultdict, {}),
             _outcome(bare.__missing__)[0], _outcome(collections.defaultdict, None)[0]]
    return table["a"][0] * 2, filled, sorted(table), missing_key(), kinds, dict(recording)


class _NotIterable:
    def __init__(self, value):
        self.value = value


class _IterReturnsSelf:
    def __iter__(self):
        return self  # no __next__: iter() rejects it


class _IterDisabled:
    __iter__ = None

    def __getitem__(self, index):
        return index


@program("iterating_a_non_iterable_object_raises_type_error", lambda: rand(3))
def _(x):
    kinds = [_outcome(iter, _NotIterable(x)), _outcome(list, _IterReturnsSelf()), _outcome(iter, _IterDisabled())]

    def loop():
        total = x
        for item in _NotIterable(x):
            total = total + item
        return total

    return x + 1, kinds, _outcome(loop)


@program("eval_of_literals_and_source_that_does_not_compile", lambda: rand(3),
         reference={"xfail": "Dynamo does not know how to trace builtin operator `eval` with argument types ['bytes']",
                    "why": "PyTorch 2.13 folds `eval` of a constant str only; `eval` of bytes and `exec` break"})
def _(x):
    values = [eval("0x_ff"), eval(" (1, -2.5, 'a', {1: [2]})"), eval("..."), eval(b"1_000")]

    def syntax_error(run, source):
        try:
            run(source)
            return "compiled"
        except SyntaxError as error:
            return type(error).__name__, error.msg, error.lineno, error.offset

    errors = [syntax_error(eval, ".. ."), syntax_error(eval, "0x"), syntax_error(eval, "return 1"),
              syntax_error(exec, "def f(:"), syntax_error(exec, "  x = 1")]
    return x * values[0], values, errors


@program("builtin_constructors_reject_keywords_and_extra_arguments", lambda: rand(3),
         reference={"xfail": "InternalTorchDynamoError: TypeError: any() takes exactly one argument (0 given)",
                    "why": "PyTorch 2.13 turns the TypeError of `any()` into its own internal error"})
def _(x):
    kinds = [_outcome(lambda: bool(x=2)), _outcome(lambda: list(sequence=(0, 1))), _outcome(lambda: tuple(sequence=[1])),
             _outcome(bool, 1, 2), _outcome(list, [1], [2]), _outcome(any), _outcome(lambda: all([], x=1)),
             _outcome(tuple, "ab"), _outcome(bool, [])]
    return x * 2, kinds
