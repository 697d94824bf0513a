"""Python control flow: branches and loops on constants, sizes, int arguments and metadata.

Every construct keeps the shape model exact: a branch makes one value of one shape and
dtype on both paths (the else path is cast to the if path's dtype), a loop carries one
accumulator whose dtype it keeps, and runs at least once. Conditions on sizes and int
arguments use thresholds between the values of different calls, so that a later call can
take the other path (what the guards must notice). Bodies hold nested statements.
"""
from __future__ import annotations

from .builder import Builder
from .builder import TensorVar
from .expressions import Expr, cast, expression, new_value, operand, promoted, some_shape


def nested_statements(b: Builder, most: int = 2) -> None:
    for _ in range(b.integer(0, most)):
        b.statement(b)


def size_condition(b: Builder) -> str | None:
    sizes = b.symbolic_sizes()
    if not sizes:
        return None
    var, dim, symbol = b.choice(sizes)
    low = min(b.symbols[symbol])  # the later, larger size takes the other path
    reading = b.choice([f"{var.name}.shape[{dim}]", f"{var.name}.size({dim})", f"{var.name}.size()[{dim}]"])
    return b.choice([f"{reading} > {low}", f"{reading} <= {low}", f"{reading} % 2 == 0",
                     f"{reading} * 2 > {low} + 3"])


def int_condition(b: Builder) -> str | None:
    if "n" not in b.ints:
        return None
    low = min(b.int_values)
    return b.choice([f"n > {low}", f"n == {low}", f"n % 2 == 1"])


def metadata_condition(b: Builder) -> str:
    var = b.choice(b.tensors)
    return b.choice([f"{var.name}.dim() == {len(var.shape)}", f"{var.name}.dtype == torch.float64",
                     f"{var.name}.requires_grad", "torch.is_grad_enabled()",
                     f"{var.name}.is_contiguous()", f"{var.name}.numel() > 6",
                     f"{var.name}.ndim > 1", f"{var.name}.is_floating_point()"])


def global_condition(b: Builder) -> str:
    b.define("FLAG", "FLAG = True")
    b.define("LIMIT", "LIMIT = 1.5")
    b.mutations.append(b.choice(["FLAG = not FLAG", "LIMIT = 0.5", "LIMIT = LIMIT"]))
    return b.choice(["FLAG", "LIMIT > 1.0", "not FLAG", "LIMIT * 2 > 2.5"])


def if_else(b: Builder) -> None:
    """`if cond:` / `else:`, each path making a value of one shape."""
    options = [("metadata", metadata_condition(b))]
    for feature, make in (("size", size_condition), ("int", int_condition)):
        condition = make(b)
        if condition is not None:
            options.append((feature, condition))
    options.append(("global", None))
    feature, condition = b.choice(options)
    if condition is None:
        condition = global_condition(b)
    b.feature(f"if_{feature}")
    branches(b, condition)


def branches(b: Builder, condition: str) -> None:
    shape = some_shape(b)
    name = b.fresh("v")
    b.emit(f"if {condition}:")
    made = []
    for path in range(2):
        if path:
            b.emit("else:")
        with b.indented(), b.block():
            nested_statements(b)
            made.append(expression(b, shape, b.integer(0, 2)))
            b.emit(f"{name} = {cast(made[-1], made[0].dtype)}")
    b.add_tensor(name, shape, made[0].dtype, made[0].grad or made[1].grad)


def conditional_update(b: Builder) -> None:
    """`if cond: v = v * k + e` on a variable that exists before (no else)."""
    condition = size_condition(b) or int_condition(b) or metadata_condition(b)
    var = b.choice([t for t in b.tensors if t.name.isidentifier()])
    b.emit(f"if {condition}:")
    with b.indented(), b.block():
        nested_statements(b, 1)
        accumulate(b, var, expression(b, var.shape, b.integer(0, 2)), "1")
    b.feature("if_update")


def accumulate(b: Builder, var: TensorVar, expr: Expr, index: str) -> None:
    """`var = <var combined with expr>`, in `var`'s dtype (a loop must not change it)."""
    template = b.choice(["{acc} * 0.5 + {e}", "{acc} + {e} * {i}", "torch.tanh({acc} - {e})",
                         "{acc} + {e} / ({i} + 1)", "{acc} * {e}"])
    update = template.format(acc=var.name, e=operand(expr.code), i=index)
    if promoted(var.dtype, expr.dtype) != var.dtype:
        update = f"({update}).to(torch.{var.dtype})"
    b.emit(f"{var.name} = {update}")
    var.grad = var.grad or expr.grad
    var.mutable = False


def for_loop(b: Builder) -> None:
    """`for i in range(bound)` (a constant, an int argument, a size) carrying an accumulator."""
    bounds = [("2", "for_constant"), ("3", "for_constant")]
    if "n" in b.ints:
        bounds.append(("n", "for_int"))
    sizes = b.symbolic_sizes()
    if sizes:
        var, dim, _ = b.choice(sizes)
        bounds.append((f"{var.name}.shape[{dim}]", "for_size"))
    bound, feature = b.choice(bounds)
    accumulator = new_value(b, depth=b.integer(0, 1), prefix="acc")
    index = b.fresh("i")
    b.emit(f"for {index} in range({bound}):")
    _loop_body(b, accumulator, index)
    b.feature(feature)


def while_loop(b: Builder) -> None:
    bound = b.choice(["2"] + (["n"] if "n" in b.ints else []))
    accumulator = new_value(b, depth=b.integer(0, 1), prefix="acc")
    counter = b.fresh("k")
    b.emit(f"{counter} = 0")
    b.emit(f"while {counter} < {bound}:")
    _loop_body(b, accumulator, counter, step=f"{counter} += 1")
    b.feature("while")


def _loop_body(b: Builder, accumulator, index: str, step: str | None = None) -> None:
    with b.indented(), b.block():
        nested_statements(b)
        accumulate(b, accumulator, expression(b, accumulator.shape, b.integer(0, 2)), index)
        if step:
            b.emit(step)


def grad_mode_block(b: Builder) -> None:
    """`with torch.no_grad():` (or another grad mode) around statements and one value."""
    manager = b.choice(["torch.no_grad()", "torch.set_grad_enabled(False)", "torch.enable_grad()"])
    shape = some_shape(b)
    name = b.fresh("v")
    b.emit(f"with {manager}:")
    with b.indented(), b.block():
        nested_statements(b)
        expr = expression(b, shape, b.integer(0, 2))
        b.emit(f"{name} = {expr.code}")
    grad = expr.grad and manager == "torch.enable_grad()"
    b.add_tensor(name, shape, expr.dtype, grad)
    b.feature("grad_mode")


def try_block(b: Builder) -> None:
    """`try:` around statements, with a handler that is not taken."""
    shape = some_shape(b)
    name = b.fresh("v")
    b.emit("try:")
    with b.indented(), b.block():
        nested_statements(b)
        expr = expression(b, shape, b.integer(0, 2))
        b.emit(f"{name} = {expr.code}")
    b.emit(f"except {b.choice(['IndexError', 'KeyError', 'ValueError', 'RuntimeError'])}:")
    with b.indented():
        b.emit(f"{name} = {cast(expression(b, shape, 0), expr.dtype)}")
    b.add_tensor(name, shape, expr.dtype, True)
    b.feature("try")
