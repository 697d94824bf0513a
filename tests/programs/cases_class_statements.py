"""Corpus programs for class statements inside the compiled region: the class built as
Python builds it (its body, metaclass, `__prepare__`, `__init_subclass__`, `__set_name__`,
`__classcell__` for zero-argument super(), decorators, dataclasses, ABCs, `type(name, bases,
namespace)`), its instances, and a class that leaves the region, made anew on each call.

TorchDynamo breaks on every class statement (`enable_trace_load_build_class` is off by
default), so under `GW_CORPUS_REFERENCE=1` these programs run without fullgraph and their
`reference` states PyTorch's frame counts."""
from __future__ import annotations

import abc
import collections
import dataclasses
import enum
import functools
import typing

import torch

from .harness import Program, program_decorator, rand
from .markers import graph_break

PROGRAMS: list[Program] = []

program = program_decorator(PROGRAMS)

_DYNAMO_BREAKS = "TorchDynamo breaks on LOAD_BUILD_CLASS (enable_trace_load_build_class is off by default)"


def _breaks_in_pytorch(frames: int | list[int], xfail: str | None = None) -> dict:
    """PyTorch's run: the statement is a graph break, and the class it makes (new on each call)
    is guarded by identity by the code after it, which recompiles on every call."""
    fields = {"fullgraph": False, "frames": frames, "why": _DYNAMO_BREAKS}
    if xfail is not None:
        fields["xfail"] = xfail
    return fields


def describe(value):
    """What a user can observe of a value whose class may be made by the region (a class made
    anew is another object in each run, so it is compared by what it is, not by identity)."""
    if isinstance(value, type):
        return ("class", value.__qualname__, value.__module__, [k.__qualname__ for k in value.__mro__],
                sorted(name for name in vars(value) if not name.startswith("__")), type(value).__name__)
    if isinstance(value, (list, tuple)):
        return [describe(item) for item in value]
    if type(value).__module__ == __name__ and "<locals>" in type(value).__qualname__:
        return ("instance", describe(type(value)), {k: describe(v) for k, v in vars(value).items()})
    return value


def _described(world, compiled, args):
    return describe(compiled(*args.args, **args.kwargs))


# -- the class and its instances ------------------------------------------------------------


