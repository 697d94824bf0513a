"""What calling a symbolic value means: inline it, record it in the graph, or break.

`call_value` is the one dispatch point. Python functions (the user's, and the
methods of torch.nn modules) are inlined into a new `Frame`; torch functions,
Tensor methods and operators become graph nodes; builtins and methods of
modelled values go to `builtin_calls` and `methods`. Before anything else,
`marked_behaviour` asks whether the callable carries a user marking
(graph_break, disable, and the rules registry of nonstrict_trace and friends).
"""
from __future__ import annotations

import abc
import functools
import inspect
import sys
import types
import weakref
from typing import TYPE_CHECKING, Any

import torch

from ..._core import rules
from ..guards.sources import AttrSource, ItemSource, WeakrefSource
from ..marked import marked_calls, markers
from ..objects import builtin_calls, methods, operations
from ..objects.values import (
    ConstantValue,
    DictValue,
    FunctionValue,
    IteratorValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    SequenceValue,
    Value,
)
from ..objects.wrap import function_value, is_torch_function
from ..residual.callees import global_module_hooks
from . import contexts
from . import graph_breaks as gb

if TYPE_CHECKING:
    from .tracer import Tracer

_UNSUPPORTED_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_AUTOGRAD_CALLS = {torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad}
_GLOBAL_STATE_CALLS = {torch.manual_seed, torch.seed, torch.set_default_dtype,
                       torch.set_default_device, torch.use_deterministic_algorithms,
                       torch.set_printoptions, torch.set_num_threads}


def call_value(tracer: "Tracer", function: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if isinstance(function, FunctionValue):
        return inline(tracer, function, args, kwargs)
    if isinstance(function, MethodValue):
        return methods.call_method(tracer, function.receiver, function.name, args, kwargs)
    if isinstance(function, ModuleValue):
        return call_module(tracer, function, args, kwargs)
    if isinstance(function, ConstantValue) and type(function.value) is weakref.ref and not args:
        source = None if function.source is None else WeakrefSource(function.source)
        return tracer.wrap(function.value(), source)
    if isinstance(function, ConstantValue) and type(function.value) is functools.partial:
        return _call_partial(tracer, function, args, kwargs)
    if isinstance(function, ConstantValue):
        return call_constant(tracer, function.value, args, kwargs)
    if isinstance(function, SequenceValue) and function.cls is torch.nn.Sequential:
        result = args[0]
        for child in function.items:
            result = call_value(tracer, child, [result], {})
        return result
    if isinstance(function, ObjectValue):
        from ..objects import attributes

        method = attributes.lookup(tracer, function, "__call__")
        if isinstance(method, FunctionValue):
            return inline(tracer, method, args, kwargs)
    raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"call {function!r}",
                             name=function.python_type().__name__)


def marked_behaviour(tracer: "Tracer", target: Any, args: list[Value] = (), kwargs: dict = {}) -> Value | None:
    """Raise the graph break a user marking asks for, or return the value of a call to a
    callable marked in the rules registry (nonstrict_trace and friends: `marked_calls`)."""
    dynamo = sys.modules.get("torch._dynamo")
    if target is markers.graph_break or (dynamo is not None and target is getattr(dynamo, "graph_break", None)):
        shown_args = [getattr(arg, "value", arg) for arg in args]
        shown_kwargs = {key: getattr(arg, "value", arg) for key, arg in kwargs.items()}
        message = shown_args[0] if shown_args else shown_kwargs.get("msg") or None
        raise tracer.graph_break(
            gb.USER_GRAPH_BREAK,
            f"Called `graphwright.graph_break()` with args `{shown_args}`, kwargs `{shown_kwargs}`",
            msg=message)
    if getattr(target, "_graphwright_disabled", False) or getattr(target, "_torchdynamo_disable", False):
        name = getattr(target, "__qualname__", repr(target))
        raise tracer.graph_break(gb.DISABLED_FUNCTION, f"call to disabled {name}", name=name)
    if rules.marking_of(target) is not None:
        # marked callables see plain Python numbers: a symbolic int is specialised at the call site
        args = [_specialised(tracer, arg) for arg in args]
        kwargs = {key: _specialised(tracer, arg) for key, arg in kwargs.items()}
    return marked_calls.call_marked(tracer, target, list(args), kwargs)


def _specialised(tracer: "Tracer", value: Value) -> Value:
    if operations.is_symbolic(value):
        return ConstantValue(operations.python_value(tracer, value))
    return value


