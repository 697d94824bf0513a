"""Where tensor subclasses meet AOT autograd's flat graphs: the traced function and the runtime.

The aten graphs take and return plain tensors only. For a call signature
whose inputs (lifted parameters and buffers included) hold traceable wrapper
subclasses, a `SubclassBoundary` desugars them:

- while tracing, the graph's placeholders are the subclasses' plain inner
  tensors; `rebuild_inputs` makes the subclasses again around them with
  `__tensor_unflatten__`, so that the captured graph runs on subclasses: each
  subclass's `__torch_dispatch__` runs and the recorder records the inner
  aten ops it does. Functionalization and autograd work on the subclass
  values themselves (mutations, views and requires_grad are the subclass's,
  tangents and gradients are subclasses), so `GraphMetadata` describes the
  values the user sees. (An in-place call on a plain tensor with a subclass
  argument needs the eager order, the subclass first: `subclass_calls.py`.) What the traced function returns is flattened back
  (`flatten_outputs`), and each returned value's layout recorded;
- at run time, `forward` and `backward` wrap the compiled flat graphs: the
  forward flattens the call's subclass arguments and rebuilds subclass
  values; the backward flattens incoming gradients, after checking they have
  the traced structure, and rebuilds subclass gradients.

Between the two (the autograd.Function, the epilogue that writes mutated
inputs back and replays views) the runtime sees subclass values, as eager
does: a mutated subclass input is written back through the subclass, a view
of one is replayed on it.

A subclass the graph itself makes (`TwoTensor(x, y)`, `DTensor.from_local`
in the region), and a call of a subclass's own Python API, are made while
tracing by `subclass_calls.SubclassCalls`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from .._core.errors import BackendError
from .._core.jagged import is_jagged, is_ragged_size, is_static_ragged_size
from .._core.subclass_protocol import flatten_signature, is_wrapper_subclass, metadata_guard
from .._core.user_stack import user_frames_of_stack
from .jagged import refuse_static
from .partition import Partition
from .subclasses import (
    LeafSpec,
    Rebuild,
    Rebuilder,
    SubclassLayout,
    backward_on_subclass,
    contiguous_strides,
    count_of,
    flatten_into,
    flatten_values,
    layout_of,
    rebuild_traced,
    same_context,
    subclass_gradient_error,
)

ValueLayout = SubclassLayout | LeafSpec | None
"""A traced value's layout: a subclass's, a plain tensor's spec, or None (not a tensor)."""


def _value_layout(value: Any) -> ValueLayout:
    layout = layout_of(value)
    if layout is not None:
        return layout
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype, value.device)
    return None


def _tangent_like(value: Any) -> Any:
    # a gradient never requires grad, and a subclass's flatten context may say whether it does
    # (a jagged tensor's): the tangent's layout is the detached value's
    value = value.detach() if value.requires_grad else value
    coerce = getattr(type(value), "__coerce_tangent_metadata__", None)
    return value if coerce is None else coerce(value)


def _subclass(layout: ValueLayout) -> SubclassLayout | None:
    return layout if isinstance(layout, SubclassLayout) else None


def _starts(layouts: Sequence[SubclassLayout | None]) -> list[int]:
    starts, position = [], 0
    for layout in layouts:
        starts.append(position)
        position += count_of(layout)
    return starts


