"""Tensor expression trees over the variables in scope.

`expression(b, shape)` draws a tree whose value has exactly `shape`: leaves are variables
read one step (a reduction, a view, an index; `shapes.derivations`), inner nodes are
pointwise operations, broadcasting binary operations (against smaller shapes and Python
scalars), `torch.where`, reductions from larger shapes, matrix products, dtype casts
and integer detours. Values stay bounded (no unbounded exp, division by at least one),
so that eager and compiled runs agree within tolerance. Dtypes follow PyTorch's
promotion: float64 wins.
"""
from __future__ import annotations

import dataclasses

from .builder import Builder
from .shapes import Shape, broadcast_operands, matmul_inner_dims, reduction_sources

UNARY = (
    "torch.sin({})", "{}.cos()", "torch.tanh({})", "{}.relu()", "torch.sigmoid({})", "{}.abs()",
    "-{}", "F.gelu({})", "{}.clamp(-1.0, 1.0)", "torch.exp({}.clamp(max=2.0))",
    "torch.log1p({}.abs())", "({}.abs() + 1.0).sqrt()", "{}.pow(2)", "torch.erf({})",
    "{}.neg()", "F.silu({})", "{}.square().clamp(max=4.0)", "torch.atan({})",
)
UNARY_WITH_DIM = ("F.softmax({}, dim=-1)", "torch.log_softmax({}, dim=-1)", "{}.cumsum(-1)",
                  "{}.flip(-1)", "{}.roll(1, -1)")
BINARY = (
    "{} + {}", "{} - {}", "{} * {}", "{} / ({}.abs() + 1.0)", "torch.maximum({}, {})",
    "torch.minimum({}, {})", "torch.add({}, {}, alpha=0.5)", "torch.where({0} > {1}, {0}, {1})",
)
SCALAR_BINARY = ("{} + {}", "{} * {}", "{} - {}", "{} / {}", "torch.mul({}, {})")
REDUCTIONS = ("{}.sum({}, keepdim={})", "{}.mean({}, keepdim={})", "{}.amax({}, keepdim={})",
              "torch.logsumexp({}, {}, keepdim={})", "{}.var({}, unbiased=False, keepdim={})",
              "{}.prod({}, keepdim={}).clamp(-4.0, 4.0)")
CASTS = (("{}.to(torch.float64)", "float64"), ("{}.double()", "float64"), ("{}.float()", "float32"),
         ("{}.to(torch.float32)", "float32"))
KINDS = ("leaf", "unary", "binary", "scalar", "where", "reduction", "matmul", "cast", "integer")


@dataclasses.dataclass(frozen=True)
class Expr:
    code: str
    dtype: str
    grad: bool


def atomic(code: str) -> bool:
    """True when `code` needs no parentheses as the operand of a method or operator."""
    depth = 0
    for char in code:
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif depth == 0 and not (char.isalnum() or char in "_."):
            return False
    return not code[:1].isdigit()


def operand(code: str) -> str:
    return code if atomic(code) else f"({code})"


def promoted(*dtypes: str) -> str:
    """The dtype of an operation on tensors of these dtypes and of one number of dimensions."""
    return "float64" if "float64" in dtypes else "float32"


def result_dtype(shape: Shape, dtype: str, other_shape: Shape, other_dtype: str) -> str:
    """PyTorch's promotion for two float tensors: a 0-d tensor does not widen one with dimensions."""
    if bool(shape) != bool(other_shape):
        return dtype if shape else other_dtype
    return promoted(dtype, other_dtype)


def leaf(b: Builder, shape: Shape) -> Expr:
    var, derivation = b.choice(b.leaves(shape))
    b.read(var)
    if derivation.kind != "variable":
        b.feature(derivation.kind)
    return Expr(derivation.code, var.dtype, var.grad)


