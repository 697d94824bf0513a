"""Tensor subclasses under AOT autograd: which ones it handles, and the refusal of the others.

AOT autograd traces plain fake tensors into aten graphs. A subclass with a
`__torch_dispatch__` of its own (TwoTensor, DTensor, a jagged nested tensor)
runs its Python on every aten op: traced as it is, the aten graphs would
record one fake run of that Python and return plain tensors where eager
returns the subclass. Until such subclasses are desugared through
`__tensor_flatten__` (the work that replaces this module), a graph holding
one is refused before anything is traced: under `fullgraph=False` it then
runs as captured, under `fullgraph=True` the refusal is the user's error.

Handled: plain tensors, fake tensors (the tracer's plumbing), `nn.Parameter`
and every subclass without a `__torch_dispatch__` of its own, whose Python
behaviour the strict tracer records as plain tensor operations
(`_core.tensor_subclasses` tells them apart).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from .._core import artifacts
from .._core.errors import BackendRefusal
from .._core.tensor_subclasses import dispatches_itself
from .._core.user_stack import user_frames_of_stack


def refuse_tensor_subclasses(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                             state: Sequence[tuple[str, Any]]) -> None:
    """Raise `BackendRefusal` when an input, a lifted parameter or buffer (`state`: name, value),
    an intermediate or an output of `gm` is a tensor subclass AOT autograd does not handle."""
    for what, value in _values(gm, example_inputs, state):
        if dispatches_itself(value):
            raise _refusal(what, type(value))


def _values(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
            state: Sequence[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    for node, value in zip(placeholders, example_inputs):
        yield f"input `{node.name}`", value
    for name, value in state:
        yield f"parameter or buffer `{name}`", value
    for node in gm.graph.nodes:
        if node.op == "output":
            for i, leaf in enumerate(torch.utils._pytree.tree_leaves(node.args)):
                if isinstance(leaf, torch.fx.Node):
                    yield f"output {i} (`{leaf.name}`)", _fake_value(leaf)
        else:
            yield f"`{node.name}`", _fake_value(node)


def _fake_value(node: torch.fx.Node) -> Any:
    return node.meta.get("val", node.meta.get("example_value"))


def _refusal(what: str, cls: type) -> BackendRefusal:
    graph = artifacts.scope_name() or "a captured graph"
    return BackendRefusal(
        f"AOT autograd cannot compile a graph holding the tensor subclass `{cls.__qualname__}`: {what} of "
        f"{graph} is a `{cls.__module__}.{cls.__qualname__}`",
        explanation=(
            f"`{cls.__qualname__}` has a `__torch_dispatch__` of its own, and graphwright's ahead-of-time "
            "autograd traces plain tensors only: its aten graphs would lose what the subclass does."
        ),
        hints=[
            "With fullgraph=False this graph runs as captured (as backend='eager' runs it).",
            "Compile with backend='eager', or keep the subclass out of the compiled region.",
        ],
        user_stack=user_frames_of_stack(),
    )
