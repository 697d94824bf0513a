"""The two programs every real model runs, and how their observations are compared.

- `run_eval`: the model in eval mode under `torch.no_grad()`, called twice on
  fresh inputs of the same shapes; observed: every output (caches included).
- `run_train`: two training steps on different inputs: forward with labels,
  `loss.backward()`, an SGD step; observed: outputs, every parameter's
  gradient, and the state_dict after the step.
- `run_outputs`: as `run_eval`, asking for every layer's hidden states and
  attention weights (`output_hidden_states=True, output_attentions=True`, with
  the `eager` attention implementation, which returns the weights): transformers
  collects them through forward hooks it registers on the layers in the first
  such call.

Each program takes `call`, the function that runs the model (the module
itself, or the module compiled by graphwright or torch.compile), and returns
an `Observation` per call together with the compile counter's graph count
after that call. `assert_same` compares two runs leaf by leaf: tensors within
`1e-5`, everything else exactly.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .catalogue import RealModel

TOLERANCE = 1e-5
SEEDS = (1, 2)


@dataclasses.dataclass
class Observation:
    outputs: list[tuple[str, Any]]
    gradients: dict[str, torch.Tensor | None] = dataclasses.field(default_factory=dict)
    state: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)


def leaves(value: Any, path: str = "output", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every tensor and plain value reachable from a model's output, with its path: tuples,
    lists, dicts and ModelOutputs by item, other objects (key/value caches) by attribute."""
    if depth > 8:
        raise ValueError(f"{path}: output nested too deeply to compare")
    if isinstance(value, torch.Tensor):
        yield path, value.detach().clone()
    elif value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device, type)):
        yield path, value
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from leaves(item, f"{path}[{index}]", depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}[{key!r}]", depth + 1)
    else:
        yield path, type(value)
        for name, item in sorted(vars(value).items()):
            yield from leaves(item, f"{path}.{name}", depth + 1)


def run_eval(spec: RealModel, model: torch.nn.Module, call: Callable[..., Any]) -> list[Observation]:
    model.eval()
    observed = []
    with torch.no_grad():
        for seed in SEEDS:
            observed.append(Observation(list(leaves(call(**spec.eval_inputs(seed))))))
    return observed


def run_outputs(spec: RealModel, model: torch.nn.Module, call: Callable[..., Any]) -> list[Observation]:
    model.set_attn_implementation("eager")
    model.eval()
    observed = []
    with torch.no_grad():
        for seed in SEEDS:
            outputs = call(**spec.eval_inputs(seed), output_hidden_states=True, output_attentions=True)
            observed.append(Observation(list(leaves(outputs))))
    return observed


def run_train(spec: RealModel, model: torch.nn.Module, call: Callable[..., Any]) -> list[Observation]:
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    observed = []
    for seed in SEEDS:
        optimizer.zero_grad()
        output = call(**spec.train_inputs(seed))
        output.loss.backward()
        gradients = {name: None if p.grad is None else p.grad.clone() for name, p in model.named_parameters()}
        optimizer.step()
        state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
        observed.append(Observation(list(leaves(output)), gradients, state))
    return observed


PROGRAMS = {"eval": run_eval, "train": run_train, "outputs": run_outputs}


def run_counted(spec: RealModel, mode: str, model: torch.nn.Module, compile_fn: Callable,
                counter: Any) -> tuple[list[Observation], list[int]]:
    """Run the program on a copy of `model` compiled by `compile_fn(copy)`; the observations and
    the counter's graph count after each call."""
    copied = copy.deepcopy(model)
    compiled = compile_fn(copied)
    counts: list[int] = []

    def call(**kwargs: Any) -> Any:
        output = compiled(**kwargs)
        counts.append(counter.frame_count)
        return output

    return PROGRAMS[mode](spec, copied, call), counts


def run_eager(spec: RealModel, mode: str, model: torch.nn.Module) -> list[Observation]:
    copied = copy.deepcopy(model)
    return PROGRAMS[mode](spec, copied, copied)


def assert_same(actual: list[Observation], expected: list[Observation], tolerance: float = TOLERANCE) -> None:
    assert len(actual) == len(expected)
    for step, (got, want) in enumerate(zip(actual, expected), start=1):
        _assert_leaves(f"call {step} outputs", got.outputs, want.outputs, tolerance)
        _assert_leaves(f"call {step} gradients", list(got.gradients.items()), list(want.gradients.items()), tolerance)
        _assert_leaves(f"call {step} state_dict", list(got.state.items()), list(want.state.items()), tolerance)


def _assert_leaves(what: str, got: list[tuple[str, Any]], want: list[tuple[str, Any]], tolerance: float) -> None:
    assert [path for path, _ in got] == [path for path, _ in want], f"{what}: different structure"
    for (path, value), (_, expected) in zip(got, want):
        if isinstance(expected, torch.Tensor):
            assert isinstance(value, torch.Tensor), f"{what}: {path} is {type(value).__name__}, not a tensor"
            torch.testing.assert_close(value, expected, atol=tolerance, rtol=tolerance,
                                       msg=lambda text: f"{what}: {path}: {text}")
        else:
            assert value == expected, f"{what}: {path}: {value!r} != {expected!r}"
