"""Corpus programs for the Python language: opcodes, calls, closures, loops,
comprehensions, unpacking, strings, builtins, dataclass and NamedTuple inputs, `id()` of
objects made in the region (equal exactly where `is` holds)."""
from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import operator
import types
from typing import NamedTuple

import torch

from .harness import Args, function_program, program_decorator, rand

PROGRAMS = []


program = program_decorator(PROGRAMS)




@program("arithmetic_on_tensors_and_constants", lambda: rand(4, 3))
def _(x):
    a = 7 // 2 + 7 % 3 - 2 ** 3 + (5 & 3) + (5 | 8) - (6 ^ 3) + (1 << 4) - (64 >> 2)
    b = -x * 2 + x / 3 - x ** 2 + a
    b += 1.5
    b *= x
    b -= abs(x)
    b /= 2
    return b, a, 3.5 / 2, -(7 // -2)


@program("comparisons_on_constants_and_int_argument", lambda: (rand(3), 4),
         changed=lambda: (rand(3), 1), frames_changed=2)
def _(x, n):
    if n > 3 and n != 5:
        x = x + 1
    elif 0 < n <= 3:
        x = x - 1
    if n is not None and not n == 2:
        x = x * n
    return x


@program("closure_reads_outer_variable", lambda: rand(5))
def _(x):
    scale = 3.0
    offset = torch.ones(5)

    def inner(y):
        return y * scale + offset

    return inner(x) + inner(x * 2)


@program("closure_writes_nonlocal", lambda: rand(2, 2))
def _(x):
    count = 0

    def bump(y):
        nonlocal count
        count += 1
        return y + count

    y = bump(bump(x))
    return y, count


def _make_scaler(factor):
    bias = torch.full((3,), factor / 2)

    def scaled(x):
        return x * factor + bias

    return scaled


PROGRAMS.append(function_program("compiled_closure_made_by_a_factory", _make_scaler(2.5),
                                 lambda: rand(3)))


@program("lambdas_and_sorted_with_key", lambda: rand(4))
def _(x):
    double = lambda t: t * 2  # noqa: E731
    keys = sorted([3, 1, 2], key=lambda k: -k)
    return [double(x) + k for k in keys]


def _helper_with_defaults(x, scale=2, *, shift=1, **extra):
    return x * scale + shift + extra.get("more", 0)


@program("defaults_keyword_only_and_kwargs", lambda: rand(3))
def _(x):
    return (_helper_with_defaults(x), _helper_with_defaults(x, 3, shift=-1),
            _helper_with_defaults(x, shift=0, more=5), _helper_with_defaults(scale=4, x=x))


def _sum_all(*tensors, weight=1.0):
    total = tensors[0]
    for t in tensors[1:]:
        total = total + t
    return total * weight


@program("star_args_and_double_star_kwargs", lambda: (rand(2), rand(2), rand(2)))
def _(a, b, c):
    parts = [a, b, c]
    options = {"weight": 0.5}
    return _sum_all(*parts, **options), _sum_all(*parts[:2]), _sum_all(a, *[b, c], **{})


@program("keyword_arguments_to_the_compiled_function", lambda: Args(rand(3), scale=2.0, bias=rand(3)))
def _(x, *, scale, bias=None):
    return x * scale + (bias if bias is not None else 0)


def _power_tower(x, depth):
    if depth == 0:
        return x
    return _power_tower(x * 0.5 + 1, depth - 1)


@program("recursive_user_function_is_inlined", lambda: rand(3))
def _(x):
    return _power_tower(x, 4)


@program("for_loop_over_range_with_step", lambda: rand(3))
def _(x):
    total = torch.zeros(3)
    for i in range(1, 10, 3):
        total = total + x * i
    for i in reversed(range(3)):
        total = total - i
    return total


@program("for_loop_over_input_list", lambda: [rand(2), rand(2), rand(2)],
         changed=lambda: [rand(2), rand(2)], frames_changed=2)
def _(xs):
    out = xs[0]
    for t in xs[1:]:
        out = out * t
    return out, len(xs)


@program("for_loop_over_tuple_and_enumerate_zip", lambda: ((rand(2), rand(2)), [1.0, 2.0]))
def _(pair, weights):
    acc = 0
    for i, (t, w) in enumerate(zip(pair, weights)):
        acc = acc + t * w + i
    return acc


@program("for_loop_over_dict_items", lambda: {"a": rand(3), "b": rand(3)},
         changed=lambda: {"a": rand(3), "c": rand(3)}, frames_changed=2)
def _(d):
    out = {}
    for key, value in d.items():
        out[key + "_sq"] = value * value
    for key in d:
        out[key] = d[key] + 1
    return out, sorted(d.keys())


@program("while_loop_on_constant_counter", lambda: rand(3))
def _(x):
    i = 0
    while i < 4:
        x = x * 0.9 + i
        i += 1
    else:
        x = x - 1
    return x


@program("break_and_continue_in_loops", lambda: rand(3))
def _(x):
    for i in range(10):
        if i % 2 == 0:
            continue
        if i > 6:
            break
        x = x + i
    return x


@program("if_on_bool_argument", lambda: (rand(3), True),
         changed=lambda: (rand(3), False), frames_changed=2)
def _(x, flag):
    if flag:
        return x.relu()
    return x.sigmoid()


@program("ternary_and_boolean_operators_on_constants", lambda: (rand(3), 0))
def _(x, n):
    scale = 2 if n == 0 else 3
    a = n or 7
    b = n and 5
    c = not n
    return x * scale + a + b + int(c)


@program("list_comprehension_over_tensors", lambda: rand(4, 3))
def _(x):
    rows = [row * i for i, row in enumerate(x) if i != 2]
    return torch.stack(rows), [i * i for i in range(5)]


@program("dict_and_set_comprehensions", lambda: rand(3))
def _(x):
    d = {f"k{i}": x + i for i in range(3)}
    s = {i % 3 for i in range(10)}
    return d, sorted(s), len(s)


@program("nested_comprehension", lambda: rand(2, 2))
def _(x):
    grid = [[x * i + j for j in range(2)] for i in range(3)]
    return [torch.stack(row) for row in grid]


@program("generator_expression_consumed_by_sum", lambda: rand(3))
def _(x):
    return sum(x * i for i in range(4)), max(i * i for i in range(5))


@program("tuple_unpacking_and_swaps", lambda: (rand(2), rand(2)))
def _(a, b):
    a, b = b, a
    (c, d), e = (a + 1, b + 1), a * b
    return a - b, c, d, e


@program("starred_unpacking", lambda: [rand(2), rand(2), rand(2), rand(2)])
def _(xs):
    first, *middle, last = xs
    head, *tail = range(4)
    merged = [*middle, first, *tail]
    return first + last, len(middle), merged[:2], head, (*middle, last)


@program("slicing_tensors_and_lists", lambda: rand(4, 6))
def _(x):
    items = [1, 2, 3, 4, 5]
    return (x[1:], x[:, ::2], x[..., None], x[-1], x[1:3, -2:], x[None, :, 0],
            items[1:-1], items[::-1], items[::2])


@program("fstrings_format_and_percent_on_constants", lambda: {"layer0": rand(2), "layer1": rand(2)})
def _(d):
    out = []
    for i in range(2):
        key = f"layer{i}"
        name = "{}-{:02d}".format("block", i)
        tag = "%s_%d" % ("t", i)
        out.append((d[key] * (i + 1), name, tag, f"{i:>3}|{2.5:.2f}|{key!r}"))
    return out


@program("string_methods_on_constants", lambda: rand(2))
def _(x):
    names = "a,b,c".split(",")
    joined = "-".join(names).upper()
    return x * len(joined), joined, "b" in names, joined.startswith("A"), " x ".strip()


@program("isinstance_len_getattr_hasattr", lambda: (rand(3), [1, 2], (rand(2),)))
def _(x, lst, tup):
    out = x
    if isinstance(x, torch.Tensor) and isinstance(lst, (list, tuple)):
        out = out + len(lst) + len(tup)
    if hasattr(x, "shape") and not hasattr(lst, "shape"):
        out = out * getattr(x, "ndim")
    return out, getattr(lst, "missing", "default"), isinstance(tup[0], int)


@program("min_max_sum_abs_round_on_constants", lambda: rand(3))
def _(x):
    sizes = [3, -7, 5]
    a = min(sizes) + max(sizes) + sum(sizes) + abs(sizes[1]) + max(2, 9, 4)
    b = round(2.567, 2) + int(3.9) + float(2) + divmod(17, 5)[1] + pow(2, 5)
    return x * a + b, a, b


@program("membership_tests_on_constant_containers", lambda: rand(2))
def _(x):
    modes = ("train", "eval")
    table = {"relu": 1, "gelu": 2}
    out = x
    if "eval" in modes and "tanh" not in table:
        out = out + table["gelu"]
    return out, 3 in [1, 2, 3]


@program("is_none_checks_on_optional_argument", lambda: (rand(3), None),
         changed=lambda: (rand(3), rand(3)), frames_changed=2)
def _(x, mask):
    if mask is None:
        return x * 2
    return x * mask


@program("nested_function_defined_on_every_call", lambda: rand(3))
def _(x):
    outs = []
    for k in range(3):
        def shift(y, k=k):
            return y + k
        outs.append(shift(x))
    return outs


@program("functools_partial_and_operator_module", lambda: rand(3))
def _(x):
    add_two = functools.partial(torch.add, other=2.0)
    return add_two(x), operator.mul(x, 3), functools.reduce(operator.add, [x, x, x])


@program("local_dict_and_list_methods", lambda: rand(3))
def _(x):
    d = {"a": x}
    d.update(b=x * 2)
    d.setdefault("c", x * 3)
    lst = [x]
    lst.append(x + 1)
    lst.extend([x + 2, x + 3])
    lst.insert(0, x - 1)
    popped = lst.pop()
    lst.reverse()
    return d.get("b"), d.get("z", 0), list(d.keys()), lst, popped, len(lst)


@program("tuple_and_list_concatenation_and_repetition", lambda: rand(2))
def _(x):
    shape = (2,) + (1,) * 2
    parts = [x] * 2 + [x * 3]
    return x.reshape(shape), torch.cat(parts), shape


@program("math_functions", lambda: rand(4, 8))
def _(x):
    d = x.shape[-1]
    scale = 1 / math.sqrt(d)
    angle = math.pi / 4
    return (x * scale + math.log(d) - math.exp(0.5) * math.cos(angle) + math.floor(2.7)
            + math.ceil(0.2) + math.tanh(0.5))


@program("assert_on_metadata_and_constants", lambda: rand(2, 3))
def _(x):
    assert x.dim() == 2, "expected a matrix"
    assert x.shape[1] == 3
    assert isinstance(x, torch.Tensor)
    return x.sum(1)


@dataclasses.dataclass
class Batch:
    features: torch.Tensor
    target: torch.Tensor
    scale: float = 1.0


@program("dataclass_input", lambda: Batch(rand(4, 3), rand(4), 0.5),
         changed=lambda: Batch(rand(4, 3), rand(4), 2.0), frames_changed=2)
def _(batch):
    pred = batch.features.sum(1) * batch.scale
    return ((pred - batch.target) ** 2).mean()


class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor


@program("namedtuple_input_and_output", lambda: Pair(rand(3), rand(3)))
def _(pair):
    left, right = pair
    return Pair(pair.left + right, left * pair[1]), pair._fields


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def apply(self, x):
        return x * self.factor

    @property
    def doubled(self):
        return self.factor * 2


@program("user_object_method_and_property", lambda: (rand(3), Scaler(3.0)))
def _(x, scaler):
    return scaler.apply(x) + scaler.doubled


@program("int_float_and_bool_conversions", lambda: rand(3))
def _(x):
    n = int("12") + int(True) + len(str(42))
    return x * float(n) + bool(n), n


@program("try_finally_without_an_exception", lambda: rand(3))
def _(x):
    steps = []
    try:
        y = x * 2
        steps.append("body")
    finally:
        steps.append("finally")
    return y, steps


@program("exception_raised_and_caught_inside", lambda: rand(3))
def _(x):
    try:
        raise ValueError("not a tensor problem")
    except ValueError as error:
        message = str(error)
    return x + len(message)


class Timer:
    def __init__(self):
        self.entered = 0
        self.exited = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.exited += 1
        return False


@program("user_context_manager_created_inside", lambda: rand(3))
def _(x):
    timer = Timer()
    with timer as t:
        y = x * t.entered
    return y + timer.exited, timer.exited


@program("walrus_del_and_chained_comparison", lambda: rand(3))
def _(x):
    if (n := x.shape[0]) > 2:
        y = x * n
    tmp = y + 1
    del y
    return tmp, 0 < n < 10 != 11


@program("match_statement_on_a_constant", lambda: (rand(3), "gelu"))
def _(x, kind):
    match kind:
        case "relu":
            return x.relu()
        case "gelu" | "silu":
            return torch.nn.functional.gelu(x)
        case _:
            return x


@program("any_all_map_filter_on_constants", lambda: [rand(2), rand(2), rand(2)])
def _(xs):
    sizes = list(map(len, xs))
    big = list(filter(lambda n: n > 1, sizes))
    if all(n == 2 for n in sizes) and any(sizes):
        return [t * 2 for t in xs], big
    return xs, big


class Geometry:
    unit = 2.0

    @staticmethod
    def area(x):
        return x * x

    @classmethod
    def scaled(cls, x):
        return x * cls.unit


@program("staticmethod_and_classmethod_calls", lambda: rand(3))
def _(x):
    return Geometry.area(x) + Geometry.scaled(x) + Geometry().scaled(x)


@program("returning_an_input_keeps_its_identity", lambda: rand(3),
         call=lambda world, compiled, args: compiled(*args.args) is args.args[0])
def _(x):
    return x


@program("enumerate_with_start_and_index_loops", lambda: [rand(2), rand(2), rand(2)])
def _(xs):
    total = 0
    for i, t in enumerate(xs, start=1):
        total = total + t * i
    for i in range(len(xs)):
        total = total - xs[i]
    return total


def _traced_twice(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs) * 2
    return wrapper


@_traced_twice
def _decorated_scale(x, scale=1.0):
    return x * scale


PROGRAMS.append(function_program(
    "compiled_function_is_a_decorator_wrapper_with_star_args", _decorated_scale,
    lambda: Args(rand(3), scale=3.0)))


class DictConfig:
    def __init__(self, **values):
        self.__dict__["_values"] = values

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None


class Slotted:
    __slots__ = ("gain", "bias")

    def __init__(self, gain, bias):
        self.gain = gain
        self.bias = bias


class AffineTransform:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, x):
        return x * self.scale + 1


