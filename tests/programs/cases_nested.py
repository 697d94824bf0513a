"""Corpus programs whose compiled code calls code compiled on its own: a training step
calling a compiled model, a compiled function calling a compiled helper or a method of
a compiled module. The inner compiled code is traced into (its original function or
module), so its work joins the caller's graphs, as under torch.compile."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .harness import Program, rand

PROGRAMS = []


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.scale = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return torch.relu(self.linear(x)) * self.scale

    def logits(self, x):
        return self.forward(x).log_softmax(-1)


def _model_compiled_alone(world, compile):
    model, optimizer = world
    return model, optimizer, compile(model)


def _train_step(compiled_model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.mse_loss(compiled_model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


def _sgd_world():
    model = Scaled()
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _step(world, compiled, args):
    _, optimizer, compiled_model = world
    return compiled(compiled_model, optimizer, *args.args)


def _adamw_world():
    model = Scaled()
    return model, torch.optim.AdamW(model.parameters(), lr=0.01)


for _name, _world in (("sgd", _sgd_world), ("adamw", _adamw_world)):
    # AdamW makes its state on the first step: made before that step is traced, one graph serves
    # every step (as under torch.compile)
    PROGRAMS.append(Program(
        name=f"training_step_calling_a_model_compiled_on_its_own_{_name}", make=_world,
        nested=_model_compiled_alone, target=lambda world: _train_step, call=_step,
        inputs=lambda: (rand(5, 4), rand(5, 3)), repeats=3, fullgraph=False, frames=3,
        observe=lambda world: (world[0].state_dict(), world[1].state_dict(),
                               [parameter.grad for parameter in world[0].parameters()])))


def _forward_and_loss(compiled_model, x, y):
    return F.mse_loss(compiled_model(x), y)


def _loss_of_compiled_model(world, compiled, args):
    return compiled(world[2], *args.args)


PROGRAMS.append(Program(
    name="loss_over_a_compiled_model_is_one_graph", make=_sgd_world, nested=_model_compiled_alone,
    target=lambda world: _forward_and_loss, call=_loss_of_compiled_model,
    inputs=lambda: (rand(5, 4, requires_grad=True), rand(5, 3)), grad=True, frames=1))


def _calls_a_method(compiled_model, x):
    return compiled_model.logits(x) + 1


PROGRAMS.append(Program(
    name="method_of_a_compiled_module_traced_into", make=_sgd_world, nested=_model_compiled_alone,
    target=lambda world: _calls_a_method, call=_loss_of_compiled_model,
    inputs=lambda: (rand(5, 4),), frames=1))


class Breaking(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = nn.Linear(4, 3)

    def forward(self, x):
        x = torch.tanh(self.first(x))
        print("between the layers")
        return self.second(x)


def _breaking_world():
    model = Breaking()
    return model, None


PROGRAMS.append(Program(
    name="compiled_model_with_a_break_inside_a_compiled_loss", make=_breaking_world,
    nested=_model_compiled_alone, target=lambda world: _forward_and_loss, call=_loss_of_compiled_model,
    inputs=lambda: (rand(5, 4), rand(5, 3)), fullgraph=False, frames=3))


def _helper(x):
    return torch.sin(x) * 2


def _helper_compiled_alone(world, compile):
    return compile(_helper)


def _calls_the_helper(world, compiled, args):
    return compiled(world, *args.args)


def _uses_helper(helper, x):
    return helper(x).sum() + helper(x + 1).mean()


PROGRAMS.append(Program(
    name="function_compiled_on_its_own_inlined_into_its_caller", make=lambda: None,
    nested=_helper_compiled_alone, target=lambda world: _uses_helper, call=_calls_the_helper,
    inputs=lambda: (rand(4),), frames=1))


# A learning-rate scheduler stepped inside the compiled step: neither compiler traces
# `torch.optim.lr_scheduler` (its step counts change every call), so `scheduler.step()` and the
# `optimizer.step` wrapper it installs are graph breaks; the optimizer's own step is compiled,
# once for the first rate and once more with the rate as a graph input.
def _train_step_with_scheduler(compiled_model, optimizer, scheduler, x, y):
    optimizer.zero_grad()
    loss = F.mse_loss(compiled_model(x), y)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.detach()


def _scheduled(make_optimizer, make_scheduler):
    def world():
        model = Scaled()
        optimizer = make_optimizer(model.parameters())
        return model, optimizer, make_scheduler(optimizer)
    return world


def _scheduled_model_compiled_alone(world, compile):
    model, optimizer, scheduler = world
    return model, optimizer, scheduler, compile(model)


def _scheduled_step(world, compiled, args):
    _, optimizer, scheduler, compiled_model = world
    return compiled(compiled_model, optimizer, scheduler, *args.args)


_SCHEDULED_WORLDS = {
    "sgd_step_lr": _scheduled(lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
                              lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)),
    "adam_lambda_lr": _scheduled(lambda params: torch.optim.Adam(params, lr=0.01),
                                 lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.9 ** epoch)),
}
for _name, _world in _SCHEDULED_WORLDS.items():
    PROGRAMS.append(Program(
        name=f"training_step_stepping_a_scheduler_breaks_at_it_{_name}", make=_world,
        nested=_scheduled_model_compiled_alone, target=lambda world: _train_step_with_scheduler,
        call=_scheduled_step, inputs=lambda: (rand(5, 4), rand(5, 3)), repeats=4, fullgraph=False,
        frames=[3, 4, 4, 4],
        observe=lambda world: (world[0].state_dict(), world[1].state_dict(), world[2].state_dict())))