class SubclassBoundary:
    """The desugaring of one call signature (`fakes`: its fake inputs, subclasses among them)."""

    def __init__(self, fakes: Sequence[Any], makes_subclasses: bool = False) -> None:
        refuse_static(fakes)
        self._fakes = list(fakes)
        # a jagged tensor is functionalized through its inner tensors (`jagged.py`)
        self.may_hold_jagged = makes_subclasses or any(is_jagged(value) for value in fakes)
        self.input_layouts = [layout_of(value) for value in fakes]
        flat = flatten_values(fakes, self.input_layouts)
        plain = {id(value) for value, layout in zip(fakes, self.input_layouts) if layout is None}
        # inner tensors carry no autograd state of their own: the subclass does
        self.flat_inputs = [value.detach() if isinstance(value, torch.Tensor) and value.requires_grad
                            and id(value) not in plain else value for value in flat]
        self._input_starts = _starts(self.input_layouts)
        # symbolic outer sizes of subclass inputs (`dynamic=True`) that no inner tensor's size
        # names: inputs of their own, read from the subclass at run time
        self.size_inputs = _outer_size_inputs(fakes, self.input_layouts, self.flat_inputs)
        self.flat_inputs.extend(value for *_, value in self.size_inputs)
        self.value_layouts: list[ValueLayout] = []
        self.tangent_layouts: list[SubclassLayout | None] = []
        self.gradient_layouts: list[SubclassLayout | None] = []
        self._tangent_specs: list[ValueLayout] = []

    @staticmethod
    def of(fakes: Sequence[Any], makes_subclasses: bool) -> SubclassBoundary | None:
        """The boundary of a signature with subclass inputs, or of a graph that makes subclasses;
        None when neither."""
        if makes_subclasses or any(is_wrapper_subclass(value) for value in fakes):
            return SubclassBoundary(fakes, makes_subclasses)
        return None

    # --- while tracing -------------------------------------------------------------------------

    def rebuild_inputs(self, flat: Sequence[Any]) -> list[Any]:
        """The signature's inputs, subclasses made around the flat placeholders `flat`."""
        inputs = []
        for fake, layout, start in zip(self._fakes, self.input_layouts, self._input_starts):
            if layout is None:
                inputs.append(flat[start])
                continue
            value = rebuild_traced(layout, flat[start:start + layout.count])
            if fake.requires_grad:
                value.requires_grad_(True)
            inputs.append(value)
        return inputs

    def record_forward_values(self, values: Sequence[Any], requires_grad: Sequence[bool]) -> None:
        """The layouts of the forward values (synced, unwrapped), and of the tangents of the
        differentiable ones: a subclass may ask for tangents of other metadata than its value's
        (`__coerce_tangent_metadata__`: DTensor turns a partial placement into a replicated one)."""
        self.value_layouts = [_value_layout(value) for value in values]
        self._tangent_specs = [_value_layout(_tangent_like(value)) for value, rg in zip(values, requires_grad) if rg]
        self.tangent_layouts = [_subclass(layout) for layout in self._tangent_specs]

    def fake_tangents(self) -> list[torch.Tensor]:
        """Contiguous tangents (in the active fake mode), flat: the plain tensors of each
        differentiable forward value."""
        specs: list[LeafSpec] = []
        for layout in self._tangent_specs:
            specs.extend(layout.leaves if isinstance(layout, SubclassLayout) else [layout])
        return [torch.empty(shape, dtype=dtype, device=device) for shape, dtype, device in specs]

    def rebuild_tangents(self, flat: Sequence[Any]) -> list[Any]:
        """The tangents of the differentiable forward values, subclasses made around `flat`."""
        tangents, position = [], 0
        for layout in self.tangent_layouts:
            if layout is None:
                tangents.append(flat[position])
            else:
                size = layout.outer_size
                tangents.append(rebuild_traced(layout, flat[position:position + layout.count],
                                               contiguous_strides(size)))
            position += count_of(layout)
        return tangents

    def flatten_outputs(self, outputs: Sequence[Any], num_values: int) -> tuple:
        """What the traced function returns, flat: the forward values, then the gradients."""
        values, grads = outputs[:num_values], outputs[num_values:]
        self.value_layouts = [_value_layout(value) for value in values]
        self.gradient_layouts = [layout_of(grad) for grad in grads]
        value_subclasses = [_subclass(layout) for layout in self.value_layouts]
        return tuple(flatten_values(values, value_subclasses) + flatten_values(grads, self.gradient_layouts))

    @staticmethod
    def check_plain(graph: torch.fx.GraphModule) -> None:
        """The traced graph takes and returns plain tensors only (a subclass that escaped the
        desugaring would reach a code generator that cannot run it)."""
        output = next(node for node in reversed(graph.graph.nodes) if node.op == "output")
        nodes = [node for node in graph.graph.nodes if node.op == "placeholder"]
        nodes += [node for node in output.args[0] if isinstance(node, torch.fx.Node)]
        for node in nodes:
            value = node.meta.get("val")
            if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor and is_wrapper_subclass(value):
                raise BackendError(
                    f"AOT autograd left the tensor subclass `{type(value).__qualname__}` in an aten graph "
                    f"(`{node.name}`)",
                    explanation="Its graphs must take and return the plain tensors subclasses are made of.",
                    hints=["Compile with backend='eager', or report this program to graphwright."],
                    user_stack=user_frames_of_stack(),
                )

    # --- indices between the flat graphs and the signature's values ------------------------------

    @property
    def _value_subclasses(self) -> list[SubclassLayout | None]:
        return [_subclass(layout) for layout in self.value_layouts]

    @property
    def num_flat_inputs(self) -> int:
        return len(self.flat_inputs)

    @property
    def num_flat_values(self) -> int:
        return sum(count_of(layout) for layout in self._value_subclasses)

    def flat_inputs_of(self, inputs: Sequence[int]) -> list[int]:
        """The flat placeholders of the given inputs."""
        return [self._input_starts[i] + k for i in inputs for k in range(count_of(self.input_layouts[i]))]

    def flat_values_of(self, values: Sequence[int]) -> list[int]:
        """The flat outputs of the given forward values."""
        layouts = self._value_subclasses
        starts = _starts(layouts)
        return [starts[i] + k for i in values for k in range(count_of(layouts[i]))]

    def inputs_without_gradient(self, part: Partition) -> tuple[int, ...]:
        """The inputs the flat backward gives no gradient."""
        missing = set(part.inputs_without_gradient)
        starts = _starts(self.gradient_layouts)
        return tuple(i for i, (start, layout) in enumerate(zip(starts, self.gradient_layouts))
                     if all(start + k in missing for k in range(count_of(layout))))

    def gradient_tangents(self, part: Partition) -> tuple[frozenset[int], ...]:
        """For each input's gradient, the tangents (by differentiable forward value) it reads."""
        tangent_of_flat = [k for k, layout in enumerate(self.tangent_layouts) for _ in range(count_of(layout))]
        starts = _starts(self.gradient_layouts)
        return tuple(frozenset(tangent_of_flat[t] for k in range(count_of(layout))
                               for t in part.gradient_tangents[start + k])
                     for start, layout in zip(starts, self.gradient_layouts))

    # --- at run time ---------------------------------------------------------------------------

    def forward(self, compiled, graph: torch.fx.GraphModule, detached: Sequence[int] = ()) -> FlatForward:
        """The compiled flat forward (or inference) `graph`, taking and returning the values the user
        sees. The `detached` inputs (no gradient reaches them) come detached: a subclass whose flatten
        context says whether it requires grad (a jagged tensor) is checked against that context."""
        layouts = [layout_of(self._fakes[i].detach()) if i in detached and layout is not None
                   and self._fakes[i].requires_grad else layout for i, layout in enumerate(self.input_layouts)]
        return FlatForward(compiled, layouts, self._value_subclasses,
                           Rebuilder(self.flat_inputs, _output_values(graph)),
                           [_size_reader(*size_input[:4]) for size_input in self.size_inputs])

    def backward(self, compiled, part: Partition) -> FlatBackward:
        """The compiled flat backward of `part`, taking subclass tangents and giving subclass gradients."""
        inputs = [node.meta.get("val") for node in part.backward.graph.nodes if node.op == "placeholder"]
        return FlatBackward(compiled, part.num_saved_tensors + part.num_saved_other, self.tangent_layouts,
                            self.gradient_layouts, Rebuilder(inputs, _output_values(part.backward)), part.backward)


