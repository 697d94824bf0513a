"""The `eager` backend: run the captured graph as it is."""
from __future__ import annotations

import torch

from .registry import register_backend


@register_backend
def eager(gm: torch.fx.GraphModule, example_inputs: list):
    """Run the torch-level graph with PyTorch eager; a nonstrict_trace call runs its Python."""
    return gm.forward
