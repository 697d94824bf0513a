"""What calling a symbolic value means: inline it, record it in the graph, or break.

`call_value` is the one dispatch point. Python functions (the user's, and
torch's own but for its operators) are inlined into a new `Frame`; torch
operators, Tensor methods and Python operators become graph nodes; builtins and
methods of modelled values go to `builtin_calls` and `methods`. Before anything
else, `modelled_call` asks whether the callable has a meaning of its own: a
user marking (graph_break, disable, the rules registry of nonstrict_trace and
friends), a library function modelled in `builtin_calls`, or an autograd or
global-state call.
"""
from __future__ import annotations

import enum
import functools
import inspect
import sys
import types
import weakref
from typing import TYPE_CHECKING, Any

import torch

from .. import operators
from ..guards.sources import AttrSource, FunctionSource, ItemSource, WeakReferenceSource, WeakrefSource
from ..marked import marked_calls, markers
from ..objects import (
    builtin_calls,
    classes,
    descriptors,
    instances,
    introspection,
    methods,
    numpy_calls,
    operations,
    optimizer_state,
    torch_functions,
)
from ..objects.class_creation import made_class
from ..objects.values import (
    ConstantValue,
    ContextValue,
    DescriptorValue,
    DictValue,
    FunctionValue,
    MethodValue,
    ModuleValue,
    PartialValue,
    SequenceValue,
    Value,
)
from ..objects.wrap import compiled_original, function_value, is_cached_function, is_graph_operator, state_source
from ..residual.call_routing import never_traced
from . import contexts, module_calls
from . import graph_breaks as gb
from .graph_builder import is_graph_argument

if TYPE_CHECKING:
    from .tracer import Tracer

_UNSUPPORTED_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_AUTOGRAD_CALLS = {torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad}
# Queries of the state a trace models itself (grad mode and autocast, entered and left in the
# region): their answers follow from the entry's grad-mode and global-state guards.
_MODELLED_STATE = {getattr(module, name) for module in (torch, torch._C) for name in dir(module)
                   if "grad_enabled" in name or "autocast" in name or "deterministic_algorithms" in name}
# The torch function state, which the tracer models (`with DisableTorchFunctionSubclass()` in the
# region) from the state the call starts with (guarded).
_TORCH_FUNCTION_QUERIES = (torch._C._is_torch_function_enabled, torch._C._is_torch_function_all_disabled)
_GLOBAL_STATE_CALLS = {torch.manual_seed, torch.seed, torch.set_default_dtype,
                       torch.set_default_device, torch.set_printoptions, torch.set_num_threads}


