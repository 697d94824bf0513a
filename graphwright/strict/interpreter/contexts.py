"""`with` blocks: grad mode, autocast and `torch._C.DisableTorchFunctionSubclass` modelled natively,
user context managers inlined;
grad-mode context managers used as decorators; the global flags a region may switch
(`torch.use_deterministic_algorithms`, the attention backends of `sdpa_kernel`, and Python's
limit on the digits of int-string conversions, `sys.set_int_max_str_digits`).

`warnings.catch_warnings` is entered and left by the residual code, among the warnings
it replays (`output_calls`); the list `record=True` gives is only known then.

Grad mode, autocast and those flags change how later operations behave, so switching
one both records a node in the graph (the compiled graph switches the mode at
run time, as eager would) and switches the real mode while tracing (so fake
tensors get the right `requires_grad` and dtypes, and queries the right answer).
The tracer undoes the real switch when tracing ends, however it ends.
"""
from __future__ import annotations

import functools
import inspect
import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..objects.values import (
    NONE,
    ConstantValue,
    ContextValue,
    FunctionValue,
    MethodValue,
    ObjectValue,
    PartialValue,
    Value,
)
from ..marked import markers
from ..objects.wrap import function_value
from ..objects import output_calls
from . import graph_breaks as gb

if TYPE_CHECKING:
    from .tracer import Tracer

GRAD_MODE_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled,
                     torch.inference_mode)
AUTOCAST_CLASSES = (torch.autocast, torch.amp.autocast, torch.cpu.amp.autocast)
# Profilers and their ranges: the graph does not record them (PyTorch ignores them too).
PROFILER_CLASSES = (torch.autograd.profiler.record_function, torch.profiler.profile,
                    torch.autograd.profiler.profile)
# Off while their block runs: tensor subclasses' `__torch_function__` (the tracer runs them).
TORCH_FUNCTION_SWITCHES = (torch._C.DisableTorchFunctionSubclass, torch._C.DisableTorchFunction)
MODELLED_CLASSES = (*GRAD_MODE_CLASSES, *AUTOCAST_CLASSES, *PROFILER_CLASSES, *TORCH_FUNCTION_SWITCHES,
                    warnings.catch_warnings)
LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def make_context(tracer: "Tracer", cls: type, args: list, kwargs: dict) -> Value:
    """The value of `cls(*args, **kwargs)` for a modelled context-manager class (Python args)."""
    if cls is torch.no_grad:
        return ContextValue("grad", (False,), cls)
    if cls is torch.enable_grad:
        return ContextValue("grad", (True,), cls)
    if cls is torch.inference_mode:
        raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, "inference_mode", type="torch.inference_mode")
    if cls is torch.set_grad_enabled:
        # set_grad_enabled switches on construction, not on __enter__ (it doubles as a function)
        context = ContextValue("grad", (bool(args[0]),), cls)
        context.saved = torch.is_grad_enabled()
        set_grad_mode(tracer, bool(args[0]))
        return context
    if cls in AUTOCAST_CLASSES:
        return ContextValue("autocast", (cls(*args, **kwargs),), cls)
    if cls in PROFILER_CLASSES:
        return ContextValue("profiler", (), cls)
    if cls in TORCH_FUNCTION_SWITCHES:
        return ContextValue("torch_function", (cls is torch._C.DisableTorchFunction,), cls)
    if cls is warnings.catch_warnings:
        if args:
            raise tracer.user_error(TypeError("catch_warnings.__init__() takes 1 positional argument"))
        return ContextValue("warnings", (kwargs,), cls)
    raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, cls.__name__, type=cls.__name__)


