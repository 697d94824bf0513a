"""Corpus programs for user classes of every shape, as Python runs them:
subclasses of dict, OrderedDict, list and tuple (built in the region, passed
in, mutated, returned), a ModelOutput-like OrderedDict dataclass, dataclasses
(defaults, factories, __post_init__, frozen), custom __new__,
__init_subclass__, __slots__, properties and user descriptors, __getattr__
and __getattribute__, classmethods and staticmethods, zero-argument super(),
enums, ABCs, operator overloading, and objects that escape the region."""
from __future__ import annotations

import abc
import collections
import copy
import dataclasses
import enum
import functools
import types
import typing
from collections import OrderedDict
import torch
from torch import nn

from .harness import Args, Program, module_program, program_decorator, rand

PROGRAMS: list[Program] = []

program = program_decorator(PROGRAMS)


# -- dict subclasses -----------------------------------------------------------------------


class AttrDict(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value


@program("dict_subclass_with_attribute_access_built_inside", lambda: rand(3))
def _(x):
    d = AttrDict(a=x, b=x * 2)
    d.c = d.a + d.b
    return d.c * d["a"], len(d), sorted(d.keys()), isinstance(d, dict), hasattr(d, "missing")


class Record(dict):
    def __init__(self, *args, tag="new", **kwargs):
        super().__init__(*args, **kwargs)
        self.tag = tag

    def total(self):
        return sum(self.values())


@program("dict_subclass_returned_with_items_and_attributes", lambda: rand(3))
def _(x):
    record = Record({"a": x}, tag="made", b=x + 1)
    record["c"] = record.total()
    return record


@program("dict_subclass_passed_in_read_and_mutated", lambda: Record({"a": rand(2)}, tag="in"))
def _(record):
    record["b"] = record["a"] * 2
    record.tag = record.tag + "!"
    return record.total(), list(record)


class Tracked(OrderedDict):
    def __init__(self, *args, **kwargs):
        self.order = []
        super().__init__(*args, **kwargs)

    def __setitem__(self, key, value):
        self.order.append(key)
        super().__setitem__(key, value)


@program("ordered_dict_subclass_with_setitem_override", lambda: rand(3),
         reference=dict(xfail="2.13 skips the overridden __setitem__ that OrderedDict.__init__ "
                              "calls (a wrong result)", why="PyTorch returns a wrong result here"))
def _(x):
    tracked = Tracked(first=x)
    tracked["second"] = x * 2
    tracked["first"] = x * 3
    return tracked, tracked.order, list(tracked.items())[0][0]


class Defaulting(dict):
    def __missing__(self, key):
        return len(key)


@program("dict_subclass_missing_hook", lambda: rand(3))
def _(x):
    d = Defaulting(a=x)
    return d["a"] + d["absent"], "absent" in d, d.get("other", 5)


@program("defaultdict_built_inside_groups_tensors", lambda: rand(4))
def _(x):
    groups = collections.defaultdict(list)
    for index, value in enumerate(x.unbind()):
        groups[index % 2].append(value)
    return {key: torch.stack(values).sum() for key, values in groups.items()}, len(groups)


# -- list and tuple subclasses --------------------------------------------------------------


class Stack(list):
    def push(self, value):
        self.append(value)
        return self

    @property
    def top(self):
        return self[-1]


@program("list_subclass_built_inside_and_returned", lambda: rand(3))
def _(x):
    stack = Stack([x])
    stack.push(x + 1).push(x * 2)
    stack.label = "three"
    return stack, stack.top, len(stack), stack[0:2]


@program("list_subclass_passed_in_and_mutated", lambda: Stack([rand(2)]))
def _(stack):
    stack.push(stack.top * 2)
    stack[0] = stack[0] + 1
    return stack.top, len(stack)


class Span(tuple):
    def __new__(cls, start, end):
        return super().__new__(cls, (start, end))

    @property
    def length(self):
        return self[1] - self[0]

    def shifted(self, by):
        return Span(self[0] + by, self[1] + by)


@program("tuple_subclass_with_custom_new", lambda: rand(3))
def _(x):
    span = Span(x, x * 3)
    start, end = span.shifted(1)
    return span, span.length, start + end, isinstance(span, tuple)


# -- a ModelOutput-like class: an OrderedDict that is also a dataclass ----------------------


class Output(OrderedDict):
    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def __getitem__(self, key):
        if isinstance(key, str):
            return dict(self.items())[key]
        return self.to_tuple()[key]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class LMOutput(Output):
    logits: torch.Tensor = None
    loss: torch.Tensor | None = None
    hidden: tuple | None = None


@program("model_output_like_ordered_dict_dataclass", lambda: rand(2, 3))
def _(x):
    out = LMOutput(logits=x * 2, hidden=(x,))
    first = out[0]
    return (out, first + out.logits, "loss" in out, "logits" in out, list(out.keys()),
            len(out.values()), out.to_tuple()[1][0], out["hidden"][0], out.loss is None)


@program("model_output_like_mutated_after_construction", lambda: rand(2, 3))
def _(x):
    out = LMOutput(logits=x)
    out.loss = out.logits.sum()
    out["hidden"] = (x + 1,)
    return out, out.to_tuple()


@program("model_output_like_passed_in", lambda: LMOutput(logits=rand(2, 3), loss=rand(())))
def _(out):
    out.loss = out.loss * 2
    return out[0] + out.loss, out.logits.shape, "hidden" in out


# -- dataclasses ----------------------------------------------------------------------------


@dataclasses.dataclass
class Stats:
    values: torch.Tensor
    name: str = "stats"
    history: list = dataclasses.field(default_factory=list)
    mean: torch.Tensor = dataclasses.field(init=False)

    def __post_init__(self):
        self.mean = self.values.mean()
        self.history.append(self.name)


@program("dataclass_with_defaults_factory_and_post_init_returned", lambda: rand(4))
def _(x):
    stats = Stats(x * 2)
    other = Stats(x, name="other")
    return stats, other.history, stats.history is other.history, dataclasses.is_dataclass(stats)


@dataclasses.dataclass(frozen=True)
class Frame:
    scale: float
    shift: float = 0.0

    def apply(self, x):
        return x * self.scale + self.shift


@program("frozen_dataclass_built_inside_and_replaced", lambda: rand(3))
def _(x):
    frame = Frame(2.0)
    moved = dataclasses.replace(frame, shift=1.0)
    try:
        frame.scale = 5.0
        refused = False
    except dataclasses.FrozenInstanceError:
        refused = True
    return moved.apply(x), frame, refused, frame == Frame(2.0)


@program("dataclass_passed_in_and_mutated", lambda: Stats(rand(3)))
def _(stats):
    stats.values = stats.values + 1
    stats.history.append("seen")
    return stats.mean * 2


# -- the object protocol --------------------------------------------------------------------


class Interned:
    made = 0

    def __new__(cls, value):
        instance = super().__new__(cls)
        instance.created_with = value
        return instance

    def __init__(self, value):
        self.value = value * 2


@program("custom_new_sets_state_before_init", lambda: rand(3))
def _(x):
    obj = Interned(x)
    return obj.created_with + obj.value, type(obj).__name__


class Layer:
    registry: dict = {}

    def __init_subclass__(cls, kind="", **kwargs):
        super().__init_subclass__(**kwargs)
        Layer.registry[kind] = cls


class Doubler(Layer, kind="double"):
    def __call__(self, x):
        return x * 2


class Negator(Layer, kind="negate"):
    def __call__(self, x):
        return -x


@program("init_subclass_registry_instantiated_by_name", lambda: rand(3))
def _(x):
    for kind in ("double", "negate"):
        x = Layer.registry[kind]()(x)
    return x


class Point:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm(self):
        return (self.x ** 2 + self.y ** 2).sqrt()


@program("slotted_object_built_inside_and_returned", lambda: rand(3))
def _(x):
    point = Point(x, x + 1)
    point.y = point.y * 2
    return point, point.norm(), hasattr(point, "z")


class Temperature:
    def __init__(self, celsius):
        self._celsius = celsius

    @property
    def celsius(self):
        return self._celsius

    @celsius.setter
    def celsius(self, value):
        self._celsius = value

    @celsius.deleter
    def celsius(self):
        del self._celsius

    @property
    def fahrenheit(self):
        return self._celsius * 9 / 5 + 32


@program("property_getter_setter_and_deleter", lambda: rand(3))
def _(x):
    t = Temperature(x)
    t.celsius = t.celsius + 10
    f = t.fahrenheit
    del t.celsius
    return f, hasattr(t, "_celsius")


@program("property_setter_on_an_object_passed_in", lambda: Temperature(rand(3)))
def _(t):
    t.celsius = t.fahrenheit
    return t.celsius


class Positive:
    """A data descriptor: validates and stores under a private name."""

    def __set_name__(self, owner, name):
        self.private = "_" + name

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return getattr(instance, self.private)

    def __set__(self, instance, value):
        setattr(instance, self.private, value.abs())


class Scaled:
    """A non-data descriptor that caches its result in the instance's __dict__."""

    def __init__(self, function):
        self.function = function
        self.name = function.__name__

    def __get__(self, instance, owner):
        if instance is None:
            return self
        value = self.function(instance)
        instance.__dict__[self.name] = value
        return value


class Measured:
    weight = Positive()

    def __init__(self, weight):
        self.weight = weight
        self.calls = 0

    @Scaled
    def doubled(self):
        self.calls += 1
        return self.weight * 2


@program("user_data_and_non_data_descriptors", lambda: rand(3))
def _(x):
    m = Measured(x - 0.5)
    first = m.doubled
    second = m.doubled
    return first + second, m.calls, m.weight, type(Measured.__dict__["weight"]).__name__


class Lazy:
    def __init__(self, base):
        self.base = base

    def __getattr__(self, name):
        if name.startswith("times_"):
            return self.base * int(name[len("times_"):])
        raise AttributeError(name)


@program("getattr_fallback_on_an_object_built_inside", lambda: rand(3))
def _(x):
    lazy = Lazy(x)
    return lazy.times_3 + lazy.times_2, getattr(lazy, "other", None), hasattr(lazy, "times_4")


class Logged:
    def __init__(self, value):
        self.value = value
        self.reads = []

    def __getattribute__(self, name):
        if name == "value":
            object.__getattribute__(self, "reads").append(name)
        return object.__getattribute__(self, name)


@program("getattribute_override_sees_every_read", lambda: rand(3),
         reference=dict(xfail="2.13 cannot trace a class that overrides __getattribute__",
                        why="PyTorch breaks the graph here"))
def _(x):
    logged = Logged(x)
    total = logged.value + logged.value
    return total, logged.reads


@program("getattribute_override_on_an_object_passed_in", lambda: (rand(3), Logged(2)),
         changed=lambda: (rand(3), Logged(5)), frames_changed=2,
         reference=dict(xfail="2.13 cannot trace a class that overrides __getattribute__",
                        why="PyTorch breaks the graph here"))
def _(x, logged):
    return x * logged.value, logged.reads


class Interval:
    def __init__(self, low, high):
        self.low, self.high = low, high

    @classmethod
    def around(cls, center, radius):
        return cls(center - radius, center + radius)

    @staticmethod
    def width_of(low, high):
        return high - low

    def width(self):
        return self.width_of(self.low, self.high)


class ClosedInterval(Interval):
    pass


@program("classmethod_constructor_and_staticmethod", lambda: rand(3))
def _(x):
    interval = ClosedInterval.around(x, 2.0)
    return interval.width(), Interval.width_of(1, 4), type(interval).__name__


class Base:
    def __init__(self, x):
        self.trail = ["base"]
        self.x = x

    def describe(self):
        return self.x


class Left(Base):
    def __init__(self, x):
        super().__init__(x)
        self.trail.append("left")

    def describe(self):
        return super().describe() * 2


class Right(Base):
    def __init__(self, x):
        super().__init__(x)
        self.trail.append("right")

    def describe(self):
        return super().describe() + 1


class Diamond(Left, Right):
    def __init__(self, x):
        super().__init__(x)
        self.trail.append("diamond")

    def describe(self):
        return super().describe() - 3


@program("zero_argument_super_in_a_diamond", lambda: rand(3))
def _(x):
    d = Diamond(x)
    return d.describe(), d.trail, super(Left, d).describe()


@program("distribution_built_inside", lambda: (rand(3), rand(3).abs() + 0.5, rand(3)))
def _(loc, scale, x):
    normal = torch.distributions.Normal(loc, scale, validate_args=False)
    return normal.log_prob(x), normal.mean, normal.stddev


class Color(enum.Enum):
    RED = 1
    GREEN = 2

    def scale(self):
        return self.value * 10


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class Access(enum.Flag):
    READ = 1
    WRITE = 2


class Permission(enum.IntFlag):
    READ = 1
    WRITE = 2


@program("enum_members_and_classes", lambda: rand(3))
def _(x):
    color = Color(2)
    named = Color["RED"]
    members = [member.name for member in Color]
    both = Access.READ | Access.WRITE
    return (x * color.scale() + Level.HIGH, x * (Permission.READ | Permission.WRITE), named is Color.RED,
            members, len(Color),
            Access.WRITE in both, Level(1) < Level.HIGH, color.name)


class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self):
        ...

    def doubled_area(self):
        return 2 * self.area()


