"""Symbolic sizes and scalars: dimensions traced as `torch.SymInt`, Python numbers traced as
`torch.SymInt` / `torch.SymFloat`, and the fx nodes that compute them.

When a compilation is dynamic (`dynamic=True`, or `dynamic=None` after a size
changed), chosen input dimensions become symbols of one `ShapeEnv`, shared by
the fake tensors. Python code that reads such a size gets a SymInt; every
SymInt the graph needs is computed inside the graph (`x.size(i)` and the
arithmetic on it). An int or float read by source that changed between calls
(under `dynamic=None`) becomes a symbol too, and a graph input of its own.
Branching on a symbol adds a guard to the ShapeEnv; `guard_expression` turns
those guards into Python over the inputs' sources.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

from ..._core.jagged import is_jagged, is_static_ragged_size
from ..._core.subclass_protocol import is_wrapper_subclass
from ..._core.symbolic_inputs import InputName, marked_dims, symbolic_context, symbolic_fake

SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
SCALAR = frozenset()
"""The entry of an int or float input in `dynamic_dims`: the number itself is symbolic."""


def may_be_symbolic(value: Any) -> bool:
    """Whether a number read by source can be traced as a symbol once it changed between calls:
    any int, any float but NaN and the infinities (the ShapeEnv cannot reason about them), as
    in PyTorch."""
    return type(value) is int or type(value) is float and math.isfinite(value)


def has_marked_tensor(values: Any) -> bool:
    """Whether any tensor among `values` (searched through containers) carries `mark_dynamic`,
    `maybe_mark_dynamic`, or is a jagged nested tensor (whose ragged size is always symbolic)."""
    return any(isinstance(leaf, torch.Tensor) and marked_dims(leaf) for leaf in pytree.tree_leaves(values))


def holds_symbol(value: Any) -> bool:
    if isinstance(value, SYMBOLIC_TYPES):
        return True
    if isinstance(value, (tuple, list)):
        return any(holds_symbol(item) for item in value)
    if isinstance(value, slice):
        return holds_symbol((value.start, value.stop, value.step))
    return False


@dataclass(frozen=True)
class DataDependence:
    """Whether values computed from tensor data become graph values (unbacked symbols) or
    graph breaks: `scalars` for `.item()`, `shapes` for operators whose output size depends
    on the data (`nonzero`, boolean masks). PyTorch's config names; both on under fullgraph."""

    scalars: bool = False
    shapes: bool = False
    sizes: bool = False
    """A ShapeEnv from the start even for static inputs: a jagged tensor made in the region needs
    one for its ragged size (a graph break says so, `GraphBreak.needs_sizes`)."""

    def new_shape_env(self) -> ShapeEnv:
        return ShapeEnv(allow_scalar_outputs=self.scalars, allow_dynamic_output_shape_ops=self.shapes)


NO_DATA_DEPENDENCE = DataDependence()


class SymbolicSizes:
    def __init__(self, shape_env: ShapeEnv | None = None) -> None:
        self.shape_env = shape_env or NO_DATA_DEPENDENCE.new_shape_env()
        self._nodes: dict[Any, torch.fx.Node] = {}

    def fake_input(self, fake_mode: Any, real: torch.Tensor, dims: frozenset[int],
                   ranges: dict[int, tuple[int, int | None]], name: str, every_inner: bool = False) -> torch.Tensor:
        """A fake of `real` (the input `name`) whose `dims` are symbolic, those in `ranges` within
        (lowest, highest), and with `every_inner` every size of a subclass's inner tensors."""
        return symbolic_fake(fake_mode, real, dims, ranges, name, every_inner)

    def specialised(self, size: Any) -> bool:
        """Whether the program forced symbolic `size` to one value."""
        return self.shape_env.replace(size.node.expr).is_number

    def symbolic_int(self, value: int, name: str) -> torch.SymInt:
        """A fresh symbol standing for an int input, whose current value is `value` (0 and 1
        included: unlike a size, the number may be anything)."""
        return self.shape_env.create_unspecified_symint_and_symbol(value, InputName(name), DimDynamic.DYNAMIC)

    def symbolic_float(self, value: float, name: str) -> torch.SymFloat:
        """A fresh symbol standing for a float input, whose current value is `value`."""
        source = InputName(name)
        symbol = self.shape_env.create_unspecified_symbol(value, source, dynamic_dim=DimDynamic.DYNAMIC)
        return self.shape_env.create_symfloatnode(symbol, hint=value, source=source)

    def register(self, node: torch.fx.Node, value: Any) -> None:
        """`node` computes `value` (a SymInt/SymFloat/SymBool) at run time."""
        if isinstance(value, SYMBOLIC_TYPES):
            self._nodes.setdefault(value.node.expr, node)

    def knows(self, value: Any) -> bool:
        return value.node.expr in self._nodes

    def node_arg(self, value: Any) -> Any:
        """The fx argument for a Python value that may hold symbols."""
        if isinstance(value, SYMBOLIC_TYPES):
            replaced = self.shape_env.replace(value.node.expr)
            if replaced.is_number:
                return value.node.pytype(replaced)
            node = self._nodes.get(value.node.expr) or self._nodes.get(replaced)
            if node is None:
                raise KeyError(f"no graph node computes {value}")
            return node
        if isinstance(value, torch.Size):
            return tuple(self.node_arg(item) for item in value)
        if isinstance(value, (tuple, list)):
            return type(value)(self.node_arg(item) for item in value)
        if isinstance(value, slice):
            return slice(self.node_arg(value.start), self.node_arg(value.stop), self.node_arg(value.step))
        return value

    def guard_expression(self, fakes: list[torch.Tensor]) -> str | None:
        """Python text over `L['t<i>']` (the i-th graph input) that holds when sizes still fit.
        A tensor whose sizes, strides and storage offset are all numbers is left out: its tensor
        guard checks sizes and strides, and storage offsets are checked by no entry (iterating
        a tensor passes views at a new offset each step)."""
        if not any(is_wrapper_subclass(fake) for fake in fakes):
            placeholders = [None if _all_numbers(fake) else fake for fake in fakes]
            return self.shape_env.produce_guards_expression(placeholders, ignore_static=False)
        # a tensor subclass's inner tensors have sizes of their own, named `L['t<i>'].<attribute>`;
        # given contexts, every input must be given (its static sizes are guarded twice then)
        # a jagged tensor traced static (PyTorch's meta dummy behind `nested_view_from_values_offsets`)
        # has a real nested int for its ragged size, which its tensor guard checks: left out
        pairs = [(fake, InputName(f"L['t{index}']")) for index, fake in enumerate(fakes)
                 if not (is_jagged(fake) and any(is_static_ragged_size(size) for size in fake.shape))]
        fakes, sources = [fake for fake, _ in pairs], [source for _, source in pairs]
        contexts = [symbolic_context(fake, frozenset(), {}, source) if is_wrapper_subclass(fake) else None
                    for fake, source in zip(fakes, sources)]
        guards = self.shape_env.produce_guards(fakes, sources, input_contexts=contexts, ignore_static=False)
        return " and ".join(guards) if guards else None


def _all_numbers(fake: Any) -> bool:
    return isinstance(fake, torch.Tensor) and not holds_symbol((*fake.shape, *fake.stride(), fake.storage_offset()))


def substitute_inputs(code: str, names: list[str]) -> str:
    """Replace `L['t<i>']` in a ShapeEnv guard with the i-th input's expression."""
    return re.sub(r"L\['t(\d+)'\]", lambda match: names[int(match.group(1))], code)
