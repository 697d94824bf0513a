"""Corpus programs for constructs met in PyTorch's own Python library (tests/real_models/
test_torch_library.py), each reduced to the general Python behaviour: a dict keyed by tensors
(the optimizers' `self.state[param]`, filled lazily on the first step), a comprehension whose
helper asks `torch.compiler.is_compiling()` in a function that runs in plain Python after a
break (the optimizers' `_get_value` and `_stack_if_compiling`), and an operator that rejects
what such a helper gave it."""
from __future__ import annotations

import collections

import torch
from torch import nn

from .harness import Program, program_decorator, rand

PROGRAMS = []
program = program_decorator(PROGRAMS)


class MomentumStep:
    """A hand-written optimizer: state per parameter, in a defaultdict keyed by the parameter,
    made on the first step."""

    def __init__(self, params):
        self.params = list(params)
        self.state = collections.defaultdict(dict)

    def step(self, scale):
        for p in self.params:
            state = self.state[p]
            if len(state) == 0:
                state["buffer"] = torch.zeros_like(p)
                state["steps"] = torch.zeros(())
            state["buffer"].mul_(0.9).add_(p * scale)
            state["steps"] += 1
            p.data.sub_(0.1 * state["buffer"])
        return sum(self.state[p]["steps"] for p in self.params)


def _momentum_make():
    model = nn.Linear(3, 2)
    return model, MomentumStep(model.parameters())


PROGRAMS.append(Program(
    name="state_in_a_dict_keyed_by_parameters_made_on_the_first_call", make=_momentum_make,
    inputs=lambda: 0.5, repeats=3, target=lambda world: world[1].step,
    observe=lambda world: ([dict(world[1].state[p]) for p in world[1].params],
                           [p.detach().clone() for p in world[0].parameters()]),
    # the first call fills the dict it guards as empty: the second compiles with the state
    frames=[1, 2, 2]))


@program("dict_keyed_by_tensors_made_in_the_region", lambda: (rand(3), rand(3)))
def _(x, y):
    doubled, halved = x * 2, y / 2
    by_tensor = {doubled: "doubled", halved: "halved"}
    by_tensor[doubled] = "twice"
    names = [by_tensor[t] for t in (halved, doubled)]
    keys = [key + 1 for key in by_tensor]
    return names, keys, doubled in by_tensor, (doubled + 0) in by_tensor


def _scaled_world():
    layer = nn.Linear(3, 2)
    return layer, {layer.weight: 2.0, layer.bias: 0.5}


def _scaled_sum(world):
    layer, scales = world

    def scaled_sum(x):
        total = sum(scales[p] * p.sum() for p in layer.parameters())
        return total + x.sum(), layer.weight in scales, x in scales, scales.get(x, "absent")
    return scaled_sum


PROGRAMS.append(Program(
    name="dict_keyed_by_parameters_read_by_key", make=_scaled_world, inputs=lambda: rand(3),
    target=_scaled_sum))


def _as_number(t):
    return t if torch.compiler.is_compiling() else t.item()


def _stacked(values):
    if torch.compiler.is_compiling():
        return torch.stack(values)
    return torch.tensor(values)


@program("comprehension_in_a_function_split_in_a_loop_sees_one_compiling_state",
         lambda: [rand(3), rand(3)], fullgraph=False, frames=1,
         reference={"frames": 2, "why": "TorchDynamo compiles the comprehension's frame (`t.sum()`) "
                                         "into a graph of its own; graphwright runs it with its calls routed"})
def _(steps):
    for t in steps:
        print("step", t.shape)  # a break in a loop: the function runs as plain Python
    corrections = [1 - 0.9 ** _as_number(t.sum()) for t in steps]
    return _stacked(corrections)


def _scale(t):
    return t if torch.compiler.is_compiling() else t.item()


@program("operator_rejecting_what_a_compiling_helper_gave_runs_eagerly",
         lambda: ([rand(3), rand(2)], [torch.randn(()), torch.randn(())]), fullgraph=False, frames=0,
         reference={"xfail": "TorchDynamo calls the operator with the tensors: TypeError",
                    "why": "torch.compile passes the operator what `is_compiling()` made"})
def _(tensors, scales):
    tensors = [t.clone() for t in tensors]
    # under `is_compiling()` the scales are tensors, which `_foreach_addcdiv_` does not take in
    # a list: the function runs as eager Python, its helper too
    torch._foreach_addcdiv_(tensors, tensors, [t.abs() + 1 for t in tensors], [_scale(s) for s in scales])
    return tensors
