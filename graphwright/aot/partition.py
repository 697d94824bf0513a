"""Splitting a joint forward+backward graph into a forward and a backward graph.

The forward graph computes the forward values and also returns the tensors
(and sizes) the backward needs, the "saved" values; the backward graph takes
those saved values and the tangents and returns the input gradients.

Which values cross the boundary is a memory decision. We start from the
simple rule (save every forward value the backward reads), then let the
backward recompute what the user checkpointed (operations marked by
`torch.utils.checkpoint`, see `_core/recompute.py`), then, when
`recompute=True`, cheap deterministic ops (pointwise math and views) whenever
that saves fewer bytes. Random ops are never recomputed, so the backward sees
the same dropout mask as the forward.
"""
from __future__ import annotations

import dataclasses
import heapq
import operator
from collections.abc import Iterable, Sequence

import torch
import torch.fx as fx

from .._core.recompute import RECOMPUTE_KEY


@dataclasses.dataclass
class Partition:
    """The two graphs and what flows between them.

    `forward` returns `num_forward_outputs` values, then `num_saved_tensors`
    saved tensors, then the saved non-tensor values (symbolic sizes).
    `backward` takes the saved values (tensors, then the others) and the
    tangents, and returns one gradient per input; `inputs_without_gradient` are
    the inputs it returns None for, `gradient_tangents` the tangents (by index)
    each input's gradient depends on.
    """

    forward: fx.GraphModule
    backward: fx.GraphModule
    num_forward_outputs: int
    num_saved_tensors: int
    num_saved_other: int
    saved_bytes: int
    inputs_without_gradient: tuple[int, ...] = ()
    gradient_tangents: tuple[frozenset[int], ...] = ()


