"""The `aot_eager` backend: the aten graphs of ahead-of-time autograd, run as they are.

Each aten graph runs through its `torch.fx` generated Python code; nothing is
fused. Useful to check AOT autograd itself, apart from any code generator.
"""
from __future__ import annotations

import torch

from ..aot import GraphCompilers, aot_compile
from .registry import register_backend


def run_generated_code(gm: torch.fx.GraphModule, example_inputs: list):
    """A graph compiler that keeps the graph: a boxed call of its generated `forward`."""
    forward = gm.forward

    def run(args: list):
        return forward(*args)

    return run


_COMPILERS = GraphCompilers(
    forward=run_generated_code, backward=run_generated_code, inference=run_generated_code
)


@register_backend
def aot_eager(gm: torch.fx.GraphModule, example_inputs: list):
    """Trace `gm` into aten forward/backward graphs with our AOT autograd and run them."""
    return aot_compile(gm, example_inputs, _COMPILERS)


# A graph with symbolic sizes is compiled once for every size (see `aot_compile`).
aot_eager.graphwright_dynamic_shapes = True