SizeInput = tuple[int, tuple[str, ...], str, int, torch.SymInt]
"""(input index, attribute path to a nested subclass, "size" or "stride", dimension, the symbol)."""


def _outer_size_inputs(fakes: Sequence[Any], layouts: Sequence[SubclassLayout | None],
                       flat: Sequence[Any]) -> list[SizeInput]:
    bound = {symbol for value in flat for symbol in _symbols_of(value)}
    found: list[SizeInput] = []
    for index, (fake, layout) in enumerate(zip(fakes, layouts)):
        if layout is None:
            continue
        for path, tensor in _subclass_tensors(fake, layout, ()):
            for kind in ("size", "stride"):
                for dim, value in enumerate(getattr(tensor, kind)()):
                    if isinstance(value, torch.SymInt) and not is_ragged_size(value) \
                            and isinstance(value.node.expr, sympy.Symbol) \
                            and value.node.expr not in bound:
                        bound.add(value.node.expr)
                        found.append((index, path, kind, dim, value))
    return found


def _subclass_tensors(tensor: torch.Tensor, layout: SubclassLayout, path: tuple[str, ...]):
    yield path, tensor
    for name, inner in zip(layout.attributes, layout.inner):
        if inner is not None:
            yield from _subclass_tensors(getattr(tensor, name), inner, (*path, name))


