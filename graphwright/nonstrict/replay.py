"""Running a recorded graph again in place of the Python that produced it.

A `nonstrict_trace` body runs once under the non-strict tracer when the
strict tracer meets its call. Ahead-of-time autograd then traces the captured
graph again (once; twice when the graph mutates an input that requires grad);
replaying the aten operations recorded the first time, instead of the body's
Python, keeps the body to one run per compile, so that its visible side
effects while tracing happen once.

A replay is faithful when the recorded operations, differentiated one by one,
give the body's gradients: each operation runs in the grad mode it was
recorded in, and `replayable` refuses bodies whose autograd graph holds what
the operations do not show (a custom `autograd.Function`, whose backward is
its own, or a tensor made to require grad inside the body).
The replayed operations keep the body's source lines (`source_lines.Rerun`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from .._core.source_lines import Rerun
from .recorder import GRAD_ENABLED_KEY


class _Replay(Rerun):
    """Each operation in its recorded grad mode, with the body's lines after those of its call."""

    def run_node(self, node: torch.fx.Node) -> Any:
        if node.meta.get(GRAD_ENABLED_KEY, True):
            return super().run_node(node)
        with torch.no_grad():
            return super().run_node(node)


def replay(gm: torch.fx.GraphModule, *flat_inputs: Any) -> Any:
    """Run `gm`'s nodes on `flat_inputs` (its placeholders, in order), each in its recorded grad
    mode; the output node's value, unflattened by nothing.

    >>> outputs = replay(gm, anchor, x, w)
    """
    return _Replay(gm).run(*flat_inputs, enable_io_processing=False)


def replayable(outputs: Sequence[Any], inputs: Sequence[Any]) -> bool:
    """Whether differentiating the recorded operations reproduces the autograd graph that
    computed `outputs` from `inputs` (both from the recorded run)."""
    stops = set()
    for tensor in inputs:
        if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
            node = _gradient_node(tensor)
            if node is not None:
                stops.add(node)
    seen: set = set()
    work = [out.grad_fn for out in outputs if isinstance(out, torch.Tensor) and out.grad_fn is not None]
    while work:
        node = work.pop()
        if node is None or node in seen or node in stops:
            continue
        seen.add(node)
        if isinstance(node, torch.autograd.function.BackwardCFunction) or hasattr(node, "variable"):
            return False  # a custom backward, or a leaf the body made or captured
        work += [next_node for next_node, _ in node.next_functions]
    return True


def _gradient_node(tensor: torch.Tensor) -> Any:
    """The autograd node a gradient of `tensor` goes to; None for a view made under no_grad
    of a tensor that requires grad: it requires grad too, but autograd keeps no node for it
    (a gradient reaching it stops there, as at a leaf the body captured)."""
    if tensor.grad_fn is None and tensor._base is not None:
        return None
    return torch.autograd.graph.get_gradient_edge(tensor).node
