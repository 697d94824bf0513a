"""The shape model of generated programs: which shapes exist, and how one is made from another.

A dimension is a fixed `int` or a symbol (`"A"`): a size that changes between calls (the
"new shape" call) and is therefore never written as a literal in a program; code reads it
with `t.shape[i]`. Derived sizes are symbols too (`"A-1"` after `t[1:]`, `"3*A"` after a
flatten), compared only for equality. Nothing here draws or writes code beyond the small
expressions of one derivation; `expressions` and the statement kinds build on it.
"""
from __future__ import annotations

import dataclasses
import functools

Dim = int | str
Shape = tuple[Dim, ...]


def dim_product(dims: Shape) -> Dim:
    """The size of a flattening of `dims`: an int when every dimension is fixed."""
    number = 1
    symbols = []
    for dim in dims:
        if isinstance(dim, int):
            number *= dim
        else:
            symbols.append(dim)
    if not symbols:
        return number
    factors = ([str(number)] if number != 1 else []) + sorted(symbols)
    return "*".join(factors)


def dim_sum(a: Dim, b: Dim) -> Dim:
    """The size of two dimensions concatenated."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return f"({a}+{b})"


def dim_minus_one(dim: Dim) -> Dim:
    return dim - 1 if isinstance(dim, int) else f"{dim}-1"


def broadcast_operands(shape: Shape) -> list[Shape]:
    """Shapes whose tensors broadcast against `shape` without changing it, plainest first:
    the shape itself, its suffixes, and those with one dimension set to 1."""
    found: list[Shape] = [shape]
    for start in range(len(shape) + 1):
        suffix = shape[start:]
        for candidate in [suffix] + [suffix[:i] + (1,) + suffix[i + 1:] for i in range(len(suffix))]:
            if candidate not in found:
                found.append(candidate)
    return found


@dataclasses.dataclass(frozen=True)
class Derivation:
    """`code` (one step from a variable) has `shape`; `kind` names the step for statistics."""

    code: str
    shape: Shape
    kind: str


@functools.lru_cache(maxsize=4096)
def derivations(name: str, shape: Shape) -> tuple[Derivation, ...]:
    """Every one-step reading of the variable `name` of `shape`, the variable itself first."""
    found = [Derivation(name, shape, "variable")]
    if shape:
        found += [Derivation(f"{name}.sum()", (), "reduction"),
                  Derivation(f"{name}.mean()", (), "reduction")]
        found.append(Derivation(f"{name}[0]", shape[1:], "indexing"))
        found.append(Derivation(f"{name}.unsqueeze(0)", (1,) + shape, "view"))
    for d, size in enumerate(shape):
        rest = shape[:d] + shape[d + 1:]
        found.append(Derivation(f"{name}.sum({d})", rest, "reduction"))
        found.append(Derivation(f"{name}.amax(dim={d})", rest, "reduction"))
        if size != 1:
            found.append(Derivation(f"{name}.mean({d}, keepdim=True)", shape[:d] + (1,) + shape[d + 1:],
                                    "reduction"))
    if len(shape) == 2:
        found.append(Derivation(f"{name}.t()", shape[::-1], "view"))
    elif len(shape) > 2:
        swapped = shape[:-2] + (shape[-1], shape[-2])
        found.append(Derivation(f"{name}.transpose(-1, -2)", swapped, "view"))
    if len(shape) > 1:
        found.append(Derivation(f"{name}.flatten()", (dim_product(shape),), "view"))
    return tuple(found)


def matmul_inner_dims(target: Shape, reachable: set[Shape]) -> list[Dim]:
    """Sizes K such that (P, K) @ (K, Q) makes the 2-d `target` (P, Q) from reachable shapes."""
    if len(target) != 2:
        return []
    rows, columns = target
    inner = {shape[1] for shape in reachable if len(shape) == 2 and shape[0] == rows}
    return sorted((k for k in inner if (k, columns) in reachable), key=repr)


def reduction_sources(target: Shape, reachable: set[Shape]) -> list[tuple[Shape, int, bool]]:
    """(source shape, dimension, keepdim) pairs whose reduction makes `target`."""
    found = []
    for shape in sorted(reachable, key=repr):
        for d in range(len(shape)):
            if shape[:d] + shape[d + 1:] == target:
                found.append((shape, d, False))
            if shape[d] != 1 and shape[:d] + (1,) + shape[d + 1:] == target:
                found.append((shape, d, True))
    return found
