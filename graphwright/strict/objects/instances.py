"""Creating instances of classes in the region: Python's `type.__call__`.

`cls(*args, **kwargs)` runs the metaclass's `__call__` when Python code
defines one (Enum's), else `__new__` and then, when `__new__` returned an
instance of `cls`, `__init__`, each found through the MRO. Python-level
`__new__` and `__init__` are inlined; the builtin ones of the modelled bases
(object, dict, OrderedDict, defaultdict, set, frozenset, list, tuple) are
modelled here: a new instance starts as an empty `ObjectValue`, `DictValue` or `SequenceValue`
whose state the inlined code then fills; one of a subclass of int, float, complex, str or
bytes is a `ScalarInstanceValue` holding the value the base makes. A tensor subclass whose `__new__` is Python
(`nn.Parameter`) is made by that `__new__`: `Tensor._make_subclass` gives an alias of its
data with the subclass's face. Instances of other builtin bases are a graph break naming
the base.
"""
from __future__ import annotations

import collections
import itertools
import types
from typing import TYPE_CHECKING, Any

import torch

from ..._core.subclass_protocol import is_wrapper_subclass_type
from ..interpreter import graph_breaks as gb
from . import dicts, exceptions, operations, sets
from .classes import (
    DICT_BASES,
    MODELLED_BASES,
    bind,
    builtin_base,
    class_value,
    find,
    generic_set,
    instance_dict_of,
    is_python_function,
    static_function,
)
from .values import (
    ConstantValue,
    DictValue,
    ExceptionValue,
    ObjectValue,
    ScalarInstanceValue,
    SequenceValue,
    TensorValue,
    Value,
    key_value,
)
from .wrap import function_value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_TYPE_NEW = type.__dict__["__new__"]
SCALAR_BASES = (int, float, complex, str, bytes)
BUILTIN_NEW = (object.__new__, dict.__new__, list.__new__, tuple.__new__, set.__new__, frozenset.__new__,
               types.SimpleNamespace.__new__, *(base.__new__ for base in SCALAR_BASES))


