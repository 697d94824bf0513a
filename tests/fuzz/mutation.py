"""In-place operations and views: on fresh clones, through views into them, on inputs.

Autograd forbids changing in place a value that an earlier operation saved for backward,
so only variables not read since they were made are changed (`TensorVar.mutable`); an
input is changed only when it does not require grad (a buffer the caller passes). Views
changed in place (the base must see the change) are drawn by `views`, with the changes
written here.
"""
from __future__ import annotations

from .builder import Builder, TensorVar
from .expressions import Expr, expression, operand, some_shape
from .shapes import broadcast_operands

INPLACE = ("{t}.mul_({k})", "{t}.add_({e})", "{t}.sub_({e}, alpha=0.5)", "{t}.clamp_(-1.0, 1.0)",
           "{t}.copy_({e})", "{t}.addcmul_({e}, {e}, value=0.5)", "{t}.masked_fill_({e} > 0, 0.5)",
           "{t}.lerp_({e}.to({t}.dtype), 0.25)", "{t}.fill_({k})", "{t}.div_({e}.abs() + 1.0)",
           "{t}.abs_()", "{t}.neg_()", "torch.add({t}, {e}, out={t})")
SAVES_RESULT = ("{t}.relu_()", "{t}.tanh_()", "{t}.sigmoid_()", "{t}.exp_()")
"""In-place operations whose backward reads their result: the last change of a value."""
SETITEM = ("{t}[0] = {row}", "{t}[..., 0] = {k}", "{t}[{t} > 0] = {k}", "{t}[-1:] = {k}")


def _operand(b: Builder, target: TensorVar, detach: bool) -> Expr:
    shapes = [s for s in broadcast_operands(target.shape) if s in b.reachable()]
    if not shapes:
        return Expr(b.number(), target.dtype, False)
    shape = b.choice(shapes)
    expr = expression(b, shape, b.integer(0, 2))
    if detach:  # even when `expr` does not require grad: in a loop, it may from the second turn on
        return Expr(f"{operand(expr.code)}.detach()", expr.dtype, False)
    return expr


def _change(b: Builder, target: TensorVar, name: str, detach: bool, last: bool = True,
            base: str = "") -> bool:
    """One in-place change of `name` (the target, or a view of `base`), its operands drawn
    without the target and its base (an operand read before the change would be saved for
    backward); False when the change must be the last."""
    forms = list(INPLACE) + (list(SAVES_RESULT) if last else [])
    if target.shape:
        forms += SETITEM
    form = b.choice(forms)
    with b.hidden(target.name, name, base):
        _write_change(b, target, name, detach, form)
    return form not in SAVES_RESULT


def _write_change(b: Builder, target: TensorVar, name: str, detach: bool, form: str) -> None:
    if "{row}" in form:
        if target.shape[1:] not in b.reachable():
            b.emit(f"{name}[0] = {b.number()}")
            return
        row = expression(b, target.shape[1:], b.integer(0, 1))
        b.emit(form.format(t=name, row=f"{operand(row.code)}.detach()" if detach else row.code))
        b.feature("setitem")
        return
    if "out=" in form:
        detach = True  # out= arguments do not support autograd
        if target.grad:
            form = "{t}.add_({e})"
    e = _operand(b, target, detach) if "{e}" in form else None
    b.emit(form.format(t=name, e=operand(e.code) if e else "", k=b.number()))
    if e is not None and e.grad:
        target.grad = True
    b.feature("setitem" if "] =" in form else "inplace")


def fresh_inplace(b: Builder) -> None:
    """`u = e.clone()` then one to three in-place changes of it."""
    shape = some_shape(b)
    expr = expression(b, shape, b.integer(0, 2))
    var = b.assign(f"{operand(expr.code)}.clone()", shape, expr.dtype, expr.grad, mutable=True, prefix="u")
    for _ in range(b.integer(1, 3)):
        if not _change(b, var, var.name, detach=False):
            break
    var.mutable = False


def change_view(b: Builder, view: TensorVar, base: TensorVar, detach: bool) -> None:
    """One in-place change of `view`, a view of `base` (its operands read neither)."""
    _change(b, view, view.name, detach, base=base.name)


def input_mutation(b: Builder) -> None:
    """An in-place change of an input that does not require grad (the caller sees it)."""
    targets = [t for t in b.tensors if t.mutable and not t.grad and b.is_input(t)]
    if not targets:
        return
    target = b.choice(targets)
    if b.chance(50):
        b.emit("with torch.no_grad():")
        with b.indented():
            _change(b, target, target.name, detach=True)
        b.feature("input_mutation_no_grad")
    else:
        _change(b, target, target.name, detach=True)
    target.mutable = False
    b.feature("input_mutation")


def view_statement(b: Builder) -> None:
    """A view of any variable kept as a new variable (no change): reshapes, permutes,
    expands, chunks."""
    var = b.choice(b.tensors)
    shape = var.shape
    name = var.name
    options = []
    if len(shape) >= 2:
        options += [(f"{name}.permute({', '.join(str(d) for d in reversed(range(len(shape))))})", shape[::-1]),
                    (f"{name}.reshape({name}.shape[0], -1)", None),
                    (f"{name}.contiguous()", shape), (f"{name}.movedim(0, -1)", shape[1:] + shape[:1])]
    if shape:
        options += [(f"{name}.expand(2, *{name}.shape)", (2,) + shape),
                    (f"{name}.unsqueeze(-1)", shape + (1,)),
                    (f"{name}.flip(0)", shape)]
        fixed = [d for d, size in enumerate(shape) if isinstance(size, int) and size % 2 == 0]
        if fixed:
            d = b.choice(fixed)
            half = shape[:d] + (shape[d] // 2,) + shape[d + 1:]
            options += [(f"{name}.chunk(2, dim={d})[1]", half), (f"{name}.split({shape[d] // 2}, dim={d})[0]", half)]
        ones = [d for d, size in enumerate(shape) if size == 1]
        if ones:
            options.append((f"{name}.squeeze({ones[0]})", shape[:ones[0]] + shape[ones[0] + 1:]))
    options = [o for o in options if o[1] is not None]
    if not options:
        return
    code, new_shape = b.choice(options)
    b.read(var)
    b.assign(code, new_shape, var.dtype, var.grad)
    b.feature("view")
