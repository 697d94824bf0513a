"""Corpus programs built from idioms found in real model code: late-binding
closures, mutable defaults, returned closures, modules looked up by name,
`torch.jit.is_scripting()` checks, unpacking a tensor, sizes taken from
another tensor's shape, masked means, one-hot targets, nn.LSTM, gradient-aware
branches, name mangling, lru_cache helpers, a KV cache, enums, a recursive
map over nested batches, dataclass __post_init__ and half precision."""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import operator
import os
import re
import sys
import typing
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .harness import Args, Program, module_program, program_decorator, rand

PROGRAMS = []


program = program_decorator(PROGRAMS)




@program("lambdas_in_a_loop_bind_late", lambda: rand(3))
def _(x):
    scalers = [lambda: x * i for i in range(3)]
    return [f() for f in scalers]


def _remember(value, memory=[]):  # noqa: B006  (the shared default is the point)
    memory.append(value)
    return len(memory)


@program("mutable_default_argument_grows_across_calls", lambda: rand(2), repeats=3,
         frames=[1, 2, 3], reset=lambda: _remember.__defaults__[0].clear(),
         observe=lambda world: len(_remember.__defaults__[0]))
def _(x):
    return x * _remember("call")


def _call_returned_closure(world, compiled, args):
    scale = compiled(*args.args)
    return scale(torch.ones(3))


@program("returned_closure_captures_a_computed_tensor", lambda: rand(3),
         call=_call_returned_closure)
def _(x):
    factor = x.exp()

    def scale(y):
        return y * factor

    return scale


@program("two_level_nonlocal_chain", lambda: rand(2))
def _(x):
    total = 0

    def outer():
        def inner():
            nonlocal total
            total += 2
        inner()
        inner()

    outer()
    return x * total


@program("unpacking_a_tensor_along_its_first_dimension", lambda: rand(3, 2, 4, requires_grad=True),
         grad=True)
def _(qkv):
    q, k, v = qkv
    first, *rest = qkv.unbind(1)
    return (q @ k.T) @ v, first, len(rest)


@program("jit_scripting_and_tracing_checks", lambda: rand(3))
def _(x):
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        x = x * 2
    return x


@program("loops_over_a_torch_size_and_shape_driven_while", lambda: rand(8, 4))
def _(x):
    product = 1
    for size in x.shape:
        product *= size
    n = x.shape[0]
    halvings = 0
    while n > 1:
        n //= 2
        halvings += 1
    return x.reshape(product) * halvings


@program("fstring_debug_specifier_and_zip_star_transpose", lambda: rand(2))
def _(x):
    n = 3
    rows = [[1, 2, 3], [4, 5, 6]]
    columns = list(zip(*rows))
    return x * len(f"{n=}"), f"{n=}", columns


def _masked_batch():
    return rand(2, 5, 3), torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 0]]), torch.tensor([0, 2])


@program("masked_mean_and_one_hot_targets", _masked_batch)
def _(x, mask, labels):
    m = mask.unsqueeze(-1).to(x.dtype)
    mean = (x * m).sum(1) / m.sum(1).clamp(min=1)
    return mean, F.one_hot(labels, num_classes=3).float() - mean.softmax(-1)


class Named(nn.Module):
    def __init__(self, depth=3):
        super().__init__()
        self.depth = depth
        for i in range(depth):
            setattr(self, f"layer{i}", nn.Linear(4, 4))

    def _forward_impl(self, x):
        for i in range(self.depth):
            x = getattr(self, f"layer{i}")(x).relu()
        return x

    def forward(self, x):
        return self._forward_impl(x), type(self).__name__, self.__class__ is Named


PROGRAMS.append(module_program(
    "submodules_looked_up_by_a_formatted_name", Named, lambda: rand(2, 4, requires_grad=True),
    grad=True))


