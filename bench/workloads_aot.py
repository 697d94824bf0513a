"""AOT autograd and the `inductor` backend: steady-state speed and tracing time.

Targets (issue 5): graphwright's `inductor` at least 0.95x the throughput of
`torch.compile(backend="inductor")` (a time ratio of at most about 1.05x),
faster than eager on the transformer block; AOT tracing time at most 1.0x
PyTorch's for the same graph.

- `aot/inductor/<model>/forward`: one inference call (no_grad), steady state.
- `aot/inductor/<model>/forward_backward`: one forward and backward, steady state.
- `aot/trace/<model>/...`: ahead-of-time autograd of one torch-level graph
  (from `torch.fx.symbolic_trace`) into forward and backward graphs, run
  once, with graph compilers that keep the graphs as they are; PyTorch's
  side is `aot_module_simplified` with no-op compilers.
- `aot/compile/<model>/aot_eager`: in a warm process, after a reset of the
  compiler's caches, `compile(model, backend="aot_eager")` on a fresh model,
  its first forward and `.sum().backward()` minus an eager forward and
  backward: what the compile costs (capture, AOT autograd, first calls).
"""
from __future__ import annotations

import torch

from .harness import workload
from .models import mlp_and_input, transformer_and_input
from .timing import per_call, timed

CALLS = 20
MODELS = {"mlp": mlp_and_input, "transformer": transformer_and_input}


def _compiled(side: str, model: torch.nn.Module):
    if side == "graphwright":
        import graphwright

        return graphwright.compile(model, backend="inductor")
    if side == "pytorch":
        return torch.compile(model, backend="inductor")
    return model


def _register_speed(model_name: str, build) -> None:
    def forward(side: str):
        model, x = build()
        run = _compiled(side, model)

        def call():
            with torch.no_grad():
                run(x)

        return lambda: per_call(call, CALLS)

    def forward_backward(side: str):
        model, x = build()
        run = _compiled(side, model)
        return lambda: per_call(lambda: run(x).sum().backward(), CALLS)

    forward.__doc__ = f"{model_name}: one no_grad forward call, steady state"
    forward_backward.__doc__ = f"{model_name}: one forward+backward, steady state"
    sides = ("graphwright", "pytorch", "eager")
    workload(f"aot/inductor/{model_name}/forward", sides=sides)(forward)
    workload(f"aot/inductor/{model_name}/forward_backward", sides=sides)(forward_backward)


class _TupleOutput(torch.nn.Module):
    """PyTorch's `aot_module_simplified` wants graphs that return a tuple."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x):
        return (self.model(x),)


def _aot_trace(side: str, gm: torch.fx.GraphModule, x: torch.Tensor):
    if side == "graphwright":
        from torch._subclasses.fake_tensor import FakeTensorMode

        from graphwright.aot import GraphCompilers, aot_compile
        from graphwright.backends.aot_eager import run_generated_code

        # The first FakeTensorMode imports a large part of torch (torch._dynamo
        # among it); PyTorch's side pays that when importing aot_autograd, here.
        FakeTensorMode()
        keep = GraphCompilers(run_generated_code, run_generated_code, run_generated_code)
        return lambda: aot_compile(gm, [x], keep)(x)
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    def keep(graph, example_inputs):
        return make_boxed_func(graph.forward)

    return lambda: aot_module_simplified(gm, [x], fw_compiler=keep, bw_compiler=keep)(x)


def _register_trace(model_name: str, build) -> None:
    def make(side: str):
        model, x = build()
        return lambda: timed(_aot_trace(side, torch.fx.symbolic_trace(_TupleOutput(model)), x))

    make.__doc__ = f"{model_name}: AOT autograd of its graph into forward/backward graphs"
    workload(f"aot/trace/{model_name}/first", cold=True)(make)
    workload(f"aot/trace/{model_name}/repeat")(make)


def _fresh_aot_eager(side: str, model: torch.nn.Module):
    if side == "graphwright":
        import graphwright

        graphwright.reset()
        return graphwright.compile(model, backend="aot_eager")
    torch._dynamo.reset()
    return torch.compile(model, backend="aot_eager")


def _register_compile(model_name: str, build) -> None:
    def make(side: str):
        def sample() -> float:
            model, x = build()
            eager = min(timed(lambda: model(x).sum().backward()) for _ in range(3))
            compiled = _fresh_aot_eager(side, model)
            return timed(lambda: compiled(x).sum().backward()) - eager

        return sample

    make.__doc__ = f"{model_name}: compile with aot_eager after a reset, first forward+backward minus eager's"
    workload(f"aot/compile/{model_name}/aot_eager")(make)


for _name, _build in MODELS.items():
    _register_speed(_name, _build)
    _register_trace(_name, _build)
    _register_compile(_name, _build)