class Square(Shape):
    def __init__(self, side):
        self.side = side

    def area(self):
        return self.side * self.side


@program("abstract_base_class_and_concrete_subclass", lambda: rand(3),
         reference=dict(xfail="2.13 breaks the graph where instantiating an abstract class "
                              "raises TypeError", why="PyTorch breaks the graph here"))
def _(x):
    try:
        Shape()
        refused = False
    except TypeError:
        refused = True
    square = Square(x)
    return square.doubled_area(), refused, isinstance(square, Shape)


class Vector:
    def __init__(self, data):
        self.data = data

    def __add__(self, other):
        if isinstance(other, Vector):
            return Vector(self.data + other.data)
        return Vector(self.data + other)

    def __radd__(self, other):
        return Vector(other + self.data)

    def __mul__(self, scalar):
        return Vector(self.data * scalar)

    __rmul__ = __mul__

    def __neg__(self):
        return Vector(-self.data)

    def __eq__(self, other):
        return isinstance(other, Vector) and self.data is other.data

    def __len__(self):
        return self.data.shape[0]

    def __iter__(self):
        return iter(self.data.unbind())

    def __getitem__(self, index):
        return self.data[index]


@program("operator_overloading_on_user_objects", lambda: rand(3))
def _(x):
    v = Vector(x)
    w = 2 * (v + 1) + v * 3
    total = sum([v, v], 0)
    return (-w).data, total.data, len(w), list(v)[0], w[1], v == v, v != w