class Children(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoders = nn.ModuleList([nn.Linear(3, 3), nn.Sequential(nn.Linear(3, 3), nn.Tanh())])
        self.gates = nn.ModuleList([nn.Linear(3, 1), nn.Linear(3, 1)])

    def forward(self, x):
        outputs = []
        for encoder, gate in zip(self.encoders, self.gates):
            y = encoder(x)
            if isinstance(encoder, nn.Sequential):
                y = y * 2
            outputs.append(y * torch.sigmoid(gate(y)))
        kinds = [type(child).__name__ for child in self.children()]
        return sum(outputs), kinds


PROGRAMS.append(module_program(
    "zip_over_module_lists_and_isinstance_on_children", Children,
    lambda: rand(2, 3, requires_grad=True), grad=True))


class Segmentation(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.classifier = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        size = x.shape[-2:]
        y = self.classifier(F.relu(self.down(x)))
        return F.interpolate(y, size=size, mode="bilinear", align_corners=False)


PROGRAMS.append(module_program(
    "upsampling_to_the_input_size_taken_from_its_shape", Segmentation,
    lambda: rand(1, 3, 8, 8, requires_grad=True), grad=True,
    changed=lambda: rand(1, 3, 6, 10, requires_grad=True), frames_changed=2))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=1, batch_first=True)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return self.head(out[:, -1]), h, c


PROGRAMS.append(module_program(
    "lstm_module", Recurrent, lambda: rand(2, 5, 4, requires_grad=True), grad=True,
    reference=dict(fullgraph=False, frames=0,
                   why="PyTorch 2.13 does not trace nn.LSTM (allow_rnn=False); the issue has "
                       "every nn.Module call land in the graph")))


def _warn_from_helper(x):
    import warnings

    from .harness import CorpusWarning

    warnings.warn("from the helper", CorpusWarning, stacklevel=2)
    return x + 1


PROGRAMS.append(Program(
    name="warning_with_stacklevel_from_an_inlined_helper", make=lambda: _warn_from_helper,
    inputs=lambda: Args(rand(2)),
    reference=dict(fullgraph=False, frames=1,
                   why="PyTorch breaks the graph at warnings.warn; graphwright replays it")))


class GradAware(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        if self.lin.weight.grad is None:
            return y
        return y + self.lin.weight.grad.sum()


PROGRAMS.append(module_program(
    "branch_on_whether_a_parameter_has_a_gradient", GradAware, lambda: rand(2, 3), grad=True,
    frames=[1, 2]))


class Mangled(nn.Module):
    def __init__(self):
        super().__init__()
        self.__scale = 3.0
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x) * self.__scale


class OldStyleSuper(Mangled):
    def forward(self, x):
        return super(OldStyleSuper, self).forward(x) + 1


PROGRAMS.append(module_program(
    "name_mangled_attribute_and_two_argument_super", OldStyleSuper,
    lambda: rand(3, 2, requires_grad=True), grad=True))


@functools.lru_cache(maxsize=None)
def _position_table(length):
    positions = torch.arange(length, dtype=torch.float32)
    return torch.stack([positions.sin(), positions.cos()], dim=-1)


@program("lru_cached_helper_builds_a_constant_table", lambda: rand(4, 2))
def _(x):
    return x + _position_table(x.shape[0])


class KVCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.register_buffer("keys", torch.zeros(1, 6, 4))
        self.position = 0

    def forward(self, x):
        self.keys[:, self.position] = self.proj(x).detach()
        self.position += 1
        return self.keys[:, : self.position].mean(1)


PROGRAMS.append(module_program(
    "kv_cache_written_at_a_growing_position", KVCache, lambda: rand(1, 4), repeats=3,
    frames=[1, 2, 3], observe=lambda world: world.position))


@program("torch_assert_on_metadata", lambda: rand(2, 3, 4))
def _(x):
    torch._assert(x.shape[1] == 3, "expected three channels")
    return x.mean(1)


@program("conditional_context_manager_with_nullcontext", lambda: (rand(3, requires_grad=True), True),
         changed=lambda: (rand(3, requires_grad=True), False), frames_changed=2, grad=True)
def _(x, frozen):
    context = torch.no_grad() if frozen else contextlib.nullcontext()
    with context:
        y = x * 2
    return y, y.requires_grad


@program("autocast_disabled_inside_an_autocast_region", lambda: (rand(4, 4), rand(4, 4)))
def _(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = a @ b
        with torch.autocast("cpu", enabled=False):
            full = a @ b
    return low.dtype, full.dtype, full


class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


@program("enum_member_argument_is_guarded", lambda: (rand(3), Mode.TRAIN),
         changed=lambda: (rand(3), Mode.EVAL), frames_changed=2)
def _(x, mode):
    if mode == Mode.TRAIN:
        return x * 2, mode.value
    return x - 1, mode.name


def _apply_to_tensors(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Mapping):
        return {key: _apply_to_tensors(value, fn) for key, value in obj.items()}
    if isinstance(obj, Sequence) and not isinstance(obj, str):
        return type(obj)(_apply_to_tensors(value, fn) for value in obj)
    return obj


@program("recursive_map_over_a_nested_batch", lambda: {"x": rand(2), "pair": (rand(2), "tag"),
                                                        "rest": [rand(1), 3]})
def _(batch):
    return _apply_to_tensors(batch, lambda t: typing.cast(torch.Tensor, t) * 10)


@dataclasses.dataclass
class Normalized:
    values: torch.Tensor
    eps: float = 1e-5
    scale: torch.Tensor = dataclasses.field(init=False)

    def __post_init__(self):
        self.scale = self.values.abs().amax().clamp(min=self.eps)


@program("dataclass_with_post_init_built_inside", lambda: rand(4))
def _(x):
    normalized = Normalized(x * 3)
    return normalized.values / normalized.scale, normalized.eps


@program("half_and_bfloat16_inputs", lambda: (rand(3, 4).half(), rand(3, 4).bfloat16()))
def _(h, b):
    return h.softmax(-1), (b @ b.T).float(), h.float() + b.float(), (h * 2).dtype


@program("optional_import_with_an_import_error_fallback", lambda: rand(3), fullgraph=False,
         frames=1, reference={"frames": 0, "why": "PyTorch breaks at a failing import ('Import failure') and "
                                                  "runs the frame eagerly; graphwright raises the ImportError "
                                                  "as the program's own and follows its except clause"})
def _(x):
    try:
        import graphwright_corpus_missing_module  # noqa: F401
        scale = 10
    except ImportError:
        scale = 2
    return x * scale


@program("version_and_platform_checks", lambda: rand(3))
def _(x):
    if torch.__version__ >= "2.0" and sys.platform != "win32" and hasattr(torch, "compile"):
        return x + 1
    return x - 1


def _with_environment(value):
    def make():
        os.environ["GRAPHWRIGHT_CORPUS_FLAG"] = value
        return rand(3)
    return make


@program("environment_variable_read_in_the_region", _with_environment("1"),
         changed=_with_environment("0"), frames_changed=2,
         reset=lambda: os.environ.pop("GRAPHWRIGHT_CORPUS_FLAG", None))
def _(x):
    if os.environ.get("GRAPHWRIGHT_CORPUS_FLAG", "0") == "1":
        return x * 2
    return x * 3


class LazyTable(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.cached_length = 0

    def forward(self, x):
        length = x.shape[0]
        if self.cached_length < length:
            self.register_buffer("table", torch.arange(length * 4.0).view(length, 4), persistent=False)
            self.cached_length = length
        return self.lin(x) + self.table[:length]


PROGRAMS.append(module_program(
    "buffer_registered_lazily_on_the_first_call", LazyTable, lambda: rand(3, 4), repeats=2,
    frames=[1, 2], observe=lambda world: (world.cached_length, world.table.clone())))


# -- version checks inside forward: a regex-parsed version compared through `operator` ----------


class _Version:
    """A library version as `packaging.version.Version` keeps one: parsed by a class-level
    compiled pattern, compared by its release tuple."""

    _regex = re.compile(r"v?(?P<release>\d+(?:\.\d+)*)(?P<local>\+\w+)?")

    def __init__(self, text):
        match = self._regex.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"Invalid version: {text!r}")
        self.release = tuple(int(part) for part in match.group("release").split("."))
        self.local = match.group("local")

    def __ge__(self, other):
        return self.release >= other.release

    def __lt__(self, other):
        return self.release < other.release


_VERSION_OPERATIONS = {">=": operator.ge, "<": operator.lt}
_LIBRARY_VERSION = "2.13.0+cpu"


def _is_library_version(operation, wanted):
    return _VERSION_OPERATIONS[operation](_Version(_LIBRARY_VERSION), _Version(wanted))


@program("version_check_parses_with_a_regex_and_compares_with_operator_ge", lambda: rand(3))
def _(x):
    # diffusers' gradient checkpointing asks is_torch_version(">=", "1.11.0") on every call
    if _is_library_version(">=", "1.11.0") and not _is_library_version("<", "2.0"):
        return x * 2
    return x


class _Money:
    def __init__(self, cents):
        self.cents = cents

    def __add__(self, other):
        return _Money(self.cents + other.cents)

    def __mul__(self, factor):
        return _Money(self.cents * factor)


@program("operator_functions_on_objects_use_their_special_methods", lambda: rand(3))
def _(x):
    total = functools.reduce(operator.add, [_Money(1), _Money(2), _Money(4)])
    scaled = operator.mul(total, 3)
    return x * scaled.cents
