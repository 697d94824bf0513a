"""Cold start: from importing the compiler to the first compiled result, in a fresh process.

`coldstart/<model>` (cold): the process has imported torch and built the model
and its input (untimed); the sample then imports the compiler, compiles the
model (`fullgraph=True`, `backend="eager"`) and makes the first call under
`no_grad`. graphwright's side starts with `import graphwright`, PyTorch's with
`torch.compile`, which imports TorchDynamo itself. Target (issue 9): at most
0.5x PyTorch's.

`coldstart/torch_dynamo_import` (cold, one side): what neither side can avoid
today. PyTorch's fake and meta tensor kernels import TorchDynamo: the
constructor of FakeTensorMode reads `torch._dynamo.config`, the Python meta
kernels of `torch._refs` are wrapped in `torch._disable_dynamo`, which imports
it on first use, and `torch._check` imports sympy. The sample times
`import torch._dynamo` alone.
"""
from __future__ import annotations

import time

import torch

from .harness import workload
from .models import mlp_and_input, transformer_and_input

_MODELS = {"mlp": mlp_and_input, "transformer": transformer_and_input}


def _register(name: str, build) -> None:
    def first_result(side: str):
        model, x = build()

        def sample() -> float:
            start = time.perf_counter()
            if side == "graphwright":
                import graphwright

                compiled = graphwright.compile(model, backend="eager", fullgraph=True)
            else:
                compiled = torch.compile(model, backend="eager", fullgraph=True)
            with torch.no_grad():
                compiled(x)
            return time.perf_counter() - start
        return sample

    first_result.__doc__ = f"import the compiler, compile {name}, first call (fresh process)"
    workload(f"coldstart/{name}", cold=True)(first_result)


for _name, _build in _MODELS.items():
    _register(_name, _build)


@workload("coldstart/torch_dynamo_import", cold=True, sides=("pytorch",))
def torch_dynamo_import(side: str):
    """import torch._dynamo alone (fresh process): what fake tensors cost both sides"""
    def sample() -> float:
        start = time.perf_counter()
        import torch._dynamo  # noqa: F401

        return time.perf_counter() - start
    return sample