def _call(tracer: "Tracer", function: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
    from ..interpreter import calls

    return calls.call_value(tracer, function, args, kwargs)


def has_python_constructor(cls: type) -> bool:
    """Whether `cls`'s `__new__` or `__init__` (or its metaclass's `__call__`) is Python code."""
    def python(owner: type, name: str) -> bool:
        raw = next((klass.__dict__[name] for klass in owner.__mro__ if name in klass.__dict__), None)
        return type(static_function(raw)) is types.FunctionType
    return python(cls, "__new__") or python(cls, "__init__") or python(type(cls), "__call__")


def call_class(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`cls(*args, **kwargs)` for a class the tracer does not model natively."""
    meta_call = find(tracer, type(cls), "__call__")
    if meta_call is not None and is_python_function(meta_call[1]):
        return _call(tracer, bind(tracer, *meta_call, "__call__", class_value(cls), type(cls)), args, kwargs)
    return type_call(tracer, cls, args, kwargs)


def type_call(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`type.__call__(cls, *args, **kwargs)`: `__new__`, then `__init__` on what it made
    (also what a metaclass's own `__call__` reaches through super())."""
    cls_value = class_value(cls)
    base = builtin_base(cls)
    owner, raw = find(tracer, cls, "__new__")
    new = static_function(raw)
    tensor = base is torch._C.TensorBase and (is_python_function(new) or new is _TENSOR_NEW)
    if base not in MODELLED_BASES and not exceptions.is_exception_class(base) and not tensor \
            and base is not type and base not in SCALAR_BASES:
        raise _unmodelled_base(tracer, cls, base)
    if tensor and is_wrapper_subclass_type(cls):
        return make_wrapper_subclass(tracer, cls, args, kwargs)
    if new is _TENSOR_NEW:
        instance = tensor_new(tracer, [cls_value, *args], kwargs)
    elif is_python_function(new):
        function = new if isinstance(new, Value) else function_value(new, None)
        instance = _call(tracer, function, [cls_value, *args], kwargs)
    elif new is _TYPE_NEW:  # a metaclass: a class statement's class, `type(name, bases, namespace)`
        from . import class_statements

        instance = class_statements.type_new(tracer, [cls_value, *args], kwargs)
    elif new in BUILTIN_NEW or exceptions.is_builtin_new(new):
        instance = new_instance(tracer, cls, args, kwargs)
    else:
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"instantiate {cls.__qualname__}",
                                 name=f"{cls.__qualname__} (its __new__ is {owner.__qualname__}.__new__, written in C)")
    made = instance.python_type()
    if not issubclass(made, cls):
        return instance
    if isinstance(instance, TensorValue) and find(tracer, made, "__init__")[1] is object.__init__:
        return instance
    init = find(tracer, made, "__init__")
    if is_python_function(init[1]):
        result = _call(tracer, bind(tracer, *init, "__init__", instance, made), args, kwargs)
        if not operations.is_none(result):
            raise tracer.user_error(TypeError(
                f"__init__() should return None, not '{result.python_type().__name__}'"))
    else:
        init_builtin(tracer, instance, args, kwargs)
    return instance


def new_instance(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """What the builtin `__new__` of `cls`'s base returns: an empty instance (a tuple's items
    are given to `__new__`)."""
    base = builtin_base(cls)
    plain = cls is base
    if exceptions.is_exception_class(base):
        return exceptions.new_exception(cls, args)
    if base is object:
        _check_abstract(tracer, cls)
        if args or kwargs:
            if find(tracer, cls, "__new__")[1] is not object.__new__:
                raise tracer.user_error(TypeError(
                    "object.__new__() takes exactly one argument (the type to instantiate)"))
            if find(tracer, cls, "__init__")[1] is object.__init__:
                raise tracer.user_error(TypeError(f"{cls.__name__}() takes no arguments"))
        return ObjectValue(None, cls)
    if base in DICT_BASES:
        return DictValue({}, dict, cls=None if cls is dict else cls)
    if base is list:
        return SequenceValue([], list, cls=None if plain else cls)
    if base is tuple:
        items = operations.iterate(tracer, args[0]) if args else []
        return SequenceValue(items, tuple, cls=None if plain else cls)
    if base in (set, frozenset):  # a frozenset's members are given to __new__, a set's to __init__
        return sets.filled(tracer, base, args[0] if args and base is frozenset else None, None if plain else cls)
    if base is types.SimpleNamespace:
        return ObjectValue(None, cls)
    if base in SCALAR_BASES:  # the value made by the base from the arguments given to __new__
        from .builtin_calls import evaluate

        made = evaluate(tracer, base, args, kwargs)
        return made if plain else ScalarInstanceValue(cls, made)
    raise _unmodelled_base(tracer, cls, base)


def make_tensor_subclass(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`torch.Tensor._make_subclass(cls, data, require_grad=False)`: `data` detached, with the
    class `cls` (the residual code makes the same of the graph's output if it leaves); a class
    with a `__torch_function__` of its own has it run on its operations from then on, as any
    Python subclass's. One that requires grad is a new leaf of autograd, which a graph cannot
    make, and a traceable wrapper subclass has no storage to share: graph breaks."""
    bound = dict(zip(("cls", "data", "require_grad"), args))
    if len(args) > 3 or set(kwargs) - {"require_grad"} or {"cls", "data"} - set(bound):
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, "Tensor._make_subclass(...)",
                                 name="a tensor subclass made with Tensor._make_subclass options")
    bound.update(kwargs)
    cls, data = bound["cls"], bound["data"]
    cls = cls.value if isinstance(cls, ConstantValue) and isinstance(cls.value, type) else None
    grad = operations.python_value(tracer, bound.get("require_grad", ConstantValue(False)))
    if cls is None or not issubclass(cls, torch.Tensor) or is_wrapper_subclass_type(cls) \
            or not isinstance(data, TensorValue) or is_wrapper_subclass_type(data.cls):
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, "Tensor._make_subclass(...)",
                                 name=f"{getattr(cls, '__qualname__', 'a class')} (made of a traceable wrapper "
                                      "subclass or a non-tensor, or one itself)")
    if grad:
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"{cls.__qualname__} requiring grad",
                                 name=f"{cls.__qualname__} that requires grad (a new leaf of autograd)")
    with tracer.graph.torch_function_off():
        made = tracer.graph.call("call_method", "detach", [data], {})
    made.cls = cls
    return made


_TENSOR_NEW = torch._C.TensorBase.__new__


def tensor_new(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`TensorBase.__new__(cls, tensor)`, what `cls(tensor)` calls for a Python subclass of
    Tensor (directly or through `super().__new__`): in eager an alias of `tensor`, in autograd's
    graph, whose class is `cls`, as `tensor.as_subclass(cls)` makes it. Other arguments (sizes,
    data) make a new tensor from Python values: graph breaks."""
    from . import torch_functions

    if len(args) != 2 or kwargs or not isinstance(args[1], TensorValue):
        cls = operations.python_value(tracer, args[0]) if args else torch.Tensor
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"instantiate {getattr(cls, '__qualname__', cls)}",
                                 name=f"{getattr(cls, '__qualname__', cls)} from arguments other than one tensor")
    return torch_functions.as_subclass(tracer, args[1], args[0])


def make_wrapper_subclass(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`cls(...)` for a traceable wrapper subclass (TwoTensor, a scaled tensor): one node that
    calls the class. Its fake is what the constructor makes of the fake arguments: such a
    constructor wraps its tensors, and AOT autograd desugars the result as it does an input."""
    values = [*args, *kwargs.values()]
    if not any(isinstance(value, TensorValue) for value in values) \
            or not all(isinstance(value, (TensorValue, ConstantValue)) for value in values):
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"instantiate {cls.__qualname__}",
                                 name=f"the tensor subclass {cls.__qualname__} from arguments other than "
                                      "tensors and constants")
    made = tracer.graph.call("call_function", cls, args, kwargs)
    if not isinstance(made, TensorValue) or type(made.fake) is not cls:
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"instantiate {cls.__qualname__}",
                                 name=f"the tensor subclass {cls.__qualname__}, whose constructor made a "
                                      f"{type(getattr(made, 'fake', made)).__qualname__}")
    return made


def _unmodelled_base(tracer: "Tracer", cls: type, base: type) -> Exception:
    what = f"the builtin class {base.__qualname__}" if cls is base else \
        f"{cls.__qualname__} (a subclass of the builtin {base.__qualname__})"
    return tracer.graph_break(gb.UNSUPPORTED_CLASS, f"instantiate {cls.__qualname__}", name=what)


def _check_abstract(tracer: "Tracer", cls: type) -> None:
    abstract = sorted(getattr(cls, "__abstractmethods__", ()))
    if abstract:
        plural = "s" if len(abstract) > 1 else ""
        raise tracer.user_error(TypeError(
            f"Can't instantiate abstract class {cls.__name__} with abstract method{plural} "
            f"{', '.join(abstract)}"))


def init_builtin(tracer: "Tracer", instance: Value, args: list[Value], kwargs: dict[str, Value]) -> None:
    """The builtin `__init__` of the instance's base: object's checks its arguments, dict's
    and list's fill the items (OrderedDict's through the instance's own `__setitem__`)."""
    cls = instance.python_type()
    base = builtin_base(cls)
    if isinstance(instance, ExceptionValue):
        exceptions.init_exception(tracer, instance, args, kwargs)
        return
    if base is type:
        if kwargs and len(args) == 1:
            raise tracer.user_error(TypeError("type.__init__() takes no keyword arguments"))
        if len(args) not in (1, 3):
            raise tracer.user_error(TypeError("type.__init__() takes 1 or 3 arguments"))
        return
    if base in (object, tuple, frozenset, *SCALAR_BASES):  # none has an __init__ of its own
        if args or kwargs:
            if find(tracer, cls, "__init__")[1] is not object.__init__:
                raise tracer.user_error(TypeError(
                    "object.__init__() takes exactly one argument (the instance to initialize)"))
            if find(tracer, cls, "__new__")[1] is object.__new__:
                raise tracer.user_error(TypeError(f"{cls.__name__}() takes no arguments"))
        return
    if base is types.SimpleNamespace:
        if args:
            raise tracer.user_error(TypeError("no positional arguments expected"))
        for name, value in kwargs.items():
            generic_set(tracer, instance, name, value)
        return
    if base is list:
        if kwargs or len(args) > 1:
            raise tracer.user_error(TypeError("list expected at most 1 argument"))
        instance.items[:] = operations.iterate(tracer, args[0]) if args else []
        return
    if base is set:
        if kwargs or len(args) > 1:
            raise tracer.user_error(TypeError(f"set expected at most 1 argument, got {len(args)}"))
        sets.initialize(tracer, instance, args)
        return
    if base is collections.defaultdict:
        factory = args[0] if args else ConstantValue(None)
        if not operations.is_none(factory) and not operations.is_callable(tracer, factory):
            raise tracer.user_error(TypeError("first argument must be callable or None"))
        generic_set(tracer, instance, "default_factory", factory)
        args = args[1:]
    if len(args) > 1:
        raise tracer.user_error(TypeError(f"{base.__name__} expected at most 1 argument, got {len(args)}"))
    pairs = itertools.chain(dicts.pairs(tracer, args[0]) if args else (), kwargs.items())
    if base is collections.OrderedDict:
        for key, value in pairs:
            operations.setitem(tracer, instance, key_value(key), value)
        return
    instance.items.update(pairs)


def make_empty(cls: type, base: type, items: tuple | None) -> Any:
    """A real, empty instance of `cls`, made by its builtin base (no `__new__` of the user's
    runs); a tuple's or frozenset's items are given here. Used by residual code and for pytree
    templates."""
    return base.__new__(cls, items) if base in (tuple, frozenset, *SCALAR_BASES) else base.__new__(cls)


def fill(instance: Any, base: type, contents: dict | list | None, state: dict) -> None:
    """Give an instance made by `make_empty` its items and attributes as the builtin base and
    `store_own` store them (no overridden `__setitem__` or `__setattr__` runs)."""
    if isinstance(contents, dict):
        for key, value in contents.items():
            base.__setitem__(instance, key, value)
    elif isinstance(contents, set):
        set.update(instance, contents)
    elif contents is not None:
        list.extend(instance, contents)
    for name, value in state.items():
        store_own(instance, name, value)


def store_own(instance: Any, name: str, value: Any) -> None:
    """Store `name` in the instance's own state, its slot or its `__dict__`, as the region's
    stores did: no descriptor (a read-only property over a `__dict__` entry, a descriptor whose
    `__set__` already ran in the trace) and no `__setattr__` of its class runs again."""
    for klass in type(instance).__mro__:
        raw = klass.__dict__.get(name)
        if type(raw) is types.MemberDescriptorType:
            raw.__set__(instance, value)
            return
    instance_dict_of(instance)[name] = value


def handle_builtin_new(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`object.__new__(cls)`, `tuple.__new__(cls, items)`, `dict.__new__(cls)`...: called
    explicitly, usually from a class's own `__new__` through super()."""
    if not args:
        raise tracer.user_error(TypeError("__new__(): not enough arguments"))
    cls = operations.python_value(tracer, args[0])
    if not isinstance(cls, type):
        raise tracer.user_error(TypeError(f"__new__(X): X is not a type object ({type(cls).__name__})"))
    return new_instance(tracer, cls, list(args[1:]), kwargs)


def is_builtin_new(target: Any) -> bool:
    return any(target is new for new in BUILTIN_NEW)
