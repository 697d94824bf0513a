"""What a graph does to its inputs and what its outputs are.

A functionalized run of the graph on fake tensors (the one the trace records)
tells us which inputs it mutates, which outputs require grad, and which
outputs are not new tensors at all but an input, a view of an input, or
another output again. Tracing and the runtime wrapper read this; this module
never traces and never runs real tensors.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
from collections.abc import Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.multiprocessing.reductions import StorageWeakRef

from .._core.errors import BackendError
from .._core.jagged import is_jagged
from .._core.user_stack import user_frames_of_stack
from . import jagged
from .views import ViewChain, input_size_names, relative_chain, view_chain


class OutputKind(enum.Enum):
    GRAPH = "computed by the graph"
    INPUT = "an input itself"
    INPUT_VIEW = "a view of an input"
    SAME_OUTPUT = "the same object as an earlier output"
    OUTPUT_VIEW = "a view of an earlier output the graph computes"
    INTERMEDIATE_VIEW = "a view of an intermediate that other outputs view too"
    CONSTANT = "a Python constant"


@dataclasses.dataclass(frozen=True)
class OutputInfo:
    """How the runtime produces one flat output leaf.

    `index` names the input (INPUT, INPUT_VIEW), earlier output (SAME_OUTPUT,
    OUTPUT_VIEW) or hidden base (INTERMEDIATE_VIEW) it refers to; `view` is
    the chain of aten view ops that makes the output from that base, for the
    view kinds; `value` is the constant for CONSTANT. `no_grad_view`: a view
    made under `no_grad` of a tensor that requires grad, which eager makes a
    leaf that requires grad (no gradient flows through it to its base).
    """

    kind: OutputKind
    requires_grad: bool = False
    index: int = -1
    view: ViewChain | None = None
    value: Any = None
    no_grad_view: bool = False
    differentiable_tail: int = 0


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Shape, dtype and device of a tensor to fabricate (a tangent) while tracing; `stride`: an
    output's strides as eager lays it out (None for a mutated input's new value)."""

    shape: tuple
    dtype: torch.dtype
    device: torch.device
    stride: tuple | None = None


@dataclasses.dataclass
class GraphMetadata:
    """Everything the tracer and the runtime must know about one graph.

    The forward graph returns, in order, the new values of `mutated_inputs`,
    the outputs of kind GRAPH, then the hidden bases: intermediates that
    several outputs are views of (`hidden_bases[k]` is one such output's
    index), from which the runtime rebuilds those views so that they share
    storage as in eager. `forward_requires_grad` says which forward values
    are differentiable (each one gets a tangent in the joint graph).
    An input mutated only under `no_grad` or through a detached alias (a
    parameter clamped or renormalised in place) is written back under
    `no_grad` too, as eager did it.
    """

    mutated_inputs: list[int]
    mutated_under_no_grad: list[bool]
    outputs: list[OutputInfo]
    out_spec: pytree.TreeSpec
    hidden_bases: list[int]
    forward_requires_grad: list[bool]
    forward_specs: list[TensorSpec | None]

    @property
    def graph_output_indices(self) -> list[int]:
        return [i for i, info in enumerate(self.outputs) if info.kind is OutputKind.GRAPH]

    @property
    def num_forward_outputs(self) -> int:
        return len(self.mutated_inputs) + len(self.graph_output_indices) + len(self.hidden_bases)

    def forward_values(self, functional_inputs: Sequence[Any], flat_outputs: Sequence[Any]) -> list[Any]:
        """What the forward graph returns, picked from one run's inputs and flat outputs."""
        return (
            [functional_inputs[i] for i in self.mutated_inputs]
            + [flat_outputs[i] for i in self.graph_output_indices]
            + [flat_outputs[k]._base for k in self.hidden_bases]
        )

    @property
    def tangent_specs(self) -> list[TensorSpec]:
        return [
            spec
            for spec, rg in zip(self.forward_specs, self.forward_requires_grad)
            if rg and spec is not None
        ]


