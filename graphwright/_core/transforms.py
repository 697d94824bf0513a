"""Function transforms applied to a traced subgraph: the target of their graph nodes.

The strict tracer traces the function given to `torch.func.vmap`, `grad`,
`jacrev`, `vjp`... as a subgraph (its body) and records one node calling a
`TransformCall` with the body and the call's flat inputs. The call rebuilds
the arguments from the spec of the call site, makes a Python function that
runs the body (the body takes the tensors among its arguments' leaves, then
the outer values it reads), applies the real transform of `torch.func` to it
and returns the leaves of the result.

Under the `eager` backend functorch runs on real tensors; under ahead-of-time
autograd the same call runs on traced tensors and functorch's batching and
differentiation rules put the transformed operations into the aten graphs. It
lives in layer 1 so that every layer reaches it.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

GRAPH_VALUE = object()
"""Stands for a graph value among a spec's leaves (a tensor, a symbolic size)."""


def call(fn: Callable) -> Callable:
    """The identity transform: the function itself (the outputs of `vjp`)."""
    return fn


def vjp_apply(fn: Callable, *, has_aux: bool = False) -> Callable:
    """`(primals, cotangents) -> vjp_fn(cotangents)`: the call of the function `torch.func.vjp`
    returned (its primal outputs come from their own node)."""
    def apply(primals: tuple, cotangents: Any) -> Any:
        return torch.func.vjp(fn, *primals, has_aux=has_aux)[1](cotangents)
    return apply


def jvp_apply(fn: Callable, **options: Any) -> Callable:
    """`(primals, tangents) -> torch.func.jvp(fn, primals, tangents)`, as a transform."""
    def apply(primals: tuple, tangents: tuple) -> Any:
        return torch.func.jvp(fn, primals, tangents, **options)
    return apply


class TransformCall:
    """One call of a transformed function on a traced body, as a graph node's target.

    `transform(function, **options)` is the transformed function (torch.func.vmap,
    grad, ... or one of the adapters above); it is called with `(args, kwargs)`
    rebuilt from `in_spec`, whose `leaves` are the call site's constants with the
    first flat inputs at `input_positions`. The transform calls the function
    with `(body_args, body_kwargs)`, whose leaves at `body_positions` are the
    body's inputs; the body returns the graph values of its output, which
    `body_spec`/`body_leaves` (`GRAPH_VALUE` for each graph value) make whole
    again. `call(body, *flat_inputs)` returns the leaves of the transform's
    result; `out_spec` is their structure."""

    def __init__(self, transform: Callable, options: dict, in_spec: pytree.TreeSpec, leaves: list,
                 input_positions: Sequence[int], body_positions: Sequence[int], body_spec: pytree.TreeSpec,
                 body_leaves: list) -> None:
        self.transform = transform
        self.options = options
        self.in_spec = in_spec
        self.leaves = leaves
        self.input_positions = tuple(input_positions)
        self.body_positions = tuple(body_positions)
        self.body_spec = body_spec
        self.body_leaves = body_leaves
        self.out_spec: pytree.TreeSpec | None = None
        name = getattr(transform, "__name__", type(transform).__name__)
        # torch.fx names the node's global after these
        self.__name__ = self.__qualname__ = re.sub(r"\W+", "_", name).strip("_") + "_call"
        self.__module__ = __name__

    def __call__(self, body: Callable, *flat_inputs: Any) -> tuple:
        count = len(self.input_positions)
        leaves = list(self.leaves)
        for position, value in zip(self.input_positions, flat_inputs[:count]):
            leaves[position] = value
        lifted = flat_inputs[count:]
        args, kwargs = pytree.tree_unflatten(leaves, self.in_spec)

        def function(*body_args: Any, **body_kwargs: Any) -> Any:
            given = pytree.tree_leaves((body_args, body_kwargs))
            returned = iter(body(*[given[position] for position in self.body_positions], *lifted))
            output = [next(returned) if leaf is GRAPH_VALUE else leaf for leaf in self.body_leaves]
            return pytree.tree_unflatten(output, self.body_spec)

        result = self.transform(function, **self.options)(*args, **kwargs)
        out_leaves, self.out_spec = pytree.tree_flatten(result)
        return tuple(out_leaves)

    def __repr__(self) -> str:
        return f"<{self.__name__} {self.options}>"
