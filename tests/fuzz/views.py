"""Views of every kind, returned from the region, written through, or used as `out=` targets.

`views_of(b, var)` lists the views of one variable: transposes and permutes, `diagonal`,
`narrow`, `select`, `expand`, `unbind`, `split`, `chunk`, slices with steps, `unfold`,
`as_strided` (within the smallest size any call has), dtype views (`view(torch.int32)`,
`view(torch.bfloat16)`, a float64 read as float32 and back), complex views
(`view_as_complex`, `view(torch.complex64)`, and their `real`, `imag` and
`view_as_real`). Each knows its shape when the shape model can say (a slice with a step
of a symbolic size cannot), its dtype, and whether it may be changed in place (no element twice, not an output of a multi-view function whose base
requires grad). Only float views of known shape join the scope: the others are returned
(from `f`'s own body) and never computed on, as reinterpreted bits are no numbers to
compute with. A write through a dtype or complex view keeps the base's values sane
(zeroing, flipping sign bits, rotating by 1j).
"""
from __future__ import annotations

import dataclasses

from .builder import FLOAT_DTYPES, Builder, TensorVar
from .expressions import cast, expression, operand, some_shape
from .mutation import change_view
from .shapes import Shape, broadcast_operands, dim_minus_one, dim_product, matmul_inner_dims, reduction_sources

COMPLEX = {"float32": "complex64", "float64": "complex128"}
SAME_SIZE_INT = {"float32": ("int32", 2**31), "float64": ("int64", 2**63)}
HALF_WIDTH = {"float32": "bfloat16", "float64": "float32"}
MULTIPLE_VIEWS = ("unbind", "split", "chunk")


@dataclasses.dataclass(frozen=True)
class View:
    code: str
    shape: Shape | None  # None: the shape model cannot say
    kind: str
    dtype: str
    writable: bool

    @property
    def tracked(self) -> bool:
        """A float view of known shape: it may join the scope."""
        return self.shape is not None and self.dtype in FLOAT_DTYPES


def smallest(b: Builder, dim) -> int:
    """The smallest size a dimension has over the calls."""
    if isinstance(dim, int):
        return dim
    return eval(dim, {}, {symbol: min(sizes) for symbol, sizes in b.symbols.items()})  # "A-1", "3*A"