class Celsius:
    unit = "C"
    scale = 1.0

    def __init__(self, value):
        self.value = value

    def converted(self):
        return self.value * self.scale


def _set_scale(world, compiled, args):
    Celsius.scale = args.kwargs["scale"]
    return compiled(*args.args)


@program("class_attribute_read_through_an_instance_built_inside_is_guarded",
         lambda: Args(rand(3), scale=1.0), call=_set_scale,
         changed=lambda: Args(rand(3), scale=2.5), frames_changed=2,
         reset=lambda: setattr(Celsius, "scale", 1.0))
def _(x):
    reading = Celsius(x)
    return reading.converted(), reading.unit


def _doubling(self):
    return self.value * 2


def _tripling(self):
    return self.value * 3


def _set_converter(world, compiled, args):
    Celsius.converted = args.kwargs["converter"]
    return compiled(*args.args)


@program("method_replaced_on_a_user_class_between_calls",
         lambda: Args(rand(3), converter=_doubling), call=_set_converter,
         changed=lambda: Args(rand(3), converter=_tripling), frames_changed=2,
         reset=lambda: setattr(Celsius, "converted", _ORIGINAL_CONVERTED),
         reference=dict(xfail="2.13 does not guard a method replaced on a user class (a wrong "
                              "result)", why="PyTorch returns a wrong result here"))
