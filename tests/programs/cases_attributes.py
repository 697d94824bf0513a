"""Corpus programs about attributes and introspection of values, especially values made in
the region: the attributes of functions, bound methods, builtin methods and partials made
or read there (`d.clear.__name__`, `f.__get__(obj)`, `hasattr(partial, name)`), `__class__`
of any value, `callable()`, and partials passed in (guarded on what they hold, not on their
identity), and `__dict__` assigned on an object made in the region."""
from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import sys
import threading
import typing

import torch

from .harness import program_decorator, rand
from .markers import allow_in_graph

PROGRAMS = []


program = program_decorator(PROGRAMS)


# -- builtin methods of values made in the region ---------------------------------------

@program("builtin_method_of_a_dict_made_in_the_region_knows_its_name_and_receiver", lambda: rand(3))
def _(x):
    d = {"a": x}
    clear = d.clear
    return x * 2, clear.__name__, clear.__qualname__, clear.__module__, [].append.__qualname__


@program("builtin_method_of_a_dict_made_in_the_region_knows_its_receiver_and_type", lambda: rand(3),
         reference={"xfail": "`is` on `d.clear.__self__`, `type(d.clear)`: GetAttrVariable has no type",
                    "why": "PyTorch 2.13 does not model the type and receiver of a dict's builtin method"})
def _(x):
    d = {"a": x}
    d.clear.__self__["b"] = x + 1
    return d, d.clear.__self__ is d, type(d.clear).__name__


@program("builtin_method_of_a_tensor_knows_its_name", lambda: rand(3))
def _(x):
    method = x.add
    return method(1), method.__name__, method.__qualname__


@program("builtin_method_called_through_its_call_slot", lambda: rand(3),
         reference={"xfail": "Unsupported method call: `__call__` of a GetAttrVariable",
                    "why": "PyTorch 2.13 cannot call `__call__` of a list's builtin method"})
def _(x):
    items = [x]
    items.append.__call__(x * 2)
    return items


# -- functions and methods --------------------------------------------------------------

class _Optimizer:
    def __init__(self, scale):
        self.scale = scale

    def step(self, x):
        return x * self.scale


def _counting(method, log):
    """How torch.optim.lr_scheduler wraps `optimizer.step`: the function, bound anew."""
    function = method.__func__
    receiver = method.__self__

    def wrapper(*args, **kwargs):
        log.append(function.__name__)
        return function.__get__(receiver, receiver.__class__)(*args, **kwargs)

    return wrapper


@program("function_get_binds_the_function_like_a_method", lambda: (rand(3), []))
def _(x, log):
    step = _counting(_Optimizer(3.0).step, log)
    return step(x), step(x + 1)


@program("function_made_in_the_region_get_binds_it", lambda: rand(3),
         reference={"xfail": "AttributeError: `__get__` of a function made in the region",
                    "why": "PyTorch 2.13 models `__get__` only on functions read from outside"})
def _(x):
    def scaled(self, y):
        return y * self.scale

    bound = scaled.__get__(_Optimizer(2.0))
    return bound(x), bound.__func__ is scaled, bound.__self__.scale, scaled.__get__(None, _Optimizer) is scaled


@program("functools_wraps_of_nested_functions_made_in_the_region", lambda: (rand(3), rand(3)))
def _(x, y):
    def add(a, b):
        """Adds."""
        return a + b

    @functools.wraps(add)
    def wrapped(a, b):
        return add(a, b)

    @functools.wraps(wrapped)
    def outer(a, b):
        return wrapped(a, b) * 2

    return outer(x, y), outer.__name__, outer.__doc__, outer.__wrapped__.__wrapped__ is add


# -- functools.partial ------------------------------------------------------------------

@program("partial_of_a_lambda_made_in_the_region", lambda: rand(3))
def _(x):
    multiply = lambda a, b: a * b  # noqa: E731
    triple = functools.partial(multiply, b=3)
    return triple(x), triple.keywords, triple.args


@program("partial_of_a_bound_method_and_a_partial_of_a_partial", lambda: rand(3),
         reference={"xfail": "a partial of a partial made in the region loses the inner keywords",
                    "why": "PyTorch 2.13 returns {} for `twice.keywords`"})