# Functionalization runs at the C++ `Functionalize` dispatch key (wrappers made by
# `torch._to_functional_tensor`), below autograd and above every Python
# dispatch mode, so the tracer's recording mode sees plain functional aten
# calls on the unwrapped fake tensors whatever its place on the mode stack.
# The Python dispatcher must be on too: ops whose schema hides a mutation
# (`native_batch_norm` updates running stats) have Python kernels that turn
# them into honest mutating ops above functionalization; without them the
# mutation would happen below it, unseen.


@contextlib.contextmanager
def functionalization():
    """Turn in-place and view ops on functional wrappers into functional ops while active."""
    torch._enable_functionalization(reapply_views=True)
    try:
        with enable_python_dispatcher():
            yield
    finally:
        torch._disable_functionalization()


@contextlib.contextmanager
def functionalization_paused():
    """Inside `functionalization()`: make tensors that are not functional wrappers (factory
    functions would otherwise make wrappers)."""
    torch._disable_functionalization()
    try:
        yield
    finally:
        torch._enable_functionalization(reapply_views=True)


def to_functional(value: Any) -> Any:
    """Wrap a tensor for functionalization, keeping its requires_grad. A jagged nested tensor is
    made again around wrapped inner tensors: autograd cannot take a functional wrapper of a
    nested tensor (it would ask the wrapper for nested sizes the subclass does not give), so
    functionalization sees its inner tensors and autograd the subclass, as in PyTorch."""
    if not isinstance(value, torch.Tensor):
        return value
    if is_jagged(value):
        return jagged.with_inner(value, to_functional)
    wrapped = torch._to_functional_tensor(value)
    torch._mirror_autograd_meta_to(value, wrapped)
    return wrapped


def laid_out_otherwise(strides: tuple | None, value: Any) -> bool:
    """Whether `value`, the current value of a functional tensor, may have other strides than
    eager's `strides` (its wrapper's, read before a sync): functionalization rebuilds a tensor
    written through a view (`out=` into `o.t()`) from the view's new value, transposed. Strides
    of dimensions of size 1 do not count; symbolic strides count as other unless known equal
    (asking would specialise the sizes)."""
    if strides is None or not isinstance(value, torch.Tensor) or statically_known_true(value.numel() == 0):
        return False
    return any(not statically_known_true(size == 1) and not statically_known_true(a == b)
               for a, b, size in zip(value.stride(), strides, value.shape))


def from_functional(value: Any) -> Any:
    """The current value of a functional wrapper, with pending mutations applied."""
    if isinstance(value, torch.Tensor) and torch._is_functional_tensor(value):
        torch._sync(value)
        return torch._from_functional_tensor(value)
    if jagged.holds_functional(value):
        return jagged.with_inner(value, from_functional)
    return value



def describe_run(
    fake_inputs: Sequence[Any],
    functional_inputs: Sequence[Any],
    flat_outputs: Sequence[Any],
    out_spec: pytree.TreeSpec,
    *,
    grad_enabled: bool,
    eager_outputs: Sequence[Any] | None = None,
) -> GraphMetadata:
    """What one functionalized run of the graph did, read right after it (before any sync).

    `functional_inputs` are the wrappers of `fake_inputs` the graph ran on and
    `flat_outputs` what it returned; functionalization is still on. The run is
    made in the call's grad mode; `grad_enabled` says whether this signature
    differentiates at all (False: nothing requires grad, and every mutation
    is written back as under `no_grad`). `eager_outputs`: the values the strict
    tracer recorded for the flat outputs, where known (their strides are eager's).

    >>> meta = describe_run(fakes, functional_inputs, flat_outputs, out_spec, grad_enabled=True)
    >>> meta.mutated_inputs, [o.kind for o in meta.outputs]
    """
    strides = _EagerStrides(flat_outputs, eager_outputs)
    mutated = _mutated_inputs(fake_inputs, functional_inputs)
    under_no_grad = [
        not grad_enabled or _mutated_out_of_autograd_sight(fake_inputs[i], functional_inputs[i]) for i in mutated
    ]
    chains = _ViewChains(input_size_names(fake_inputs))
    outputs = _describe_outputs(flat_outputs, functional_inputs, chains)
    hidden_bases = _share_intermediate_bases(flat_outputs, outputs, chains, strides)
    meta = GraphMetadata(mutated, under_no_grad, outputs, out_spec, hidden_bases, [], [])
    forward_values = meta.forward_values(functional_inputs, flat_outputs)
    meta.forward_specs = [_tensor_spec(v, strides.get(v) if k >= len(mutated) else None)
                          for k, v in enumerate(forward_values)]
    leaves = [meta.outputs[i].no_grad_view for i in meta.graph_output_indices]
    hidden = under_no_grad + leaves + [False] * (len(forward_values) - len(mutated) - len(leaves))
    meta.forward_requires_grad = [
        isinstance(v, torch.Tensor) and v.requires_grad and grad_enabled and not h
        for v, h in zip(forward_values, hidden)
    ]
    return meta


