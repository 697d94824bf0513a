"""Corpus programs about ints that count calls (a sampler's step index, a cursor): once such
an int changes it is a symbolic int, from whatever value (0 and 1 included), that indexes
tensors without being fixed again, and the tensor elements passed alongside it (views of one
schedule at a new storage offset each step) do not recompile."""
from __future__ import annotations

import torch

from .harness import Args, Program, rand

PROGRAMS = []


class Schedule:
    """A sampler's schedule as diffusers' schedulers keep it: noise levels, timesteps, and the
    index of the next step, advanced by every step."""

    def __init__(self) -> None:
        self.sigmas = torch.linspace(1.0, 0.0, 8)
        self.timesteps = torch.arange(70, -1, -10)
        self.step_index = 0


def _denoise_step(x, schedule, t):
    sigma = schedule.sigmas[schedule.step_index]
    dt = schedule.sigmas[schedule.step_index + 1] - sigma
    schedule.step_index += 1
    return x + dt * x * t / 70


def _step_through_the_schedule(world, compiled, args):
    return compiled(*args.args, world, world.timesteps[world.step_index])


PROGRAMS.append(Program(
    name="step_counter_indexes_a_schedule_symbolically_from_its_second_value", make=Schedule,
    inputs=lambda: Args(rand(3)), target=lambda world: _denoise_step, call=_step_through_the_schedule,
    repeats=5, frames=[1, 2, 2, 2, 2], observe=lambda world: world.step_index))


class Cursor:
    def __init__(self) -> None:
        self.table = torch.arange(64.0).reshape(4, 4, 4)
        self.position = 0


def _read_at_the_cursor(x, cursor):
    i = cursor.position
    cursor.position += 1
    table = cursor.table
    picked = (table[..., i, None].sum(), table[i, 1:].sum(), table[:, -i].sum(), table[None, i, :, 3 - i].sum(),
              table[i][i].sum(), table[i, i, i])
    return x * sum(picked)


PROGRAMS.append(Program(
    name="symbolic_int_in_an_index_with_slices_none_and_ellipsis", make=Cursor,
    inputs=lambda: Args(rand(3)), target=lambda world: _read_at_the_cursor,
    call=lambda world, compiled, args: compiled(*args.args, world),
    repeats=4, frames=[1, 2, 2, 2], observe=lambda world: world.position,
    reference={"frames": [1, 2, 3, 4], "why": "PyTorch rewrites only a lone symbolic index as `select`: "
                                              "one inside a tuple is fixed to its value"}))
