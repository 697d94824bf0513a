"""Strict capture: graphwright.compile vs torch.compile(backend="eager") on the same modules.

- `strict/<model>/capture` (cold, fresh process, import excluded): the first compiled
  call minus one eager call of the same model, i.e. the time spent capturing.
  Target (issue 3): at most 0.5x PyTorch's.
- `strict/<model>/overhead` (warm): a compiled call minus an eager call, per call,
  i.e. guards plus wrapper cost on a cache hit. Target: at most 1.0x PyTorch's.

Models: a 4-layer MLP, a transformer block, and a Python-heavy loop over 50 small layers.
"""
from __future__ import annotations

import torch

from .harness import workload
from .models import many_layers_and_input, mlp_and_input, transformer_and_input
from .timing import per_call, timed

_MODELS = {"mlp": mlp_and_input, "transformer": transformer_and_input, "many_layers": many_layers_and_input}
_CALLS = 200


def _compile(side: str, model: torch.nn.Module) -> torch.nn.Module:
    if side == "graphwright":
        import graphwright

        return graphwright.compile(model, backend="eager", fullgraph=True)
    return torch.compile(model, backend="eager", fullgraph=True)


def _register(name: str, build) -> None:
    def capture(side: str):
        model, x = build()
        with torch.no_grad():
            model(x)  # warm the eager kernels so the first compiled call pays only for capture
            eager_time = min(timed(lambda: model(x)) for _ in range(3))
            compiled = _compile(side, model)
        return lambda: _no_grad_timed(lambda: compiled(x)) - eager_time

    def overhead(side: str):
        model, x = build(batch=1)
        compiled = _compile(side, model)
        with torch.no_grad():
            compiled(x)

        def sample() -> float:
            # interleaved, best of several: the difference is small next to timing noise
            eager, fast = [], []
            with torch.no_grad():
                for _ in range(5):
                    eager.append(per_call(lambda: model(x), _CALLS))
                    fast.append(per_call(lambda: compiled(x), _CALLS))
            return min(fast) - min(eager)
        return sample

    def call(side: str):
        model, x = build(batch=1)
        compiled = _compile(side, model)
        with torch.no_grad():
            compiled(x)

        def sample() -> float:
            with torch.no_grad():
                return min(per_call(lambda: compiled(x), _CALLS) for _ in range(5))
        return sample

    call.__doc__ = f"one warm compiled call of {name}, batch 1 (the whole cost a user sees)"
    workload(f"strict/{name}/call")(call)
    capture.__doc__ = f"first compiled call of {name} minus an eager call (capture time)"
    overhead.__doc__ = f"compiled call of {name} minus eager call, warm (guards + wrapper)"
    workload(f"strict/{name}/capture", cold=True)(capture)
    workload(f"strict/{name}/overhead")(overhead)


def _no_grad_timed(fn) -> float:
    with torch.no_grad():
        return timed(fn)


for _name, _build in _MODELS.items():
    _register(_name, _build)
