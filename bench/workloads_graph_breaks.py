"""Graph splitting: a function with two graph breaks (three graphs), graphwright.compile vs
torch.compile(backend="eager"), both with fullgraph=False.

- `breaks/two_breaks/compile` (cold, fresh process, import excluded): the first compiled
  call minus one eager call: tracing, re-tracing up to each break, resume functions and
  their graphs. Target (issue 8): at most 0.5x PyTorch's.
- `breaks/two_breaks/overhead` (warm): a compiled call minus an eager call, per call: three
  entries' guards, the residual code and two resume calls. Target: at most 1.0x PyTorch's.

The function is small on purpose (a few operations per graph on a 16-element tensor), so
that the figures are the compiler's cost, not the kernels'.
"""
from __future__ import annotations

import torch

from .harness import workload
from .timing import per_call, timed

_CALLS = 500


def _function(side: str):
    if side == "graphwright":
        import graphwright

        graph_break, disable = graphwright.graph_break, graphwright.disable
    else:
        from torch import _dynamo

        graph_break, disable = _dynamo.graph_break, _dynamo.disable

    @disable
    def log_norm(t):
        return float(t.norm())

    def two_breaks(x, weights):
        h = torch.tanh(x @ weights[0]) + x
        graph_break()
        h = torch.relu(h @ weights[1]) * 0.5 + h
        norm = log_norm(h)
        return torch.sigmoid(h @ weights[2]) + norm

    return two_breaks


def _inputs():
    torch.manual_seed(0)
    return torch.randn(4, 16), [torch.randn(16, 16) * 0.1 for _ in range(3)]


def _compile(side: str, fn):
    if side == "graphwright":
        import graphwright

        return graphwright.compile(fn, backend="eager")
    return torch.compile(fn, backend="eager")


@workload("breaks/two_breaks/compile", cold=True)
def compile_two_breaks(side: str):
    """first call of a function with two graph breaks minus an eager call (capture time)"""
    fn = _function(side)
    x, weights = _inputs()
    fn(x, weights)
    eager_time = min(timed(lambda: fn(x, weights)) for _ in range(3))
    compiled = _compile(side, fn)
    return lambda: timed(lambda: compiled(x, weights)) - eager_time


@workload("breaks/two_breaks/overhead")
def overhead_two_breaks(side: str):
    """compiled call minus eager call of the two-break function, warm (guards + residual code)"""
    fn = _function(side)
    x, weights = _inputs()
    compiled = _compile(side, fn)
    compiled(x, weights)

    def sample() -> float:
        eager, fast = [], []
        for _ in range(5):
            eager.append(per_call(lambda: fn(x, weights), _CALLS))
            fast.append(per_call(lambda: compiled(x, weights), _CALLS))
        return min(fast) - min(eager)
    return sample
