"""Graphs compiled inside `DistributedDataParallel`'s forward, split at its gradient buckets.

DDP all-reduces gradients bucket by bucket, from hooks that autograd fires as
each parameter's gradient becomes ready. A graph compiled by AOT autograd runs
its backward as one autograd node: every gradient becomes ready at its end, and
no all-reduce overlaps the backward. So, as PyTorch's DDP optimizer does, a graph
compiled while a DDP module's forward runs (`DistributedDataParallel.
_get_active_ddp_module()`) is cut into consecutive pieces, each holding about
one bucket of parameters (DDP's `bucket_bytes_cap`; its first bucket's cap for
the last piece), and each piece is compiled by the backend on its own: the
backward of a piece ends, and its bucket's all-reduce starts, while the
backward of the pieces before it still runs.

Buckets are counted from the end of the graph (the backward runs the graph in
reverse); a parameter counts where the graph first uses it (its gradient is
complete once the backward has passed that node). `BucketedBackend` wraps a
backend; `graph_buckets` says where the cuts fall (the tests read it).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx

from .._core import config
from .registry import CompilerFn


BUCKETS_KEY = "graphwright_ddp_buckets"
"""`gm.meta[BUCKETS_KEY]`: for a graph compiled in pieces, the node names of each piece (a report shows them)."""


@dataclass
class Bucket:
    """A run of consecutive graph nodes and the parameters whose gradients they complete."""

    nodes: list[torch.fx.Node] = field(default_factory=list)
    parameters: list[str] = field(default_factory=list)  # placeholder names
    size: int = 0  # bytes of those parameters


def active_ddp_module() -> torch.nn.Module | None:
    """The DDP module whose forward is running, if any."""
    if not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel._get_active_ddp_module()


def bucket_caps(ddp: torch.nn.Module) -> tuple[int, int]:
    """(first bucket's cap, every other bucket's cap) in bytes, as DDP itself buckets."""
    cap = ddp.bucket_bytes_cap
    bucket_config = getattr(ddp, "_bucket_config", None)
    first = getattr(bucket_config, "first_bucket_bytes_cap", cap)
    return min(first, cap), cap


def _synced_parameters(gm: torch.fx.GraphModule, example_inputs: list) -> dict[torch.fx.Node, int]:
    """The placeholders holding parameters whose gradients DDP all-reduces, with their sizes."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    sizes = {}
    for node, value in zip(placeholders, example_inputs):
        if isinstance(value, torch.nn.Parameter) and value.requires_grad \
                and not getattr(value, "_ddp_ignored", False):
            sizes[node] = value.numel() * value.element_size()
    return sizes


def graph_buckets(gm: torch.fx.GraphModule, example_inputs: list, first_cap: int, cap: int) -> list[Bucket]:
    """The graph's nodes (but placeholders and output) cut into buckets, in graph order."""
    sizes = _synced_parameters(gm, example_inputs)
    completes: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    seen: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        for parameter in node.all_input_nodes:
            if parameter in sizes and parameter not in seen:
                seen.add(parameter)
                completes.setdefault(node, []).append(parameter)
    buckets = [Bucket()]  # from the end of the graph
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        current = buckets[-1]
        if current.size >= (first_cap if len(buckets) == 1 else cap):
            current = Bucket()
            buckets.append(current)
        current.nodes.append(node)
        for parameter in reversed(completes.get(node, ())):
            current.parameters.append(parameter.name)
            current.size += sizes[parameter]
    if len(buckets) > 1 and buckets[-1].size == 0:  # a head without parameters joins the next
        head = buckets.pop()
        buckets[-1].nodes += head.nodes
    buckets.reverse()
    for bucket in buckets:
        bucket.nodes.reverse()
        bucket.parameters.reverse()
    return buckets


def _piece(gm: torch.fx.GraphModule, bucket: Bucket, used_later: set[torch.fx.Node]
           ) -> tuple[torch.fx.GraphModule, list[torch.fx.Node], list[torch.fx.Node]]:
    """The bucket's nodes as a graph of their own: (graph, the nodes it reads, the nodes it returns)."""
    inside = set(bucket.nodes)
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    inputs: list[torch.fx.Node] = []

    def read(node: torch.fx.Node) -> torch.fx.Node:
        if node not in env:
            inputs.append(node)
            env[node] = graph.placeholder(node.name)
            env[node].meta = dict(node.meta)
        return env[node]

    for node in bucket.nodes:
        for used in node.all_input_nodes:
            if used not in inside:
                read(used)
        env[node] = graph.node_copy(node, lambda used: env[used])
    outputs = [node for node in bucket.nodes if node in used_later]
    graph.output(tuple(env[node] for node in outputs))
    return torch.fx.GraphModule(gm, graph), inputs, outputs


def compile_in_buckets(gm: torch.fx.GraphModule, example_inputs: list, backend: CompilerFn,
                       buckets: list[Bucket]) -> Callable:
    """One graph whose pieces, one per bucket, are each compiled by `backend`: a graph of calls
    of the compiled pieces, run through its generated code."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    examples = dict(zip(placeholders, example_inputs))
    output = next(node for node in reversed(gm.graph.nodes) if node.op == "output")
    position = {node: index for index, bucket in enumerate(buckets) for node in bucket.nodes}
    used_later = {node for node in position
                  if any(position.get(user, len(buckets)) > position[node] for user in node.users)}
    stitched = torch.fx.Graph()
    env = {node: stitched.placeholder(node.name) for node in placeholders}
    for node in placeholders:
        env[node].meta = dict(node.meta)
    for index, bucket in enumerate(buckets):
        piece, inputs, outputs = _piece(gm, bucket, used_later)
        piece_examples = [examples[node] if node in examples else node.meta.get("example_value")
                          for node in inputs]
        compiled = backend(piece, piece_examples)
        call = stitched.call_function(_PieceCall(compiled, f"bucket_{index}"), tuple(env[node] for node in inputs))
        for slot, node in enumerate(outputs):
            env[node] = stitched.call_function(operator.getitem, (call, slot))
    stitched.output(torch.fx.node.map_arg(output.args[0], lambda node: env[node]))
    return torch.fx.GraphModule(torch.nn.Module(), stitched).forward


class _PieceCall:
    """A compiled piece, named for the generated code of the graph that calls it."""

    def __init__(self, compiled: Callable, name: str) -> None:
        self.compiled = compiled
        self.__name__ = self.__qualname__ = name

    def __call__(self, *args: Any) -> Any:
        return self.compiled(*args)


@dataclass(frozen=True)
class BucketedBackend:
    """`backend`, but that a graph compiled inside DDP's forward is compiled in bucket pieces
    (`config.optimize_ddp`). Equal to another wrapping the same backend: compiled functions
    share their cache by backend."""

    backend: CompilerFn

    @property
    def __name__(self) -> str:  # errors name the backend the user chose
        return getattr(self.backend, "__name__", type(self.backend).__name__)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        ddp = active_ddp_module() if config.optimize_ddp else None
        if ddp is None:
            return self.backend(gm, example_inputs)
        buckets = graph_buckets(gm, example_inputs, *bucket_caps(ddp))
        if len(buckets) == 1:
            return self.backend(gm, example_inputs)
        gm.meta[BUCKETS_KEY] = [[node.name for node in bucket.nodes] for bucket in buckets]
        return compile_in_buckets(gm, example_inputs, self.backend, buckets)
