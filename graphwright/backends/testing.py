"""`graphwright.testing`: backends that count what they were asked to compile."""
from __future__ import annotations

import torch

from .registry import CompilerFn, lookup_backend


def _count_ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for node in gm.graph.nodes if node.op.startswith("call"))


class CompileCounter:
    """A backend that runs each graph eagerly and counts graphs and ops.

    >>> cnt = CompileCounter()
    >>> graphwright.compile(fn, backend=cnt)(x)
    >>> cnt.frame_count, cnt.op_count
    """

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        self.frame_count += 1
        self.op_count += _count_ops(gm)
        self.graphs.append(gm)
        return self._compile(gm, example_inputs)

    def _compile(self, gm: torch.fx.GraphModule, example_inputs: list):
        return gm.forward


class CompileCounterWithBackend(CompileCounter):
    """Counts like `CompileCounter`, then compiles with a real backend (e.g. "aot_eager")."""

    def __init__(self, backend: str | CompilerFn) -> None:
        self.backend = lookup_backend(backend)
        super().__init__()

    def _compile(self, gm: torch.fx.GraphModule, example_inputs: list):
        return self.backend(gm, example_inputs)