def call_value(tracer: "Tracer", function: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if isinstance(function, FunctionValue):
        return inline(tracer, function, args, kwargs)
    if isinstance(function, MethodValue):
        return methods.call_method(tracer, function.receiver, function.name, args, kwargs)
    if isinstance(function, ModuleValue):
        return call_module(tracer, function, args, kwargs)
    if isinstance(function, PartialValue):
        return call_value(tracer, function.func, [*function.args, *args], {**function.keywords, **kwargs})
    if isinstance(function, operators.TransformedFunction):
        return function.call(tracer, args, kwargs)
    if isinstance(function, ContextValue):
        return contexts.decorate(tracer, function, args, kwargs)
    if isinstance(function, DescriptorValue) and function.cls is staticmethod:  # callable since 3.10
        return call_value(tracer, function.parts["__func__"], args, kwargs)
    if isinstance(function, ConstantValue) and type(function.value) is weakref.ref and not args:
        source = function.source
        if source is not None:
            source = source.target if isinstance(source, WeakReferenceSource) else WeakrefSource(source)
        return tracer.wrap(function.value(), source)
    if isinstance(function, ConstantValue) and type(function.value) is functools.partial:
        return call_value(tracer, tracer.wrap(function.value, function.source), args, kwargs)
    if isinstance(function, ConstantValue) and type(function.value) in builtin_calls.GETTER_TYPES:
        return builtin_calls.call_getter(tracer, function.value, args, kwargs)
    if isinstance(function, ConstantValue):
        return call_constant(tracer, function.value, args, kwargs, function)
    if isinstance(function, SequenceValue) and function.cls is torch.nn.Sequential:
        result = args[0]
        for child in function.items:
            result = call_value(tracer, child, [result], {})
        return result
    method = classes.special_method(tracer, function, "__call__")
    if method is not None and not isinstance(function, ModuleValue):
        return call_value(tracer, method, args, kwargs)
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
    if markers.is_disabled(target):
        name = getattr(target, "__qualname__", repr(target))
        raise tracer.graph_break(gb.DISABLED_FUNCTION, f"call to disabled {name}", name=name)
    # symbolic ints stay symbolic through marked calls: inputs of their nodes
    return marked_calls.call_marked(tracer, target, list(args), kwargs)


def modelled_call(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """The value of a call the tracer gives its own meaning, whatever kind of callable `target`
    is (a C function, or a Python function it could trace into): a user marking, a library
    function modelled in `builtin_calls`, or a graph break for autograd and global-state calls.
    None for any other callable."""
    handler = numpy_calls.handler_for(target) or builtin_calls.handler_for(target) \
        or operators.handler_for(target)  # before markings
    if handler is not None:
        return handler(tracer, args, kwargs)
    marked = marked_behaviour(tracer, target, args, kwargs)
    if marked is not None:
        return marked
    switch = markers.break_switch_class(target)
    if switch is not None:
        return contexts.break_switch(tracer, switch, args, kwargs)
    if is_cached_function(target):
        return _call_cached(tracer, target, args, kwargs)
    if _is_dynamo_generation_tag(target):
        return ConstantValue(None)
    if type(target) is types.MethodWrapperType:
        read = torch_functions.read_tensor_property(tracer, target, args, kwargs)
        if read is not None:
            return read
    unbound = classes.call_unbound_builtin(tracer, target, args, kwargs)
    if unbound is not None:
        return unbound
    slot = descriptors.call_slot(tracer, target, args, kwargs) or contexts.call_slot(tracer, target, args, kwargs)
    if slot is not None:
        return slot
    if _is_one_of(target, _AUTOGRAD_CALLS):
        raise tracer.graph_break(gb.AUTOGRAD_CALL, f"call {target.__qualname__}", name=target.__qualname__)
    if target is torch.use_deterministic_algorithms:
        return contexts.use_deterministic_algorithms(tracer, args, kwargs)
    if target is torch.Tensor._make_subclass:
        return instances.make_tensor_subclass(tracer, args, kwargs)
    if target is torch._C.TensorBase.__new__:
        return instances.tensor_new(tracer, args, kwargs)
    if _is_one_of(target, contexts.INT_DIGIT_LIMIT):
        return contexts.int_digit_limit(tracer, target, args, kwargs)
    if _is_one_of(target, contexts.ATTENTION_SWITCHES):
        return contexts.switch_attention_backend(tracer, target, args, kwargs)
    if target in _TORCH_FUNCTION_QUERIES and not args and not kwargs:
        graph = tracer.graph
        return ConstantValue(graph.torch_function_enabled() if target is torch._C._is_torch_function_enabled
                             else graph.torch_function_all_disabled())
    if _is_one_of(target, _GLOBAL_STATE_CALLS):
        raise tracer.graph_break(gb.GLOBAL_STATE_CALL, f"call {target.__name__}", name=f"torch.{target.__name__}")
    return None


def _is_dynamo_generation_tag(target: Any) -> bool:
    """TorchDynamo's `GenerationTracker.tag`, which the `nn.Module.__init__` that torch.compile
    installs calls on every new module: it files the module by `id()` for TorchDynamo's own
    guards, which nothing compiled by graphwright reads; a module built in the region is not
    filed."""
    return getattr(target, "__qualname__", None) == "GenerationTracker.tag" \
        and getattr(target, "__module__", None) == "torch._dynamo.mutation_guard"


def _is_one_of(target: Any, callables: set) -> bool:
    try:
        return target in callables
    except TypeError:  # an unhashable callable
        return False


def call_constant(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value],
                  value: Value | None = None) -> Value:
    """Call a real callable; `value` is it as read (with its source), when it was read."""
    modelled = modelled_call(tracer, target, args, kwargs)
    if modelled is not None:
        return modelled
    if type(target) is types.MethodType and is_cached_function(target.__func__):
        return _call_cached(tracer, target.__func__, [tracer.wrap(target.__self__, None), *args], kwargs)
    original = compiled_original(target)
    if original is not None:
        return call_value(tracer, tracer.wrap(original, None), args, kwargs)
    if isinstance(target, type):
        return instantiate(tracer, target, args, kwargs)
    if is_graph_operator(target) and type(target) is types.FunctionType \
            and not all(is_graph_argument(arg) for arg in [*args, *kwargs.values()]):
        # a torch function written in Python given what no node can hold (a module as
        # `distance_function`): traced into, as any other Python function of torch
        return inline(tracer, function_value(target, None), args, kwargs)
    if is_graph_operator(target):
        result = tracer.graph.call("call_function", target, args, kwargs)
        if not args and not kwargs and isinstance(result, ConstantValue) and not _is_one_of(target, _MODELLED_STATE) \
                and target not in tracer.switched_flags:
            # a query of global state (`torch.are_deterministic_algorithms_enabled()`): asked again
            tracer.add_guard(FunctionSource(), "query", (target, result.value))
        return result
    if type(target) is types.FunctionType:
        return inline(tracer, function_value(target, None), args, kwargs)
    if builtin_calls.is_pure_on_constants(target):
        return builtin_calls.evaluate(tracer, target, args, kwargs)
    if introspection.is_subclasses_query(target) and not args and not kwargs:
        return introspection.subclasses(tracer, target)
    call = getattr(type(target), "__call__", None)
    if type(call) is types.FunctionType:  # an object whose class defines __call__ (typing's Box[int])
        return inline(tracer, function_value(call, None).bind(value or ConstantValue(target)), args, kwargs)
    name = getattr(target, "__qualname__", None) or repr(target)
    module = getattr(target, "__module__", None)
    raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"call {module}.{name}",
                             name=f"{module}.{name}" if module else name)


