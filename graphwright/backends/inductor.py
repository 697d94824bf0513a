"""The `inductor` backend: the aten graphs of our AOT autograd, compiled by PyTorch's Inductor.

Entry point: `torch._inductor.compile_fx.compile_fx_inner`. It compiles one
aten-level graph that is already functional and decomposed, and does not
run PyTorch's AOT autograd again (`compile_fx`, the usual entry point, does:
it would trace our graphs a second time). What it expects, we provide:
- graphs traced with Inductor's decomposition table (`select_decomp_table`),
  which `compile_fx` would otherwise apply inside its own AOT autograd;
- graphs returning a tuple, with fake tensors as example inputs (the
  placeholders' `meta["val"]`);
- the boxed calling convention: the result is called with a list of inputs;
- `is_backward` / `is_inference` telling it which kind of graph it compiles.
Inductor is imported on first use, so `import graphwright` stays light.
"""
from __future__ import annotations

import functools

import torch

from ..aot import GraphCompilers, aot_compile
from .registry import register_backend


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: list, *, kind: str):
    from torch._inductor.compile_fx import compile_fx_inner

    return compile_fx_inner(
        gm,
        example_inputs,
        is_backward=kind == "backward",
        is_inference=kind == "inference",
    )


_COMPILERS = GraphCompilers(
    forward=functools.partial(_compile_graph, kind="forward"),
    backward=functools.partial(_compile_graph, kind="backward"),
    inference=functools.partial(_compile_graph, kind="inference"),
)


@register_backend
def inductor(gm: torch.fx.GraphModule, example_inputs: list):
    """Trace `gm` with our AOT autograd, then compile each aten graph with Inductor."""
    # Inductor's decompositions call into its lowerings, which `compile_fx` imports.
    import torch._inductor.compile_fx  # noqa: F401
    from torch._inductor.decomposition import select_decomp_table

    return aot_compile(gm, example_inputs, _COMPILERS, decompositions=select_decomp_table())