def call_constant(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    marked = marked_behaviour(tracer, target, args, kwargs)
    if marked is not None:
        return marked
    if isinstance(target, functools._lru_cache_wrapper):
        # the cache is an optimisation of a pure function: trace the function itself
        return call_value(tracer, tracer.wrap(target.__wrapped__, None), args, kwargs)
    compiled_original = getattr(target, "_graphwright_original", None)
    if compiled_original is not None:
        return call_value(tracer, tracer.wrap(compiled_original, None), args, kwargs)
    handler = builtin_calls.handler_for(target)
    if handler is not None:
        return handler(tracer, args, kwargs)
    if target in _AUTOGRAD_CALLS:
        raise tracer.graph_break(gb.AUTOGRAD_CALL, f"call {target.__qualname__}", name=target.__qualname__)
    if target in _GLOBAL_STATE_CALLS:
        raise tracer.graph_break(gb.GLOBAL_STATE_CALL, f"call {target.__name__}", name=f"torch.{target.__name__}")
    if isinstance(target, type):
        return instantiate(tracer, target, args, kwargs)
    if is_torch_callable(target):
        return tracer.graph.call("call_function", target, args, kwargs)
    if type(target) is types.FunctionType:
        return inline(tracer, function_value(target, None), args, kwargs)
    if builtin_calls.is_pure_on_constants(target):
        return builtin_calls.evaluate(tracer, target, args, kwargs)
    name = getattr(target, "__qualname__", None) or repr(target)
    module = getattr(target, "__module__", None)
    raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"call {module}.{name}",
                             name=f"{module}.{name}" if module else name)