def break_switch(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> ContextValue:
    """`graphwright.error_on_graph_break(value)` or torch's, called in the region."""
    from ..objects import operations

    value = args[0] if args else kwargs.get("error_on_graph_break", kwargs.get("value"))
    if value is None or len(args) + len(kwargs) != 1:
        raise tracer.user_error(TypeError("error_on_graph_break() takes exactly one argument"))
    setting = operations.python_value(tracer, value)
    if not isinstance(setting, bool):
        raise tracer.user_error(TypeError(f"error_on_graph_break() takes True or False, not "
                                          f"{type(setting).__name__}"))
    return ContextValue("error_on_graph_break", (setting,), cls)


def _decorated(make_context: Any, function: Any) -> Any:
    """What a grad-mode context manager used as a decorator returns (`@torch.no_grad()`), inlined."""
    @functools.wraps(function)
    def in_context(*args, **kwargs):
        with make_context():
            return function(*args, **kwargs)
    return in_context


def decorate(tracer: "Tracer", context: ContextValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`torch.no_grad()(fn)` (`@torch.no_grad()`, enable_grad, set_grad_enabled): `fn` wrapped to
    run under that grad mode, its name and docstring kept as torch's decorator keeps them.
    `set_grad_enabled`, which switched the mode when it was made, switches it back first, as
    its `__call__` does."""
    from . import calls

    function = args[0] if len(args) == 1 and not kwargs else None
    if context.kind != "grad" or not isinstance(function, (FunctionValue, PartialValue)) \
            or isinstance(function, FunctionValue) and function.code.co_flags & inspect.CO_GENERATOR:
        raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, f"{context!r} called as a decorator",
                                 type=f"{context.kind} context manager called on {args!r}")
    if context.saved is not None:
        set_grad_mode(tracer, bool(context.saved))
    factory = ConstantValue(torch.enable_grad if context.args[0] else torch.no_grad)
    return calls.inline(tracer, function_value(_decorated, None), [factory, function], {})


def remade_grad_mode(cls: type, enabled: bool, previous: bool | None) -> Any:
    """A grad-mode context manager made in the region, made again by residual code without
    switching the mode (the region already did what it did): a `set_grad_enabled`, which
    switched it when made, restores `previous` on exit."""
    if cls is not torch.set_grad_enabled:
        return cls()
    context = object.__new__(torch.set_grad_enabled)
    context.prev, context.mode = previous, enabled
    return context
def use_deterministic_algorithms(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`torch.use_deterministic_algorithms(mode, warn_only=...)` in the region (the entry's
    global-state guard saw the flags it starts with)."""
    from ..objects import operations

    try:
        mode = bool(operations.python_value(tracer, args[0] if args else kwargs["mode"]))
        warn_only = bool(operations.python_value(tracer, kwargs.get("warn_only", ConstantValue(False))))
    except KeyError:
        raise tracer.user_error(TypeError("use_deterministic_algorithms() missing argument 'mode'")) from None
    _switch_in_graph_and_after(tracer, torch._C._set_deterministic_algorithms, [mode], {"warn_only": warn_only})
    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
    return NONE


def _switch_in_graph_and_after(tracer: "Tracer", setter: Any, args: list, kwargs: dict) -> None:
    """A global flag switched in the region: in the graph, where the operators after it pick
    their kernels; and again after the graph, by the residual code, since a backend that
    traces the graph into aten operators (AOT autograd) keeps no call that is not one."""
    tracer.graph.record(setter, args, kwargs)
    tracer.side_effects.replay_call(setter, [ConstantValue(arg) for arg in args],
                                    {key: ConstantValue(value) for key, value in kwargs.items()})


def _attention_switches() -> dict[Any, Any]:
    """The switches of the scaled-dot-product-attention backends (`torch.nn.attention.sdpa_kernel`
    sets them), each setter with the getter of its flag."""
    names = [name[len("_set_sdp_use_"):] for name in dir(torch._C) if name.startswith("_set_sdp_use_")]
    pairs = [(f"_set_sdp_use_{name}", f"_get_{name}_sdp_enabled") for name in names]
    pairs += [("_set_sdp_priority_order", "_get_sdp_priority_order"),
              ("_set_math_sdp_allow_fp16_bf16_reduction", "_get_math_sdp_allow_fp16_bf16_reduction")]
    return {getattr(torch._C, setter): getattr(torch._C, getter) for setter, getter in pairs
            if hasattr(torch._C, setter) and hasattr(torch._C, getter)}


ATTENTION_SWITCHES = _attention_switches()


def switch_attention_backend(tracer: "Tracer", setter: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`torch._C._set_sdp_use_math(enabled)` and its kin in the region: the graph switches the flag
    at run time (the operators after it pick their kernel then), and tracing switches it too, so
    that the region's own queries of it see what eager would; a query of a flag the region
    switched is no guard (the entry's query guards saw the flags it starts with)."""
    from ..objects import operations

    python_args = [operations.python_value(tracer, arg) for arg in args]
    python_kwargs = {key: operations.python_value(tracer, arg) for key, arg in kwargs.items()}
    try:
        setter(*python_args, **python_kwargs)
    except Exception as error:
        raise tracer.user_error(error, f"{setter.__name__}(...)")
    _switch_in_graph_and_after(tracer, setter, python_args, python_kwargs)
    tracer.switched_flags.add(ATTENTION_SWITCHES[setter])
    return NONE


INT_DIGIT_LIMIT = (sys.get_int_max_str_digits, sys.set_int_max_str_digits)


def int_digit_limit(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`sys.get_int_max_str_digits()` and `sys.set_int_max_str_digits(n)`: set, the limit is set
    now (the region's own conversions and queries see it) and again after the graph; asked
    before the region sets it, its answer is guarded, as any query of global state."""
    from ..guards.sources import FunctionSource
    from ..objects import operations

    python_args = [operations.python_value(tracer, arg) for arg in args]
    python_kwargs = {key: operations.python_value(tracer, arg) for key, arg in kwargs.items()}
    try:
        result = target(*python_args, **python_kwargs)
    except Exception as error:
        raise tracer.user_error(error, f"sys.{target.__name__}(...)")
    if target is sys.get_int_max_str_digits:
        if target not in tracer.switched_flags:
            tracer.add_guard(FunctionSource(), "query", (target, result))
        return ConstantValue(result)
    tracer.side_effects.replay_call(target, [ConstantValue(arg) for arg in python_args],
                                    {key: ConstantValue(value) for key, value in python_kwargs.items()})
    tracer.switched_flags.add(sys.get_int_max_str_digits)
    return NONE


def saved_torch_flags() -> tuple:
    """The global flags a region may switch, to restore when tracing ends."""
    return (torch._C._get_deterministic_algorithms(), torch._C._get_deterministic_algorithms_warn_only(),
            {setter: getter() for setter, getter in ATTENTION_SWITCHES.items()}, sys.get_int_max_str_digits())


def restore_torch_flags(saved: tuple) -> None:
    deterministic, warn_only, attention, int_digits = saved
    torch._C._set_deterministic_algorithms(deterministic, warn_only=warn_only)
    for setter, value in attention.items():
        setter(value)
    sys.set_int_max_str_digits(int_digits)


def set_grad_mode(tracer: "Tracer", enabled: bool) -> None:
    if torch.is_grad_enabled() == enabled:
        return  # already so (the grad-mode guard holds it at entry): nothing for the graph to do
    tracer.graph.record(torch._C._set_grad_enabled, [enabled])
    torch._C._set_grad_enabled(enabled)


def enter(tracer: "Tracer", manager: Value, bound: bool, push_exit: Callable[[Value], None]) -> Value:
    """BEFORE_WITH: `push_exit(the exit callable)`, then enter; returns the value bound by
    `as` (`bound`: the block uses it). The exit callable is on the stack while `__enter__`
    runs, as in CPython (it holds the manager)."""
    from ..objects import classes
    from . import calls

    if isinstance(manager, ConstantValue) and type(manager.value) in (torch.no_grad, torch.enable_grad):
        cls = type(manager.value)
        manager = ContextValue("grad", (cls is torch.enable_grad,), cls)
    if isinstance(manager, ObjectValue) and markers.is_break_switch(manager.obj):
        # a switch made outside (the one a decorator holds): its setting as it is now
        manager = ContextValue("error_on_graph_break", (manager.obj.error_on_graph_break,), type(manager.obj))
    if isinstance(manager, ContextValue):
        enter_modelled(tracer, manager, bound)
        push_exit(MethodValue(manager, "__exit__"))
        return NONE
    if isinstance(manager, ObjectValue) and isinstance(manager.obj, LOCK_TYPES):
        # A lock read from outside (functools.cached_property takes one): the trace runs in
        # one thread and the graph holds no Python state another thread could race on.
        push_exit(MethodValue(ContextValue("lock", (), type(manager.obj)), "__exit__"))
        return manager
    enter_method = classes.special_method(tracer, manager, "__enter__")
    exit_method = classes.special_method(tracer, manager, "__exit__")
    if enter_method is not None and exit_method is not None:
        push_exit(exit_method)
        return calls.call_value(tracer, enter_method, [], {})
    raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, f"with {manager!r}",
                             type=manager.python_type().__name__)


def enter_modelled(tracer: "Tracer", manager: ContextValue, bound: bool) -> None:
    """Enter a modelled context manager (`bound`: the value its `__enter__` returns is used)."""
    if manager.kind == "grad" and manager.saved is None:
        manager.saved = torch.is_grad_enabled()
        set_grad_mode(tracer, bool(manager.args[0]))
    elif manager.kind == "autocast":
        real = manager.args[0]
        manager.saved = tracer.graph.record(
            torch.amp.autocast_mode._enter_autocast,
            [real.device, real.fast_dtype, real._enabled, real._cache_enabled])
        real.__enter__()
        tracer.open_contexts.append(real)
    elif manager.kind == "profiler" and bound:
        raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, "profiler as ...",
                                 type="profiler whose object is used (the graph does not profile)")
    elif manager.kind == "torch_function":
        tracer.graph.switch_torch_function(False, every=manager.args[0])
    elif manager.kind == "error_on_graph_break":
        manager.saved = tracer.error_on_graph_break
        tracer.error_on_graph_break = manager.args[0]
    elif manager.kind == "warnings":
        options = manager.args[0]
        if options.get("record") and bound:
            raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, "catch_warnings(record=True) as ...",
                                     type="warnings.catch_warnings(record=True) whose list is used")
        tracer.side_effects.replay_call(output_calls.enter_catch_warnings, [ConstantValue(options)], {})
        manager.saved = True  # entered: the residual code enters a manager of its own


def call_slot(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """`type(cm).__enter__(cm)` and `type(cm).__exit__(cm, *exc)` on a modelled context manager,
    as `contextlib.ExitStack.enter_context` calls them: what a `with` block does; None for any
    other call."""
    if not args or not isinstance(args[0], ContextValue) or kwargs:
        return None
    manager = args[0]
    if target is getattr(manager.cls, "__enter__", None) and len(args) == 1:
        enter_modelled(tracer, manager, bound=True)
        return NONE
    if target is getattr(manager.cls, "__exit__", None) and len(args) == 4:
        return exit_context(tracer, manager)
    return None


def exit_context(tracer: "Tracer", context: ContextValue) -> Value:
    if context.kind == "grad":
        set_grad_mode(tracer, bool(context.saved))
    elif context.kind == "autocast":
        tracer.graph.record(torch.amp.autocast_mode._exit_autocast, [context.saved])
        real = tracer.open_contexts.pop()
        real.__exit__(None, None, None)
    elif context.kind == "torch_function":
        tracer.graph.switch_torch_function(True, every=context.args[0])
    elif context.kind == "error_on_graph_break":
        tracer.error_on_graph_break = context.saved
    elif context.kind == "warnings":
        tracer.side_effects.replay_call(output_calls.exit_catch_warnings, [], {})
    return ConstantValue(None)