def _ancestors(roots: Iterable[fx.Node]) -> set[fx.Node]:
    seen: set[fx.Node] = set()
    stack = [r for r in roots if isinstance(r, fx.Node)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(node.all_input_nodes)
    return seen


def _value(node: fx.Node):
    return node.meta.get("val")


def node_bytes(node: fx.Node) -> int:
    """Bytes of the tensor a node produces; symbolic sizes count by their hint."""
    val = _value(node)
    if not isinstance(val, torch.Tensor):
        return 0
    numel = val.numel()
    if isinstance(numel, torch.SymInt):
        hint = numel.node.hint
        numel = hint if hint is not None else 1 << 20
    return int(numel) * val.element_size()


def _is_recomputable(node: fx.Node) -> bool:
    """Cheap and deterministic: pointwise math or a view, never an RNG op."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    tags = node.target.tags
    if torch.Tag.nondeterministic_seeded in tags:
        return False
    return torch.Tag.pointwise in tags or node.target.is_view


def _is_checkpointed(node: fx.Node) -> bool:
    """Recorded inside a checkpointed function, and deterministic (or an item of such an op)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return isinstance(node.args[0], fx.Node) and _is_checkpointed(node.args[0])
    return RECOMPUTE_KEY in node.meta and isinstance(node.target, torch._ops.OpOverload) \
        and torch.Tag.nondeterministic_seeded not in node.target.tags


def _is_tensor(node: fx.Node) -> bool:
    return isinstance(_value(node), torch.Tensor)


def _saved_cost(node: fx.Node) -> int:
    # Inputs are kept alive by the caller anyway (parameters above all), so
    # saving one costs nothing extra.
    return 0 if node.op == "placeholder" else node_bytes(node)


class _Split:
    """The node sets of one split: what the backward computes, and so what it must receive."""

    def __init__(self, graph: fx.Graph, num_inputs: int, num_forward_outputs: int) -> None:
        self.placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        self.inputs = self.placeholders[:num_inputs]
        self.tangents = self.placeholders[num_inputs:]
        output = next(n for n in reversed(graph.nodes) if n.op == "output")
        outs = list(output.args[0])
        self.forward_outputs = outs[:num_forward_outputs]
        self.grad_outputs = outs[num_forward_outputs:]
        self.order = {n: i for i, n in enumerate(graph.nodes)}
        self.tangents_read = _tangents_read(graph, self.tangents)
        # Operations run for their side effects (a leaf function's call) belong to the forward
        # even when no output depends on them.
        effects = [n for n in graph.nodes if n.op == "call_function" and not self.tangents_read[n]
                   and n.is_impure()]
        self.forward_nodes = _ancestors([*self.forward_outputs, *effects]) | set(self.inputs)
        # A multi-output op's results are unpacked where it runs: the tuple never crosses over.
        for node in graph.nodes:
            if node.target is operator.getitem and node.args[0] in self.forward_nodes:
                self.forward_nodes.add(node)
        needed_by_backward = _ancestors(self.grad_outputs)
        self.backward_nodes = (needed_by_backward - self.forward_nodes) | set(self.tangents)

    def saved(self) -> list[fx.Node]:
        """Forward values the backward reads, in graph order."""
        needed: set[fx.Node] = set()
        for node in self.backward_nodes:
            needed.update(a for a in node.all_input_nodes if a not in self.backward_nodes)
        needed.update(
            n for n in self.grad_outputs if isinstance(n, fx.Node) and n not in self.backward_nodes
        )
        return sorted(needed, key=self.order.__getitem__)

    def recompute_checkpointed(self) -> None:
        """Move every saved checkpointed operation into the backward, and so on up its inputs:
        the backward then reads the checkpointed function's inputs, not its activations."""
        saved = set(self.saved())
        pending = [node for node in saved if _is_checkpointed(node)]
        while pending:
            node = pending.pop()
            if node not in saved:
                continue
            self.backward_nodes.add(node)
            saved.discard(node)
            for argument in node.all_input_nodes:
                if argument not in self.backward_nodes and argument not in saved:
                    saved.add(argument)
                    if _is_checkpointed(argument):
                        pending.append(argument)

    def recompute_cheap_ops(self) -> None:
        """Move saved pointwise ops and views into the backward while that lowers saved bytes.

        Latest saved node first; a moved node's inputs become saved and are
        candidates in turn, so a chain of cheap ops folds back to where it
        starts. One pass over a heap keeps this linear in the graph's size.
        """
        saved = set(self.saved())
        candidates = [(-self.order[n], n) for n in saved]
        heapq.heapify(candidates)
        while candidates:
            _, node = heapq.heappop(candidates)
            if node not in saved or not _is_recomputable(node):
                continue
            new_inputs = [a for a in node.all_input_nodes if a not in saved]
            if sum(_saved_cost(a) for a in new_inputs) >= _saved_cost(node):
                continue
            self.backward_nodes.add(node)
            saved.discard(node)
            for a in new_inputs:
                saved.add(a)
                heapq.heappush(candidates, (-self.order[a], a))


def partition_joint(
    joint: fx.GraphModule,
    num_inputs: int,
    num_forward_outputs: int,
    *,
    mutated_inputs: Sequence[int] = (),
    recompute: bool = True,
) -> Partition:
    """Split a joint graph traced by `joint.trace_signature`.

    >>> part = partition_joint(joint_gm, num_inputs=3, num_forward_outputs=1)
    >>> part.forward.print_readable(); part.backward.print_readable()

    `mutated_inputs` are inputs the runtime overwrites after the forward: a
    saved one is cloned in the forward so the backward reads its old value.
    """
    split = _Split(joint.graph, num_inputs, num_forward_outputs)
    split.recompute_checkpointed()
    if recompute:
        split.recompute_cheap_ops()
    saved = split.saved()
    saved_tensors = [n for n in saved if _is_tensor(n)]
    saved_other = [n for n in saved if not _is_tensor(n)]
    cloned = {split.inputs[i] for i in mutated_inputs}

    forward_graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in joint.graph.nodes:
        if node in split.forward_nodes:
            env[node] = forward_graph.node_copy(node, env.__getitem__)
    for node in saved_tensors:
        if node in cloned:
            copy = forward_graph.call_function(torch.ops.aten.clone.default, (env[node],))
            copy.meta["val"] = _value(node)
            env[node] = copy
    forward_graph.output(
        tuple(env[n] if isinstance(n, fx.Node) else n for n in split.forward_outputs)
        + tuple(env[n] for n in saved_tensors + saved_other)
    )

    backward_graph = fx.Graph()
    benv: dict[fx.Node, fx.Node] = {}
    for node in saved_tensors + saved_other + split.tangents:
        benv[node] = backward_graph.placeholder(node.name)
        benv[node].meta.update(node.meta)
    for node in joint.graph.nodes:
        if node in split.backward_nodes and node.op != "placeholder":
            benv[node] = backward_graph.node_copy(node, benv.__getitem__)
    backward_graph.output(
        tuple(benv[n] if isinstance(n, fx.Node) else n for n in split.grad_outputs)
    )

    return Partition(
        forward=fx.GraphModule(joint, forward_graph),
        backward=fx.GraphModule(joint, backward_graph),
        num_forward_outputs=num_forward_outputs,
        num_saved_tensors=len(saved_tensors),
        num_saved_other=len(saved_other),
        saved_bytes=sum(_saved_cost(n) for n in saved_tensors),
        inputs_without_gradient=tuple(i for i, grad in enumerate(split.grad_outputs) if grad is None),
        gradient_tangents=_tangents_of_gradients(split),
    )


def _tangents_read(graph: fx.Graph, tangents: list[fx.Node]) -> dict[fx.Node, int]:
    """For each node, the tangents it depends on, as a bit mask (bit k: tangent k); one sweep
    in graph order."""
    masks = {tangent: 1 << k for k, tangent in enumerate(tangents)}
    for node in graph.nodes:
        if node not in masks:
            mask = 0
            for argument in node.all_input_nodes:
                mask |= masks[argument]
            masks[node] = mask
    return masks


def _tangents_of_gradients(split: _Split) -> tuple[frozenset[int], ...]:
    gradients = []
    for grad in split.grad_outputs:
        mask = split.tangents_read[grad] if isinstance(grad, fx.Node) else 0
        gradients.append(frozenset(k for k in range(len(split.tangents)) if mask >> k & 1))
    return tuple(gradients)