@program("config_objects_getattr_slots_namespace_and_callables",
         lambda: (rand(3), DictConfig(lr=0.5, depth=2), Slotted(2.0, -1.0),
                  types.SimpleNamespace(alpha=3), argparse.Namespace(beta=4), AffineTransform(0.5)))
def _(x, cfg, slotted, ns, args, transform):
    for _ in range(cfg.depth):
        x = x * cfg.lr
    x = x * slotted.gain + slotted.bias + ns.alpha + args.beta
    return transform(x), getattr(cfg, "missing", "fallback")


@program("identity_operators_called_as_functions_on_a_tensor", lambda: rand(3))
def _(x):
    return x + 1, [op(-10, x) for op in (operator.is_, operator.is_not)], operator.is_(x, x)


class _BoolReturnsFloat:
    def __init__(self, value):
        self.value = value

    def __bool__(self):
        self.value = 1.2
        return self.value


@program("bool_returning_a_float_is_a_type_error", lambda: rand(3))
def _(x):
    holder = _BoolReturnsFloat(0.5)
    try:
        if not holder:
            return x + holder.value, "not reached"
    except TypeError as error:
        return x - holder.value, str(error)
    return x, "not reached"


@program("list_and_size_indexed_by_a_tensor_made_of_a_constant", lambda: (rand(2, 3, 4), rand(3)))
def _(x, y):
    items = [x, y, x + 1]
    index = torch.as_tensor(2)
    return items[index], x.reshape(-1, x.shape[torch.tensor(1)])


