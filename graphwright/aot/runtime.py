"""Running compiled forward/backward graphs as if the original graph ran in eager.

A compiled graph here is a boxed callable: it takes a list of arguments and
returns a sequence. The training path wraps the forward and backward graphs
in one `torch.autograd.Function`; the inference path calls the forward
graph only. Both then do what functionalization took out of the graph:
copy the new values of mutated inputs back into them, and rebuild outputs
that alias an input or another output by replaying the view ops that made
them, so that identity, storage sharing, dtype and strides are as in eager.

`make_training_function` and `make_inference_function` return the hot-path
callables; they are written for speed (no per-call allocation beyond what
autograd needs, precomputed index lists).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

from .._core.errors import BackendError
from .._core.user_stack import user_frames_of_stack
from .metadata import GraphMetadata, OutputInfo, OutputKind
from .subclasses import backward_on_subclass, first_subclass_tangent, make_zeros, zeros_spec
from .views import make_replay

BoxedFn = Callable[[list], Sequence[Any]]


class _Epilogue:
    """Writes back mutated inputs and assembles the user's outputs from the forward values."""

    def __init__(self, meta: GraphMetadata) -> None:
        self.mutated = list(zip(meta.mutated_inputs, meta.mutated_under_no_grad))
        self.num_mutated = len(meta.mutated_inputs)
        self.bases_start = self.num_mutated + len(meta.graph_output_indices)
        self.num_bases = len(meta.hidden_bases)
        self.producers = [_producer(info) for info in meta.outputs]
        # The common case, every output computed by the graph: skip the per-output dispatch.
        self.all_graph = all(o.kind is OutputKind.GRAPH and not o.no_grad_view for o in meta.outputs)
        self.rebuild = _structure_builder(meta.out_spec)

    def __call__(self, args: Sequence[Any], values: Sequence[Any]) -> Any:
        for (i, under_no_grad), new in zip(self.mutated, values):
            if under_no_grad:
                with torch.no_grad():
                    args[i].copy_(new)
            else:
                args[i].copy_(new)
        if self.all_graph:
            return self.rebuild(values[self.num_mutated :])
        bases = values[self.bases_start : self.bases_start + self.num_bases]
        flat: list[Any] = []
        next_graph_value = iter(values[self.num_mutated : self.bases_start])
        for produce in self.producers:
            flat.append(produce(args, flat, bases, next_graph_value))
        return self.rebuild(flat)


def _structure_builder(spec: pytree.TreeSpec) -> Callable[[Sequence[Any]], Any]:
    """Flat leaves -> the output structure; a single tensor and a flat tuple skip pytree."""
    if spec.is_leaf():
        return lambda leaves: leaves[0]
    if spec.type is tuple and all(child.is_leaf() for child in spec.children()):
        return tuple
    return lambda leaves: pytree.tree_unflatten(list(leaves), spec)


Producer = Callable[[Sequence[Any], list, Sequence[Any], Iterator[Any]], Any]
"""`produce(args, earlier outputs, hidden bases, the graph's next values)`: one output leaf."""


def _producer(info: OutputInfo) -> Producer:
    """How one output leaf is made on each call, decided once."""
    kind, index = info.kind, info.index
    if kind is OutputKind.GRAPH:
        # a no-grad view the graph computed (its chain could not be replayed): a leaf that requires grad
        if info.no_grad_view:
            return lambda args, earlier, bases, graph_values: next(graph_values).requires_grad_()
        return lambda args, earlier, bases, graph_values: next(graph_values)
    if kind is OutputKind.CONSTANT:
        value = info.value
        return lambda args, earlier, bases, graph_values: value
    if kind is OutputKind.INPUT:
        return lambda args, earlier, bases, graph_values: args[index]
    if kind is OutputKind.SAME_OUTPUT:
        return lambda args, earlier, bases, graph_values: earlier[index]
    source = {OutputKind.INPUT_VIEW: 0, OutputKind.OUTPUT_VIEW: 1, OutputKind.INTERMEDIATE_VIEW: 2}[kind]
    detach = not info.requires_grad
    if info.no_grad_view:
        # more recorded steps than the chain has: the whole chain under no_grad (the gradient
        # still stops before the base)
        tail = info.differentiable_tail if info.differentiable_tail < len(info.view) else 0
        split = len(info.view) - tail
        return _no_grad_then_differentiable(source, index, detach, make_replay(info.view[:split]),
                                            make_replay(info.view[split:]))
    replay = make_replay(info.view)

    def produce(args, earlier, bases, graph_values):
        base = (args, earlier, bases)[source][index]
        if detach and base.requires_grad:
            base = base.detach()
        return replay(base, args)

    return produce


