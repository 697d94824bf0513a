"""Exceptions: raised in a callee and caught by the caller, raised and caught in loops,
suppressed by a `with` block's `__exit__`, and raised only under
`torch.compiler.is_compiling()` (a library's path that only compiled code takes: the
function then runs as eager Python, which takes the other path: a planted break).

A helper function's body is drawn like `f`'s, so each also happens a frame or two down.
"""
from __future__ import annotations

from .builder import Builder
from .expressions import expression, operand, some_shape

CHECKED = '''class LimitError(ValueError):
    def __init__(self, size, limit):
        super().__init__(f"size {size} over {limit}")
        self.size = size
        self.limit = limit


def checked(t, limit):
    if t.numel() > limit:
        raise LimitError(t.numel(), limit)
    return t * 2'''

SWALLOW = '''class Swallow:
    """Suppresses the exceptions of its kinds (counting them), lets others pass."""

    caught = 0

    def __init__(self, *kinds):
        self.kinds = kinds

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is not None and issubclass(kind, self.kinds):
            Swallow.caught += 1
            return True
        return False'''

EAGER_ONLY = '''def eager_only_scale(t, scales=None):
    """Builds its scales only when not compiled (as libraries skip work under compilation)."""
    if not torch.compiler.is_compiling():
        scales = (2.0,)
    return t * scales[0]'''


def raise_across_frames(b: Builder) -> None:
    """A module-level function raises a user exception (with attributes) that `f` catches."""
    b.define("checked", CHECKED)
    shape = some_shape(b)
    source = expression(b, shape, b.integer(0, 2))
    limit = b.choice(["0", "1000", "n" if "n" in b.ints else "4"])
    name = b.fresh("v")
    b.emit("try:")
    b.emit(f"    {name} = checked({source.code}, {limit})")
    b.emit("except LimitError as error:")
    b.emit(f"    {name} = {operand(source.code)} * (error.limit + len(error.args))")
    b.add_tensor(name, shape, source.dtype, True)
    b.feature("exception_across_frames")


def raise_in_loop(b: Builder) -> None:
    """A loop whose body raises on one turn, caught inside the loop."""
    shape = some_shape(b)
    source = expression(b, shape, b.integer(0, 1))
    name = b.fresh("v")
    turn = b.choice(["0", "2", "n % 3" if "n" in b.ints else "1"])
    kind = b.choice(["KeyError", "ValueError", "IndexError"])
    b.emit(f"{name} = {source.code}")
    b.emit("for turn in range(3):")
    b.emit("    try:")
    b.emit(f"        if turn == {turn}:")
    b.emit(f"            raise {kind}(turn)")
    b.emit(f"        {name} = {name} + {b.number()}")
    b.emit(f"    except {kind} as error:")
    b.emit(f"        {name} = {name} * (len(str(error)) + 1)")
    b.add_tensor(name, shape, source.dtype, True)
    b.feature("exception_in_loop")


def suppressed_by_with(b: Builder) -> None:
    """A `with` block whose `__exit__` suppresses what the block raises (an error Python
    raises, or the program's own), or lets another kind pass to an `except`."""
    b.define("Swallow", SWALLOW)
    b.observe("Swallow.caught")
    shape = some_shape(b)
    source = expression(b, shape, b.integer(0, 1))
    name = b.fresh("v")
    b.emit(f"{name} = {source.code}")
    raising, kinds = b.choice([("{}[0]", "KeyError"), ("[][1]", "IndexError, KeyError"),
                               ("raise ValueError('passes')", "KeyError")])
    passes = "ValueError" in raising
    if passes:
        b.emit("try:")
    indent = "    " if passes else ""
    b.emit(f"{indent}with Swallow({kinds}):")
    b.emit(f"{indent}    {name} = {name} * {b.number()}")
    b.emit(f"{indent}    {raising}")
    b.emit(f"{indent}    {name} = {name} + 100.0")
    if passes:
        b.emit("except ValueError:")
        b.emit(f"    {name} = {name} - 1.0")
    b.add_tensor(name, shape, source.dtype, True)
    b.feature("exception_suppressed_by_with")


def raised_only_when_compiling(b: Builder) -> None:
    """A call that raises only under compilation: the frame runs eagerly instead."""
    b.define("eager_only_scale", EAGER_ONLY)
    shape = some_shape(b)
    source = expression(b, shape, b.integer(0, 1))
    b.assign(f"eager_only_scale({source.code})", shape, source.dtype, source.grad)
    b.plant_break("GB011", "break_observed_exception")
