"""Models from libraries the other suites do not use (`library_models.py`: x-transformers,
vector-quantize-pytorch, torchdiffeq, torchmetrics, entmax, zuko), compiled by graphwright:
the same answers as eager, and torch.compile's graph counts on the same program.

Each model runs the eval and train programs of `module_programs.py` (eval: two `no_grad`
calls; train: two steps of forward, the mean square of every floating-point output as the
loss, backward and SGD), with `fullgraph=True` and `fullgraph=False`, under the `eager` and
`aot_eager` backends. Compared: every output, gradient and state_dict entry (1e-5), and the
graph count after each call with torch.compile's (`TORCH_COUNTS`, recorded from
`torch._dynamo.testing.CompileCounter` on the same programs and re-checked by the slow
`test_torch_compile_needs_the_recorded_graph_counts`). Where torch.compile cannot capture a
program whole, graphwright must raise `Unsupported` under `fullgraph=True` too, unless
`GRAPHWRIGHT_COUNTS` says it does better.

Quick (in `make test`): one program per model, its eval under `eager`, `fullgraph=True` where
torch.compile captures it whole, else `fullgraph=False`; the rest is `slow` (and `breadth`).
"""
from __future__ import annotations

import pytest
import torch._dynamo.testing

import graphwright

from . import module_programs
from .library_models import MODELS
from .programs import assert_same

# (model, program, fullgraph) -> torch.compile's graphs after each call; None: it cannot
# compile the program with fullgraph=True.
TORCH_COUNTS: dict[tuple[str, str, bool], list[int] | None] = {
    **{(name, mode, fullgraph): [1, 1] for name, model in MODELS.items() for mode in model.modes
       for fullgraph in (True, False)},
    # ALiBi's bias is computed and kept with `register_buffer` on the first call; the second
    # call's guards see the buffer
    **{("xt_continuous_alibi", mode, fullgraph): [1, 2] for mode in ("eval", "train") for fullgraph in (True, False)},
    # `if self.initted:` on a buffer (a branch on data) before every codebook lookup
    ("vector_quantize", "eval", True): None, ("vector_quantize", "eval", False): [5, 5],
    ("vector_quantize", "train", True): None, ("vector_quantize", "train", False): [6, 7],
    ("residual_vq", "eval", True): None, ("residual_vq", "eval", False): [8, 8],
    ("residual_vq", "train", True): None, ("residual_vq", "train", False): [9, 10],
    # `_check_timelike` asserts on the time values; the solvers step by comparing times
    ("ode_rk4", "eval", True): None, ("ode_rk4", "eval", False): [10, 10],
    ("ode_rk4", "train", True): None, ("ode_rk4", "train", False): [11, 11],
    ("ode_dopri5", "eval", True): None, ("ode_dopri5", "eval", False): [39, 39],
    ("ode_dopri5", "train", True): None, ("ode_dopri5", "train", False): [47, 47],
    # `bincount` (its size depends on the data) is captured under fullgraph only; the
    # metric's second call finds its state updated
    **{("metric_submodule", mode, True): [1, 2] for mode in ("eval", "train")},
    **{("metric_submodule", mode, False): [8, 10] for mode in ("eval", "train")},
    # MeanMetric checks its input for NaNs (`if torch.isnan(x).any()`)
    **{("metric_collection", mode, True): None for mode in ("eval", "train")},
    **{("metric_collection", mode, False): [19, 25] for mode in ("eval", "train")},
    # torch.compile passes `cls` twice to entmax's classmethod `forward` when it traces it
    ("entmax", "train", True): None, ("entmax", "train", False): [4, 4],
    # torch.compile cannot build zuko's transforms in the region (`as_proxy`)
    **{(name, mode, True): None for name in ("zuko_maf", "zuko_nsf") for mode in ("eval", "train")},
    **{(name, mode, False): [2, 2] for name in ("zuko_maf", "zuko_nsf") for mode in ("eval", "train")},
}