def expression(b: Builder, shape: Shape, depth: int = 3) -> Expr:
    """A tree of at most `depth` operations whose value has `shape` (which must be
    reachable from the variables in scope)."""
    kind = "leaf" if depth <= 0 else b.choice(KINDS)
    reachable = b.reachable()
    if kind == "leaf":
        return leaf(b, shape)
    if kind == "unary":
        template = b.choice(UNARY + (UNARY_WITH_DIM if shape else ()))
        inner = expression(b, shape, depth - 1)
        b.feature("unary")
        return Expr(template.format(operand(inner.code)), inner.dtype, inner.grad)
    if kind in ("binary", "where"):
        return _binary(b, shape, depth, reachable, where=kind == "where")
    if kind == "scalar":
        inner = expression(b, shape, depth - 1)
        template = b.choice(SCALAR_BINARY)
        left, right = operand(inner.code), b.number()
        if b.chance(50):
            left, right = right, left
            if template == "{} / {}":
                right = f"({right}.abs() + 1.0)"
        b.feature("scalar")
        return Expr(template.format(left, right), inner.dtype, inner.grad)
    if kind == "reduction":
        sources = reduction_sources(shape, reachable)
        if not sources:
            return leaf(b, shape)
        source, dim, keepdim = b.choice(sources)
        inner = expression(b, source, depth - 1)
        b.feature("reduction")
        template = b.choice(REDUCTIONS)
        return Expr(template.format(operand(inner.code), dim, keepdim), inner.dtype, inner.grad)
    if kind == "matmul":
        inner_dims = matmul_inner_dims(shape, reachable)
        if not inner_dims:
            return leaf(b, shape)
        k = b.choice(inner_dims)
        left = expression(b, (shape[0], k), depth - 1)
        right = expression(b, (k, shape[1]), depth - 1)
        b.feature("matmul")
        dtype = promoted(left.dtype, right.dtype)
        # matmul does not promote: both sides are cast to the wider dtype
        code = b.choice(["{} @ {}", "torch.mm({}, {})", "torch.matmul({}, {})"]).format(
            operand(cast(left, dtype)), operand(cast(right, dtype)))
        return Expr(code, dtype, left.grad or right.grad)
    if kind == "cast":
        inner = expression(b, shape, depth - 1)
        template, dtype = b.choice(CASTS)
        b.feature("cast")
        return Expr(template.format(operand(inner.code)), dtype, inner.grad)
    inner = expression(b, shape, depth - 1)
    b.feature("integer")
    template = b.choice(["(({} * 3.0).floor().long() % 3).to({})", "({} > 0).to({})"])
    return Expr(template.format(operand(inner.code), f"torch.{inner.dtype}"), inner.dtype, False)


def cast(expr: Expr, dtype: str) -> str:
    """The code of `expr` with dtype `dtype`."""
    return expr.code if expr.dtype == dtype else f"{operand(expr.code)}.to(torch.{dtype})"


def _binary(b: Builder, shape: Shape, depth: int, reachable: set, where: bool) -> Expr:
    first = expression(b, shape, depth - 1)
    other_shape = b.choice([s for s in broadcast_operands(shape) if s in reachable])
    second = expression(b, other_shape, depth - 1)
    if other_shape != shape:
        b.feature("broadcast")
    if where:
        condition = expression(b, b.choice([s for s in broadcast_operands(shape) if s in reachable]), 0)
        b.feature("where")
        code = f"torch.where({condition.code} > 0, {first.code}, {second.code})"
    else:
        template = b.choice(BINARY)
        left, right = operand(first.code), operand(second.code)
        if b.chance(30):
            left, right = right, left
        b.feature("binary")
        code = template.format(left, right)
    return Expr(code, result_dtype(shape, first.dtype, other_shape, second.dtype), first.grad or second.grad)


def some_shape(b: Builder) -> Shape:
    """A shape reachable from the variables in scope, those of variables first."""
    shapes = []
    for var in reversed(b.tensors):
        if var.shape not in shapes:
            shapes.append(var.shape)
    shapes += sorted(b.reachable() - set(shapes), key=repr)
    return b.choice(shapes)


def new_value(b: Builder, shape: Shape | None = None, depth: int | None = None, prefix: str = "v"):
    """Assign an expression (of `shape`, or any reachable shape) to a new variable."""
    shape = some_shape(b) if shape is None else shape
    expr = expression(b, shape, b.integer(0, 3) if depth is None else depth)
    return b.assign(expr.code, shape, expr.dtype, expr.grad, prefix=prefix)