def _call_cached(tracer: "Tracer", cached: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """A function under `functools.lru_cache`/`cache`: the cache is an optimisation of a pure
    function, so the function itself is traced. One whose only effects are replayed calls
    (transformers' `logger.warning_once`) has them once per distinct arguments: the cached call
    itself is replayed instead, so that the real cache decides at run time, as in Python."""
    effects = tracer.side_effects
    before = effects.counts()
    result = call_value(tracer, tracer.wrap(cached.__wrapped__, None), args, kwargs)
    after = effects.counts()
    if after == before:
        return result
    if after[1:] != before[1:] or not all(operations.is_constant_tree(arg) or arg.source is not None
                                          for arg in [*args, *kwargs.values()]):
        name = getattr(cached, "__qualname__", repr(cached))
        raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"cached {name} with side effects",
                                 name=f"{name} (a cached function that changes state)")
    del effects.replayed_calls[before[0]:]
    effects.replay_call(cached, args, kwargs)
    return result


def instantiate(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if cls is weakref.ref:
        return _weak_reference(tracer, args, kwargs)
    if cls in contexts.MODELLED_CLASSES:
        if cls in (torch.no_grad, torch.enable_grad) and len(args) == 1 and not kwargs:
            # `torch.no_grad(fn)`: the class applied to a function as a decorator
            return contexts.decorate(tracer, contexts.make_context(tracer, cls, [], {}), args, {})
        python_args = [operations.python_value(tracer, arg) for arg in args]
        python_kwargs = {key: operations.python_value(tracer, arg) for key, arg in kwargs.items()}
        return contexts.make_context(tracer, cls, python_args, python_kwargs)
    if cls in builtin_calls.GETTER_TYPES:
        return builtin_calls.evaluate(tracer, cls, args, kwargs)
    if cls is types.MethodType and len(args) == 2 and not kwargs:
        bound = _bound_method(args[0], args[1])
        if bound is not None:
            return bound
    if issubclass(cls, BaseException):
        return instances.call_class(tracer, cls, args, kwargs)
    if issubclass(cls, tuple) and hasattr(cls, "n_fields") and len(args) == 1 and not kwargs:
        # a structseq (torch.return_types.max...): a tuple of its one argument's items
        items = operations.iterate(tracer, args[0])
        if len(items) != cls.n_sequence_fields:
            raise tracer.user_error(TypeError(f"{cls.__module__}.{cls.__name__}() takes a "
                                              f"{cls.n_sequence_fields}-sequence ({len(items)}-sequence given)"))
        return SequenceValue(items, tuple, cls=cls)
    if issubclass(cls, torch.nn.Module) and cls.__module__.startswith("torch.nn.modules"):
        return _stateless_torch_module(tracer, cls, args, kwargs)
    if is_state_guard(cls):
        raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, f"instantiate {cls.__qualname__}",
                                 type=f"{cls.__module__}.{cls.__qualname__}")
    if isinstance(cls, enum.EnumMeta):
        made = introspection.enum_call(tracer, cls, args, kwargs)
        if made is not None:
            return made
    if cls.__module__.startswith("torch") and not instances.has_python_constructor(cls) \
            and made_class(cls) is None and all(operations.is_constant_tree(v) for v in [*args, *kwargs.values()]):
        return builtin_calls.evaluate(tracer, cls, args, kwargs)
    # user classes, nn.Module's subclasses, torch's classes written in Python (their
    # constructors may keep their arguments or change class state: run here, they would
    # keep copies and change the world while tracing)
    return instances.call_class(tracer, cls, args, kwargs)


