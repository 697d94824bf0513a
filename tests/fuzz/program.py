"""A whole generated program: its source text and what the generator knows about it.

The source is a self-contained Python module: module-level
definitions, the function `f` the runner compiles, `make_inputs` building `f`'s
arguments for the sizes of one call, `CALLS` (the sizes and int of each call; the third
call runs `mutate()` first, the fourth changes sizes and the int, the fifth goes back),
`OBSERVED` (module-level state compared after every call), `BREAKS` (graph-break kinds
planted), `COMPILE_OPTIONS` and `CONFIG` (graphwright.config values for the compiled run).
"""
from __future__ import annotations

import collections
import dataclasses
import random
import re
from collections.abc import Callable

from hypothesis import strategies as st

from .builder import Builder
from .jagged import jagged_input
from .modules import TWO_TENSOR
from .statements import statement

HEADER = '''import copy
import dataclasses
import functools
import itertools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw'''

@dataclasses.dataclass(frozen=True)
class GeneratedProgram:
    source: str
    features: collections.Counter
    breaks: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Input:
    name: str
    maker: str  # the expression in make_inputs


def _tensor_input(b: Builder, name: str, shape, dtype: str, grad: bool) -> Input:
    sizes = ", ".join(str(d) for d in shape)
    extra = (f", dtype=torch.{dtype}" if dtype != "float32" else "") + (", requires_grad=True" if grad else "")
    b.add_tensor(name, shape, dtype, grad, mutable=not grad)
    b.inputs.add(name)
    return Input(name, f"torch.randn({sizes}{extra})")


def _subclass_input(b: Builder, shape, grad: bool) -> Input:
    """A `TwoTensor` (a wrapper subclass holding two tensors, every op applied to both)."""
    b.define("TwoTensor", TWO_TENSOR)
    sizes = ", ".join(str(d) for d in shape)
    b.add_tensor("tt", shape, "float32", grad, mutable=not grad)
    b.inputs.add("tt")
    b.subclass = True
    b.feature("input_subclass")
    return Input("tt", f"TwoTensor(torch.randn({sizes}), torch.randn({sizes})){'.requires_grad_()' if grad else ''}")


def draw_inputs(b: Builder) -> list[Input]:
    width, other = b.choice([3, 4, 2]), b.choice([4, 2, 3])
    inputs = [_tensor_input(b, "x", ("A", width), "float32", True)]
    if b.chance(60):
        shape = b.choice([("A", width), (width,), (1, width), ("A", 1), (width, other), ("A", other)])
        inputs.append(_tensor_input(b, "y", shape, b.choice(["float32", "float64"]), b.chance(50)))
        b.feature("input_float64" if b.tensors[-1].dtype == "float64" else "input_float32")
    if b.chance(30):
        shape = b.choice([("A", width, other), (other, "A"), (2, "A", width)])
        inputs.append(_tensor_input(b, "z", shape, "float32", b.chance(50)))
        b.feature("input_3d" if len(shape) == 3 else "input_2d")
    if b.chance(40):
        inputs.append(_tensor_input(b, "buf", b.choice([("A", width), (width,)]), "float32", False))
        b.feature("input_buffer")
    if b.chance(25):
        for index in range(2):
            b.add_tensor(f"items[{index}]", (width,), "float32", False)
        b.lists.add("items")
        inputs.append(Input("items", f"[torch.randn({width}), torch.randn({width})]"))
        b.feature("input_list")
    if b.chance(12):  # a tensor subclass: a TwoTensor, or a jagged nested tensor (never both: `jagged.py`)
        if b.chance(50):
            inputs.append(Input(*jagged_input(b, width, b.chance(50))))
        else:
            inputs.append(_subclass_input(b, b.choice([("A", width), (width,)]), b.chance(50)))
    if b.chance(60):
        b.ints.append("n")
        inputs.append(Input("n", "n"))
        b.feature("input_int")
    return inputs


