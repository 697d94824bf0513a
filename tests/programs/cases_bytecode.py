"""Corpus programs aimed at particular CPython 3.11 opcodes and builtins:
EXTENDED_ARG, DICT_UPDATE/DICT_MERGE/SET_UPDATE, MATCH_SEQUENCE/MAPPING/CLASS,
IMPORT_NAME inside the function, every in-place binary operator, iter/next,
slice objects, attribute lookups by name, itertools and container methods."""
from __future__ import annotations

import itertools
import math

import torch

from .harness import function_program, program_decorator, rand

PROGRAMS = []


program = program_decorator(PROGRAMS)




def _long_function_source(statements: int) -> str:
    # Over 256 constants and a jump over the whole body need EXTENDED_ARG.
    body = "".join(f"        x = x + {index}.5\n" for index in range(statements))
    return f"def long_function(x):\n    if x.dim() == 1:\n{body}    return x\n"


_namespace: dict = {}
exec(compile(_long_function_source(300), "<corpus long_function>", "exec"), _namespace)
PROGRAMS.append(function_program(
    "extended_arg_for_many_constants_and_long_jumps", _namespace["long_function"],
    lambda: rand(3)))


@program("dict_and_set_unpacking_merges", lambda: ({"a": rand(2)}, {"b": rand(2)}))
def _(first, second):
    merged = {**first, **second, "c": 3}
    keys = {*merged, "d"}
    combined = [*first.values(), *second.values()]
    return merged, sorted(keys), (*combined,), dict(first, **second), torch.cat(combined) * 2


@program("match_sequence_mapping_and_class_patterns", lambda: (rand(2, 3), {"mode": "scale", "k": 2}))
def _(x, options):
    match x.shape:
        case (rows, cols):
            size = rows * cols
        case _:
            size = 0
    match options:
        case {"mode": "scale", "k": k}:
            x = x * k
        case {"mode": other}:
            x = x + len(other)
    match x:
        case torch.Tensor():
            x = x + size
    return x, size


@program("import_inside_the_function", lambda: rand(3))
def _(x):
    import math
    from torch.nn import functional as F

    return F.silu(x) * math.e


@program("every_in_place_binary_operator_on_ints", lambda: rand(3))
def _(x):
    n = 7
    n += 3
    n -= 1
    n *= 4
    n //= 3
    n %= 7
    n **= 2
    n <<= 2
    n >>= 1
    n |= 1
    n &= 0xFF
    n ^= 5
    f = 2.0
    f /= 4
    return x * n + f, n, f


@program("in_place_operators_on_tensors", lambda: (rand(3, 3), rand(3, 3)))
def _(a, b):
    c = a.clone()
    c += b
    c -= 1
    c *= b
    c /= 2
    c **= 2
    c @= b
    m = (a > 0)
    m |= b > 0
    m &= a < 1
    m ^= b < -1
    return c, m


@program("iter_next_and_reversed_over_lists", lambda: [rand(2), rand(2), rand(2)])
def _(xs):
    it = iter(xs)
    first = next(it)
    second = next(it)
    rest = list(it)
    back = list(reversed(xs))
    return first * second, rest, back[0], next(iter([]), "empty")


@program("slice_objects_ellipsis_and_none_indexing", lambda: rand(4, 5, 6))
def _(x):
    window = slice(1, None, 2)
    return x[window], x[..., window], x[Ellipsis, 0], x[None, ..., None].shape, x[:, None, 2:4]


@program("attribute_and_method_lookup_by_name", lambda: rand(3))
def _(x):
    relu = getattr(x, "relu")
    add = getattr(torch, "add")
    return relu() + add(x, 1), torch.Tensor.mul(x, 3), type(x).__name__, callable(torch.add)


@program("torch_size_in_strings_and_comparisons", lambda: rand(2, 3))
def _(x):
    label = f"shape={tuple(x.shape)} {x.shape}"
    same = x.shape == (2, 3) and x.size() == torch.Size([2, 3])
    return x * len(label), label, same, str(x.dtype)


@program("builtins_over_constant_pairs", lambda: rand(3))
def _(x):
    table = dict(zip(["a", "b", "c"], [1, 2, 3]))
    ordered = sorted(table.items(), key=lambda item: -item[1])
    weights = {k: v / sum(table.values()) for k, v in table.items()}
    return x * weights["b"], ordered, list(enumerate(reversed(range(3)))), isinstance(2.5, (int, float))


@program("itertools_over_constants_and_tensors", lambda: [rand(2), rand(2), rand(2)])
def _(xs):
    pairs = list(itertools.product(range(2), "ab"))
    chained = list(itertools.chain(xs[:1], xs[2:]))
    running = list(itertools.accumulate([1, 2, 3]))
    combos = [a * b for a, b in itertools.combinations(xs, 2)]
    return pairs, torch.stack(chained), running, torch.stack(combos).sum(0)


@program("container_methods_on_constants", lambda: rand(2))
def _(x):
    items = [3, 1, 3, 2]
    d = {"a": 1, "b": 2, "c": 3}
    common = sorted(d.keys() & {"a", "c", "z"})
    head, sep, tail = "conv.weight".partition(".")
    return (x * items.index(2) + items.count(3), common, (head, sep, tail), "ab" * 2,
            (37).bit_length(), math.prod([2, 3, 4]), "-".join(str(i) for i in range(3)))
