"""The state of drawing one program: what is in scope, and the source written so far.

A `Builder` turns one source of bounded integers (Hypothesis's draws, or a recorded
random generator: `program`) into the few kinds of choices the statement kinds make
(always listing the plainest option first: shrinking moves towards it), keeps the
tensor variables in scope with their shapes and dtypes, writes the body of the compiled
function `f` line by line, and collects what the program needs at module level (classes,
modules, marked functions, global state), the features it used and the graph breaks it
planted. It knows no statement kind.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .shapes import Derivation, Shape, derivations

FLOAT_DTYPES = ("float32", "float64")


@dataclasses.dataclass
class TensorVar:
    """A tensor variable of `f`: its shape, dtype, whether it requires grad, and whether it
    may still be changed in place (made in `f`, not yet read since: an earlier read may
    have been saved for backward)."""

    name: str
    shape: Shape
    dtype: str
    grad: bool
    mutable: bool = False


@dataclasses.dataclass
class FunctionBody:
    """The lines of a function body written with `Builder.function`."""

    lines: list[str] = dataclasses.field(default_factory=list)
    global_names: list[str] = dataclasses.field(default_factory=list)

    def source(self, header: str, indent: str = "") -> str:
        """`header` (a `def` line) and the body, `global` declarations first."""
        lines = [indent + header]
        if self.global_names:
            lines.append(f"{indent}    global {', '.join(self.global_names)}")
        lines += [indent + line for line in self.lines]
        return "\n".join(lines)


class Builder:
    """One program being drawn; see the module docstring."""

    def __init__(self, draw_integer: Callable[[int, int], int], symbols: dict[str, Sequence[int]],
                 int_values: Sequence[int]) -> None:
        self._draw_integer = draw_integer  # every choice of the program is one call of it
        self.symbols = symbols  # symbolic dimension -> its size in each call
        self.int_values = int_values  # the int argument `n` in each call
        self.lines: list[str] = []
        self.level = 1
        self.tensors: list[TensorVar] = []
        self.ints: list[str] = []  # int parameters in scope
        self.lists: set[str] = set()  # list parameters in scope
        self.definitions: dict[str, str] = {}
        self.counters: collections.Counter = collections.Counter()
        self.features: collections.Counter = collections.Counter()
        self.breaks: set[str] = set()
        self.inputs: set[str] = set()  # the tensor parameters of `f`
        self.global_names: list[str] = []  # assigned in `f`: declared `global`
        self.observed: list[str] = []  # module-level state compared after every call
        self.modules: list[str] = []  # module-level `nn.Module`s (always compared)
        self.mutations: list[str] = []  # lines of `mutate()`, run between calls
        self.outputs: list[str] = []  # values of `f`'s body returned besides tensors in scope
        self.subclass = False  # a tensor subclass (TwoTensor) is among the values
        self.jagged: list[str] = []  # jagged nested tensors in scope, all of `nt`'s offsets (`jagged.py`)
        self.jagged_width, self.jagged_grad = 0, False
        self.allow_breaks = False  # whether graph breaks may be planted
        self.depth = 0  # nested blocks (if, for, with) around the current statement
        self.nesting = 0  # nested function bodies around the current statement
        self.statement: Callable[[Builder], None] | None = None  # set by `program`

    # -- choices (plainest first: Hypothesis shrinks towards the first option) ------

    def choice(self, options: Sequence[Any]) -> Any:
        options = list(options)
        return options[self._draw_integer(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        """True with `percent`% probability; shrinks towards False."""
        return self._draw_integer(0, 99) >= 100 - percent

    def integer(self, low: int, high: int) -> int:
        return self._draw_integer(low, high)

    def number(self) -> str:
        """A Python float literal."""
        return self.choice(["2.0", "0.5", "-1.5", "3.0", "0.25", "1.0"])

    # -- names and source ------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        name = f"{prefix}{self.counters[prefix]}"
        self.counters[prefix] += 1
        return name

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    @contextlib.contextmanager
    def indented(self) -> Iterator[None]:
        self.level += 1
        try:
            yield
        finally:
            self.level -= 1

    def define(self, key: str, text: str) -> bool:
        """Add a module-level definition once; True when it is new."""
        if key in self.definitions:
            return False
        self.definitions[key] = text
        return True

    def observe(self, name: str) -> None:
        if name not in self.observed:
            self.observed.append(name)

    def declare_global(self, name: str) -> None:
        if name not in self.global_names:
            self.global_names.append(name)

    def feature(self, name: str) -> None:
        self.features[name] += 1

    def plant_break(self, gb_id: str, feature: str) -> None:
        self.breaks.add(gb_id)
        self.feature(feature)

    # -- scope -----------------------------------------------------------------------

    @contextlib.contextmanager
    def block(self) -> Iterator[None]:
        """A nested body: variables it makes are not in scope after it (the other path of
        a branch, or zero iterations of a loop, would not have made them), and nothing
        made before it may be changed in place inside it (a loop would do it twice)."""
        tensors, ints, jagged = list(self.tensors), list(self.ints), list(self.jagged)
        mutable = [t.mutable for t in self.tensors]
        for t in self.tensors:
            t.mutable = False
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            for t, was in zip(tensors, mutable):
                t.mutable = was and t.mutable
            self.tensors, self.ints, self.jagged = tensors, ints, jagged

    @contextlib.contextmanager
    def function(self, params: Sequence[TensorVar], ints: Sequence[str] = ()) -> Iterator[FunctionBody]:
        """Write the body of another function (a helper, a method, a closure): only `params`
        and `ints` are in scope; on exit the body's lines and `global` names are in the
        yielded `FunctionBody`, and the enclosing function's state is back."""
        saved = (self.lines, self.level, self.tensors, self.ints, self.lists, self.global_names, self.jagged)
        self.lines, self.level, self.tensors, self.ints, self.lists = [], 1, list(params), list(ints), set()
        self.jagged = []
        self.global_names = []
        self.nesting += 1
        body = FunctionBody()
        try:
            yield body
        finally:
            body.lines, body.global_names = self.lines, self.global_names
            self.lines, self.level, self.tensors, self.ints, self.lists, self.global_names, self.jagged = saved
            self.nesting -= 1

    @contextlib.contextmanager
    def hidden(self, *names: str) -> Iterator[None]:
        """Leave the variables `names` out of scope for a while."""
        tensors = self.tensors
        self.tensors = [t for t in tensors if t.name not in names]
        try:
            yield
        finally:
            self.tensors = tensors + [t for t in self.tensors if t not in tensors]

    @property
    def top_level(self) -> bool:
        """True in `f`'s own body outside any block: a name made here is defined at its return."""
        return self.depth == 0 and self.nesting == 0

    def output(self, name: str) -> None:
        """Return `name` from `f` (it must be made at the top level)."""
        if self.top_level and name not in self.outputs:
            self.outputs.append(name)

    def is_input(self, var: TensorVar) -> bool:
        return var.name in self.inputs

    def add_tensor(self, name: str, shape: Shape, dtype: str, grad: bool, mutable: bool = False) -> TensorVar:
        var = TensorVar(name, shape, dtype, grad, mutable)
        self.tensors = [t for t in self.tensors if t.name != name] + [var]
        return var

    def assign(self, code: str, shape: Shape, dtype: str, grad: bool, mutable: bool = False,
               prefix: str = "v") -> TensorVar:
        name = self.fresh(prefix)
        self.emit(f"{name} = {code}")
        return self.add_tensor(name, shape, dtype, grad, mutable)

    def read(self, var: TensorVar) -> str:
        """The variable's name, noting that it has been read (no in-place change after)."""
        var.mutable = False
        return var.name

    def leaves(self, shape: Shape) -> list[tuple[TensorVar, Derivation]]:
        return [(var, d) for var in self.tensors for d in derivations(var.name, var.shape) if d.shape == shape]

    def reachable(self) -> set[Shape]:
        return {d.shape for var in self.tensors for d in derivations(var.name, var.shape)}

    def symbolic_sizes(self) -> list[tuple[TensorVar, int, str]]:
        """(variable, dimension, symbol) for every symbolic size in scope."""
        return [(var, d, dim) for var in self.tensors for d, dim in enumerate(var.shape)
                if isinstance(dim, str) and dim in self.symbols]