def _(x):
    return Celsius(x).converted()


_ORIGINAL_CONVERTED = Celsius.converted


@program("dict_subclass_argument_with_other_keys_recompiles", lambda: Record({"a": rand(2)}),
         changed=lambda: Record({"a": rand(2), "b": rand(2)}), frames_changed=2)
def _(record):
    return record.total(), len(record)


class Area:
    def __init__(self, side):
        self.side = side

    @functools.cached_property
    def value(self):
        return self.side * self.side

    def __lt__(self, other):
        return self.side < other.side

    def __str__(self):
        return f"Area({self.side})"

    def __format__(self, spec):
        return format(self.side, spec) + " sq"


@program("cached_property_ordering_and_text_of_user_objects", lambda: rand(3),
         reference=dict(xfail="2.13 cannot enter the RLock that functools.cached_property takes",
                        why="PyTorch breaks the graph here"))
def _(x):
    areas = [Area(3), Area(1), Area(2)]
    first = Area(x)
    total = first.value + first.value
    ordered = sorted(areas)
    return (total, [area.side for area in ordered], max(areas).side, min(areas, key=lambda a: -a.side).side,
            str(areas[0]), f"{areas[1]:.2f}", f"{areas[2]!s}", "value" in vars(first))


@program("simple_namespace_built_inside_and_returned", lambda: rand(3),
         reference=dict(xfail="2.13 cannot call types.SimpleNamespace", why="PyTorch breaks the graph here"))