def _symbols_of(value: Any) -> set:
    if isinstance(value, torch.SymInt):
        return {value.node.expr} if isinstance(value.node.expr, sympy.Symbol) else set()
    if not isinstance(value, torch.Tensor):
        return set()
    numbers = (*value.shape, *value.stride(), value.storage_offset())
    return {n.node.expr for n in numbers if isinstance(n, torch.SymInt) and not is_static_ragged_size(n)
            and isinstance(n.node.expr, sympy.Symbol)}


def _size_reader(index: int, path: tuple[str, ...], kind: str, dim: int) -> Callable[[Sequence[Any]], int]:
    def read(args):
        tensor = args[index]
        for name in path:
            tensor = getattr(tensor, name)
        return tensor.size(dim) if kind == "size" else tensor.stride(dim)

    return read


def _output_values(graph: torch.fx.GraphModule) -> list[Any]:
    output = next(node for node in reversed(graph.graph.nodes) if node.op == "output")
    return [value.meta.get("val") if isinstance(value, torch.fx.Node) else value for value in output.args[0]]


def _producers(layouts: Sequence[SubclassLayout | None], rebuilder: Rebuilder) -> list[tuple[int, Rebuild | None]]:
    return [(start, None if layout is None else rebuilder.rebuild(layout, start))
            for start, layout in zip(_starts(layouts), layouts)]


class FlatForward:
    """A compiled flat forward graph behind the signature's calling convention. Hot path: the
    plans (which arguments to flatten, which values to rebuild) are made once."""

    def __init__(self, compiled, input_layouts: Sequence[SubclassLayout | None],
                 value_layouts: Sequence[SubclassLayout | None], rebuilder: Rebuilder,
                 size_readers: Sequence[Callable[[Sequence[Any]], int]] = ()) -> None:
        self._compiled = compiled
        self._size_readers = list(size_readers)
        self._inputs = [(i, layout) for i, layout in enumerate(input_layouts)]
        self._values = _producers(value_layouts, rebuilder)
        self._keeps_inputs = rebuilder.reads_inputs
        self._num_flat_values = sum(count_of(layout) for layout in value_layouts)

    def __call__(self, args: list) -> list:
        flat: list[Any] = []
        for i, layout in self._inputs:
            if layout is None:
                flat.append(args[i])
            else:
                _check_input(args[i], layout, i)
                flatten_into(args[i], layout, flat)
        for read in self._size_readers:
            flat.append(read(args))
        values = self._compiled(list(flat) if self._keeps_inputs else flat)
        result = [values[start] if rebuild is None else rebuild(flat, values) for start, rebuild in self._values]
        result.extend(values[self._num_flat_values:])
        return result


def _check_input(value: Any, layout: SubclassLayout, index: int) -> None:
    if type(value) is not layout.cls or not _same_structure(value, layout):
        raise BackendError(
            f"Input {index} of a compiled graph is a `{type(value).__qualname__}` of another structure than "
            f"the one it was compiled for ({layout.describe()})",
            explanation="The aten graphs were traced on the inner tensors of a tensor subclass with other "
            "attributes or flatten context.",
            hints=["Compile through `graphwright.compile`, whose guards recompile for another structure."],
            user_stack=user_frames_of_stack(),
        )


def _same_structure(value: Any, layout: SubclassLayout) -> bool:
    attributes, context = flatten_signature(value)
    custom = metadata_guard(layout.cls)
    if set(attributes) != layout.names or not (same_context(context, layout.context_pattern) if custom is None
                                               else custom(layout.context, context)):
        return False
    if any(getattr(value, name) is not opaque for name, opaque in layout.opaque):
        return False
    return all(inner is None or (type(getattr(value, name)) is inner.cls
                                 and _same_structure(getattr(value, name), inner))
               for name, inner in zip(layout.attributes, layout.inner))


