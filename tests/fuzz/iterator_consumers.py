"""What consumes the iterators of `iterators`: every builtin and C method taking an iterable.

A `Consumer` writes code over a source (`{s}`, the iterable's expression or name) and
says what its value is: a tensor of a known shape (it joins the scope) or a Python value
(logged). Each consumer states which sources it takes (ints, tensors of one shape,
tensors of several ranks), what it needs of them (an iterator for `next`, a known
length for an unpacking) and what it may raise besides the source's own `Halt`
(`zip(strict=True)` and unpackings raise `ValueError`, a predicate dividing by
`v - k` raises `ZeroDivisionError`): `iterators` catches those.

Predicates are decidable while tracing: int comparisons, tensor ranks and sizes; a
predicate on tensor values is a planted graph break, drawn only where breaks are.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .builder import Builder
from .expressions import cast, expression, operand
from .shapes import Shape, dim_product


@dataclasses.dataclass
class Written:
    """A consumer's code: `lines` run first, then `value` is the result."""

    name: str
    value: str
    lines: list[str] = dataclasses.field(default_factory=list)
    raises: tuple[str, ...] = ()
    shape: Shape | None = None  # a tensor result's shape; None for a Python value
    dtype: str = "float32"
    fallback: Callable[[Builder], str] | None = None  # a tensor of that shape, when not reachable

    def default(self, b: Builder) -> str:
        """The result's value when what the consumer runs raises."""
        if self.shape is None:
            return '"raised"'
        if self.fallback is not None:
            return self.fallback(b)
        return cast(expression(b, self.shape, 0), self.dtype)


@dataclasses.dataclass(frozen=True)
class Consumer:
    name: str
    kinds: tuple[str, ...]
    write: Callable[[Builder, Any, str], Written]
    needs: Callable[[Any, Builder], bool] = lambda source, b: True

    def fits(self, source, b: Builder) -> bool:
        return source.kind in self.kinds and self.needs(source, b)


def _k(b: Builder) -> str:
    return b.choice(["1", "2", "3"])


def _calls(raising: tuple[str, ...] = (), **calls: tuple[str, ...]):
    """A consumer with a Python value: one of `calls` (a name, then one of its templates:
    {s} the source, {k} a small int, {r} the result's name, lines before the value
    separated by `;;`); the calls named in `raising` may raise ValueError."""
    def write(b: Builder, source, result: str) -> Written:
        name = b.choice(list(calls))
        text = b.choice(calls[name]).format(s=source.code, k=_k(b), r=result)
        *lines, value = text.split(";;")
        return Written(name, value, lines, ("ValueError",) if name in raising else ())
    return write


def _raising_predicate(b: Builder, source, result: str) -> Written:
    """A predicate or key that divides by `v - k`: ZeroDivisionError at the item equal to k."""
    k = _k(b)
    template = b.choice(["any(12 // (v - {k}) > 0 for v in {s})", "list(filter(lambda v: 12 // (v - {k}), {s}))",
                         "sorted({s}, key=lambda v: 12 // (v - {k}))",
                         "max({s}, key=lambda v: 12 // (v - {k}), default=0)",
                         "list(itertools.takewhile(lambda v: 12 // (v - {k}) > 0, {s}))"])
    return Written("predicate_raises", template.format(s=source.code, k=k), raises=("ZeroDivisionError",))


def _unpack(b: Builder, source, result: str) -> Written:
    first, second, rest = b.fresh("a"), b.fresh("b"), b.fresh("rest")
    if source.length is not None and source.length >= 2 and b.chance(50):
        return Written("unpack", f"({first}, {second}, {rest})", [f"{first}, {second}, *{rest} = {source.code}"])
    if b.chance(50):
        return Written("unpack", f"({first}, {rest})", [f"{first}, *{rest} = {source.code}"],
                       raises=("ValueError",))  # an empty source
    return Written("unpack", f"({first}, {second})", [f"{first}, {second} = {source.code}"], raises=("ValueError",))


def _tee(b: Builder, source, result: str) -> Written:
    left, right = b.fresh("left"), b.fresh("right")
    return Written("tee", f"(next({left}, None), list({right}), list({left}))",
                   [f"{left}, {right} = itertools.tee({source.code})"])


def _next(b: Builder, source, result: str) -> Written:
    if source.iterator:
        return Written("next", b.choice(["next({s}, -1)", "next({s}, None)"]).format(s=source.code))
    return Written("next", f"next(iter({source.code}), -1)")


