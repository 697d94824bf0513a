"""Jagged nested tensors among a program's values: an input `nt` of two sequences, one `A`
long (so the fourth call changes its lengths) and one of two, and the statements that
support it.

A jagged value is not among the builder's tensors (most statements index, reshape or
reduce dimensions a ragged one does not have); its own statement writes pointwise
operations on jagged values of the same offsets (every one is made from `nt`), and reads
dense tensors out of them (`values()` reduced over the summed lengths, a `(width,)`
tensor the other statements then use). A jagged value may be returned too.

No TwoTensor joins a program with a jagged input: the runner's loss sums every output, and
eager's backward would send a TwoTensor gradient into a jagged tensor's formulas.
"""
from __future__ import annotations

from .builder import Builder

_UNARY = ["{}.sin()", "{}.relu()", "torch.tanh({})", "{}.sigmoid()", "{}.abs()", "F.gelu({})"]
_BINARY = ["{} + {}", "{} * {}", "{} - {}"]
_SCALAR = ["{} * {}", "{} + {}", "{} / {}"]
_READ = ["{}.values().sum(0)", "{}.values().mean(0)", "{}.values().amax(0)", "{}.values()[0]"]


def jagged_input(b: Builder, width: int, grad: bool) -> tuple[str, str]:
    """The input `nt` (its name and its expression in `make_inputs`)."""
    b.jagged = ["nt"]
    b.jagged_width, b.jagged_grad = width, grad
    b.inputs.add("nt")
    b.feature("input_jagged")
    extra = ", requires_grad=True" if grad else ""
    return "nt", (f"torch.nested.nested_tensor([torch.randn(A, {width}), torch.randn(2, {width})], "
                  f"layout=torch.jagged{extra})")


def jagged_statement(b: Builder) -> None:
    """A new jagged value from those in scope, then perhaps a dense tensor read from it."""
    operand = b.choice(b.jagged)
    form = b.choice(["unary", "scalar", "binary"])
    if form == "unary":
        code = b.choice(_UNARY).format(operand)
    elif form == "scalar":
        code = b.choice(_SCALAR).format(operand, b.number())
    else:
        code = b.choice(_BINARY).format(operand, b.choice(b.jagged))
    name = b.fresh("j")
    b.emit(f"{name} = {code}")
    b.jagged.append(name)
    b.feature(f"jagged_{form}")
    if b.chance(60):
        b.assign(b.choice(_READ).format(name), (b.jagged_width,), "float32", grad=b.jagged_grad)
        b.feature("jagged_read")
    elif b.top_level and b.chance(50):
        b.output(name)
        b.feature("jagged_returned")