def _(x):
    step = functools.partial(_Optimizer(2.0).step)
    twice = functools.partial(functools.partial(torch.add, alpha=2), x)
    return step(x), twice(x), twice.keywords


_PARTIAL_NAMES = ("func", "args", "keywords", "__dict__", "__call__", "__class__", "__doc__", "__module__",
                  "__repr__", "__eq__", "__hash__", "__reduce__", "__new__", "__subclasshook__",
                  "__name__", "__qualname__", "__code__", "__defaults__", "__get__", "__globals__",
                  "__closure__", "__annotations__")


@program("partial_made_in_the_region_has_the_attributes_of_partial", lambda: rand(3))
def _(x):
    p = functools.partial(lambda a, b: a + b, b=x)
    present = tuple(hasattr(p, name) for name in _PARTIAL_NAMES)
    return p(x), present, callable(p)


@program("partial_made_in_the_region_knows_its_class_and_module", lambda: rand(3),
         reference={"xfail": "AttributeError reading `__class__` or `__module__` of a partial",
                    "why": "PyTorch 2.13 raises AttributeError for `p.__module__` of a partial made in the region"})
def _(x):
    p = functools.partial(lambda a, b: a + b, b=x)
    return p(x), p.__class__ is functools.partial, p.__module__


def _mul(x, y):
    return x * y


@program("partials_passed_in_are_guarded_on_what_they_hold",
         lambda: (functools.partial(_mul, y=rand(2)), rand(2)),
         changed=lambda: (functools.partial(lambda x, y: x - y, y=rand(2)), rand(2)), frames_changed=2)
def _(scale, x):
    return scale(x), scale.func.__name__


# -- classes of values and callable() ----------------------------------------------------

_Point = collections.namedtuple("_Point", ["x", "y"])


@program("class_of_a_list_tuple_and_namedtuple_makes_another", lambda: ([rand(2), rand(2)], _Point(rand(2), rand(2))))
def _(items, point):
    doubled = [item * 2 for item in items]
    return (items.__class__(doubled), tuple(doubled).__class__(doubled),
            point.__class__(*doubled), x_class_name(items[0]))


def x_class_name(tensor):
    return f"{tensor.__class__.__name__}!"


class _Meta(type):
    def __call__(cls, *args):
        return super().__call__(*args)


class _NotCallable(metaclass=_Meta):
    pass


class _Callable:
    def __call__(self):
        return 1


@program("callable_asks_the_class_of_an_instance_not_its_metaclass",
         lambda: (rand(3), _NotCallable(), _Callable()))
def _(x, plain, calls):
    return x + callable(plain) + 2 * callable(calls), callable(_NotCallable), callable(x)


# -- methods of numbers, symbolic ones too ------------------------------------------------

@program("methods_of_a_float_input_that_becomes_symbolic", lambda: (rand(2), 1.0),
         changed=lambda: (rand(2), 2.5), frames_changed=2)
def _(x, m):
    if m.is_integer():
        x = x * 2
    return x + m.conjugate(), m.as_integer_ratio()[1] > 0, m.hex()


@program("methods_of_an_int_input_that_becomes_symbolic", lambda: (rand(2), 3),
         changed=lambda: (rand(2), 6), frames_changed=2)
def _(x, n):
    return x * n.bit_length() + n.conjugate(), n.as_integer_ratio(), n.real, n.denominator


# -- id() of objects passed in --------------------------------------------------------------

class _Plain:
    pass


_FIRST, _SECOND = _Plain(), _Plain()


@program("id_of_an_object_passed_in_is_guarded_on_its_identity", lambda: (rand(2), _FIRST, id(_FIRST)),
         changed=lambda: (rand(2), _SECOND, id(_FIRST)), frames_changed=2)
def _(x, obj, expected):
    return x + 1 if id(obj) == expected else x - 1


# -- attributes stored on tensors --------------------------------------------------------

@program("attributes_stored_on_input_and_computed_tensors", lambda: (rand(3), True),
         observe=None)