def _no_grad_then_differentiable(source: int, index: int, detach: bool, no_grad_steps, differentiable_steps):
    """A view whose first steps eager made under `no_grad` (a leaf that requires grad), the rest
    recorded by autograd."""
    def produce(args, earlier, bases, graph_values):
        base = (args, earlier, bases)[source][index]
        if detach and base.requires_grad:
            base = base.detach()
        with torch.no_grad():
            view = no_grad_steps(base, args)
        return differentiable_steps(view, args)

    return produce


def make_inference_function(forward: BoxedFn, meta: GraphMetadata) -> Callable[..., Any]:
    """The callable for calls that need no gradient: forward graph, then the epilogue."""
    epilogue = _Epilogue(meta)

    def run(*args):
        # The aten graph has no grad-mode switches left: autograd must not record it.
        with torch.no_grad():
            values = forward(list(args))
        return epilogue(args, values)

    return run


def _double_backward_error() -> BackendError:
    return BackendError(
        "Double backward through a graphwright-compiled graph is not supported",
        explanation=(
            "The gradients of an ahead-of-time compiled graph come from a compiled backward "
            "graph, which has no backward of its own."
        ),
        hints=[
            "Compute higher-order gradients outside the compiled region, or compile with "
            "backend='eager'."
        ],
        user_stack=user_frames_of_stack(),
    )


class _NoDoubleBackward(torch.autograd.Function):
    """Ties gradients computed with `create_graph=True` to what they depend on; differentiating them raises.

    `forward(num_grads, *grads, *dependencies)`: the dependencies (saved
    tensors and incoming gradients that require grad) only make the graph
    reach this node, as eager's double backward would.
    """

    @staticmethod
    def forward(ctx, num_grads, *grads_and_dependencies):
        return tuple(g.view_as(g) for g in grads_and_dependencies[:num_grads])

    @staticmethod
    def backward(ctx, *grad_grads):
        raise _double_backward_error()


def _mark_no_double_backward(grads: Sequence[Any], dependencies: Sequence[Any]) -> tuple:
    dependencies = [t for t in dependencies if isinstance(t, torch.Tensor) and t.requires_grad]
    present = [i for i, g in enumerate(grads) if g is not None]
    if not dependencies or not present:
        return tuple(grads)
    marked = _NoDoubleBackward.apply(len(present), *(grads[i] for i in present), *dependencies)
    result = list(grads)
    for i, g in zip(present, marked):
        result[i] = g
    return tuple(result)


def _with_grad_on(apply: Callable[..., Any]) -> Callable[..., Any]:
    def apply_with_grad_on(*args):
        with torch.enable_grad():
            return apply(*args)

    return apply_with_grad_on


class LazyBackward:
    """Compiles the backward graph on the first backward call, as eager would first need it."""

    def __init__(self, compile_backward: Callable[[], BoxedFn]) -> None:
        self._compile = compile_backward
        self._compiled: BoxedFn | None = None

    def __call__(self, args: list) -> Sequence[Any]:
        if self._compiled is None:
            self._compiled = self._compile()
        return self._compiled(args)


def _unreached_as_none(grads: Sequence[Any], gradient_tangents: Sequence[frozenset[int]], missing: set[int],
                       num_tangents: int) -> tuple:
    """The gradients, None for each input no defined tangent reaches."""
    if len(missing) == num_tangents:
        return (None,) * len(grads)
    return tuple(None if depends and depends <= missing else grad
                 for grad, depends in zip(grads, gradient_tangents))