def _(x):
    ns = types.SimpleNamespace(scale=2, offset=x)
    ns.result = ns.offset * ns.scale
    return ns, vars(ns)["scale"]


class Hyper:
    def __init__(self, depth, widths):
        self.depth = depth
        self.widths = widths
        self.extra = {"act": "relu", "dims": [1, 2]}


@program("copy_and_deepcopy_of_objects_built_inside", lambda: rand(3),
         reference=dict(xfail="2.13 copies a dict subclass without its items (a wrong result)",
                        why="PyTorch returns a wrong result here"))
def _(x):
    stats = Stats(x)
    shallow = copy.copy(stats)
    deep = copy.deepcopy(Hyper(2, [4, 8]))
    shallow.history.append("shared")
    deep.widths.append(16)
    record = copy.copy(Record({"a": x}, tag="r"))
    stack = copy.deepcopy(Stack([1, [2]]))
    return (shallow, stats.history, deep, record, stack, shallow.values is stats.values,
            type(record).__name__, record.tag)


@program("deepcopy_of_a_config_passed_in_then_changed", lambda: (rand(3), Hyper(3, [5])),
         reference=dict(frames=[1, 2], why="2.13 recompiles for a second object of the same class"))
def _(x, hyper):
    mine = copy.deepcopy(hyper)
    mine.extra["act"] = "gelu"
    mine.widths.append(7)
    del mine.depth
    return x * len(mine.widths), mine, hyper.extra["act"], hasattr(mine, "depth")


@program("delattr_and_setattr_by_name_on_a_deep_copy", lambda: (rand(3), Hyper(3, [5])),
         reference=dict(frames=[1, 2], why="2.13 recompiles for a second object of the same class"))
def _(x, hyper):
    mine = copy.deepcopy(hyper)
    for name in list(vars(mine)):
        if name.startswith("w"):
            value = getattr(mine, name)
            delattr(mine, name)
            setattr(mine, "renamed_" + name, value)
    buckets = 0
    buckets += (x > 0).long() * 4  # a number augmented by a tensor (T5's relative buckets)
    return buckets, sorted(vars(mine)), hyper.widths


SCALE_BY_TYPE = {int: 2.0, float: 0.5, typing.Union: 3.0}


@program("registries_keyed_by_classes_and_enum_members",
         lambda: (rand(3), {Color.RED: rand(3), Color.GREEN: rand(3)}))
def _(x, by_color):
    scale = SCALE_BY_TYPE.get(type(3)) * SCALE_BY_TYPE[float] * SCALE_BY_TYPE.get(typing.Union)
    return x * scale + by_color[Color.GREEN], list(by_color)


