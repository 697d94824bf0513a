"""Graph breaks of each kind, planted where any statement can be.

Each statement records the graph-break kind it plants (the id in
`graphwright/strict/interpreter/graph_breaks.py`), so that the runner can tell a break
the program asked for from one it did not: `graph_break()`, `print`, `.item()` and
`.tolist()`, a branch on a tensor's value, a call the tracer cannot follow (`copy`; a NumPy
call is recorded as tensor operations instead, a planted break that does not happen),
a call of a `disable`d function, and an operator whose output shape depends on data.
Under `fullgraph=True` such a program may raise a typed graphwright error instead of
running; under `fullgraph=False` it must run as eager does.
"""
from __future__ import annotations

from .builder import Builder
from .control_flow import branches
from .expressions import expression, operand, result_dtype, some_shape

DISABLED = '''@gw.disable
def disabled_{index}(t):
    return t.cos() * 2 + 1'''


def explicit_break(b: Builder) -> None:
    b.emit(b.choice(["gw.graph_break()", 'gw.graph_break("generated")']))
    b.plant_break("GB001", "break_graph_break")


def print_call(b: Builder) -> None:
    """`print` of Python values only (sizes, dtypes, shapes, literals): what it prints does
    not depend on floating-point rounding."""
    var = b.choice(b.tensors)
    things = b.choice([
        ['"shape"', f"{var.name}.shape"], ['"dtype"', f"{var.name}.dtype"],
        ['"sizes"', f"{var.name}.size(-1) if {var.name}.dim() else 0", "sep=\", \""],
        ['"step"', "n" if "n" in b.ints else "1", f"{var.name}.dim()"],
    ])
    b.emit(f"print({', '.join(things)})")
    b.plant_break("GB008", "break_print")


def item_call(b: Builder) -> None:
    """`.item()` or `.tolist()`, its Python value used in a later operation or branch."""
    shape = some_shape(b)
    source = expression(b, shape, b.integer(0, 1))
    value = b.fresh("s")
    if b.chance(50) or not shape or b.subclass:  # a subclass has no .tolist()
        b.emit(f"{value} = {operand(source.code)}.sum().item()")
        b.feature("break_item")
    else:
        b.emit(f"{value} = {operand(source.code)}.reshape(-1).tolist()[0]")
        b.feature("break_tolist")
    b.breaks.add("GB003")
    use_shape = some_shape(b)
    if b.chance(30):
        branches(b, f"{value} > 0")
        b.breaks.add("GB002")
    else:
        scaled = expression(b, use_shape, b.integer(0, 1))
        b.assign(f"{operand(scaled.code)} * {value}", use_shape, scaled.dtype, scaled.grad)


def data_dependent_branch(b: Builder) -> None:
    shape = some_shape(b)
    condition = expression(b, shape, b.integer(0, 1))
    test = b.choice(["{c}.sum() > 0", "{c}.max() > 0.5", "({c} > 0).any()", "{c}.mean() < 0"])
    b.plant_break("GB002", "break_data_branch")
    branches(b, test.format(c=operand(condition.code)))


def unsupported_call(b: Builder) -> None:
    shape = some_shape(b)
    source = expression(b, shape, b.integer(0, 1))
    calls = ["copy.deepcopy({e}.detach())"]
    if not b.subclass:  # a subclass has no .numpy()
        calls.append("torch.as_tensor(np.tanh(np.asarray({e}.detach())))")
    call = b.choice(calls)
    b.assign(call.format(e=operand(source.code)), shape, source.dtype, False)
    b.plant_break("GB005", "break_unsupported_call")


def disabled_call(b: Builder) -> None:
    shape = some_shape(b)
    source = expression(b, shape, b.integer(0, 1))
    name = "disabled_0"
    b.define(name, DISABLED.format(index=0))
    b.assign(f"{name}({source.code})", shape, source.dtype, source.grad)
    b.plant_break("GB009", "break_disabled_call")


def dynamic_shape_call(b: Builder) -> None:
    """An operator whose output size depends on data; its size or sum is used after."""
    shape = some_shape(b)
    source = expression(b, shape, b.integer(0, 1))
    use_shape = some_shape(b)
    other = expression(b, use_shape, b.integer(0, 1))
    form = b.choice(["{o} + torch.nonzero({s} > 0).shape[0]", "{o} * {s}[{s} > 0].sum()",
                     "{o} - torch.masked_select({s}, {s} < 0).numel()"])
    dtype = other.dtype if "sum" not in form else result_dtype(use_shape, other.dtype, (), source.dtype)
    b.assign(form.format(o=operand(other.code), s=operand(source.code)), use_shape, dtype, True)
    b.plant_break("GB004", "break_dynamic_shape")
