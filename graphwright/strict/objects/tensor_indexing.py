"""Indexing a tensor by symbolic ints, without specialising them.

`tensor[i]` with a `torch.SymInt` index converts the index to a Python int
(`__index__`), which fixes the symbol to its current value: a step counter
that became symbolic (`sigmas[self.step_index]`) would recompile on every
step. A key made of ints, slices, `None` and `...`, with at least one symbolic
int, is written as what it means instead: `select` for each int, `unsqueeze`
for each `None`, plain slicing for slices (slice bounds stay symbolic on
their own). Keys with tensors, lists or bools (advanced indexing) keep the
ordinary `getitem` call.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch

from .values import ConstantValue, SequenceValue, TensorValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


def index_by_symbolic_ints(tracer: "Tracer", tensor: TensorValue, key: Value) -> Value | None:
    """`tensor[key]` as selects, when `key` holds a symbolic int; None when it does not, or
    when it is not a basic index."""
    parts = _basic_index(key)
    if parts is None or not any(isinstance(part, torch.SymInt) for part in parts):
        return None
    consumed = sum(1 for part in parts if part is not None and part is not Ellipsis)
    if consumed > tensor.fake.dim() or sum(1 for part in parts if part is Ellipsis) > 1:
        return None  # the ordinary call raises Python's IndexError
    graph, result, dim = tracer.graph, tensor, 0
    for part in parts:
        if part is Ellipsis:
            dim += tensor.fake.dim() - consumed
        elif part is None:
            result = graph.call("call_method", "unsqueeze", [result, ConstantValue(dim)], {})
            dim += 1
        elif isinstance(part, slice):
            if part != slice(None):
                key = ConstantValue((slice(None),) * dim + (part,))
                result = graph.call("call_function", operator.getitem, [result, key], {})
            dim += 1
        else:  # an int: the dimension goes away
            result = graph.call("call_function", torch.select, [result, ConstantValue(dim), ConstantValue(part)], {})
    return result


def _basic_index(key: Value) -> list[Any] | None:
    items = key.items if isinstance(key, SequenceValue) and key.kind is tuple else [key]
    parts = []
    for item in items:
        if not isinstance(item, ConstantValue):
            return None
        part = item.value
        if type(part) is not int and not isinstance(part, (torch.SymInt, slice)) \
                and part is not None and part is not Ellipsis:
            return None
        parts.append(part)
    return parts
