"""Dynamic shapes: a sweep of ten sizes, graphwright.compile vs torch.compile(dynamic=None).

- `dynamic/causal_lm/<backend>` (cold, fresh process, imports and model build excluded): ten
  forward calls of a tiny Llama (transformers) at sequence lengths 3..12 under `no_grad`,
  `fullgraph=True`: every compile the sweep needs (two on both sides) plus the calls. Each
  process gets an empty Inductor cache. Targets (issue 11): at most 0.5x PyTorch's with
  `eager` and `aot_eager`, at most 0.9x with `inductor`.
- `dynamic/data_dependent/eager` (cold): the same sweep through a program whose output shape
  depends on the data (a boolean mask and `nonzero`), `fullgraph=True` (captured, one graph
  with unbacked sizes after the first recompile).

Compile counts are checked by tests/test_dynamic_shapes.py (graphwright's at most PyTorch's).
"""
from __future__ import annotations

import os
import tempfile

import torch

from .harness import workload
from .timing import timed


def _compile(side: str, model, backend: str):
    if side == "graphwright":
        import graphwright

        return graphwright.compile(model, backend=backend, fullgraph=True)
    return torch.compile(model, backend=backend, fullgraph=True, dynamic=None)


def _tiny_llama():
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                      hidden_size=32, intermediate_size=64, vocab_size=100)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _register_causal_lm(backend: str) -> None:
    def sweep(side: str):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_inductor_")
        model = _tiny_llama()
        inputs = [torch.randint(0, 100, (2, length)) for length in range(3, 13)]
        with torch.no_grad():
            model(inputs[0])
        compiled = _compile(side, model, backend)

        def run() -> None:
            with torch.no_grad():
                for ids in inputs:
                    compiled(ids)
        return lambda: timed(run)

    sweep.__doc__ = f"ten sequence lengths through a tiny causal LM, {backend} backend (compiles included)"
    workload(f"dynamic/causal_lm/{backend}", cold=True)(sweep)


for _backend in ("eager", "aot_eager", "inductor"):
    _register_causal_lm(_backend)


def _data_dependent(x):
    positive = x[x > 0]
    return positive.sum() * torch.nonzero(x).shape[0] + x.mean()


def _import_what_unbacked_sizes_need() -> None:
    """Creating the first unbacked size imports about 400 modules (torch._inductor, networkx):
    imports are excluded from cold samples, so both sides pay them before timing."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        mode.from_tensor(torch.ones(2)).nonzero()


@workload("dynamic/data_dependent/eager", cold=True)
def data_dependent_sweep(side: str):
    """ten sizes through a program with a boolean mask and nonzero (compiles included)"""
    inputs = [torch.randn(size) for size in range(3, 13)]
    _data_dependent(inputs[0])
    _import_what_unbacked_sizes_need()
    compiled = _compile(side, _data_dependent, "eager")

    def run() -> None:
        for x in inputs:
            compiled(x)
    return lambda: timed(run)
