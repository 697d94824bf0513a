"""The `inductor` backend: the aten graphs of our AOT autograd, compiled by PyTorch's Inductor.

Entry point: `torch._inductor.compile_fx.compile_fx_inner`. It compiles one
aten-level graph that is already functional and decomposed, and does not
run PyTorch's AOT autograd again (`compile_fx`, the usual entry point, does:
it would trace our graphs a second time). What `compile_fx` would otherwise
do around it, we do here:
- trace with Inductor's decomposition table (`select_decomp_table`);
- run Inductor's joint-graph passes (`joint_graph_passes`) on the joint
  graph before partitioning and on the inference graph: among them the
  rewrite of random ops into seeded Inductor random ops, which its lowering
  requires;
- mark the outputs the user sees (`user_visible_output_idxs`) so that
  Inductor keeps their traced strides; every backward output is a gradient
  the user sees;
- pass fake tensors as example inputs (the placeholders' `meta["val"]`), call
  the result boxed (with a list), say whether it is a backward or an
  inference graph.
Inductor is imported on first use, so `import graphwright` stays light.
"""
from __future__ import annotations

import contextlib
import functools

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ..aot import USER_OUTPUTS_KEY, GraphCompilers, aot_compile, example_values
from .registry import register_backend


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: list, *, kind: str):
    from torch._inductor.compile_fx import compile_fx_inner

    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    if kind == "backward":
        visible = [i for i, value in enumerate(output.args[0]) if isinstance(value, torch.fx.Node)]
    else:
        visible = output.meta.get(USER_OUTPUTS_KEY, [])
    output.meta["user_visible_output_idxs"] = visible
    return compile_fx_inner(
        gm,
        example_inputs,
        is_backward=kind == "backward",
        is_inference=kind == "inference",
    )


def _joint_graph_passes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    from torch._inductor.fx_passes.joint_graph import joint_graph_passes
    from torch._inductor.virtualized import V

    # Some passes make new fake values and look for the fake mode where compile_fx puts it.
    fake_modes = [v.fake_mode for v in example_values(gm) if isinstance(v, FakeTensor)]
    with V.set_fake_mode(fake_modes[0]) if fake_modes else contextlib.nullcontext():
        return joint_graph_passes(gm)


_COMPILERS = GraphCompilers(
    forward=functools.partial(_compile_graph, kind="forward"),
    backward=functools.partial(_compile_graph, kind="backward"),
    inference=functools.partial(_compile_graph, kind="inference"),
    graph_passes=_joint_graph_passes,
)


@register_backend
def inductor(gm: torch.fx.GraphModule, example_inputs: list):
    """Trace `gm` with our AOT autograd, then compile each aten graph with Inductor."""
    # Inductor's decompositions call into its lowerings, which `compile_fx` imports.
    import torch._inductor.compile_fx  # noqa: F401
    from torch._inductor.decomposition import select_decomp_table

    return aot_compile(gm, example_inputs, _COMPILERS, decompositions=select_decomp_table())


# A graph with symbolic sizes is compiled once for every size (see `aot_compile`).
inductor.graphwright_dynamic_shapes = True