def _call_partial(tracer: "Tracer", partial: ConstantValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`functools.partial(f, *bound, **keywords)(*args)`, its stored arguments read by source."""
    target, source = partial.value, partial.source

    def stored(table: str, key: Any, real: Any) -> Value:
        return tracer.wrap(real, None if source is None else ItemSource(AttrSource(source, table), key))

    bound = [stored("args", index, arg) for index, arg in enumerate(target.args)]
    keywords = {key: stored("keywords", key, arg) for key, arg in target.keywords.items()}
    function = tracer.wrap(target.func, None if source is None else AttrSource(source, "func"))
    return call_value(tracer, function, [*bound, *args], {**keywords, **kwargs})


def is_torch_callable(target: Any) -> bool:
    if getattr(target, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor):
        return True
    return is_torch_function(target) and callable(target)


def instantiate(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if cls in contexts.GRAD_MODE_CLASSES or cls in contexts.AUTOCAST_CLASSES:
        python_args = [operations.python_value(tracer, arg) for arg in args]
        python_kwargs = {key: operations.python_value(tracer, arg) for key, arg in kwargs.items()}
        return contexts.make_context(tracer, cls, python_args, python_kwargs)
    if issubclass(cls, BaseException):
        return builtin_calls.evaluate(tracer, cls, args, kwargs)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        bound = _bind(tracer, cls.__new__, [ConstantValue(cls), *args], kwargs)
        return SequenceValue([bound[field] for field in cls._fields], tuple, cls=cls)
    if issubclass(cls, torch.nn.Module) and cls.__module__.startswith("torch.nn.modules"):
        return _stateless_torch_module(tracer, cls, args, kwargs)
    if cls.__module__.startswith("torch") and all(operations.is_constant_tree(v)
                                                  for v in [*args, *kwargs.values()]):
        return builtin_calls.evaluate(tracer, cls, args, kwargs)
    if issubclass(cls, torch.nn.Module) or cls.__new__ is not object.__new__ \
            or type(cls) not in (type, abc.ABCMeta) or cls.__module__ == "builtins":
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"instantiate {cls.__qualname__}",
                                 name=cls.__qualname__)
    instance = ObjectValue(None, cls)
    init = cls.__init__
    if type(init) is types.FunctionType:
        inline(tracer, function_value(init, None).bind(instance), args, kwargs)
    elif args or kwargs:
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"instantiate {cls.__qualname__}",
                                 name=cls.__qualname__)
    return instance


def _stateless_torch_module(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """A torch.nn module built inside the region (a loss, an activation): fine while it has no state."""
    module = builtin_calls.evaluate(tracer, cls, args, kwargs).value
    if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"instantiate {cls.__qualname__} with state",
                                 name=f"{cls.__qualname__} (it has parameters or buffers)")
    return ModuleValue(module)


def call_module(tracer: "Tracer", module: ModuleValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`module(*args, **kwargs)`: forward pre-hooks, forward, forward hooks, as nn.Module runs them."""
    from ..objects import attributes

    real = module.module
    if real._backward_hooks or real._backward_pre_hooks or global_module_hooks():
        name = type(real).__name__
        raise tracer.graph_break(gb.MODULE_HOOKS, f"hooks on {name}", name=name)
    if not (real._forward_hooks or real._forward_pre_hooks):
        tracer.add_guard(module.source, "no_hooks")
        return call_value(tracer, attributes.load_attr(tracer, module, "forward"), args, kwargs)
    for hook_id, hook in _hooks(tracer, module, "_forward_pre_hooks"):
        if hook_id in real._forward_pre_hooks_with_kwargs:
            result = call_value(tracer, hook, [module, SequenceValue(args, tuple), DictValue(kwargs)], {})
            if not operations.is_none(result):
                new_args, new_kwargs = operations.iterate(tracer, result)
                args, kwargs = operations.iterate(tracer, new_args), operations.dict_items(tracer, new_kwargs)
        else:
            result = call_value(tracer, hook, [module, SequenceValue(args, tuple)], {})
            if not operations.is_none(result):
                args = operations.iterate(tracer, result) if isinstance(result, SequenceValue) \
                    and result.kind is tuple else [result]
    output = call_value(tracer, attributes.load_attr(tracer, module, "forward"), args, kwargs)
    for hook_id, hook in _hooks(tracer, module, "_forward_hooks"):
        hook_args = [module, SequenceValue(args, tuple)]
        if hook_id in real._forward_hooks_with_kwargs:
            hook_args.append(DictValue(kwargs))
        result = call_value(tracer, hook, [*hook_args, output], {})
        if not operations.is_none(result):
            output = result
    return output


def _hooks(tracer: "Tracer", module: ModuleValue, table: str) -> list[tuple[Any, Value]]:
    """The hooks of one table, read by source so that adding or removing one recompiles."""
    from ..guards.sources import AttrSource

    real = getattr(module.module, table)
    source = None if module.source is None else AttrSource(module.source, table)
    tracer.add_guard(source, "keys", tuple(real))
    return [(hook_id, tracer.wrap(hook, None if source is None else ItemSource(source, hook_id)))
            for hook_id, hook in real.items()]


def inline(tracer: "Tracer", function: FunctionValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """Run a Python function's bytecode in a new frame on these symbolic arguments."""
    from .frame import Frame

    code = function.code
    if code.co_flags & _UNSUPPORTED_FLAGS or (code.co_flags & inspect.CO_GENERATOR
                                              and code.co_name != "<genexpr>"):
        raise tracer.graph_break(gb.GENERATOR, f"call coroutine {function.name}", name=function.name)
    if function.fn is not None:
        self_args = args if function.bound_self is None else [function.bound_self, *args]
        marked = marked_behaviour(tracer, function.fn, self_args, kwargs)
        if marked is not None:
            return marked
    if function.bound_self is not None:
        args = [function.bound_self, *args]
    local_values = bind_arguments(tracer, function, args, kwargs)
    frame = Frame(tracer, code, function.globals, local_values, function.closure)
    if code.co_flags & inspect.CO_GENERATOR:
        # Run the generator expression to exhaustion now: its items are symbolic, so nothing
        # is lost unless it interleaves side effects with its consumer.
        frame.yielded = []
        frame.run()
        return IteratorValue(frame.yielded)
    return frame.run()


def bind_arguments(tracer: "Tracer", function: FunctionValue, args: list[Value],
                   kwargs: dict[str, Value]) -> dict[str, Value]:
    """Parameters to values, as CPython binds a call (positional, keyword, defaults, * and **)."""
    code = function.code
    names = code.co_varnames
    positional = names[:code.co_argcount]
    keyword_only = names[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    index = code.co_argcount + code.co_kwonlyargcount
    star = names[index] if code.co_flags & inspect.CO_VARARGS else None
    index += bool(star)
    double_star = names[index] if code.co_flags & inspect.CO_VARKEYWORDS else None

    def fail(message: str) -> Exception:
        return tracer.user_error(TypeError(f"{function.name}() {message}"))

    bound: dict[str, Value] = dict(zip(positional, args))
    extra = list(args[len(positional):])
    if extra and star is None:
        raise fail(f"takes {len(positional)} positional arguments but {len(args)} were given")
    extra_kwargs: dict[str, Value] = {}
    for key, value in kwargs.items():
        if key in positional[:code.co_posonlyargcount] or key not in positional + keyword_only:
            if double_star is None:
                raise fail(f"got an unexpected keyword argument '{key}'")
            extra_kwargs[key] = value
        elif key in bound:
            raise fail(f"got multiple values for argument '{key}'")
        else:
            bound[key] = value
    defaults = function.defaults
    for offset, name in enumerate(positional[len(positional) - len(defaults):]):
        if name not in bound:
            bound[name] = _as_value(tracer, defaults[offset], function.source, "__defaults__", offset)
    for name in keyword_only:
        if name not in bound and name in function.kwdefaults:
            bound[name] = _as_value(tracer, function.kwdefaults[name], function.source, "__kwdefaults__", name)
    missing = [name for name in positional + keyword_only if name not in bound]
    if missing:
        raise fail(f"missing required argument '{missing[0]}'")
    if star is not None:
        bound[star] = SequenceValue(extra, tuple)
    if double_star is not None:
        bound[double_star] = DictValue(extra_kwargs)
    return bound


def _as_value(tracer: "Tracer", default: Any, function_source: Any, table: str, key: Any) -> Value:
    """A default: symbolic already (made while tracing), or read by source (it may be mutated)."""
    if isinstance(default, Value):
        return default
    source = None if function_source is None else ItemSource(AttrSource(function_source, table), key)
    return tracer.wrap(default, source)


def _bind(tracer: "Tracer", fn: Any, args: list[Value], kwargs: dict[str, Value]) -> dict[str, Value]:
    return bind_arguments(tracer, function_value(fn, None), args, kwargs)