def _tensor_spec(value: Any, stride: tuple | None) -> TensorSpec | None:
    if not isinstance(value, torch.Tensor):
        return None
    return TensorSpec(tuple(value.shape), value.dtype, value.device, stride)


def _same_sizes(recorded: Any, value: torch.Tensor) -> bool:
    """Whether the tracer's `recorded` tensor is known to have `value`'s sizes, without a guard
    (a size that depends on data cannot be asked; a symbol of another shape environment
    is not known equal)."""
    if not isinstance(recorded, torch.Tensor) or recorded.dim() != value.dim():
        return False
    for a, b in zip(recorded.shape, value.shape):
        if isinstance(a, torch.SymInt) or isinstance(b, torch.SymInt):
            if not (isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt)
                    and a.node.shape_env is b.node.shape_env and statically_known_true(a == b)):
                return False
        elif a != b:
            return False
    return True


class _EagerStrides:
    """The strides eager gives the outputs and their bases.

    Functionalization rebuilds a tensor written through a view from the view's
    new value, and a wrapper takes its value's strides at each sync (a read of
    the tensor in the graph syncs it): a base written by `out=` into `o.t()`
    ends transposed. The strides eager gives are those of the values the
    strict tracer recorded for the graph's outputs (`eager_outputs`, with their
    `_base`), which ran the program unfunctionalized; where it recorded none,
    what the wrappers say before the final sync. Each tensor read is kept: a base
    no one else holds would be a new Python object on each `_base`, its `id`
    another's."""

    def __init__(self, flat_outputs: Sequence[Any], eager_outputs: Sequence[Any] | None) -> None:
        self._seen: dict[int, tuple[torch.Tensor, tuple]] = {}
        eager = [None] * len(flat_outputs) if eager_outputs is None else eager_outputs
        for out, recorded in zip(flat_outputs, eager):
            if not isinstance(out, torch.Tensor):
                continue
            same = _same_sizes(recorded, out)
            self._record(out, recorded if same else out)
            base, recorded_base = out._base, recorded._base if same else None
            if isinstance(base, torch.Tensor):
                self._record(base, recorded_base if _same_sizes(recorded_base, base) else base)

    def _record(self, t: torch.Tensor, laid_out_as: torch.Tensor) -> None:
        self._seen.setdefault(id(t), (t, tuple(laid_out_as.stride())))

    def get(self, t: Any) -> tuple | None:
        seen = self._seen.get(id(t))
        return seen[1] if seen is not None and seen[0] is t else None


def _mutated_out_of_autograd_sight(original: torch.Tensor, functional: torch.Tensor) -> bool:
    """Every mutation of the input ran under no_grad or through a detached alias.

    A leaf that requires grad (a parameter) can only have been mutated that
    way: eager refuses visible in-place ops on it. Functionalization does not
    flag every detached alias (`F.embedding(max_norm=...)` renormalises
    `weight.detach()`), hence the leaf rule.
    """
    if original.is_leaf and original.requires_grad:
        return True
    return torch._functionalize_are_all_mutations_under_no_grad_or_inference_mode(
        functional
    ) or torch._functionalize_are_all_mutations_hidden_from_autograd(functional)