class FlatBackward:
    """A compiled flat backward graph behind the signature's convention: `[*saved, *tangents]` in
    (a tangent of a subclass output is that subclass), one gradient per input out.

    The gradient of a plain output may come as a subclass (the output was added to one after
    the call): the flat aten `graph` then runs op by op, the subclass dispatching its operations
    as in eager (`backward_on_subclass`), unless the gradient of a subclass input depends on it
    (its inner gradients would be subclasses: refused)."""

    def __init__(self, compiled, num_saved: int, tangent_layouts: Sequence[SubclassLayout | None],
                 gradient_layouts: Sequence[SubclassLayout | None], rebuilder: Rebuilder,
                 graph: torch.fx.GraphModule | None = None) -> None:
        self._compiled = compiled
        self._graph = graph
        self._num_saved = num_saved
        self._tangents = list(tangent_layouts)
        self._gradients = _producers(gradient_layouts, rebuilder)
        self._gradient_layouts = list(gradient_layouts)
        self._keeps_inputs = rebuilder.reads_inputs

    def __call__(self, args: list) -> list:
        flat = list(args[:self._num_saved])
        run = self._compiled
        subclass_tangent = None
        for k, (tangent, layout) in enumerate(zip(args[self._num_saved:], self._tangents)):
            if layout is None:
                if subclass_tangent is None and type(tangent) is not torch.Tensor and is_wrapper_subclass(tangent):
                    run, subclass_tangent = backward_on_subclass(self._graph, tangent, k), (tangent, k)
                flat.append(tangent)
                continue
            tangent = _coerced(tangent, layout, k)
            start = len(flat)
            flatten_into(tangent, layout, flat)
            for j, (shape, _, _) in enumerate(layout.leaves):
                inner = flat[start + j]
                if not inner.is_contiguous():
                    flat[start + j] = inner = inner.contiguous()
                if all(isinstance(size, int) for size in shape) and tuple(inner.shape) != shape:
                    raise _tangent_error(k, f"its inner tensor {j} has shape {tuple(inner.shape)}, not {shape}",
                                         layout)
        grads = run(list(flat) if self._keeps_inputs else flat)
        if subclass_tangent is not None:
            self._check_plain_inner_gradients(grads, *subclass_tangent)
        return [grads[start] if rebuild is None or grads[start] is None else rebuild(flat, grads)
                for start, rebuild in self._gradients]

    def _check_plain_inner_gradients(self, grads: Sequence[Any], tangent: Any, index: int) -> None:
        for (start, rebuild), layout in zip(self._gradients, self._gradient_layouts):
            if rebuild is not None and any(is_wrapper_subclass(grad) for grad in grads[start:start + layout.count]):
                raise subclass_gradient_error(tangent, index, "the gradient of a subclass input depends on it")


def _coerced(tangent: Any, layout: SubclassLayout, index: int) -> Any:
    """The incoming gradient, with the structure the backward was traced for: coerced by the
    subclass if it can (`__coerce_same_metadata_as_tangent__`, DTensor redistributes), else refused."""
    if type(tangent) is layout.cls and _same_structure(tangent, layout):
        return tangent
    coerce = getattr(type(tangent), "__coerce_same_metadata_as_tangent__", None)
    if coerce is not None:
        coerced = coerce(tangent, layout.context) if type(tangent) is layout.cls \
            else coerce(tangent, layout.context, layout.cls)
        if coerced is not None and type(coerced) is layout.cls and _same_structure(coerced, layout):
            return coerced
    if not is_wrapper_subclass(tangent):
        raise _tangent_error(index, f"it is a `{type(tangent).__qualname__}`", layout)
    attributes, context = flatten_signature(tangent)
    raise _tangent_error(index, f"it is a `{type(tangent).__qualname__}` with attributes {list(attributes)} "
                                f"and context {context!r}", layout)


def _tangent_error(index: int, what: str, layout: SubclassLayout) -> BackendError:
    return BackendError(
        f"The gradient of differentiable output {index} of a compiled graph does not have the structure its "
        f"backward was compiled for: {what}, expected {layout.describe()}",
        explanation="The backward graph was traced with gradients of the forward outputs' own subclass "
        "structure; another structure would compute a wrong gradient.",
        hints=["Pass gradients of the same subclass and metadata as the outputs (e.g. `torch.ones_like(out)`), "
               "or run the backward outside the compiled region."],
        user_stack=user_frames_of_stack(),
    )
