"""Corpus programs run while the compiler is observed: under `torch.profiler.profile()`, where
every compiled call runs its entry's twin inside a profiler range and compiles are ranges
too, and while a compile trace for tlparse is written (records of every compile, under a
PyTorch CompileContext holding graphwright's compile id). Observing must change nothing a
user sees: outputs, gradients, side effects, recompiles."""
from __future__ import annotations

import contextlib
import tempfile

import torch
from torch import nn

from .harness import Args, Program, module_program, program_decorator, rand
from .markers import graph_break

PROGRAMS = []

program = program_decorator(PROGRAMS)


def _profiled(world, compiled, args):
    with torch.profiler.profile():
        return compiled(*args.args, **args.kwargs)


@contextlib.contextmanager
def _compile_trace():
    from graphwright._core import structured_trace  # the reference run traces torch.compile's records

    with tempfile.TemporaryDirectory() as folder:
        structured_trace.start(folder)
        try:
            yield
        finally:
            structured_trace.stop()


def _traced(world, compiled, args):
    with _compile_trace():
        return compiled(*args.args, **args.kwargs)


class _State:
    before = after = None


def _reset_state():
    _State.before = _State.after = None


@program("profiled_calls_with_two_breaks_replay_side_effects", lambda: rand(3, requires_grad=True),
         fullgraph=False, frames=3, repeats=3, call=_profiled, grad=True,
         observe=lambda world: (_State.before, _State.after), reset=_reset_state)
def _(x):
    y = x.sin() * 2
    _State.before = x.shape[0]
    graph_break()
    y = y.cos() + x.shape[0]
    graph_break()
    _State.after = "after"
    return y * x, {"size": x.shape[0]}


@program("profiled_call_recompiles_for_a_new_size", lambda: rand(3), changed=lambda: rand(2, 5),
         frames_changed=2, call=_profiled)
def _(x):
    return (x * 2).relu().sum(-1)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.rows = None

    def forward(self, x):
        self.rows = x.shape[0]
        return torch.tanh(self.linear(x)) * 2


PROGRAMS.append(module_program(
    "profiled_module_training_calls_count_and_backpropagate", _Block, lambda: rand(2, 4, requires_grad=True),
    repeats=3, call=_profiled, grad=True, observe=lambda world: world.rows))


@program("traced_compile_with_a_break_under_aot_autograd", lambda: rand(4, requires_grad=True),
         fullgraph=False, frames=2, call=_traced, grad=True, backend="aot_eager")
def _(x):
    y = torch.exp(x) / 3
    graph_break()
    return y * x.sum()


PROGRAMS.append(Program(
    name="traced_compile_of_a_recompiling_module", make=_Block, inputs=lambda: Args(rand(3, 4)),
    changed=lambda: Args(rand(5, 4)), frames_changed=2, call=_traced, backend="aot_eager",
    observe=lambda world: world.rows))
