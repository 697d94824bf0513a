"""Non-strict tracing time: graphwright.make_fx vs PyTorch's make_fx on the same model.

Target (issue: make_fx): graphwright's trace time at most 1.0x PyTorch's, for the
transformer block (dim 256, 4 heads, seq 64) and a 4-layer MLP, in every mode.
"""
from __future__ import annotations

from .harness import workload
from .models import mlp_and_input, transformer_and_input
from .timing import timed


def _make_fx(side: str):
    # Imports are excluded from trace time. FakeTensorMode imports torch._dynamo
    # lazily on its first op (torch wraps every dispatch mode's handler), while
    # PyTorch's make_fx imports it with itself: import it up front on both sides.
    import torch._dynamo  # noqa: F401

    if side == "graphwright":
        from graphwright import make_fx
    else:
        from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx


def _register(model_name: str, build, mode: str) -> None:
    def make(side: str):
        make_fx = _make_fx(side)
        model, x = build()
        # The module's real parameters become constants of a fake trace.
        trace = make_fx(model, tracing_mode=mode, _allow_non_fake_inputs=True)
        return lambda: timed(lambda: trace(x))

    make.__doc__ = f"trace {model_name} with make_fx(tracing_mode={mode!r})"
    workload(f"make_fx/{model_name}/{mode}/first", cold=True)(make)
    workload(f"make_fx/{model_name}/{mode}/repeat")(make)


for _mode in ("real", "fake", "symbolic"):
    _register("mlp", mlp_and_input, _mode)
    _register("transformer", transformer_and_input, _mode)