def _data_predicate(b: Builder, source, result: str) -> Written:
    """A predicate on tensor values: a graph break inside the consumer's loop."""
    b.breaks.add("GB002")
    return Written("data_predicate", b.choice(["any(t.sum() > 0 for t in {s})", "all(t.amax() < 2.0 for t in {s})",
                                               "sum(1 for t in {s} if t.mean() > 0)"]).format(s=source.code))


# -- consumers of tensors of one shape: the result joins the scope --------------------


def _tensor_result(name: str, template: str, shape_of: Callable[[Any], Shape] = lambda s: s.shape,
                   first: bool = False, last: bool = False, combine: str | None = None):
    """A tensor of `shape_of(source)`: every item promoted together, or the `first` or `last`
    item; `combine` makes a default of that shape from one of the items' ("stack", "cat")."""
    def write(b: Builder, source, result: str) -> Written:
        dtype = source.items[0].dtype if first else source.items[-1].dtype if last else source.dtype

        def fallback(b: Builder) -> str:
            return f"torch.{combine}([{cast(expression(b, source.shape, 0), dtype)}] * {source.length})"
        return Written(name, template.format(s=source.code), shape=shape_of(source), dtype=dtype,
                       fallback=fallback if combine else None)
    return write


def _zip_tensors(b: Builder, source, result: str) -> Written:
    others = [expression(b, source.shape, 0) for _ in range(b.integer(1, 2))]
    dtype = source.dtype
    listed = ", ".join(cast(other, dtype) for other in others)
    code = f"sum(p * q for p, q in zip({source.code}, [{listed}]))"
    return Written("zip", code, shape=source.shape, dtype=dtype)


def _sum_with_start(b: Builder, source, result: str) -> Written:
    start = expression(b, source.shape, 0)
    dtype = source.dtype if start.dtype == source.dtype else "float64"
    return Written("sum", f"sum({source.code}, {operand(start.code)} * 0.5)", shape=source.shape, dtype=dtype)


def _next_tensor(b: Builder, source, result: str) -> Written:
    dtype = source.items[0].dtype
    fallback = cast(expression(b, source.shape, 0), dtype)
    code = f"next({source.code}, {fallback})" if source.iterator else f"next(iter({source.code}), {fallback})"
    return Written("next", code, shape=source.shape, dtype=dtype)


def _stack(source) -> Shape:
    return (source.length,) + source.shape


def _cat(source) -> Shape:
    return (dim_product((source.length, source.shape[0])),) + source.shape[1:]


# -- consumers of tensors of several ranks: the chosen item is known from the ranks ---


def _by_rank(b: Builder, source, result: str) -> Written:
    ranks = [len(item.shape) for item in source.items]
    form = b.choice(["min", "max", "sorted", "next_rank"])
    if form == "min":
        index, code = ranks.index(min(ranks)), f"min({source.code}, key=lambda t: t.dim())"
    elif form == "max":
        index, code = ranks.index(max(ranks)), f"max({source.code}, key=lambda t: t.dim())"
    elif form == "sorted":
        index, code = ranks.index(max(ranks)), f"sorted({source.code}, key=lambda t: -t.dim())[0]"
    else:
        wanted = b.choice(sorted(set(ranks)))
        index = ranks.index(wanted)
        code = f"next(t for t in {source.code} if t.dim() == {wanted})"
    return Written(f"{form}_key" if form != "next_rank" else "next", code, shape=source.items[index].shape,
                   dtype=source.items[index].dtype)


def _rank_predicate(b: Builder, source, result: str) -> Written:
    rank = b.choice(sorted({len(item.shape) for item in source.items}))
    template = b.choice([("any", "any(t.dim() == {d} for t in {s})"), ("all", "all(t.dim() > 0 for t in {s})"),
                         ("in", "{d} in (t.dim() for t in {s})"),
                         ("takewhile", "[t.shape for t in itertools.takewhile(lambda t: t.dim() > 0, {s})]"),
                         ("any", "any(t.shape[-1] > {d} if t.dim() else False for t in {s})"),
                         ("list", "[t.dim() for t in {s}]")])
    return Written(template[0], template[1].format(s=source.code, d=rank))


def _one_of(*writers: Callable[[Builder, Any, str], Written]) -> Callable[[Builder, Any, str], Written]:
    return lambda b, source, result: b.choice(writers)(b, source, result)


def _known_length(least: int):
    return lambda source, b: source.length is not None and source.length >= least


INT = ("int",)
TENSOR = ("tensor",)

