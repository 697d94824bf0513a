"""Eval and train programs for models that are not Hugging Face transformers (diffusers models,
repo-style PyTorch modules), and how a case is run eagerly, by graphwright and by torch.compile.

A `ModuleCase` builds a model and its inputs for a seed. `run(case, model, mode, compile_fn,
counter)` runs the program on a copy of the model, compiled by `compile_fn` (or eagerly), and
returns the observations (outputs, gradients and state_dict after each call, compared by
`programs.assert_same`) with the counter's graph count after each call:

- eval: `model.eval()`, two calls under `torch.no_grad()` on fresh inputs of the same shapes;
- train: two steps on different inputs: forward, a loss that reaches every output tensor (the
  mean square of each), `backward()`, an SGD step.

Every call is preceded by `torch.manual_seed(<call number>)`, so models that draw random numbers
in training (label dropout) draw the same ones eagerly and compiled.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch
import pytest
import torch.utils._pytree as pytree

from .programs import Observation, leaves

SEEDS = (1, 2)


@dataclasses.dataclass(frozen=True)
class ModuleCase:
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[int], dict[str, Any]]
    # compiled instead of the module and called as `function(model, **inputs)`
    function: Callable[..., Any] | None = None
    slow: bool = False


def loss(output: Any) -> torch.Tensor:
    """A loss that reaches every floating-point tensor the model returned (not the indices a
    quantizer returns): the mean square of each."""
    tensors = [value for value in pytree.tree_leaves(output)
               if isinstance(value, torch.Tensor) and value.is_floating_point()]
    return sum(tensor.pow(2).mean() for tensor in tensors)


def _outputs(output: Any) -> list[tuple[str, Any]]:
    return [(path, value) for path, value in leaves(output) if path != "output" or isinstance(value, torch.Tensor)]


def run_eval(case: ModuleCase, model: torch.nn.Module, call: Callable[..., Any]) -> list[Observation]:
    model.eval()
    with torch.no_grad():
        return [Observation(_outputs(call(**case.inputs(seed)))) for seed in SEEDS]


def run_train(case: ModuleCase, model: torch.nn.Module, call: Callable[..., Any]) -> list[Observation]:
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    observed = []
    for seed in SEEDS:
        optimizer.zero_grad()
        output = call(**case.inputs(seed))
        loss(output).backward()
        gradients = {name: None if p.grad is None else p.grad.clone() for name, p in model.named_parameters()}
        optimizer.step()
        state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
        observed.append(Observation(_outputs(output), gradients, state))
    return observed


PROGRAMS = {"eval": run_eval, "train": run_train}


def run(case: ModuleCase, model: torch.nn.Module, mode: str, compile_fn: Callable[[Any], Any] | None = None,
        counter: Any = None) -> tuple[list[Observation], list[int]]:
    """The program on a copy of `model`, compiled by `compile_fn` (eager if None); the
    observations and the counter's graph count after each call."""
    model = copy.deepcopy(model)
    target = case.function or model
    compiled = target if compile_fn is None else compile_fn(target)
    counts: list[int] = []

    def call(**inputs: Any) -> Any:
        torch.manual_seed(len(counts))
        output = compiled(model, **inputs) if case.function else compiled(**inputs)
        counts.append(counter.frame_count if counter else 0)
        return output

    return PROGRAMS[mode](case, model, call), counts


_built: dict[int, torch.nn.Module] = {}


def built(case: ModuleCase) -> torch.nn.Module:
    """`case`'s model, built once under seed 0 and shared by the tests of a session."""
    if id(case) not in _built:
        torch.manual_seed(0)
        _built[id(case)] = case.build()
    return _built[id(case)]


def matrix(cases: dict[str, ModuleCase], aot_failures: dict[str, str] | None = None) -> list:
    """(name, mode, fullgraph, backend) for every case: quick for a quick case's eval and train with
    `fullgraph=True` under `eager`, slow otherwise; `aot_failures` (name: why) are strict xfails."""
    params = []
    for name, case in cases.items():
        for mode in PROGRAMS:
            for fullgraph in (True, False):
                for backend in ("eager", "aot_eager"):
                    quick = not case.slow and fullgraph and backend == "eager"
                    marks = [] if quick else [pytest.mark.slow]
                    if backend == "aot_eager" and name in (aot_failures or {}):
                        marks.append(pytest.mark.xfail(strict=True, raises=RuntimeError, reason=aot_failures[name]))
                    params.append(pytest.param(name, mode, fullgraph, backend, marks=marks,
                                               id=f"{name}-{mode}-{'fullgraph' if fullgraph else 'breaks'}-{backend}"))
    return params