def _mutated_inputs(fake_inputs: Sequence[Any], functional_inputs: Sequence[Any]) -> list[int]:
    mutated = []
    for i, t in enumerate(functional_inputs):
        if not isinstance(t, torch.Tensor):
            continue
        if is_jagged(t):
            jagged.refuse_mutation(t, i)
            continue
        if torch._functionalize_has_metadata_mutation(t) and _layout_changed(fake_inputs[i], t):
            raise BackendError(
                "A compiled graph changes the shape or strides of an input in place",
                explanation=(
                    f"Input {i} has its metadata mutated (e.g. by `t_()`, `resize_()` or "
                    "`unsqueeze_()`); ahead-of-time autograd only supports data mutations."
                ),
                hints=["Use the out-of-place version of the op and return its result."],
                user_stack=user_frames_of_stack(),
            )
        if torch._functionalize_has_data_mutation(t):
            mutated.append(i)
    return mutated


def _layout_changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether metadata mutations left a tensor with other sizes, strides or offset: some cancel
    out (a decomposition that transposes an `out` tensor in place and back)."""
    return not (statically_known_true(before.dim() == after.dim())
                and all(statically_known_true(a == b) for a, b in zip(before.shape, after.shape))
                and all(statically_known_true(a == b) for a, b in zip(before.stride(), after.stride()))
                and statically_known_true(before.storage_offset() == after.storage_offset()))


class _ViewChains:
    """The view chains of one run's tensors, read once each."""

    def __init__(self, size_names) -> None:
        self._size_names = size_names
        self._chains: dict[int, Any] = {}

    def of(self, t: torch.Tensor):
        if id(t) not in self._chains:
            self._chains[id(t)] = (t, view_chain(t, self._size_names))  # `t` kept: its id stays its own
        return self._chains[id(t)][1]

    def between(self, view: torch.Tensor, base: torch.Tensor) -> ViewChain | None:
        """The view ops that make `view` from `base` (which shares its storage)."""
        return relative_chain(self.of(view), self.of(base))


def _describe_outputs(flat_outputs: Sequence[Any], functional_inputs: Sequence[Any],
                      chains: _ViewChains) -> list[OutputInfo]:
    input_storages = {
        StorageWeakRef(t.untyped_storage()): i
        for i, t in reversed(list(enumerate(functional_inputs)))
        if isinstance(t, torch.Tensor)
    }
    infos: list[OutputInfo] = []
    computed: dict[StorageWeakRef, list[int]] = {}  # the outputs of kind GRAPH so far, by storage
    for j, out in enumerate(flat_outputs):
        info = _describe_output(out, flat_outputs[:j], computed, functional_inputs, input_storages, chains)
        if info.kind is OutputKind.GRAPH and isinstance(out, torch.Tensor):
            computed.setdefault(StorageWeakRef(out.untyped_storage()), []).append(j)
        infos.append(info)
    return infos


def _share_intermediate_bases(flat_outputs: Sequence[Any], infos: list[OutputInfo], chains: _ViewChains,
                              strides: _EagerStrides) -> list[int]:
    """Turn outputs that view one intermediate into INTERMEDIATE_VIEWs of a hidden base.

    Such outputs share the intermediate's storage; the intermediate is the autograd base of
    one of them (a dtype view has none of its own, but joins the others by its storage).
    Rewrites `infos` in place; returns, per hidden base, the index of the output it is the
    base of.
    """
    groups: dict[StorageWeakRef, list[int]] = {}
    for i, (out, info) in enumerate(zip(flat_outputs, infos)):
        if info.kind is OutputKind.GRAPH and isinstance(out, torch.Tensor):
            groups.setdefault(StorageWeakRef(out.untyped_storage()), []).append(i)
    hidden_bases = []
    for members in groups.values():
        owner = next((i for i in members if flat_outputs[i]._base is not None), None)
        if owner is None:
            continue
        base = flat_outputs[owner]._base
        views = [(i, chains.between(flat_outputs[i], base)) for i in members]
        views = [(i, view) for i, view in views if view is not None]
        if len(views) < 2 and not laid_out_otherwise(strides.get(base), from_functional(base)):
            continue  # one view: the graph computes it (a base written through a view: rebuilt)
        for i, view in views:
            infos[i] = dataclasses.replace(infos[i], kind=OutputKind.INTERMEDIATE_VIEW, index=len(hidden_bases),
                                           view=view)
        hidden_bases.append(owner)
    return hidden_bases