def _(x, flag):
    y = x * 2
    y.offloading = flag
    y.grad = x + 1
    x.seen = flag
    return y, y.offloading, hasattr(y, "missing"), x.seen


@program("tensor_type_names_and_converts", lambda: (rand(3), rand(3)))
def _(a, b):
    half = a.type(torch.HalfTensor)
    return b.type(half.type()), half.type(), b.type("torch.DoubleTensor")


# -- text of objects made in the region ----------------------------------------------------

class _Shown:
    pass


@program("str_of_an_object_made_in_the_region_names_its_class", lambda: rand(3))
def _(x):
    text = str(_Shown())
    return x * 2, text.split(" object at")[0]


# -- classes made from constants, frames, typing -----------------------------------------

@program("namedtuple_class_made_in_the_region", lambda: (rand(2), rand(2)))
def _(a, b):
    Pair = collections.namedtuple("Pair", ["x", "y", "total"], defaults=(None,))
    pair = Pair(a, b, a + b)
    return tuple(Pair(pair.x, pair[1], pair.total * 2)), Pair.__name__, Pair._fields, Pair(a, b).total


@program("enum_functional_api_in_the_region", lambda: rand(2))
def _(x):
    Color = enum.Enum("Color", collections.OrderedDict(red=1, blue=2))
    return x * Color.blue.value, Color(1).name


@program("classes_made_in_the_region_are_named_after_the_callers_module", lambda: rand(2),
         reference={"xfail": "the classes are named after a module of torch._dynamo",
                    "why": "PyTorch 2.13 calls the factories from its own frames"})
def _(x):
    Pair = collections.namedtuple("Pair", "x y")
    return x * 2, Pair.__module__, enum.Enum("Color", "red blue").__module__


def _caller_module():
    return sys._getframe(1).f_globals["__name__"], sys._getframe(0).f_code.co_name


@program("getframe_reads_the_callers_globals_and_code", lambda: rand(2),
         reference={"xfail": "Attempted to call function marked as skipped: sys._getframe",
                    "why": "PyTorch 2.13 does not model frames"})
def _(x):
    return x + 1, _caller_module(), typing.TypeVar("U").__name__


_T = typing.TypeVar("_T")


@program("typing_forms_are_constants_in_annotations_and_dict_keys", lambda: rand(2))
def _(x):
    def apply(c: typing.Callable[[_T], _T], y: typing.List[_T]) -> _T:
        return c(y)

    table = {typing.Union[int, str]: x * 2, typing.Optional[float]: x * 3}
    return apply(torch.sum, x), table[typing.Union[str, int]]


class _Base(typing.NamedTuple):
    a: torch.Tensor
    b: torch.Tensor


class _Extended(_Base):
    pass


@program("attribute_stored_on_a_namedtuple_subclass", lambda: _Extended(rand(2), rand(2)))
def _(pair):
    pair.extra = pair.a + pair.b
    made = _Extended(pair.b, pair.a)
    made.extra = pair.extra * 2
    return pair.extra, made, made.extra


# -- descriptors ----------------------------------------------------------------------------

class _Doubling:
    def __set__(self, obj, value):
        obj.__dict__["field"] += value * 2


class _WithSetter:
    field = _Doubling()

    def __init__(self):
        self.__dict__["field"] = 0


@program("descriptor_set_runs_once_and_the_dict_entry_is_replayed", lambda: (rand(2), _WithSetter()),
         observe=None)
def _(x, obj):
    obj.field = 10
    return x + obj.field, obj.__dict__["field"]


def _read_field(obj):
    return obj.__dict__["field"]


class _ReadOnly:
    field = property(_read_field)

    def __init__(self, n):
        self.__dict__["field"] = n


@program("read_only_property_over_a_dict_entry_of_an_object_made_in_the_region", lambda: rand(2))
def _(x):
    obj = _ReadOnly(42)
    return x + obj.field, obj.field


_CLASS_DICT = type.__dict__["__dict__"].__get__


class _Namespace:
    a = 1
    b = 2


@program("descriptors_of_c_types_called_directly", lambda: rand(2, 3))
def _(x):
    shape = torch.Tensor.shape.__get__(x)
    namespace = _CLASS_DICT(_Namespace)
    return x * namespace["b"], tuple(shape), "a" in namespace, _ReadOnly.field.__get__(_ReadOnly(3))