class _Node:
    def __init__(self, value):
        self.value = value


@program("id_of_objects_made_in_the_region", lambda: rand(3),
         reference={"xfail": "`id(y) == id(y.mul_(2))` is False for a tensor made in the region",
                    "why": "PyTorch 2.13 gives the tensor an in-place method returns an id of its own"})
def _(x):
    first, second, y = _Node(x), _Node(x), x * 2
    alias, table = first, {}
    memo = {id(first): "first", id(second): "second"}
    ids = [id(first), id(second), id(alias), id(y), id(table), id(first)]
    relations = (ids[0] == ids[2] == ids[5], ids[0] != ids[1], len(set(ids)), memo[id(alias)],
                 id(y) == id(y.mul_(2)), isinstance(ids[0], int))
    return y + 1, relations


_UNION = int | float


@program("union_types_compare_and_hash_by_their_members", lambda: rand(3))
def _(x):
    made = int | float  # another object than _UNION, equal to it
    table = {_UNION: "number"}
    return x * 2, made == _UNION, _UNION != made, (str | None) == _UNION, table.get(made), \
        hash(made) == hash(_UNION)


class _MatrixLike:
    def __matmul__(self, other):
        return ("matmul", other)

    def __imatmul__(self, other):
        self.other = other
        return self


class _OnlyMatmul:
    def __matmul__(self, other):
        return other * 2


@program("in_place_matmul_runs_the_classes_methods", lambda: rand(3),
         reference={"xfail": "Dynamo does not know how to trace builtin operator `matmul`",
                    "why": "PyTorch 2.13 does not call a user class's `__matmul__` under fullgraph"})
def _(x):
    matrix = _MatrixLike()
    product = matrix @ 3
    matrix @= x
    plain = _OnlyMatmul()
    plain @= 5  # no __imatmul__: `plain @ 5`
    return matrix.other + 1, product, plain


class _Token:
    pass


def _id_kept_after_the_graph(world, compiled, args):
    token, remainder, *facts = compiled(*args.args, **args.kwargs)
    return remainder == id(token) % 1000, facts


@program("hash_and_id_of_an_object_made_in_the_region", lambda: rand(3), fullgraph=False, frames=0,
         call=_id_kept_after_the_graph)
def _(x):
    token = _Token()
    facts = [hash(token) == hash(token), id(token) == id(token), id(token) != id(x), hash(token) == hash(_Token())]
    y = x * 2
    remainder = id(token) % 1000  # the number the object has after the graph, not its stand-in's
    return token, remainder, y + 1, *facts