def _describe_output(out, earlier, computed, functional_inputs, input_storages, chains) -> OutputInfo:
    if not isinstance(out, torch.Tensor):
        if isinstance(out, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return OutputInfo(OutputKind.GRAPH)
        return OutputInfo(OutputKind.CONSTANT, value=out)
    info = _describe_tensor_output(out, earlier, computed, functional_inputs, input_storages, chains)
    if out.requires_grad and out._is_view():
        if out.grad_fn is None:
            return dataclasses.replace(info, no_grad_view=True)
        if _cut_from_base(out, info, earlier, functional_inputs):
            return dataclasses.replace(info, no_grad_view=True, differentiable_tail=_differentiable_steps(out))
    return info


# Past this many autograd nodes the walk gives up and takes the view as differentiable.
_MAX_NODES_WALKED = 256


def _cut_from_base(out: torch.Tensor, info: OutputInfo, earlier: Sequence[Any],
                   functional_inputs: Sequence[Any]) -> bool:
    """A view of an input (or earlier output) that requires grad, whose autograd history does not
    reach that base: a step of its chain was made under `no_grad` (eager made that step a leaf
    that requires grad). Replayed differentiably, the gradient would reach the base."""
    if info.kind is OutputKind.INPUT_VIEW:
        base = functional_inputs[info.index]
    elif info.kind is OutputKind.OUTPUT_VIEW:
        base = earlier[info.index]
    else:
        return False
    if not base.requires_grad:
        return False
    target = base.grad_fn
    pending, seen = [out.grad_fn], set()
    while pending and len(seen) < _MAX_NODES_WALKED:
        node = pending.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if node is target or getattr(node, "variable", None) is base:
            return False
        pending.extend(next_node for next_node, _ in node.next_functions)
    return not pending


def _differentiable_steps(out: torch.Tensor) -> int:
    """How many of the last view steps autograd recorded (one node each) before the step made
    under `no_grad`, whose result is a leaf."""
    steps, node = 0, out.grad_fn
    while node is not None and not hasattr(node, "variable") and steps < _MAX_NODES_WALKED:
        steps += 1
        node = node.next_functions[0][0] if node.next_functions else None
    return steps


def _describe_tensor_output(out, earlier, computed, functional_inputs, input_storages, chains) -> OutputInfo:
    """`earlier`: the outputs before `out`; `computed`: those of kind GRAPH, by storage."""
    requires_grad = out.requires_grad
    for i, inp in enumerate(functional_inputs):
        if out is inp:
            return OutputInfo(OutputKind.INPUT, requires_grad, index=i)
    for j, prev in enumerate(earlier):
        if prev is out:
            return OutputInfo(OutputKind.SAME_OUTPUT, requires_grad, index=j)
    # A view whose chain cannot be replayed (a data-dependent size in its arguments) is
    # computed by the graph instead: the same values, dtype and strides, its own storage.
    storage = StorageWeakRef(out.untyped_storage())
    base_input = input_storages.get(storage)
    if base_input is not None:
        view = chains.between(out, functional_inputs[base_input])
        if view is not None:
            return OutputInfo(OutputKind.INPUT_VIEW, requires_grad, index=base_input, view=view)
    for j in computed.get(storage, ()):
        view = chains.between(out, earlier[j])
        if view is not None:
            return OutputInfo(OutputKind.OUTPUT_VIEW, requires_grad, index=j, view=view)
    return OutputInfo(OutputKind.GRAPH, requires_grad)
