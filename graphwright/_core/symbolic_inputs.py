"""Fake inputs with symbolic sizes: which dimensions a tensor marks dynamic, and how its fake is
made symbolic in them (a tensor subclass's inner tensors too).

The strict tracer makes its graph inputs this way; ahead-of-time autograd makes a jagged nested
tensor's fake this way when it compiles a graph again for the sizes of one call (its ragged
size is never a number, see `jagged.py`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch._guards import GuardSource
from torch._guards import Source as ShapeEnvSource
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    StatelessSymbolicContext,
    StrictMinMaxConstraint,
    SubclassSymbolicContext,
)
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from .subclass_protocol import inner_tensors, is_wrapper_subclass

PROPAGATED_MARK = "_dynamo_propagated_dynamic_indices"
"""PyTorch's unguarded mark of dimensions that are symbolic by nature: a jagged nested tensor
sets it on itself (its ragged dimension) and on its values (their summed lengths)."""


@dataclass(frozen=True)
class InputName(ShapeEnvSource):
    """How the ShapeEnv names a number input in what it reports (guards name inputs by position)."""

    label: str

    @property
    def _name_template(self) -> str:
        return self.label

    @property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


def marked_dims(tensor: torch.Tensor) -> set[int]:
    """The dimensions of `tensor` marked dynamic: `mark_dynamic`, `maybe_mark_dynamic`, and the
    ragged dimensions a jagged nested tensor marks."""
    return set(getattr(tensor, "_dynamo_dynamic_indices", ())) \
        | set(getattr(tensor, "_dynamo_weak_dynamic_indices", ())) | set(getattr(tensor, PROPAGATED_MARK, ()))


def symbolic_fake(fake_mode: Any, real: torch.Tensor, dims: frozenset[int],
                  ranges: dict[int, tuple[int, int | None]], name: str, every_inner: bool = False) -> torch.Tensor:
    """A fake of `real` (the input `name`) in `fake_mode` (which has a ShapeEnv) whose `dims` are
    symbolic, those in `ranges` within (lowest, highest); with `every_inner` (`dynamic=True`) every
    size of a tensor subclass's inner tensors too."""
    if not is_wrapper_subclass(real):
        return fake_mode.from_tensor(real, static_shapes=False,
                                     symbolic_context=symbolic_context(real, dims, ranges, None))
    source = InputName(name)
    fake = fake_mode.from_tensor(real, static_shapes=False, source=source,
                                 symbolic_context=symbolic_context(real, dims, ranges, source, every_inner))
    _relate_outer_sizes(fake)
    return fake


def symbolic_context(real: torch.Tensor, dims: frozenset[int], ranges: dict[int, tuple[int, int | None]],
                     source: ShapeEnvSource | None, every_inner: bool = False) -> StatelessSymbolicContext:
    """How the fake of `real` is made symbolic. A tensor subclass's inner tensors are symbolic in
    the same dimensions as it when they have as many (TwoTensor's, DTensor's local tensor), in
    those marked on them (a jagged tensor's values and sequence-length tensors), in all of them
    with `every_inner`, and static otherwise (a scale, a jagged tensor's offsets)."""
    sizes = [DimDynamic.DYNAMIC if index in dims else DimDynamic.STATIC for index in range(real.dim())]
    constraints = [_range_constraint(*ranges[index]) if index in ranges else None for index in range(real.dim())]
    if not is_wrapper_subclass(real):
        return StatelessSymbolicContext(dynamic_sizes=sizes, constraint_sizes=constraints)

    def inner_dims(tensor: torch.Tensor) -> frozenset[int]:
        if every_inner:
            return frozenset(range(tensor.dim())) - set(getattr(tensor, "_dynamo_static_indices", ()))
        return (dims if tensor.dim() == real.dim() else frozenset()) | frozenset(marked_dims(tensor))

    inner = {name: symbolic_context(tensor, inner_dims(tensor), ranges if tensor.dim() == real.dim() else {},
                                    InputName(f"{source.name}.{name}"), every_inner)
             for name, tensor in inner_tensors(real)}
    return SubclassSymbolicContext(dynamic_sizes=sizes, constraint_sizes=constraints, inner_contexts=inner,
                                   tensor_source=source)


def _relate_outer_sizes(fake: torch.Tensor) -> None:
    """Make each symbolic outer size of a fake tensor subclass the same symbol as the size of an
    inner tensor in that dimension, when they are equal now (TwoTensor's always are): a guard on
    the input says so, and ahead-of-time autograd, whose graphs take the inner tensors, then
    never meets an outer size it cannot compute."""
    for _, inner in inner_tensors(fake):
        if is_wrapper_subclass(inner):
            _relate_outer_sizes(inner)
        if inner.dim() != fake.dim():
            continue
        for outer_size, inner_size in zip(fake.shape, inner.shape):
            if isinstance(outer_size, torch.SymInt) and isinstance(inner_size, torch.SymInt) \
                    and outer_size.node.hint == inner_size.node.hint:
                bool(outer_size == inner_size)  # a guard, and one symbol for both


def _range_constraint(lowest: int, highest: int | None) -> StrictMinMaxConstraint:
    return StrictMinMaxConstraint(vr=ValueRanges(lowest, int_oo if highest is None else highest), warn_only=False)
