"""Corpus programs about Python floats that change between calls: read from an argument, an
attribute, an item of a dict in a list on an object (an optimizer's `param_groups`), a global.
The first call specialises the float; when it changes, the recompiled entry takes it as a graph
input (a SymFloat), so further values reuse that entry: in tensor arithmetic, in Python
arithmetic, in `math` functions, `int()`, `max`, `torch.tensor`, truth tests and `isinstance`. A branch on the
float guards its outcome, not the value."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .harness import Args, Program, corpus_logger, program_decorator, rand

PROGRAMS = []
program = program_decorator(PROGRAMS)


def _call_with_each_float(world, compiled, args):
    x = args.args[0]
    return [compiled(x, value) for value in args.args[1:]]


def _each(*values):
    return dict(call=_call_with_each_float, changed=lambda: Args(rand(3), *values))


@program("changing_float_argument_in_tensor_arithmetic_turns_symbolic", lambda: Args(rand(3), 0.1),
         **_each(0.2, 0.3, 0.4), frames_changed=2)
def _(x, rate):
    return x * rate - rate / 2


@program("changing_float_in_python_arithmetic_is_returned_as_a_float", lambda: Args(rand(3), 0.1),
         **_each(0.2, 0.3), frames_changed=2)
def _(x, rate):
    scaled = rate * 2 + 1
    return x * scaled, scaled, -rate, rate ** 0.5, 0.9 ** rate


@program("changing_float_through_math_functions_int_and_max_stays_symbolic", lambda: Args(rand(3), 1.1),
         **_each(2.2, 3.3, 0.4), frames_changed=2)
def _(x, rate):
    return x * math.sqrt(rate) + math.cos(rate) + int(rate * 10) + math.floor(rate) + max(rate, 0.5) \
        + min(rate, 2.0) + round(rate, 1) + abs(-rate)


@program("changing_float_made_into_a_tensor_stays_symbolic", lambda: Args(rand(3), 0.1),
         **_each(0.2, 0.3), frames_changed=2,
         reference={"frames_changed": 3, "why": "TorchDynamo specialises the float given to "
                                               "`torch.as_tensor` with a dtype"})
def _(x, rate):
    return x + torch.tensor(rate), torch.as_tensor(rate, dtype=torch.float64), torch.tensor(int(rate * 10))


@program("branch_on_a_changing_float_guards_its_outcome", lambda: Args(rand(3), 0.1),
         **_each(0.2, 0.3, 0.4, 0.15), frames_changed=3)
def _(x, rate):
    # 0.2 compiles with rate symbolic and guarded <= 0.25; 0.3 compiles for > 0.25
    if rate > 0.25:
        return x + rate
    return x - rate


@program("truth_and_isinstance_of_a_changing_float", lambda: Args(rand(3), 0.1),
         **_each(0.2, 0.0, 0.3), frames_changed=3)
def _(x, rate):
    # 0.2 compiles with rate symbolic and guarded != 0; 0.0 compiles for == 0
    if rate and isinstance(rate, float):
        return x * rate
    return x


@program("symbolic_float_is_guarded_by_type_an_int_compiles_its_own_entry", lambda: Args(rand(3), 0.1),
         **_each(0.2, 3, 0.4), frames_changed=3)
def _(x, rate):
    return x * rate, rate / 2


@program("float_that_changes_to_nan_stays_a_constant", lambda: Args(rand(3), 0.1),
         **_each(0.2, math.nan, 0.3), frames_changed=3)
def _(x, rate):
    return x * rate


@program("float_argument_formatted_into_a_returned_string_is_formatted_after_the_graph",
         lambda: Args(rand(3), 0.1), **_each(0.2, 0.3), frames_changed=2, fullgraph=False,
         reference={"frames_changed": 1, "why": "TorchDynamo never reads a float that is only formatted "
                                               "(its input is lazy), so it is no input to turn symbolic"})
def _(x, rate):
    return x + 1, f"rate={rate:.2f}", "{:.1f}|{!r}".format(rate, rate)


class _Rates:
    """An object with a float attribute and a float in a dict in a list, as optimizers keep
    their learning rate in `param_groups`."""

    def __init__(self):
        self.momentum = 0.9
        self.param_groups = [{"lr": 0.1}]


RATES = _Rates()
FACTOR = 0.5


def _set_rates(values):
    global FACTOR
    RATES.momentum, RATES.param_groups[0]["lr"], FACTOR = values


def _reset_rates():
    _set_rates((0.9, 0.1, 0.5))


def _call_with_each_setting(world, compiled, args):
    x = args.args[0]
    results = []
    for values in args.args[1:]:
        _set_rates(values)
        results.append(compiled(x))
    return results


@program("changing_floats_in_an_attribute_a_dict_in_a_list_and_a_global_turn_symbolic",
         lambda: Args(rand(3), (0.9, 0.1, 0.5)), call=_call_with_each_setting, reset=_reset_rates,
         changed=lambda: Args(rand(3), (0.8, 0.05, 0.25), (0.7, 0.025, 0.125), (0.6, 0.01, 1.5)),
         frames_changed=2)
def _(x):
    lr = RATES.param_groups[0]["lr"]
    return x * lr + RATES.momentum * FACTOR


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.scale = 0.5

    def forward(self, x):
        return self.linear(x) * self.scale


def _call_with_each_scale(world, compiled, args):
    x = args.args[0]
    results = []
    for scale in args.args[1:]:
        world.scale = scale
        results.append(compiled(x))
    return results


PROGRAMS.append(Program(
    name="changing_float_attribute_of_a_module_turns_symbolic", make=_Scaled,
    inputs=lambda: Args(rand(3), 0.5), call=_call_with_each_scale,
    changed=lambda: Args(rand(3), 0.25, 0.125, 2.0), frames_changed=2,
    observe=lambda module: module.scale))


def _optimizer_world(foreach):
    def make():
        torch.manual_seed(0)
        model = nn.Linear(3, 2)
        return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=foreach)
    return make


def _step_with_each_rate(world, compiled, args):
    model, opt = world
    results = []
    for rate in args.args[1:]:
        opt.param_groups[0]["lr"] = rate
        model(args.args[0]).sum().backward()
        compiled()
        opt.zero_grad()
        results.append([p.detach().clone() for p in model.parameters()])
    return results


for _foreach in (False, True):
    PROGRAMS.append(Program(
        name=f"optimizer_step_with_a_changing_learning_rate_foreach_{_foreach}".lower(),
        make=_optimizer_world(_foreach), inputs=lambda: Args(rand(3), 0.1), repeats=1,
        target=lambda world: world[1].step, call=_step_with_each_rate, fullgraph=False,
        changed=lambda: Args(rand(3), 0.05, 0.025, 0.0125),
        observe=lambda world: [p.detach().clone() for p in world[0].parameters()],
        frames=1, frames_changed=2))


# A training loop reporting its loss: `loss.item()` breaks the graph, and the resume function
# receives the loss as a float that changes every step. From the second step it is a symbolic
# input; formatting it into the printed or logged text formats the value the entry received,
# after the graph, so no step recompiles again (before: a guard on each value, one more entry
# and, where the resume function has a graph, one more graph per step).
def _sgd_world():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


def _train_and_print(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"loss {loss.item():.4f}")
    return loss.detach()


def _train_and_log(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    value = loss.item()
    corpus_logger.info("step: {:.4f} ({!r})".format(value, value))
    return loss.detach() * value


def _train_on_fixed_data(world, compiled, args):
    model, optimizer = world
    return compiled(model, optimizer, *args.args)


PROGRAMS.append(Program(
    name="training_loop_printing_item_of_the_loss_compiles_no_entry_per_step", make=_sgd_world,
    target=lambda world: _train_and_print, call=_train_on_fixed_data, inputs=lambda: (rand(6, 4), rand(6, 1)),
    repeats=6, fullgraph=False, frames=3, observe=lambda world: world[0].state_dict()))
PROGRAMS.append(Program(
    name="training_loop_logging_item_of_the_loss_compiles_no_graph_per_step", make=_sgd_world,
    target=lambda world: _train_and_log, call=_train_on_fixed_data, inputs=lambda: (rand(6, 4), rand(6, 1)),
    repeats=6, fullgraph=False, frames=[3, 4, 4, 4, 4, 4], observe=lambda world: world[0].state_dict(),
    reference={"frames": [3, 5, 5, 5, 5, 5], "why": "TorchDynamo breaks at the logging call (no logger is "
                                                     "reorderable by default): the resume function after it "
                                                     "takes the float as well, and recompiles once for it"}))