def _along(b: Builder, name: str, shape: Shape, grad: bool, d: int, dtype: str) -> list[View]:
    """Views that pick along dimension `d`."""
    size, rank = shape[d], len(shape)
    at = lambda new: shape[:d] + new + shape[d + 1:]  # noqa: E731
    found = [View(f"{name}.narrow({d}, 0, 1)", at((1,)), "narrow", dtype, True),
             View(f"{name}.select({d}, -1)", at(()), "select", dtype, True),
             View(f"{name}.unbind({d})[0]", at(()), "unbind", dtype, not grad),
             View(f"{name}.split(1, dim={d})[-1]", at((1,)), "split", dtype, not grad)]
    if smallest(b, size) >= 2:
        found += [View(f"{name}.narrow({d}, 1, {name}.shape[{d}] - 1)", at((dim_minus_one(size),)), "narrow",
                       dtype, True),
                  View(f"{name}.unfold({d}, 2, 1)", at((dim_minus_one(size),)) + (2,), "unfold", dtype, False)]
    if isinstance(size, int) and size >= 2:
        found += [View(f"{name}.chunk(2, dim={d})[0]", at(((size + 1) // 2,)), "chunk", dtype, not grad),
                  View(f"{name}.unfold({d}, 2, 2)", at((size // 2,)) + (2,), "unfold", dtype, True)]
    step = isinstance(size, int)
    if d == 0:
        found.append(View(f"{name}[::2]", at(((size + 1) // 2,)) if step else None, "step_slice", dtype, True))
    if d == rank - 1 and rank > 1 and smallest(b, size) >= 2:  # never empty
        found.append(View(f"{name}[..., 1::2]", at((size // 2,)) if step else None, "step_slice", dtype, True))
    return found


def views_of(b: Builder, var: TensorVar, contiguous: bool = False) -> list[View]:
    """Every view of `var` the generator makes (see the module docstring); `contiguous`:
    `var` is known to be contiguous (a fresh clone, an input), so `view` applies."""
    name, shape, dtype = var.name, var.shape, var.dtype
    rank = len(shape)
    found = [View(f"{name}.expand(2, *{name}.shape)", (2,) + shape, "expand", dtype, False),
             View(f"{name}.unsqueeze(0)", (1,) + shape, "unsqueeze", dtype, True)]
    if contiguous:
        found += [View(f"{name}.view({name}.shape)", shape, "view", dtype, True),
                  View(f"{name}.view(-1)", (dim_product(shape),), "view", dtype, True)]
    if rank:
        found.append(View(f"{name}[0]", shape[1:], "index", dtype, True))
        if smallest(b, shape[0]) >= 2:
            found.append(View(f"{name}[1:]", (dim_minus_one(shape[0]),) + shape[1:], "slice", dtype, True))
    if rank >= 2:
        found.append(View(f"{name}[:, :1]", (shape[0], 1) + shape[2:], "slice", dtype, True))
    if rank >= 2:
        diagonal = min(shape[0], shape[1]) if isinstance(shape[0], int) and isinstance(shape[1], int) else None
        found += [View(f"{name}.t()" if rank == 2 else f"{name}.transpose(0, 1)", (shape[1], shape[0]) + shape[2:],
                       "transpose", dtype, True),
                  View(f"{name}.diagonal()", None if diagonal is None else shape[2:] + (diagonal,), "diagonal",
                       dtype, True)]
        order = (1, 0) + tuple(range(2, rank)) if rank == 2 else (rank - 1,) + tuple(range(rank - 1))
        found.append(View(f"{name}.permute{order}", tuple(shape[i] for i in order), "permute", dtype, True))
    for d in sorted({0, rank - 1}) if rank else ():
        found += _along(b, name, shape, var.grad, d, dtype)
    numel = 1
    for dim in shape:
        numel *= smallest(b, dim)
    if numel >= 4:
        found += [View(f"{name}.contiguous().as_strided((2, 2), (1, 2))", (2, 2), "as_strided", dtype, True),
                  View(f"{name}.contiguous().as_strided((2,), (1,), {name}.contiguous().storage_offset() + 2)",
                       (2,), "as_strided", dtype, True)]
    found += _dtype_views(name, shape, dtype)
    if numel >= 4:  # the first four numbers as two complex ones, whatever the shape
        complex_view = f"{name}.contiguous().view(-1)[:4].view(2, 2)"
        found += [View(f"torch.view_as_complex({complex_view})", (2,), "complex", COMPLEX[dtype], True),
                  View(f"torch.view_as_complex({complex_view}).imag", (2,), "complex", dtype, True)]
    return found


def _dtype_views(name: str, shape: Shape, dtype: str) -> list[View]:
    """Views reading the same bytes as another dtype (and complex numbers)."""
    integer, _ = SAME_SIZE_INT[dtype]
    found = [View(f"{name}.view(torch.{integer})", shape, "dtype_view", integer, True)]
    if not shape:
        return found
    half = HALF_WIDTH[dtype]
    found.append(View(f"{name}.contiguous().view(torch.{half})", shape[:-1] + (dim_product((2, shape[-1])),),
                      "dtype_view", half, True))
    last = shape[-1]
    if isinstance(last, int) and last % 2 == 0:
        pairs = shape[:-1] + (last // 2,)
        complex_view = f"torch.view_as_complex({name}.contiguous().unflatten(-1, (-1, 2)))"
        found += [View(complex_view, pairs, "complex", COMPLEX[dtype], True),
                  View(f"{name}.contiguous().view(torch.{COMPLEX[dtype]})", pairs, "complex", COMPLEX[dtype], True),
                  View(f"{complex_view}.real", pairs, "complex", dtype, True),
                  View(f"{complex_view}.imag", pairs, "complex", dtype, True),
                  View(f"torch.view_as_real({complex_view})", shape[:-1] + (last // 2, 2), "complex", dtype, True)]
        if dtype == "float32":
            found.append(View(f"{name}.contiguous().view(torch.float64)", pairs, "dtype_view", "float64_bits",
                              True))
    return found


def pick(b: Builder, views: list[View]) -> View:
    """A kind of view, then a view of that kind (each kind equally likely)."""
    kind = b.choice(list(dict.fromkeys(view.kind for view in views)))
    return b.choice([view for view in views if view.kind == kind])


def returned_view(b: Builder) -> None:
    """A view of any variable, returned from `f` (a float view of known shape joins the scope)."""
    var = b.choice(b.tensors)
    view = pick(b, [v for v in views_of(b, var) if v.tracked or b.top_level])
    b.read(var)
    name = b.fresh("w")
    b.emit(f"{name} = {view.code}")
    if view.tracked:
        b.add_tensor(name, view.shape, view.dtype, var.grad)
    if not view.tracked or b.chance(60):
        b.output(name)
    b.feature(f"view_{view.kind}")
    b.feature("view_returned")


def _sane_write(b: Builder, view: View, name: str) -> str:
    """An in-place change through a view whose elements are not the base's numbers."""
    if view.dtype in ("int32", "int64"):
        bound = SAME_SIZE_INT["float32" if view.dtype == "int32" else "float64"][1]
        return b.choice(["{w}.zero_()", f"{{w}}.bitwise_and_({bound - 1})", f"{{w}}.bitwise_xor_({-bound})"]
                        ).format(w=name)
    if view.dtype.startswith("complex"):
        return b.choice(["{w}.mul_(1j)", "{w}.conj_physical_()", "{w}.zero_()", "{w}.add_(1 - 2j)"]).format(w=name)
    if view.dtype == "float64_bits":
        return b.choice(["{w}.neg_()", "{w}.zero_()"]).format(w=name)
    return b.choice(["{w}[..., 1::2].neg_()", "{w}.zero_()", "{w}.neg_()"]).format(w=name)  # halves of floats


def _writable_base(b: Builder) -> tuple[TensorVar, bool]:
    """A buffer input not yet read, or a fresh contiguous clone (sometimes detached); and
    whether it certainly does not require grad (in a loop, a value the generator believes
    does not may from the second turn on)."""
    buffers = [t for t in b.tensors if t.mutable and not t.grad and b.is_input(t)]
    if buffers and b.chance(50):
        b.feature("view_of_input_written")
        return b.choice(buffers), True
    shape = some_shape(b)
    expr = expression(b, shape, b.integer(0, 2))
    detached = b.chance(35)
    code = f"{operand(expr.code)}{'.detach()' if detached else ''}.clone(memory_format=torch.contiguous_format)"
    return b.assign(code, shape, expr.dtype, expr.grad and not detached, mutable=True, prefix="u"), detached


def written_view(b: Builder) -> None:
    """A view of a fresh clone or of a buffer input, changed in place: the base must see it.
    A view made by a function returning several (`unbind`, `split`, `chunk`) is changed
    only when its base certainly does not require grad, and only by values that do not."""
    base, certain = _writable_base(b)
    view = pick(b, [v for v in views_of(b, base, contiguous=True)
                    if v.writable and (certain or v.kind not in MULTIPLE_VIEWS)])
    name = b.fresh("w")
    b.emit(f"{name} = {view.code}")
    if view.tracked:
        target = TensorVar(name, view.shape, view.dtype, base.grad, True)
        change_view(b, target, base, detach=b.is_input(base) or view.kind in MULTIPLE_VIEWS)
        base.grad = base.grad or target.grad
        b.add_tensor(name, view.shape, view.dtype, base.grad)
    elif view.dtype in FLOAT_DTYPES:  # a float view of unknown shape: changed as a whole
        b.emit(b.choice(["{w}.mul_(2.0)", "{w}.add_(1.0)", "{w}.clamp_(max=0.5)", "{w}.zero_()"]).format(w=name))
    else:
        b.emit(_sane_write(b, view, name))
    base.mutable = False
    if b.chance(40):
        b.output(name)
    b.feature(f"view_{view.kind}")
    b.feature("view_mutation")


OUT_UNARY = ("torch.abs({a}, out={o})", "torch.sin({a}, out={o})", "torch.neg({a}, out={o})",
             "torch.clamp({a}, -1.0, 1.0, out={o})", "torch.tanh({a}, out={o})")
OUT_BINARY = ("torch.add({a}, {c}, out={o})", "torch.mul({a}, {c}, out={o})", "torch.maximum({a}, {c}, out={o})",
              "torch.where({a} > 0, {a}, {c}, out={o})", "torch.sub({a}, {c}, alpha=2, out={o})")


def _detached(b: Builder, shape: Shape, dtype: str) -> str:
    # always detached: a value made in a loop may require grad only from the second turn on
    return f"{operand(cast(expression(b, shape, b.integer(0, 2)), dtype))}.detach()"


def out_target(b: Builder) -> None:
    """`torch.op(..., out=<a non-contiguous view>)`: the op's result is that view, and its base
    sees the values. The target does not require grad (out= does not support autograd)."""
    buffers = [t for t in b.tensors if t.mutable and not t.grad and b.is_input(t) and t.shape]
    if buffers and b.chance(50):
        base = b.choice(buffers)
        b.feature("out_target_input")
    else:
        shape = b.choice(sorted((s for s in b.reachable() if s), key=repr) or [some_shape(b)])
        expr = expression(b, shape, b.integer(0, 1))
        base = b.assign(f"{operand(expr.code)}.detach().clone(memory_format=torch.contiguous_format)", shape,
                        expr.dtype, False, mutable=True, prefix="o")
    with b.hidden(base.name):  # an operand overlapping the target is an error
        reachable = b.reachable()
        views = [v for v in views_of(b, base, contiguous=True) if v.writable and v.tracked and v.shape in reachable]
        if not views:
            base.mutable = False
            return
        view = pick(b, views)
        forms = ["unary", "binary"]
        sources = reduction_sources(view.shape, reachable)
        if sources:
            forms.append("reduction")
        inner = matmul_inner_dims(view.shape, reachable)
        if inner:
            forms += ["mm", "mm"]  # rarely possible: more likely when it is
        form = b.choice(forms)
        dtype = view.dtype
        if form == "unary":
            code = b.choice(OUT_UNARY).format(a=_detached(b, view.shape, dtype), o=view.code)
        elif form == "binary":
            other = b.choice([s for s in broadcast_operands(view.shape) if s in reachable])
            code = b.choice(OUT_BINARY).format(a=_detached(b, view.shape, dtype), c=_detached(b, other, dtype),
                                               o=view.code)
        elif form == "reduction":
            source, dim, keepdim = b.choice(sources)
            reduce = b.choice(["sum", "amax", "mean"])
            code = f"torch.{reduce}({_detached(b, source, dtype)}, {dim}, keepdim={keepdim}, out={view.code})"
        else:
            k = b.choice(inner)
            code = f"torch.mm({_detached(b, (view.shape[0], k), dtype)}, {_detached(b, (k, view.shape[1]), dtype)}, " \
                   f"out={view.code})"
    base.mutable = False
    result = b.assign(code, view.shape, dtype, False, prefix="r")
    if b.chance(70):
        b.output(result.name)
    b.feature(f"out_{form}")
    b.feature(f"view_{view.kind}")
    b.feature("out_target")