class Delegating(nn.Module):
    """A wrapper module that forwards unknown attributes to the wrapped one (as adapters do)
    and keeps a setting behind a property."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3)
        self._scale = 1.0

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.inner, name)

    @property
    def scale(self):
        return self._scale

    @scale.setter
    def scale(self, value):
        self._scale = value

    def forward(self, x):
        self.scale = 2.0
        return self.inner(x) * self.scale + self.bias.sum(), self.out_features


PROGRAMS.append(module_program(
    "module_getattr_override_and_property_setter", Delegating, lambda: rand(2, 3),
    observe=lambda world: world.scale))


class ScaledCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.calls = 0

    def __call__(self, x, scale=1.0):
        self.calls += 1
        return super().__call__(x) * scale

    def forward(self, x):
        return self.lin(x)


class CallsScaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.scaled = ScaledCall()

    def forward(self, x):
        return self.scaled(x, scale=3.0)


PROGRAMS.append(module_program(
    "module_class_overriding_call", CallsScaled, lambda: rand(1, 2), frames=[1, 2],
    observe=lambda world: world.scaled.calls))


Item = typing.TypeVar("Item")


class Box(typing.Generic[Item]):
    def __init__(self, content):
        self.content = content


class Registered(type):
    def __call__(cls, *args, **kwargs):
        instance = super().__call__(*args, **kwargs)
        instance.registered = True
        return instance


class Tracked2(metaclass=Registered):
    def __init__(self, value):
        self.value = value


class Only:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance


class Padding(str, enum.Enum):
    LONGEST = "longest"
    MAX = "max_length"


@program("generic_alias_metaclass_call_singleton_and_str_enum", lambda: rand(3),
         reset=lambda: setattr(Only, "_instance", None), frames=[1, 2],  # the singleton is made once
         reference=dict(xfail="2.13 cannot call typing's Box[int]", why="PyTorch breaks the graph here"))
def _(x):
    boxed = Box[int](x)
    tracked = Tracked2(x * 2)
    return (boxed.content, boxed.__orig_class__ is Box[int], tracked.value, tracked.registered,
            Only() is Only(), Padding("longest") is Padding.LONGEST, Padding.MAX == "max_length")


@dataclasses.dataclass(slots=True, kw_only=True)
class Slotted2:
    weight: torch.Tensor
    bias: float = 0.0


@dataclasses.dataclass(order=True, frozen=True)
class Version:
    major: int
    minor: int


@dataclasses.dataclass
class Rescaled:
    values: torch.Tensor
    factor: dataclasses.InitVar[float] = 1.0

    def __post_init__(self, factor):
        self.values = self.values * factor


@program("dataclass_slots_kw_only_order_and_init_var", lambda: rand(3),
         reference=dict(xfail="2.13 cannot sort objects by their __lt__", why="PyTorch breaks the graph here"))
def _(x):
    slotted = Slotted2(weight=x, bias=1.0)
    versions = sorted([Version(1, 2), Version(0, 9), Version(1, 0)])
    return (slotted, slotted.weight + slotted.bias, [(v.major, v.minor) for v in versions],
            Version(1, 2) > Version(1, 0), Rescaled(x, 3.0))


# -- objects that escape the region ---------------------------------------------------------


class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.last = None

    def forward(self, x):
        y = self.linear(x)
        self.last = Stats(y.detach())
        return y


PROGRAMS.append(module_program(
    "dataclass_stored_on_the_module_escapes", Holder, lambda: rand(2, 3),
    observe=lambda world: world.last))


class Last:
    point = None


LAST = Last()


@program("slotted_object_stored_on_a_global_object", lambda: rand(3),
         reset=lambda: vars(LAST).clear(), observe=lambda world: LAST.point)
def _(x):
    LAST.point = Point(x, -x)
    return x + 1


@program("record_dict_subclass_stored_in_a_global", lambda: rand(3),
         reset=lambda: globals().pop("LAST_RECORD", None),
         observe=lambda world: globals().get("LAST_RECORD"))
def _(x):
    global LAST_RECORD
    LAST_RECORD = Record(value=x * 2, tag="global")
    return x


class _Ops:
    def __floordiv__(self, other):
        return "Ops.floordiv"

    def __rfloordiv__(self, other):
        return "Ops.rfloordiv"

    def __lt__(self, other):
        return "Ops.lt"

    def __gt__(self, other):
        return "Ops.gt"


class _InheritsOps(_Ops):
    pass


class _OverridesOps(_Ops):
    def __rfloordiv__(self, other):
        return "Overrides.rfloordiv"


@program("reflected_operator_of_a_subclass_goes_first_only_where_it_overrides", lambda: rand(3))
def _(x):
    return x + 1, [_Ops() // _InheritsOps(), _Ops() // _OverridesOps(), _OverridesOps() // _Ops(),
                   _Ops() < _InheritsOps(), _InheritsOps() < _Ops(), 1 // _InheritsOps()]


class _Number:
    def __init__(self, text):
        self.text = text

    def __int__(self):
        return int(self.text)

    def __float__(self):
        return float(self.text) / 2


class _NumberList(_Number, list):
    pass


class _Indexed:
    def __index__(self):
        return 7


class _BadInt:
    def __int__(self):
        return "seven"


@program("int_and_float_of_objects_use_their_special_methods", lambda: rand(3),
         reference={"xfail": "output[4]: type <class 'int'> != <class 'float'>",
                    "why": "PyTorch 2.13 returns `__index__`'s int from `float(obj)`, not a float"})
def _(x):
    def bad():
        try:
            return int(_BadInt())
        except TypeError as error:
            return str(error)

    return x * int(_Number("3")), int(_NumberList("4")), float(_Number("5")), int(_Indexed()), float(_Indexed()), bad()