def _bound_method(function: Value, receiver: Value) -> FunctionValue | None:
    """`types.MethodType(function, receiver)` of a Python function (as `ExitStack` binds an
    `__exit__`); None for another callable, whose binding is not modelled."""
    if isinstance(function, ConstantValue) and type(function.value) is types.FunctionType:
        function = function_value(function.value, function.source)
    if isinstance(function, FunctionValue) and function.bound_self is None:
        return function.bind(receiver)
    return None


def _weak_reference(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`weakref.ref(obj)` of an object that existed before the region: the reference itself,
    made again from the object's source at call time; calling it gives the object as the
    region sees it."""
    real = tracer.real_by_value.get(id(args[0])) if len(args) == 1 and not kwargs else None
    if real is None or args[0].source is None:
        what = "with a callback" if len(args) > 1 or kwargs else "to an object made in the region"
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, "instantiate weakref.ref", name=f"weakref.ref {what}")
    try:
        reference = weakref.ref(real)
    except TypeError as error:  # a dict, an int: not weakly referenceable
        raise tracer.user_error(error) from None
    return ConstantValue(reference, WeakReferenceSource(args[0].source))


def is_state_guard(cls: type) -> bool:
    """A context manager of torch written in C (`torch._C._InferenceMode`, `DisableTorchFunction`,
    dispatch-key guards): building one may already change thread-local state (an RAII guard,
    on until collected), so the tracer never builds one for real. `torch.device` and streams
    only change state when entered."""
    enter = getattr(cls, "__enter__", None)
    return enter is not None and type(enter) is not types.FunctionType and cls.__module__.startswith("torch") \
        and not issubclass(cls, (torch.device, torch.Stream))


def _stateless_torch_module(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """A torch.nn module built inside the region (a loss, an activation): fine while it has no state.
    Whether it has is asked of one built on the meta device first: initialising parameters for
    real would draw from the user's random generator."""
    with torch.device("meta"):
        probe = builtin_calls.evaluate(tracer, cls, args, kwargs).value
    if any(True for _ in probe.parameters()) or any(True for _ in probe.buffers()):
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"instantiate {cls.__qualname__} with state",
                                 name=f"{cls.__qualname__} (it has parameters or buffers)")
    return ModuleValue(builtin_calls.evaluate(tracer, cls, args, kwargs).value)


def call_module(tracer: "Tracer", module: ModuleValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`module(*args, **kwargs)`: the module class's own `__call__` when it overrides
    nn.Module's, else `module_calls.module_call`."""
    override = classes.special_method(tracer, module, "__call__")
    if override is not None:
        return call_value(tracer, override, args, kwargs)
    return module_calls.module_call(tracer, module, args, kwargs)


def inline(tracer: "Tracer", function: FunctionValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """Run a Python function's bytecode in a new frame on these symbolic arguments."""
    from . import generators
    from .frame import Frame

    code = function.code
    transformed = operators.transformed_from_wrapper(tracer, function)
    if transformed is not None:
        return transformed.call(tracer, args, kwargs)
    if code.co_flags & _UNSUPPORTED_FLAGS:
        raise tracer.graph_break(gb.GENERATOR, f"call coroutine {function.name}", name=function.name)
    if never_traced(code):
        module = function.globals.get("__name__", code.co_filename)
        raise tracer.graph_break(gb.NEVER_TRACED_FUNCTION, f"call {module}.{code.co_qualname}",
                                 name=code.co_qualname, module=module)
    if function.fn is not None:
        self_args = args if function.bound_self is None else [function.bound_self, *args]
        modelled = modelled_call(tracer, function.fn, self_args, kwargs)
        if modelled is not None:
            tracer.add_guard(function.source, "id", function.fn)  # the meaning belongs to this object
            return modelled
    if function.bound_self is not None:
        optimizer_state.initialise_before_tracing(tracer, function, args, kwargs)
        args = [function.bound_self, *args]
    state = state_source(function)
    if state is not None:  # `fn.__code__ = ...` replaces what the function does
        tracer.add_guard(AttrSource(state, "__code__"), "code", code)
    local_values = bind_arguments(tracer, function, args, kwargs)
    if code.co_flags & inspect.CO_GENERATOR:
        return generators.make_generator(tracer, function, local_values)
    return Frame(tracer, code, function.globals, local_values, function.closure).run()


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
    state = state_source(function)
    for offset, name in enumerate(positional[len(positional) - len(defaults):]):
        if name not in bound:
            bound[name] = _as_value(tracer, defaults[offset], state, "__defaults__", offset)
    for name in keyword_only:
        if name not in bound and name in function.kwdefaults:
            bound[name] = _as_value(tracer, function.kwdefaults[name], state, "__kwdefaults__", name)
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