# Where graphwright's graphs differ from torch.compile's: its counts (None: Unsupported under
# fullgraph=True). torch.compile also counts graphs that hold no operation (the code between
# two breaks that only reads attributes: vector_quantize, residual_vq, dopri5's step control),
# and a graph holding only `x.is_mps` before the `bincount` break (the metrics).
GRAPHWRIGHT_COUNTS: dict[tuple[str, str, bool], list[int] | None] = {
    ("vector_quantize", "eval", False): [4, 4], ("vector_quantize", "train", False): [4, 5],
    ("residual_vq", "eval", False): [7, 7], ("residual_vq", "train", False): [7, 8],
    ("ode_dopri5", "eval", False): [30, 30], ("ode_dopri5", "train", False): [38, 38],
    **{("metric_submodule", mode, False): [7, 9] for mode in ("eval", "train")},
    **{("metric_collection", mode, False): [18, 24] for mode in ("eval", "train")},
    ("entmax", "train", True): [1, 1], ("entmax", "train", False): [1, 1],
    **{(name, mode, fullgraph): [1, 1] for name in ("zuko_maf", "zuko_nsf") for mode in ("eval", "train")
       for fullgraph in (True, False)},
}

BACKENDS = ("eager", "aot_eager")


def _quick(name: str, mode: str, fullgraph: bool, backend: str) -> bool:
    model = MODELS[name]
    whole = TORCH_COUNTS[(name, model.modes[0], True)] is not None
    return mode == model.modes[0] and fullgraph == whole and backend == "eager"


def _cases() -> list:
    params = []
    for name, model in MODELS.items():
        for mode in model.modes:
            for fullgraph in (True, False):
                for backend in BACKENDS:
                    marks = [] if _quick(name, mode, fullgraph, backend) else [pytest.mark.slow]
                    params.append(pytest.param(name, mode, fullgraph, backend, marks=marks,
                                               id=f"{name}-{mode}-{'fullgraph' if fullgraph else 'breaks'}-{backend}"))
    return params


@pytest.mark.parametrize(("name", "mode", "fullgraph", "backend"), _cases())
def test_library_model_matches_eager_with_torch_compiles_graph_count(name: str, mode: str, fullgraph: bool,
                                                                     backend: str) -> None:
    model = MODELS[name]
    pytest.importorskip(model.library)
    case = model.case
    module = module_programs.built(case)
    expected, _ = module_programs.run(case, module, mode)
    counter = graphwright.testing.CompileCounterWithBackend(backend)

    def compile_fn(target):
        return graphwright.compile(target, fullgraph=fullgraph, backend=counter)

    key = (name, mode, fullgraph)
    wanted = GRAPHWRIGHT_COUNTS.get(key, TORCH_COUNTS[key])
    if wanted is None:
        with pytest.raises(graphwright.Unsupported):
            module_programs.run(case, module, mode, compile_fn, counter)
        return
    observed, counts = module_programs.run(case, module, mode, compile_fn, counter)
    assert_same(observed, expected)
    assert counts == wanted, f"graphs after each call: {counts}, expected {wanted} (torch.compile: {TORCH_COUNTS[key]})"


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode", "fullgraph"), sorted(TORCH_COUNTS))
def test_torch_compile_needs_the_recorded_graph_counts(name: str, mode: str, fullgraph: bool) -> None:
    model = MODELS[name]
    pytest.importorskip(model.library)
    case = model.case
    module = module_programs.built(case)
    counter = torch._dynamo.testing.CompileCounter()

    def compile_fn(target):
        return torch.compile(target, fullgraph=fullgraph, backend=counter)

    recorded = TORCH_COUNTS[(name, mode, fullgraph)]
    if recorded is None:
        with pytest.raises(Exception):  # noqa: B017 -- TorchDynamo's Unsupported or its internal errors
            module_programs.run(case, module, mode, compile_fn, counter)
        return
    _, counts = module_programs.run(case, module, mode, compile_fn, counter)
    assert counts == recorded