@program("class_statement_with_methods_and_a_class_attribute", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Scaler:
        scale = 3

        def __init__(self, shift):
            self.shift = shift

        def apply(self, t):
            return t * self.scale + self.shift

    return Scaler(1.0).apply(x), Scaler.scale


@program("class_statement_subclass_reaches_its_base_by_zero_argument_super", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Base:
        def __init__(self, t):
            self.t = t

        def value(self):
            return self.t * 2

    class Child(Base):
        def __init__(self, t):
            super().__init__(t + 1)

        def value(self):
            return super().value() - 1

    child = Child(x)
    return child.value(), isinstance(child, Base), [k.__name__ for k in Child.__mro__]


@program("class_statement_property_with_setter_staticmethod_and_classmethod", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Box:
        def __init__(self, t):
            self._t = t

        @property
        def t(self):
            return self._t

        @t.setter
        def t(self, value):
            self._t = value * 2

        @staticmethod
        def twice(t):
            return t * 2

        @classmethod
        def of(cls, t):
            return cls(t)

    box = Box.of(x)
    box.t = box.t + 1
    return box.t, Box.twice(x), type(Box.__dict__["t"]).__name__


@program("class_statement_dunder_operators_len_getitem_call_and_repr", lambda: rand(4),
         reference=_breaks_in_pytorch([1, 2], xfail="AttributeError: 'Vec' object has no attribute 't' "
                                                    "(the instance `__add__` makes loses its attribute)"))
def _(x):
    class Vec:
        def __init__(self, t):
            self.t = t

        def __add__(self, other):
            return Vec(self.t + other.t)

        def __len__(self):
            return self.t.shape[0]

        def __getitem__(self, index):
            return self.t[index]

        def __call__(self, k):
            return self.t * k

        def __repr__(self):
            return f"Vec({len(self)})"

    v = Vec(x) + Vec(x)
    return v(3), len(v), v[1], repr(v), f"{v}"


@program("class_statement_eq_and_hash_decide_set_membership", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2], xfail="a set of instances with a Python __hash__ and "
                                                    "__eq__ gets the wrong length"))
def _(x):
    class Key:
        def __init__(self, k):
            self.k = k

        def __eq__(self, other):
            return isinstance(other, Key) and self.k == other.k

        def __hash__(self):
            return hash(self.k)

    keys = {Key(1), Key(1), Key(2)}
    return x * len(keys), Key(1) == Key(1), Key(1) != Key(2), Key(3) in keys


@program("class_statement_with_slots", lambda: rand(3), reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Pair:
        __slots__ = ("a", "b")

        def __init__(self, a):
            self.a = a
            self.b = 2

    pair = Pair(x)
    try:
        pair.c = 1
        refused = False
    except AttributeError:
        refused = True
    return pair.a * pair.b, hasattr(pair, "__dict__"), refused


@program("class_statement_methods_read_the_enclosing_functions_variables", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    k = 3

    class Closure:
        def apply(self):
            return x * k

    k = 4  # the method reads the variable when it runs
    return Closure().apply()


@program("class_statement_qualname_module_and_nested_class", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Outer:
        """Outer's doc."""

        class Inner:
            pass

    return x + 1, Outer.__qualname__, Outer.Inner.__qualname__, Outer.__module__, Outer.__name__, Outer.__doc__


@program("class_statement_class_attribute_changed_through_type_of_self", lambda: rand(3),
         reference=_breaks_in_pytorch([0, 0]))
def _(x):
    class Counter:
        calls = 0

        def bump(self):
            type(self).calls += 1
            return self

    counter = Counter().bump().bump()
    Counter.extra = x * 2
    del Counter.bump
    return Counter.calls, Counter.extra, counter.calls, hasattr(counter, "bump")


@program("class_statement_in_a_loop_makes_a_new_class_each_time", lambda: rand(3),
         reference=_breaks_in_pytorch([0, 0]))
def _(x):
    made = []
    for i in range(3):
        class Step:
            k = i
        made.append(Step)
    return x * sum(step.k for step in made), made[0] is made[1], len({*made})


@program("class_statement_classes_as_registry_keys", lambda: rand(3), reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Relu:
        pass

    class Tanh:
        pass

    table = {Relu: torch.relu, Tanh: torch.tanh}
    return table[Relu](x) + table[Tanh](x), Relu in table, list(table)[1].__name__


# -- how the class is built -----------------------------------------------------------------


@program("class_statement_init_subclass_of_a_base_made_in_the_region", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Plugin:
        names = []

        def __init_subclass__(cls, tag="plain", **kwargs):
            super().__init_subclass__(**kwargs)
            cls.tag = tag
            Plugin.names.append(cls.__name__)

    class Loud(Plugin, tag="loud"):
        pass

    class Louder(Loud):
        pass

    return x + 1, Loud.tag, Louder.tag, Plugin.names


class Registered:
    """A base from outside whose `__init_subclass__` files every subclass by name."""

    kinds: dict = {}

    def __init_subclass__(cls, kind="", **kwargs):
        super().__init_subclass__(**kwargs)
        cls.kind = kind
        Registered.kinds[cls.__qualname__] = describe(cls)


@program("class_statement_init_subclass_of_a_base_from_outside_files_the_class", lambda: rand(3),
         observe=lambda world: dict(Registered.kinds), reset=Registered.kinds.clear,
         frames=[1, 2, 2], repeats=3, reference=_breaks_in_pytorch([1, 2, 3]))
def _(x):
    class Local(Registered, kind="local"):
        pass

    return x * 2, Local.kind


@program("class_statement_init_subclass_refuses_an_unknown_keyword", lambda: rand(3),
         reference=_breaks_in_pytorch([0, 0]))
def _(x):
    try:
        class Local(flavour="sweet"):
            pass
        message = "made"
    except TypeError as error:
        message = str(error)
    return x + 1, message


@program("class_statement_set_name_of_a_descriptor_made_in_the_region", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Plus:
        def __init__(self, k):
            self.k = k

        def __set_name__(self, owner, name):
            self.name = name
            self.owner = owner.__name__

        def __get__(self, obj, objtype=None):
            if obj is None:
                return self
            return obj.__dict__[self.name + "_raw"] + self.k

    class Holder:
        one = Plus(1)
        two = Plus(2)

    holder = Holder()
    holder.one_raw = x
    holder.two_raw = x * 2
    return holder.one, holder.two, Holder.one.name, Holder.two.owner


@program("class_statement_metaclass_with_prepare_new_and_init", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Meta(type):
        @classmethod
        def __prepare__(mcls, name, bases, **kwargs):
            return {"base_scale": 5}

        def __new__(mcls, name, bases, namespace, **kwargs):
            namespace["made_by"] = mcls.__name__
            return super().__new__(mcls, name, bases, namespace)

        def __init__(cls, name, bases, namespace, **kwargs):
            super().__init__(name, bases, namespace)
            cls.ready = kwargs.get("ready", False)

    class Model(metaclass=Meta, ready=True):
        scale = base_scale * 2  # noqa: F821 (put in the namespace by __prepare__)

    return x * Model.scale, Model.made_by, Model.ready, type(Model).__name__


@program("class_statement_with_a_class_decorator", lambda: rand(3), reference=_breaks_in_pytorch([1, 2]))
def _(x):
    registry = {}

    def register(cls):
        registry[cls.__name__] = cls
        cls.registered = True
        return cls

    @register
    class Local:
        pass

    return x + 1, Local.registered, list(registry), registry["Local"] is Local


@program("type_called_with_three_arguments_makes_a_class", lambda: rand(3),
         reference={"fullgraph": False, "frames": [1, 1], "why": "TorchDynamo breaks on `type(name, bases, "
                    "namespace)`"})
def _(x):
    Made = type("Made", (), {"k": 3, "apply": lambda self, t: t * self.k})
    return Made().apply(x), Made.__name__, Made.__qualname__


@program("class_statement_with_a_generic_base_keeps_its_original_bases", lambda: rand(3),
         reference=_breaks_in_pytorch([0, 0]))
def _(x):
    class Box(typing.Generic[_T]):
        def __init__(self, value):
            self.value = value

    return Box[int](x).value * 2, [k.__name__ for k in Box.__mro__], len(Box.__orig_bases__)


_T = typing.TypeVar("_T")


@program("dataclass_made_in_the_region_with_defaults_and_a_factory", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    @dataclasses.dataclass
    class Point:
        a: int
        b: float = 2.0
        seen: list = dataclasses.field(default_factory=list)

    point = Point(3)
    point.seen.append(x)
    return (point.a * point.b, point.seen[0] * 2, point == Point(3, 2.0, [x]),
            [f.name for f in dataclasses.fields(Point)], Point(1).seen is not point.seen)


@program("abstract_base_class_made_in_the_region_refuses_instantiation", lambda: rand(3),
         reference=_breaks_in_pytorch([0, 0]))
def _(x):
    class Shape(abc.ABC):
        @abc.abstractmethod
        def area(self):
            ...

    class Square(Shape):
        def __init__(self, side):
            self.side = side

        def area(self):
            return self.side * self.side

    try:
        Shape()
        message = "made"
    except TypeError as error:
        message = str(error)
    return Square(x).area(), message, isinstance(Square(x), Shape), sorted(Shape.__abstractmethods__)


@program("enum_class_statement_in_the_region", lambda: rand(3), reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Color(enum.Enum):
        RED = 1
        GREEN = 2

        def doubled(self):
            return self.value * 2

    return x * Color.GREEN.doubled(), Color(1).name, [member.name for member in Color]


@program("total_ordering_completes_a_class_made_in_the_region", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    @functools.total_ordering
    class Version:
        def __init__(self, number):
            self.number = number

        def __lt__(self, other):
            return self.number < other.number

        def __eq__(self, other):
            return self.number == other.number

    return x + 1, Version(1) <= Version(2), Version(3) > Version(2), Version(2) >= Version(3)


@program("autograd_function_made_in_the_region", lambda: rand(3, requires_grad=True), grad=True,
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    return Double.apply(x).sum()


@program("autograd_function_made_in_the_region_reads_the_enclosing_functions_variables",
         lambda: rand(3, requires_grad=True), grad=True, reference=_breaks_in_pytorch([1, 2]))
def _(x):
    scale = 3.0

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * scale

        @staticmethod
        def backward(ctx, grad):
            return grad * scale

    return Scale.apply(x).sum()


@program("module_class_made_in_the_region", lambda: rand(3), reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Twice(torch.nn.Module):
        def forward(self, t):
            return t * 2

    return Twice()(x)


@program("masked_sum_defines_an_autograd_function_class", lambda: rand(3, 4),
         reference=_breaks_in_pytorch([1, 1]))
def _(x):
    return torch.masked.sum(x, 1, mask=x > 0)


# -- a class that leaves the region ---------------------------------------------------------


_SEEN: list = []


def _each_call_a_new_class(world, compiled, args):
    made, instance, total = compiled(*args.args)
    fresh = all(made is not before for before in _SEEN)
    _SEEN.append(made)
    return describe(made), describe(instance), total, fresh, instance.norm() is not None, type(instance) is made


@program("class_statement_returned_with_an_instance_is_made_anew_each_call", lambda: rand(3),
         call=_each_call_a_new_class, reset=_SEEN.clear, reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Point:
        origin = 0.0

        def __init__(self, t):
            self.t = t

        def norm(self):
            return (self.t - self.origin).abs().sum()

    point = Point(x)
    return Point, point, point.norm()


def _each_call_new_named_tuple_and_enum(world, compiled, args):
    pair, color, total = compiled(*args.args)
    fresh = all(pair is not before[0] and color is not before[1] for before in _SEEN)
    _SEEN.append((pair, color))
    return pair._fields, tuple(pair(1, 2)), pair.__module__, [member.name for member in color], total, fresh


@program("named_tuple_and_enum_classes_made_in_the_region_are_made_anew_each_call", lambda: rand(3),
         call=_each_call_new_named_tuple_and_enum, reset=_SEEN.clear,
         reference=_breaks_in_pytorch([1, 2], xfail="the classes are named after a module of torch._dynamo"))
def _(x):
    Pair = collections.namedtuple("Pair", "first second")
    Color = enum.Enum("Color", "RED GREEN")
    return Pair, Color, x * Color.GREEN.value


@program("class_statement_subclass_and_its_base_returned", lambda: rand(3), call=_described,
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Base:
        def who(self):
            return "base"

    class Child(Base):
        def who(self):
            return "child of " + super().who()

    return Child, Child().who(), x + 1


_KEPT: dict = {}


@program("instance_of_a_class_made_in_the_region_stored_in_a_global", lambda: rand(3),
         observe=lambda world: {key: describe(item) for key, item in _KEPT.items()}, reset=_KEPT.clear,
         frames=[1, 2, 3], repeats=3, reference=_breaks_in_pytorch([1, 2, 3]))
def _(x):
    # the instance the dict held is read (its class, made by the last call, guarded) to replay
    # the store: each call recompiles, as in PyTorch
    class Node:
        def __init__(self, t):
            self.t = t

    _KEPT["last"] = Node(x)
    return x + 1


@program("class_statement_before_a_graph_break_is_made_anew_for_the_rest", lambda: rand(3),
         fullgraph=False, frames=[2, 3])
def _(x):
    y = x * 2

    class Offset:
        k = 5

        def apply(self, t):
            return t + self.k

    graph_break()
    return Offset().apply(y), Offset.__name__


@program("class_statement_whose_body_breaks_runs_in_python", lambda: rand(3),
         fullgraph=False, frames=[2, 3])
def _(x):
    y = x * 2

    class Offset:
        graph_break()
        k = 5

    return y + Offset.k


class _Annotated:
    size: int


class _Unannotated(_Annotated):
    pass


@program("class_statement_annotations_are_each_classes_own", lambda: rand(3),
         reference=_breaks_in_pytorch([1, 2]))
def _(x):
    class Base:
        size: int

    class Derived(Base):
        pass

    class Other(Base):
        size: str

    derived = Derived.__annotations__  # made empty on first read, then the class's own
    derived["late"] = float
    return x + 1, Base.__annotations__, Derived.__annotations__, Other.__annotations__, \
        derived is Derived.__annotations__, _Unannotated.__annotations__
