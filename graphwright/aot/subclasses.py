"""Tensor subclass values under AOT autograd: their layouts, flattened and rebuilt.

A traceable wrapper subclass (`_core/subclass_protocol.py`) reaches the aten
graphs as its inner tensors only. Its `SubclassLayout` is what stays
constant: the class, the inner attribute names and the flatten context, the
layout of each inner tensor (a subclass may hold subclasses), and the outer
size and stride. `flatten_values` turns values into plain tensors in a fixed
order; `rebuild_traced` makes the subclass again around fake inner tensors
while tracing; `Rebuilder` does it on every call at run time, reading
symbolic outer sizes from the call's flat inputs or the graph's flat outputs.

Refused (`refuse_unsupported_subclasses`): a subclass with a
`__torch_dispatch__` of its own that is not a traceable wrapper. Its Python
cannot be desugared, and a trace would lose what it does.

This module knows values and layouts; where they meet the traced function and
the runtime is `desugar.py`.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor

from .._core import artifacts
from .._core.errors import BackendError, BackendRefusal, TraceError
from .._core.jagged import RUNTIME_RAGGED_SIZE, is_ragged_size
from .._core.subclass_protocol import (
    context_pattern,
    flatten_signature,
    dispatches_itself,
    inner_tensors,
    is_wrapper_subclass,
    opaque_attributes,
)
from .._core.user_stack import user_frames_of_stack
from .views import input_size_names, size_source

LeafSpec = tuple[tuple, torch.dtype, torch.device]
"""Shape, dtype and device of one plain inner tensor."""


@dataclasses.dataclass(frozen=True, eq=False)
class SubclassLayout:
    """One subclass value's structure: `inner[k]` is the layout of attribute `attributes[k]`
    (None: a plain tensor); `leaves` the specs of its plain tensors in flat order."""

    cls: type
    attributes: tuple[str, ...]
    context: Any
    inner: tuple[SubclassLayout | None, ...]
    outer_size: tuple
    outer_stride: tuple
    leaves: tuple[LeafSpec, ...]
    opaque: tuple[tuple[str, Any], ...] = ()
    """The inner values that are not tensors (a DTensor's device mesh): constants of the layout,
    handed back to `__tensor_unflatten__` as they are."""

    @functools.cached_property
    def context_pattern(self) -> Any:
        """The context as a value's is compared with it: a symbolic size in it matches any."""
        return context_pattern(self.context)

    @property
    def names(self) -> frozenset[str]:
        """Every attribute `__tensor_flatten__` names, tensors and opaque objects."""
        return frozenset((*self.attributes, *(name for name, _ in self.opaque)))

    @property
    def count(self) -> int:
        return len(self.leaves)

    def describe(self) -> str:
        return f"{self.cls.__qualname__}(attributes={list(self.attributes)}, context={self.context!r})"


def same_context(a: Any, b: Any) -> bool:
    """Whether two flatten contexts are equal (one whose `==` does not give a bool equals itself only)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # a context whose == is not a bool (holds tensors): only itself is equal
        return False


def layout_of(value: Any) -> SubclassLayout | None:
    """The layout of a wrapper subclass tensor; None for anything else."""
    if not is_wrapper_subclass(value):
        return None
    _, context = flatten_signature(value)
    tensors = inner_tensors(value)
    inner = []
    leaves: list[LeafSpec] = []
    for _, tensor in tensors:
        layout = layout_of(tensor)
        inner.append(layout)
        leaves.extend(layout.leaves if layout is not None else [(tuple(tensor.shape), tensor.dtype, tensor.device)])
    return SubclassLayout(type(value), tuple(name for name, _ in tensors), context, tuple(inner),
                          tuple(value.shape), tuple(value.stride()), tuple(leaves), tuple(opaque_attributes(value)))


def count_of(layout: SubclassLayout | None) -> int:
    """How many flat values one value of this layout takes (a plain value or None: one)."""
    return 1 if layout is None else layout.count


def flatten_into(value: torch.Tensor, layout: SubclassLayout, out: list) -> None:
    """Append the plain inner tensors of `value` (of `layout`) to `out`. Hot path."""
    for name, inner in zip(layout.attributes, layout.inner):
        tensor = getattr(value, name)
        if inner is None:
            out.append(tensor)
        else:
            flatten_into(tensor, inner, out)


def flatten_values(values: Sequence[Any], layouts: Sequence[SubclassLayout | None]) -> list[Any]:
    flat: list[Any] = []
    for value, layout in zip(values, layouts):
        if layout is None:
            flat.append(value)
        else:
            flatten_into(value, layout, flat)
    return flat


def rebuild_traced(layout: SubclassLayout, flat: Sequence[Any], outer_stride: tuple | None = None) -> torch.Tensor:
    """The subclass around the fake inner tensors `flat` (in flat order), while tracing: with its
    traced outer size, and `outer_stride` if given (else the traced one)."""
    values = iter(flat)
    return _rebuild_from(layout, values, outer_stride)


def _rebuild_from(layout: SubclassLayout, values: Iterator[Any], outer_stride: tuple | None) -> torch.Tensor:
    inner = dict(layout.opaque)
    for name, inner_layout in zip(layout.attributes, layout.inner):
        inner[name] = next(values) if inner_layout is None else _rebuild_from(inner_layout, values, None)
    stride = layout.outer_stride if outer_stride is None else outer_stride
    return layout.cls.__tensor_unflatten__(inner, layout.context, torch.Size(layout.outer_size), stride)


def contiguous_strides(size: Sequence[Any]) -> tuple:
    """The strides of a contiguous tensor of `size` (sizes may be symbolic, or ragged: a nested
    int, which is never 0 or 1)."""
    strides, step = [], 1
    for dim in reversed(tuple(size)):
        strides.append(step)
        step = step * (dim if is_ragged_size(dim) else torch.sym_max(dim, 1))
    return tuple(reversed(strides))


Rebuild = Callable[[Sequence[Any], Sequence[Any]], torch.Tensor]
"""`rebuild(flat_inputs, flat_values)`: a subclass value made of some of `flat_values`, its
symbolic outer sizes read from either list."""


class Rebuilder:
    """Compiles, once, how subclass values are rebuilt at run time from a graph's flat values.

    `inputs` and `outputs` are the fake flat inputs and outputs of the graph
    (or, for values made of a backward graph's gradients, of that graph): a
    symbolic outer size is read from them on each call (`a[i].size(d)`,
    `o[j].size(d)`, or arithmetic on those). `reads_inputs` says whether a rebuild made so far
    reads the inputs: the caller must then keep them, as compiled graphs may empty their list.
    """

    def __init__(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        # the outputs first: a code generator may take (and free) the list of inputs it was given
        self._names = {**input_size_names(inputs, "a"), **input_size_names(outputs, "o")}
        self.reads_inputs = False

    def rebuild(self, layout: SubclassLayout, start: int) -> Rebuild:
        """The value of `layout` whose plain tensors are `flat_values[start:start + layout.count]`."""
        parts: list[tuple[str, int, Rebuild | None]] = []
        position = start
        for name, inner in zip(layout.attributes, layout.inner):
            parts.append((name, position, None if inner is None else self.rebuild(inner, position)))
            position += count_of(inner)
        sizes = self._sizes(layout)
        cls, context, opaque = layout.cls, layout.context, layout.opaque

        def rebuild(a, o):
            inner = {name: o[index] if make is None else make(a, o) for name, index, make in parts}
            inner.update(opaque)
            size, stride = sizes(a, o)
            return cls.__tensor_unflatten__(inner, context, size, stride)

        return rebuild

    def _sizes(self, layout: SubclassLayout) -> Callable[[Sequence[Any], Sequence[Any]], tuple[tuple, tuple]]:
        size = [self._source(value, layout) for value in layout.outer_size]
        stride = [self._source(value, layout) for value in layout.outer_stride]
        # a size is a torch.Size, as eager gives subclasses (DTensor keeps it in its spec)
        if all(isinstance(value, int) for value in (*size, *stride)):
            constant = (torch.Size(size), tuple(stride))
            return lambda a, o: constant
        text = "lambda a, o: (Size((" + "".join(f"{v}, " for v in size) + ")), (" \
            + "".join(f"{v}, " for v in stride) + "))"
        self.reads_inputs = self.reads_inputs or "a[" in text
        return eval(text, {"Size": torch.Size})

    def _source(self, value: Any, layout: SubclassLayout) -> int | str:
        if isinstance(value, int):
            return value
        if is_ragged_size(value):  # a jagged tensor's: never a number, its offsets decide
            return RUNTIME_RAGGED_SIZE
        expr = value.node.expr
        if expr.is_number:
            return int(expr)
        source = size_source(expr, self._names)
        if source is None:
            raise TraceError(
                f"cannot read the outer size {value} of a `{layout.cls.__qualname__}` at run time",
                explanation="A symbolic outer size of a tensor subclass output is neither a size of "
                "the graph's inputs nor of its outputs.",
                hints=["Compile with dynamic=False."],
                user_stack=user_frames_of_stack(),
            )
        return f"int({source})"


class SubclassZeros:
    """The zeros that stand for a gradient nothing gave, for a subclass output: the same subclass
    (class, context, inner layout), around zeros."""

    __slots__ = ("cls", "context", "inner", "opaque", "size")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.cls = type(tensor)
        _, self.context = flatten_signature(tensor)
        self.inner = [(name, zeros_spec(inner)) for name, inner in inner_tensors(tensor)]
        self.opaque = opaque_attributes(tensor)
        self.size = tuple(tensor.shape)

    def make(self) -> torch.Tensor:
        inner = {name: make_zeros(spec) for name, spec in self.inner}
        inner.update(self.opaque)
        return self.cls.__tensor_unflatten__(inner, self.context, torch.Size(self.size), contiguous_strides(self.size))


def zeros_spec(tensor: torch.Tensor) -> Any:
    """What `make_zeros` makes a missing gradient of `tensor` from. Hot path (once per
    differentiable output per call): a plain tensor's is a tuple."""
    if type(tensor) is torch.Tensor or not is_wrapper_subclass(tensor):
        return (tensor.shape, tensor.dtype, tensor.device)
    return SubclassZeros(tensor)


def make_zeros(spec: Any) -> torch.Tensor:
    if isinstance(spec, SubclassZeros):
        return spec.make()
    shape, dtype, device = spec
    return torch.zeros(shape, dtype=dtype, device=device)


def first_subclass_tangent(tangents: Sequence[Any]) -> int | None:
    """The index of the first gradient that is a tensor subclass, None when all are plain. Hot
    path (once per backward)."""
    for index, tangent in enumerate(tangents):
        if type(tangent) is not torch.Tensor and is_wrapper_subclass(tangent):
            return index
    return None


def backward_on_subclass(graph: torch.fx.GraphModule | None, tangent: Any, index: int) -> Callable[[list], Any]:
    """The backward to run when the gradient `tangent` of plain output `index` is a tensor subclass:
    the backward's aten `graph` itself, run op by op (not a code generator's compiled code, which
    takes plain tensors), so that each operation on the gradient dispatches to the subclass as
    eager's backward does. Refused without the graph (a backward loaded from the AOT cache)."""
    if graph is None:
        raise subclass_gradient_error(tangent, index, "its backward was compiled for a plain gradient")
    return lambda args: graph(*args)


def subclass_gradient_error(tangent: Any, index: int, why: str) -> BackendError:
    return BackendError(
        f"The gradient of differentiable output {index} of a compiled graph is a "
        f"`{type(tangent).__qualname__}`, but the output is a plain tensor and {why}",
        explanation="A compiled backward runs on the plain tensors it was traced with; running it "
        "on a tensor subclass would compute a wrong gradient.",
        hints=["Pass a plain gradient, or keep the subclass math inside the compiled region."],
        user_stack=user_frames_of_stack(),
    )


def is_fake_value(value: Any) -> bool:
    """A fake tensor, or a wrapper subclass whose plain tensors are all fake."""
    if isinstance(value, FakeTensor):
        return True
    layout = layout_of(value)
    return layout is not None and all(isinstance(t, FakeTensor) for t in flatten_values([value], [layout]))


def fake_tensors_in(value: Any) -> list[FakeTensor]:
    """The fake tensors a value is made of (itself, or a subclass's plain tensors)."""
    if isinstance(value, FakeTensor):
        return [value]
    layout = layout_of(value)
    if layout is None:
        return []
    return [t for t in flatten_values([value], [layout]) if isinstance(t, FakeTensor)]


def refuse_unsupported_subclasses(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                                  state: Sequence[tuple[str, Any]]) -> None:
    """Raise `BackendRefusal` when an input, a lifted parameter or buffer (`state`: name, value),
    an intermediate or an output of `gm` is a tensor subclass AOT autograd cannot desugar: one
    with a `__torch_dispatch__` of its own that is not a traceable wrapper subclass."""
    for what, value, node in _values(gm, example_inputs, state):
        if _unsupported(value):
            raise _refusal(what, type(value), node)


def _values(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
            state: Sequence[tuple[str, Any]]) -> Iterator[tuple[str, Any, torch.fx.Node | None]]:
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    for node, value in zip(placeholders, example_inputs):
        yield f"input `{node.name}`", value, None
    for name, value in state:
        yield f"parameter or buffer `{name}`", value, None
    for node in gm.graph.nodes:
        if node.op == "output":
            for i, leaf in enumerate(pytree.tree_leaves(node.args)):
                if isinstance(leaf, torch.fx.Node):
                    yield f"output {i} (`{leaf.name}`)", _fake_value(leaf), leaf
        else:
            yield f"`{node.name}`", _fake_value(node), node


def _fake_value(node: torch.fx.Node) -> Any:
    return node.meta.get("val", node.meta.get("example_value"))


def _unsupported(value: Any) -> bool:
    return dispatches_itself(value) and not is_wrapper_subclass(value)


def _operation(node: torch.fx.Node | None) -> str:
    if node is None or node.op not in ("call_function", "call_method"):
        return ""
    target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
    return f", made by `{target}`"


def _refusal(what: str, cls: type, node: torch.fx.Node | None) -> BackendRefusal:
    graph = artifacts.scope_name() or "a captured graph"
    return BackendRefusal(
        f"AOT autograd cannot compile a graph holding the tensor subclass `{cls.__qualname__}`: {what} of "
        f"{graph} is a `{cls.__module__}.{cls.__qualname__}`{_operation(node)}",
        explanation=(
            f"`{cls.__qualname__}` has a `__torch_dispatch__` of its own but no `__tensor_flatten__` and "
            "`__tensor_unflatten__`, so graphwright's ahead-of-time autograd cannot desugar it into the "
            "plain tensors it holds: its aten graphs would lose what the subclass does."
        ),
        hints=[
            "With fullgraph=False this graph runs as captured (as backend='eager' runs it).",
            f"Give `{cls.__qualname__}` `__tensor_flatten__` and `__tensor_unflatten__` (a traceable "
            "wrapper subclass), compile with backend='eager', or keep it out of the compiled region.",
        ],
        user_stack=user_frames_of_stack(),
    )
