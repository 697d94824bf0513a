"""Corpus programs about guards: what recompiles when it changes (strings,
globals, functions passed in, object attributes, submodules, sizes under
dynamic=False) and graph breaks under fullgraph=False, whose results must
still equal eager's."""
from __future__ import annotations

import torch
from torch import nn

from .harness import Args, Program, function_program, module_program
from .markers import disable, graph_break

PROGRAMS = []


def program(name, inputs, **fields):
    """Decorator: register the decorated function as a corpus program."""
    def register(fn):
        PROGRAMS.append(function_program(name, fn, inputs, **fields))
        return fn
    return register


def rand(*shape):
    return torch.randn(*shape)


@program("string_argument_is_guarded", lambda: (rand(3), "relu"),
         changed=lambda: (rand(3), "tanh"), frames_changed=2)
def _(x, kind):
    return getattr(torch, kind)(x), kind.upper()


SCALE = 2


def _set_scale(value):
    global SCALE
    SCALE = value


def _inputs_with_scale(value):
    def make():
        _set_scale(value)
        return rand(3)
    return make


@program("global_constant_read_is_guarded", _inputs_with_scale(2),
         changed=_inputs_with_scale(5), frames_changed=2, reset=lambda: _set_scale(2))
def _(x):
    return x * SCALE


def _double(x):
    return x * 2


HELPER = _double


def _inputs_with_helper(fn):
    def make():
        global HELPER
        HELPER = fn
        return rand(3)
    return make


@program("global_function_rebinding_is_guarded", _inputs_with_helper(_double),
         changed=_inputs_with_helper(torch.neg), frames_changed=2,
         reset=_inputs_with_helper(_double))
def _(x):
    return HELPER(x) + 1


@program("function_argument_identity_is_guarded", lambda: (rand(3), torch.relu),
         changed=lambda: (rand(3), torch.sigmoid), frames_changed=2)
def _(x, activation):
    return activation(x) * 2


@program("same_function_argument_does_not_recompile", lambda: (rand(3), _double),
         changed=lambda: (rand(3), _double), frames_changed=1)
def _(x, fn):
    return fn(x) + fn(x)


class Settings:
    def __init__(self, depth):
        self.depth = depth
        self.name = "net"


@program("input_object_attribute_is_guarded", lambda: (rand(3), Settings(2)),
         changed=lambda: (rand(3), Settings(3)), frames_changed=2)
def _(x, settings):
    for _ in range(settings.depth):
        x = x * 0.5
    return x


@program("nested_container_constant_is_guarded", lambda: (rand(3), {"cfg": {"n": [1, 2]}}),
         changed=lambda: (rand(3), {"cfg": {"n": [1, 3]}}), frames_changed=2)
def _(x, options):
    return x * sum(options["cfg"]["n"])


@program("tuple_of_ints_argument_is_guarded", lambda: (rand(2, 6), (3, 4)),
         changed=lambda: (rand(2, 6), (4, 3)), frames_changed=2)
def _(x, shape):
    return x.reshape(shape)


@program("new_size_recompiles_under_dynamic_false", lambda: rand(4),
         changed=lambda: rand(5), frames_changed=2, options=dict(dynamic=False))
def _(x):
    return x.cumsum(0)


@program("same_size_new_data_does_not_recompile_under_dynamic_false", lambda: rand(4, 2),
         changed=lambda: rand(4, 2) * 100, frames_changed=1, options=dict(dynamic=False))
def _(x):
    return x.softmax(-1)


class Swappable(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3)

    def forward(self, x):
        return self.inner(x).relu()


def _swap_inner(world, compiled, args):
    if args.kwargs["swap"]:
        torch.manual_seed(7)
        compiled.inner = nn.Linear(3, 3)
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "submodule_replaced_by_one_of_the_same_structure", Swappable,
    lambda: Args(rand(2, 3), swap=False), call=_swap_inner,
    changed=lambda: Args(rand(2, 3), swap=True), frames_changed=1))


def _replace_with_different_class(world, compiled, args):
    if args.kwargs["swap"]:
        compiled.inner = nn.Identity()
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "submodule_replaced_by_another_class_recompiles", Swappable,
    lambda: Args(rand(2, 3), swap=False), call=_replace_with_different_class,
    changed=lambda: Args(rand(2, 3), swap=True), frames_changed=2))


GRAPH_SPLITTING = "graph breaks under fullgraph=False run the whole function eagerly"


@program("explicit_graph_break_splits_into_two_graphs", lambda: rand(3), fullgraph=False,
         frames=2, xfail=GRAPH_SPLITTING)
def _(x):
    y = x * 2
    graph_break()
    return y + 1


@program("data_dependent_branch_splits_the_graph", lambda: rand(3).abs() + 1, fullgraph=False,
         frames=2, changed=lambda: -rand(3).abs() - 5, frames_changed=3, xfail=GRAPH_SPLITTING)
def _(x):
    y = x + 1
    if y.sum() > 0:
        return y * 2
    return y - 2


def _explicit_break_in_helper(x):
    graph_break()
    return x + 1


@program("graph_break_inside_an_inlined_helper", lambda: rand(3), fullgraph=False,
         frames=3, xfail=GRAPH_SPLITTING)
def _(x):
    y = x.cos()
    z = _explicit_break_in_helper(y)
    return z * 3


@program("graph_break_keeps_side_effects_in_order", lambda: (rand(3), []), fullgraph=False,
         frames=2, xfail=GRAPH_SPLITTING)
def _(x, log):
    log.append("before")
    y = x * 2
    graph_break()
    log.append("after")
    return y + len(log)


PROGRAMS.append(Program(
    name="disabled_function_runs_eagerly_and_splits_the_caller",
    make=lambda: _calls_disabled, inputs=lambda: rand(3), fullgraph=False, frames=2,
    xfail=GRAPH_SPLITTING))


@disable
def _disabled_helper(x):
    return x.numpy().sum() + x


def _calls_disabled(x):
    return _disabled_helper(x * 2) - 1