CONSUMERS: list[Consumer] = [
    Consumer("any", INT, _calls(any=("any(v == {k} for v in {s})", "any(map(lambda v: v > {k}, {s}))", "any({s})"))),
    Consumer("all", INT, _calls(all=("all(v < {k} for v in {s})", "all(map(lambda v: v != {k}, {s}))", "all({s})"))),
    Consumer("min_max", INT, _calls(min=("min({s}, default=-1)", "min({s}, key=lambda v: (v % 3, v), default=-1)"),
                                    max=("max({s}, default=-1)", "max({s}, key=lambda v: -v, default=0)"))),
    Consumer("sorted_sum", INT, _calls(sorted=("sorted({s})", "sorted({s}, reverse=True)",
                                               "sorted({s}, key=lambda v: v % 2)"),
                                       sum=("sum({s})", "sum({s}, 10)"))),
    Consumer("zip", INT, _calls(("zip_strict",),
                                zip=("list(zip({s}, [7, 8]))", "list(zip([7, 8], {s}))",
                                     "[a * b for a, b in zip({s}, range(2))]"),
                                zip_strict=("list(zip({s}, [7, 8, 9], strict=True))",))),
    Consumer("map_filter", INT, _calls(map=("list(map(lambda a, b: a * b, {s}, [1, 2]))", "list(map(str, {s}))"),
                                       filter=("list(filter(None, {s}))", "list(filter(lambda v: v > {k}, {s}))"),
                                       enumerate=("list(enumerate({s}, 1))", "[i * v for i, v in enumerate({s})]"))),
    Consumer("constructor", INT, _calls(dict=("dict(enumerate({s}))", 'dict(zip("abc", {s}))'), set=("set({s})",),
                                        frozenset=("frozenset({s})",), tuple=("tuple({s})",),
                                        list=("list({s})", "[*{s}, 9]"),
                                        join=('",".join(str(v) for v in {s})', '"-".join(map(str, {s}))'))),
    Consumer("update_method", INT, _calls(dict_update=('{r} = {{"z": 0}};;{r}.update(zip("ab", {s}));;{r}',),
                                          list_extend=("{r} = [9];;{r}.extend({s});;{r}",),
                                          set_update=("{r} = {{9}};;{r}.update({s});;{r}",))),
    Consumer("membership", INT, _calls(contains=("{k} in {s}",), isdisjoint=("{{2, 7}}.isdisjoint({s})",),
                                       issubset=("{{1, 2}}.issubset({s})",),
                                       issuperset=("{{0, 1}}.issuperset({s})",))),
    Consumer("pull", INT, _one_of(_unpack, _next)),
    Consumer("itertools_slicing", INT, _calls(islice=("list(itertools.islice({s}, 2))",
                                                      "list(itertools.islice({s}, 1, None, 2))"),
                                              takewhile=("list(itertools.takewhile(lambda v: v < {k}, {s}))",),
                                              dropwhile=("list(itertools.dropwhile(lambda v: v < {k}, {s}))",))),
    Consumer("itertools_combining", INT, _one_of(_tee, _calls(
        chain=("list(itertools.chain({s}, [5]))", "list(itertools.chain.from_iterable([[5], {s}]))"),
        accumulate=("list(itertools.accumulate({s}))",), compress=("list(itertools.compress({s}, [1, 0, 1]))",),
        pairwise=("list(itertools.pairwise({s}))",),
        zip_longest=("list(itertools.zip_longest({s}, [1], fillvalue=0))",)))),
    Consumer("predicate_raises", INT, _raising_predicate),
    Consumer("reduce_tensors", TENSOR, _one_of(
        _sum_with_start, _zip_tensors,
        _tensor_result("enumerate", "sum(t * i for i, t in enumerate({s}, 1))"),
        _tensor_result("accumulate", "list(itertools.accumulate({s}))[-1]")), needs=_known_length(1)),
    Consumer("collect_tensors", TENSOR, _one_of(
        _tensor_result("stack", "torch.stack(list({s}))", _stack, combine="stack"),
        _tensor_result("dict", "dict(enumerate({s}))[0]", first=True),
        _tensor_result("list", "list({s})[-1]", last=True)), needs=_known_length(1)),
    Consumer("cat_tensors", TENSOR, _tensor_result("cat", "torch.cat(tuple({s}))", _cat, combine="cat"),
             needs=lambda source, b: source.length is not None and source.length >= 1 and bool(source.shape)),
    Consumer("pick_tensor", TENSOR, _one_of(
        _next_tensor, _tensor_result("max_key", "max({s}, key=lambda t: t.shape[-1] if t.dim() else 0)",
                                     first=True)), needs=_known_length(1)),
    Consumer("by_rank", ("mixed",), _by_rank, needs=_known_length(1)),
    Consumer("rank_predicate", ("mixed",), _rank_predicate),
    Consumer("data_predicate", ("tensor", "mixed"), _data_predicate, needs=lambda source, b: b.allow_breaks),
]
