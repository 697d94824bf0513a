"""Rewrites of an aten graph, just before Inductor compiles it, that keep Inductor's own
pattern passes from changing what the graph computes.

Each rewrite computes the same values as the graph it replaces, in the order Inductor's
lowering would compute them anyway; it only takes away the shape a faulty pattern matches.
This module must not rewrite for speed: a rewrite here answers a wrong result of Inductor's.

- `add` with `alpha` fed by `mm`: Inductor's post-grad passes fuse `aten.add(x, aten.mm(a, b))`
  into `addmm(x, a, b)` (and `add(mm, mm)` into `mm_plus_mm`) without reading the add's
  `alpha`, so `torch.add(x, a @ b, alpha=0.5)` computes `x + a @ b` (PyTorch 2.13;
  `torch.compile` gives the same wrong value). Such an add gets its scaling as a
  multiplication of its own: Inductor lowers an add with `alpha` on the CPU as that same
  multiplication followed by the add (on CUDA as one fused multiply-add, so there the
  rewritten add may round once more than eager's).
"""
from __future__ import annotations

import torch

aten = torch.ops.aten

# what a new node keeps of the node it was made for: where the user wrote it, for Inductor's
# line maps and the dumps
_PROVENANCE = ("stack_trace", "nn_module_stack", "source_fn_stack", "seq_nr")


def rewrite_for_inductor(gm: torch.fx.GraphModule) -> None:
    """Apply every rewrite of this module to `gm`, in place (recompiled when one changed it).

    >>> gm.print_readable()   # add = aten.add.Tensor(x, mm, alpha=0.5)
    >>> rewrite_for_inductor(gm); gm.print_readable()
    ... # mul = aten.mul.Tensor(mm, 0.5); add = aten.add.Tensor(x, mul)
    """
    if _scale_matmul_adds(gm.graph):
        gm.recompile()


def _is_mm(value: object) -> bool:
    return isinstance(value, torch.fx.Node) and value.op == "call_function" and value.target is aten.mm.default


def _scale_matmul_adds(graph: torch.fx.Graph) -> bool:
    """Turn each `add.Tensor(a, b, alpha=k)` (k not 1) with an `mm` operand into
    `add.Tensor(a, mul.Tensor(b, k))`; True when one changed."""
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.add.Tensor or len(node.args) != 2:
            continue
        alpha = node.kwargs.get("alpha", 1)
        first, second = node.args
        if (not isinstance(alpha, torch.fx.Node) and alpha == 1) or not isinstance(second, torch.fx.Node) \
                or not (_is_mm(first) or _is_mm(second)):
            continue
        result, scaled_value = node.meta.get("val"), second.meta.get("val")
        if not isinstance(result, torch.Tensor) or not isinstance(scaled_value, torch.Tensor) \
                or scaled_value.dtype != result.dtype:
            continue  # a promoting add is never fused (the fusion wants one dtype); scaling first would round differently
        factor = alpha.meta["val"] if isinstance(alpha, torch.fx.Node) else alpha
        with graph.inserting_before(node):
            scaled = graph.call_function(aten.mul.Tensor, (second, alpha))
        scaled.meta = {key: node.meta[key] for key in _PROVENANCE if key in node.meta}
        scaled.meta["val"] = aten.mul.Tensor(scaled_value, factor)
        node.args = (first, scaled)
        node.kwargs = {key: value for key, value in node.kwargs.items() if key != "alpha"}
        changed = True
    return changed