def make_training_function(
    forward: BoxedFn,
    backward: BoxedFn,
    meta: GraphMetadata,
    *,
    num_saved_tensors: int,
    detached_inputs: Sequence[int],
    gradient_tangents: Sequence[frozenset[int]],
    enables_grad: bool = False,
    subclass_tangents: bool = False,
    backward_graph: torch.fx.GraphModule | None = None,
) -> Callable[..., Any]:
    """The callable for calls that need gradients: one autograd.Function around both graphs.

    `enables_grad`: the graph switches grad mode on, so the autograd.Function records its
    outputs even in a call made under `no_grad` (those computed with grad off are marked
    non-differentiable, as for any call).

    `detached_inputs` never get a gradient (the graph uses them only where no gradient flows,
    or not at all): they enter the autograd.Function detached, as they would be absent from
    eager's autograd graph; otherwise backward would reach the autograd graph they came from
    (which may be gone: a tensor the previous call stored and this one reads).

    An output nothing differentiates gets no gradient (None, not zeros): the backward
    graph runs on zeros for it, and an input whose gradient depends only on such outputs
    (`gradient_tangents`) gets None, as in eager, where no gradient reaches it (an
    optimizer skips a None gradient but decays a zero one).

    `subclass_tangents`: the backward takes tensor subclass tangents (a desugared backward,
    `desugar.py`, which checks them). Otherwise a gradient that is a tensor subclass (the
    output was added to one after the call) runs `backward_graph`, the aten graph the backward
    was compiled from, op by op: its operations dispatch to the subclass as eager's backward
    does (`backward_on_subclass`).
    """
    epilogue = _Epilogue(meta)
    num_forward = meta.num_forward_outputs
    differentiable = [i for i, rg in enumerate(meta.forward_requires_grad) if rg]
    non_differentiable = [i for i, rg in enumerate(meta.forward_requires_grad) if not rg]

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            values = forward(list(args))
            # a backward run under deterministic algorithms for a forward run without is
            # refused, as PyTorch refuses it (its saved values came from nondeterministic kernels)
            ctx.deterministic = torch.are_deterministic_algorithms_enabled()
            saved = values[num_forward:]
            ctx.save_for_backward(*saved[:num_saved_tensors])
            ctx.saved_other = saved[num_saved_tensors:]
            outputs = tuple(values[:num_forward])
            ctx.mark_non_differentiable(
                *(outputs[i] for i in non_differentiable if isinstance(outputs[i], torch.Tensor))
            )
            ctx.set_materialize_grads(False)
            ctx.tangent_layouts = [zeros_spec(outputs[i]) for i in differentiable]
            return outputs

        @staticmethod
        def backward(ctx, *grad_outputs):
            if not ctx.deterministic and torch.are_deterministic_algorithms_enabled():
                raise RuntimeError(
                    "This compiled backward function is being run with torch.use_deterministic_algorithms(True), "
                    "but it was previously generated during the forward function while "
                    "torch.use_deterministic_algorithms(False) was set.")
            tangents = [grad_outputs[i] for i in differentiable]
            missing = {k for k, tangent in enumerate(tangents) if tangent is None}
            if missing:
                tangents = [make_zeros(spec) if tangent is None else tangent
                            for tangent, spec in zip(tangents, ctx.tangent_layouts)]
            run_backward = backward
            if not subclass_tangents:
                index = first_subclass_tangent(tangents)
                if index is not None:
                    run_backward = backward_on_subclass(backward_graph, tangents[index], index)
            args = [*ctx.saved_tensors, *ctx.saved_other, *(tangent.contiguous() for tangent in tangents)]
            if not torch.is_grad_enabled():
                grads = tuple(run_backward(args))
            else:
                with torch.no_grad():
                    grads = run_backward(args)
                grads = _mark_no_double_backward(grads, [*ctx.saved_tensors, *grad_outputs])
            if missing:
                grads = _unreached_as_none(grads, gradient_tangents, missing, len(tangents))
            return grads

    apply = _with_grad_on(CompiledFunction.apply) if enables_grad else CompiledFunction.apply
    if not detached_inputs:
        def run(*args):
            return epilogue(args, apply(*args))

        return run

    # graph outputs that require grad though no gradient reaches an input: computed from a view
    # made under no_grad of an input leaf, itself a leaf that requires grad in eager
    own_leaves = [i for i in differentiable if i >= len(meta.mutated_inputs)]

    def run_detaching(*args):
        inputs = list(args)
        for i in detached_inputs:
            if isinstance(inputs[i], torch.Tensor) and inputs[i].requires_grad:
                inputs[i] = inputs[i].detach()
        values = apply(*inputs)
        if torch.is_grad_enabled() and any(not values[i].requires_grad for i in own_leaves):
            values = list(values)
            for i in own_leaves:
                if not values[i].requires_grad:
                    values[i] = values[i].requires_grad_()
        return epilogue(args, values)

    return run_detaching