def _returned(b: Builder) -> str:
    last = b.tensors[-1].name
    others = [t.name for t in b.tensors[:-1]]
    chosen = [last] + [b.choice(others) for _ in range(b.integer(0, 2)) if others]
    chosen = list(dict.fromkeys(chosen + b.outputs))
    if b.chance(25):
        chosen.append(b.choice(["x.shape[0]", "n" if "n" in b.ints else "1", "x.dim() * 1.5"]))
        b.feature("return_python_value")
    form = b.choice(["tuple", "single", "list", "dict"]) if len(chosen) > 1 else "single"
    if form == "single" and len(chosen) == 1:
        return chosen[0]
    if form == "dict":
        return "{" + ", ".join(f'"out{i}": {c}' for i, c in enumerate(chosen)) + "}"
    if form == "list":
        return "[" + ", ".join(chosen) + "]"
    return "(" + ", ".join(chosen) + ",)"


def _mutate_source(lines: list[str]) -> str:
    assigned = sorted({m.group(1) for line in lines if (m := re.match(r"([A-Z_]+) = ", line))})
    body = ([f"    global {', '.join(assigned)}"] if assigned else []) + [f"    {line}" for line in lines]
    return "\n".join(["def mutate():"] + (body or ["    pass"]))


def build_program(draw_integer: Callable[[int, int], int], max_statements: int = 8) -> GeneratedProgram:
    """The program a source of bounded integers chooses (see the module docstring)."""
    first_size = draw_integer(2, 4)
    sizes = [first_size] * 3 + [first_size + draw_integer(1, 3), first_size]
    first_int = draw_integer(1, 3)
    ints = [first_int] * 3 + [first_int + 1, first_int]
    b = Builder(draw_integer, {"A": sizes}, ints)
    b.statement = statement
    b.allow_breaks = b.chance(50)
    inputs = draw_inputs(b)
    for _ in range(b.integer(1, max_statements)):
        statement(b)
    returned = _returned(b)
    options = b.choice([{}, {"dynamic": True}, {"dynamic": False}])
    config = {}
    for flag in ("capture_scalar_outputs", "capture_dynamic_output_shape_ops", "reorderable_print"):
        if b.chance(15):
            config[flag] = True
            b.feature(f"config_{flag}")
    if options:
        b.feature(f"dynamic_{options['dynamic']}")
    mutations = list(dict.fromkeys(b.mutations))
    if mutations:
        b.feature("mutate_between_calls")

    params = ", ".join(i.name for i in inputs)
    f_lines = [f"def f({params}):"]
    if b.global_names:
        f_lines.append(f"    global {', '.join(b.global_names)}")
    f_lines += b.lines + [f"    return {returned}"]
    make = [f"def make_inputs(A, n):"] + [f"    {i.name} = {i.maker}" for i in inputs if i.name != "n"]
    make.append(f"    return ({', '.join(i.name for i in inputs)},)")
    calls = [{"A": size, "n": n} for size, n in zip(sizes, ints)]
    calls[2]["mutate"] = True
    parts = [HEADER, *b.definitions.values(), "\n".join(f_lines), "\n".join(make), _mutate_source(mutations),
             f"CALLS = {calls!r}\n"
             f"OBSERVED = {b.observed!r}\n"
             f"BREAKS = {sorted(b.breaks)!r}\n"
             f"COMPILE_OPTIONS = {options!r}\n"
             f"CONFIG = {config!r}"]
    source = "\n\n\n".join(parts) + "\n"
    return GeneratedProgram(source, b.features, frozenset(b.breaks))


def programs(max_statements: int = 8) -> st.SearchStrategy[GeneratedProgram]:
    """The Hypothesis strategy of programs: each choice is one integer draw, so that a
    program made by `random_program` replays (and shrinks) from its recorded choices."""
    return st.composite(lambda draw: build_program(lambda low, high: draw(st.integers(low, high)),
                                                   max_statements))()


def random_program(rng: random.Random, max_statements: int = 8) -> tuple[GeneratedProgram, list[int]]:
    """A program chosen by `rng`, independent of any other, and the choices that make it."""
    choices: list[int] = []

    def draw_integer(low: int, high: int) -> int:
        choices.append(rng.randint(low, high))
        return choices[-1]

    return build_program(draw_integer, max_statements), choices

