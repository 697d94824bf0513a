"""Hugging Face models compiled whole with `fullgraph=True`: the same answers as eager, and no
more graphs than torch.compile needs on the same program.

Every model of `catalogue.MODELS` runs both programs of `programs.py` (eval:
two `no_grad` calls, `use_cache=True` where the model has a key/value cache;
train: two steps of forward with labels, backward and SGD) eagerly, compiled
by graphwright with the `eager` and `aot_eager` backends (and `inductor` for
two models, marked slow), and compiled by `torch.compile(backend=<its
CompileCounter>)` for the graph counts. Compared: every output, gradient and
state_dict entry (within 1e-5), and the graph count after each call
(graphwright's at most PyTorch's).

A case the tracer cannot compile yet is a strict xfail whose reason is its
first failure; README.md keeps the table. When a fix lands, the case XPASSes
and fails the run: move it out of `FIRST_FAILURES` and update the table.
"""
from __future__ import annotations

import pytest
import torch

import graphwright

from .catalogue import MODELS
from .programs import assert_same, run_counted, run_eager

# (model, mode) -> the first construct graphwright cannot compile, and where.
_CODE = "`func.__code__` on a function (GB012): transformers/utils/generic.py:1122 `if arg_name in func.__code__.co_varnames`"
_MODEL_OUTPUT = ("instantiating a ModelOutput dataclass (GB022 `BaseModelOutputWithNoAttention`): "
                 "transformers/models/resnet/modeling_resnet.py:254")
FIRST_FAILURES: dict[tuple[str, str], str] = {
    **{(name, mode): _CODE for name in ("gpt2", "bert", "llama", "t5", "vit", "qwen2", "distilbert", "clip")
       for mode in ("eval", "train")},
    ("resnet", "eval"): _MODEL_OUTPUT,
    ("resnet", "train"): _MODEL_OUTPUT,
}

# Where torch.compile(fullgraph=True) itself cannot compile the program: the graph counts a
# correct capture needs, and why PyTorch's are not available.
REFERENCE_COUNTS: dict[tuple[str, str], tuple[list[int], str]] = {
    ("gpt2", "train"): ([1, 1], "torch.compile: `logger.warning_once` in PreTrainedModel.loss_function "
                                "(modeling_utils.py:4778) is unsupported under fullgraph"),
}

INDUCTOR_MODELS = ("llama", "resnet")

_eager_runs: dict[tuple[str, str], list] = {}
_torch_counts: dict[tuple[str, str], list[int]] = {}
_built: dict[str, torch.nn.Module] = {}


def built(name: str) -> torch.nn.Module:
    """The model `name`, built once per session under a fixed seed; tests run on copies."""
    if name not in _built:
        torch.manual_seed(0)
        _built[name] = MODELS[name].build()
    return _built[name]


def eager_run(name: str, mode: str) -> list:
    if (name, mode) not in _eager_runs:
        _eager_runs[(name, mode)] = run_eager(MODELS[name], mode, built(name))
    return _eager_runs[(name, mode)]


def torch_counts(name: str, mode: str) -> list[int]:
    """Graph counts after each call of the program compiled by torch.compile(fullgraph=True)."""
    if (name, mode) in REFERENCE_COUNTS:
        return REFERENCE_COUNTS[(name, mode)][0]
    if (name, mode) not in _torch_counts:
        import torch._dynamo.testing

        torch._dynamo.reset()
        counter = torch._dynamo.testing.CompileCounter()
        _, counts = run_counted(MODELS[name], mode, built(name),
                                lambda model: torch.compile(model, backend=counter, fullgraph=True), counter)
        torch._dynamo.reset()
        _torch_counts[(name, mode)] = counts
    return _torch_counts[(name, mode)]


def _cases() -> list:
    cases = []
    for name in MODELS:
        for mode in ("eval", "train"):
            for backend in ("eager", "aot_eager", "inductor"):
                if backend == "inductor" and name not in INDUCTOR_MODELS:
                    continue
                marks = [pytest.mark.slow] if backend == "inductor" else []
                reason = FIRST_FAILURES.get((name, mode))
                if reason is not None:
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
                cases.append(pytest.param(name, mode, backend, marks=marks, id=f"{name}-{mode}-{backend}"))
    return cases


@pytest.mark.parametrize(("name", "mode", "backend"), _cases())
def test_compiled_model_matches_eager(name: str, mode: str, backend: str) -> None:
    counter = graphwright.testing.CompileCounterWithBackend(backend)
    observed, counts = run_counted(MODELS[name], mode, built(name),
                                   lambda model: graphwright.compile(model, fullgraph=True, backend=counter),
                                   counter)
    assert_same(observed, eager_run(name, mode))
    reference = torch_counts(name, mode)
    assert all(ours <= theirs for ours, theirs in zip(counts, reference)), \
        f"graphs after each call: graphwright {counts}, torch.compile {reference}"