# -- builtin classes and metaclasses --------------------------------------------------------

@program("struct_sequences_made_in_the_region", lambda: (rand(3, 2), rand(2, 4)))
def _(x, y):
    pair = torch.return_types.max((x, y))
    return pair.values * 2, pair.indices, tuple(torch.return_types.qr((2 * x, y - 1)))


_LOCAL = threading.local()


@program("attribute_stored_on_a_thread_local_object", lambda: rand(2),
         observe=lambda world: getattr(_LOCAL, "seen", None))
def _(x):
    _LOCAL.seen = x * 2
    return x + 1


class _Always(type):
    def __instancecheck__(cls, instance):
        return True


class _Anything(metaclass=_Always):
    pass


@program("isinstance_asks_the_metaclass_instancecheck",
         lambda: (rand(2), torch.nn.Parameter(rand(2)), _Namespace()))
def _(x, p, obj):
    return (x + 1 if isinstance(obj, _Anything) else x - 1, isinstance(p, torch.nn.Parameter),
            isinstance(x, torch.nn.Parameter))


@program("grad_mode_context_manager_decorates_a_nested_function", lambda: rand(2, requires_grad=True))
def _(x):
    @torch.no_grad()
    def frozen(y):
        return (y + 1) * 2

    @torch.enable_grad()
    def tracked(y):
        return y * 3

    return frozen(x), tracked(x), frozen.__name__


# -- instances of user classes as dict keys ----------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Inner:
    x: float
    y: float


@dataclasses.dataclass(frozen=True)
class _Outer:
    inner: _Inner
    n: int


@program("frozen_dataclasses_made_in_the_region_are_dict_keys_by_value", lambda: rand(2))
def _(x):
    table = {_Outer(_Inner(1.0, 2.0), 3): x * 2, _Outer(_Inner(1.0, 2.5), 3): x * 3}
    key = _Outer(_Inner(1.0, 2.0), 3)
    return table[key] + len(table), key in table, _Outer(_Inner(0.0, 0.0), 1) in table, \
        hash(key) == hash(_Outer(_Inner(1.0, 2.0), 3))


class _Token:
    pass


@program("object_made_in_the_region_is_a_dict_key_by_identity", lambda: rand(2))
def _(x):
    first, second = _Token(), _Token()
    table = {first: x, second: x * 2}
    return table[second], first in table, _Token() in table, len(table)


# -- frozen dataclasses passed to allow_in_graph functions -----------------------------------

@dataclasses.dataclass(frozen=True)
class _Batch:
    x: torch.Tensor
    y: torch.Tensor
    scale: int = dataclasses.field(kw_only=True, default=2)
    offsets: list = dataclasses.field(default_factory=lambda: [5])


@allow_in_graph
def _combine(batch):
    return batch.x * batch.y * batch.scale + batch.offsets[0]


@program("frozen_dataclass_made_in_the_region_is_an_allow_in_graph_argument",
         lambda: (rand(2, requires_grad=True), rand(2)), grad=True)
def _(x, y):
    return _combine(_Batch(x, y, scale=3))


@program("frozen_dataclass_passed_in_is_an_allow_in_graph_argument",
         lambda: (rand(2), _Batch(rand(2), rand(2))))
def _(x, batch):
    return _combine(batch) + x


class _Record:
    def __init__(self, x):
        self.start = x


@program("dunder_dict_assigned_on_an_object_made_in_the_region", lambda: rand(3),
         reference={"xfail": "`record.scale` raises AttributeError after `record.__dict__ = table`",
                    "why": "PyTorch 2.13 does not make the assigned dict the object's attributes"})
def _(x):
    record, table = _Record(x), {"scale": 2}
    record.__dict__ = table
    record.shift = x + 1
    table["scale"] = 3
    try:
        record.__dict__ = [("a", 1)]
        refused = None
    except TypeError as error:
        refused = str(error)
    return record.shift * record.scale, sorted(table), hasattr(record, "start"), \
        record.__dict__ is table, vars(record) is table, refused
