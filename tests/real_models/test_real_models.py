"""Hugging Face models compiled whole with `fullgraph=True`: the same answers as eager, and no
more graphs than torch.compile needs on the same program.

Every model of `catalogue.MODELS` runs the programs of `programs.py` (eval:
two `no_grad` calls, `use_cache=True` where the model has a key/value cache;
train: two steps of forward with labels, backward and SGD; outputs: eval asking
for every layer's hidden states and attention weights) eagerly, compiled
by graphwright with the `eager` and `aot_eager` backends (and `inductor` for
two models, marked slow; so are all cases of the families added for breadth,
`catalogue.BREADTH`). Compared: every output, gradient and state_dict entry
(within 1e-5), and the graph count after each call, which may not exceed
torch.compile's (`TORCH_COUNTS`, recorded from `torch.compile(backend=<its
CompileCounter>)` on the same programs and re-checked by a slow test: compiling
each model with TorchDynamo takes 2-6 s, twice graphwright's eager and
aot_eager runs together). That re-check checks the recorded counts, not
graphwright: `make test` runs it for the 20 core models, `make test-breadth` for
the breadth families too (marked `breadth`). A breadth family's programs run in
`make test` under `aot_eager`, whose capture is the `eager` backend's with AOT
autograd after it; under `eager` they are `breadth` cases.

Each model's cases (their ids start with its name) are one unit of work for
pytest-xdist (tests/conftest.py): they share the model built once and its eager
runs, and the file's 53 models spread over the workers.

A case the tracer cannot compile yet is a strict xfail whose reason is its
first failure; README.md keeps the table. When a fix lands, the case XPASSes
and fails the run: move it out of `FIRST_FAILURES` and update the table.
"""
from __future__ import annotations

import pytest
import torch
import torch._dynamo.testing

import graphwright

from .catalogue import MODELS
from .programs import PROGRAMS, assert_same, run_counted, run_eager

MODES = tuple(PROGRAMS)

# (model, mode) -> the first construct graphwright cannot compile, and where.
FIRST_FAILURES: dict[tuple[str, str], str] = {
    ("deberta", "train"): "a branch on a data-dependent size (GB002 `u0 > 0`): with no `problem_type` set, "
                          "DebertaV2ForSequenceClassification keeps the labelled rows, "
                          "`label_index = (labels >= 0).nonzero()`, and branches on `label_index.size(0) > 0` "
                          "(modeling_deberta_v2.py:1062); torch.compile cannot either",
}

# Graphs torch.compile(fullgraph=True, backend=CompileCounter) has compiled after each call of
# the program, recorded here and checked against torch.compile by the slow
# `test_torch_compile_needs_the_recorded_graph_counts`. The classifiers' training programs
# need two: the first call writes `self.config.problem_type`, which the second call's guards
# see changed. Wav2Vec2's first call installs transformers' output-capturing hooks (and sets
# `_output_capturing_hooks_installed`), which the second call runs; so does the first call of
# the `outputs` program in every model whose forward collects its outputs by hooks.
_NO_CAPTURING_HOOKS = ("resnet", "deberta", "falcon", "bloom", "gpt_neo", "mpt", "xlnet", "funnel")
TORCH_COUNTS: dict[tuple[str, str], list[int]] = {
    **{(name, mode): [1, 1] for name in MODELS for mode in MODES},
    **{(name, "outputs"): [1, 2] for name in MODELS if name not in _NO_CAPTURING_HOOKS},
    **{(name, "train"): [1, 2] for name in ("bert", "vit", "resnet", "distilbert", "roberta", "albert",
                                             "mobilebert", "electra", "xlm_roberta", "xlnet", "funnel",
                                             "swin", "convnext", "deit", "beit", "segformer")},
    **{("wav2vec2", mode): [1, 2] for mode in ("eval", "train")},
}

# Programs torch.compile(fullgraph=True) cannot compile: why. Their recorded counts are the
# graphs a correct capture needs.
_HOOK_LOCK = ("`with _hook_installation_lock:` (a threading.Lock) in transformers' "
              "maybe_install_capturing_hooks (utils/output_capturing.py:239) is an unsupported context manager")
TORCH_CANNOT: dict[tuple[str, str], str] = {
    ("gpt2", "train"): "`logger.warning_once` in PreTrainedModel.loss_function (modeling_utils.py:4778) "
                       "is unsupported under fullgraph",
    ("deberta", "train"): "could not guard on the data-dependent `label_index.size(0) > 0` "
                          "(modeling_deberta_v2.py:1062)",
    ("wav2vec2", "eval"): _HOOK_LOCK,
    ("wav2vec2", "train"): _HOOK_LOCK,
    **{(name, "outputs"): _HOOK_LOCK for name in MODELS if name not in _NO_CAPTURING_HOOKS},
}

INDUCTOR_MODELS = ("llama", "resnet")
# The `outputs` program runs quick for these, under the eager backend; its other cases are slow.
QUICK_OUTPUTS = ("gpt2", "bert", "t5", "vit", "wav2vec2")


def _slow(name: str, mode: str, backend: str) -> bool:
    return backend == "inductor" or MODELS[name].slow or \
        mode == "outputs" and (name not in QUICK_OUTPUTS or backend != "eager")

_eager_runs: dict[tuple[str, str], list] = {}
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


def _cases() -> list:
    cases = []
    for name in MODELS:
        for mode in MODES:
            for backend in ("eager", "aot_eager", "inductor"):
                if backend == "inductor" and (name not in INDUCTOR_MODELS or mode == "outputs"):
                    continue
                marks = [pytest.mark.slow] if _slow(name, mode, backend) else []
                if MODELS[name].slow and backend == "eager":  # aot_eager runs the same capture in make test
                    marks.append(pytest.mark.breadth)
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
    reference = TORCH_COUNTS[(name, mode)]
    assert all(ours <= theirs for ours, theirs in zip(counts, reference)), \
        f"graphs after each call: graphwright {counts}, torch.compile {reference}"


def _reference_cases() -> list:
    cases = []
    for name in MODELS:
        for mode in MODES:
            # a breadth family's counts are re-checked by `make test-breadth` only
            marks = [pytest.mark.slow, *([pytest.mark.breadth] if MODELS[name].slow else [])]
            if (name, mode) in TORCH_CANNOT:
                marks.append(pytest.mark.xfail(strict=True, raises=(torch._dynamo.exc.Unsupported,
                                                                   torch._dynamo.exc.UserError),
                                               reason=f"torch.compile: {TORCH_CANNOT[(name, mode)]}"))
            cases.append(pytest.param(name, mode, marks=marks, id=f"{name}-{mode}"))
    return cases


@pytest.mark.parametrize(("name", "mode"), _reference_cases())
def test_torch_compile_needs_the_recorded_graph_counts(name: str, mode: str) -> None:
    eager_run(name, mode)  # as before graphwright's run: warnings issued once are issued already
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    _, counts = run_counted(MODELS[name], mode, built(name),
                            lambda model: torch.compile(model, backend=counter, fullgraph=True), counter)
    assert counts == TORCH_COUNTS[(name, mode)]
