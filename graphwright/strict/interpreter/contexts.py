"""`with` blocks: grad mode and autocast modelled natively, user context managers inlined;
grad-mode context managers used as decorators.

`warnings.catch_warnings` is entered and left by the residual code, among the warnings
it replays (`output_calls`); the list `record=True` gives is only known then.

Grad mode and autocast change how later operations behave, so entering one
both records a node in the graph (the compiled graph switches the mode at
run time, as eager would) and switches the real mode while tracing (so fake
tensors get the right `requires_grad` and dtypes). The tracer undoes the real
switch when tracing ends, however it ends.
"""
from __future__ import annotations

import functools
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..objects.values import (
    NONE,
    ConstantValue,
    ContextValue,
    MethodValue,
    ObjectValue,
    Value,
)
from ..objects import output_calls
from . import graph_breaks as gb

if TYPE_CHECKING:
    from .tracer import Tracer

GRAD_MODE_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled,
                     torch.inference_mode)
AUTOCAST_CLASSES = (torch.autocast, torch.amp.autocast, torch.cpu.amp.autocast)
# Profiler ranges: the graph does not record them (PyTorch ignores them too, with a warning).
PROFILER_CLASSES = (torch.autograd.profiler.record_function,)
MODELLED_CLASSES = (*GRAD_MODE_CLASSES, *AUTOCAST_CLASSES, *PROFILER_CLASSES, warnings.catch_warnings)
LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def make_context(tracer: "Tracer", cls: type, args: list, kwargs: dict) -> Value:
    """The value of `cls(*args, **kwargs)` for a modelled context-manager class (Python args)."""
    if cls is torch.no_grad:
        return ContextValue("grad", (False,))
    if cls is torch.enable_grad:
        return ContextValue("grad", (True,))
    if cls is torch.inference_mode:
        raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, "inference_mode", type="torch.inference_mode")
    if cls is torch.set_grad_enabled:
        # set_grad_enabled switches on construction, not on __enter__ (it doubles as a function)
        context = ContextValue("grad", (bool(args[0]),))
        context.saved = torch.is_grad_enabled()
        set_grad_mode(tracer, bool(args[0]))
        return context
    if cls in AUTOCAST_CLASSES:
        return ContextValue("autocast", (cls(*args, **kwargs),))
    if cls in PROFILER_CLASSES:
        return ContextValue("profiler", ())
    if cls is warnings.catch_warnings:
        if args:
            raise tracer.user_error(TypeError("catch_warnings.__init__() takes 1 positional argument"))
        return ContextValue("warnings", (kwargs,))
    raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, cls.__name__, type=cls.__name__)


def _decorated(make_context: Any, function: Any) -> Any:
    """What a context manager used as a decorator returns (`@torch.no_grad()`), inlined."""
    @functools.wraps(function)
    def in_context(*args, **kwargs):
        with make_context():
            return function(*args, **kwargs)
    return in_context


def decorate(tracer: "Tracer", context: ContextValue, args: list[Value], kwargs: dict) -> Value:
    """`context(function)`: the function, run in a fresh context of the same kind at each call."""
    from ..objects.wrap import function_value
    from . import calls

    if context.kind != "grad" or len(args) != 1 or kwargs:
        raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"call {context!r}",
                                 name=f"a {context.kind} context manager used as a decorator")
    factory = ConstantValue(torch.enable_grad if context.args[0] else torch.no_grad)
    return calls.inline(tracer, function_value(_decorated, None), [factory, args[0]], {})


def set_grad_mode(tracer: "Tracer", enabled: bool) -> None:
    tracer.graph.record(torch._C._set_grad_enabled, [enabled])
    torch._C._set_grad_enabled(enabled)


def enter(tracer: "Tracer", manager: Value, bound: bool, push_exit: Callable[[Value], None]) -> Value:
    """BEFORE_WITH: `push_exit(the exit callable)`, then enter; returns the value bound by
    `as` (`bound`: the block uses it). The exit callable is on the stack while `__enter__`
    runs, as in CPython (it holds the manager)."""
    from ..objects import classes
    from . import calls

    if isinstance(manager, ConstantValue) and type(manager.value) in (torch.no_grad, torch.enable_grad):
        manager = ContextValue("grad", (type(manager.value) is torch.enable_grad,))
    if isinstance(manager, ContextValue):
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
        elif manager.kind == "warnings":
            options = manager.args[0]
            if options.get("record") and bound:
                raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, "catch_warnings(record=True) as ...",
                                         type="warnings.catch_warnings(record=True) whose list is used")
            tracer.side_effects.replay_call(output_calls.enter_catch_warnings, [ConstantValue(options)], {})
        push_exit(MethodValue(manager, "__exit__"))
        return NONE
    if isinstance(manager, ObjectValue) and isinstance(manager.obj, LOCK_TYPES):
        # A lock read from outside (functools.cached_property takes one): the trace runs in
        # one thread and the graph holds no Python state another thread could race on.
        push_exit(MethodValue(ContextValue("lock", ()), "__exit__"))
        return manager
    enter_method = classes.special_method(tracer, manager, "__enter__")
    exit_method = classes.special_method(tracer, manager, "__exit__")
    if enter_method is not None and exit_method is not None:
        push_exit(exit_method)
        return calls.call_value(tracer, enter_method, [], {})
    raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, f"with {manager!r}",
                             type=manager.python_type().__name__)


def exit_context(tracer: "Tracer", context: ContextValue) -> Value:
    if context.kind == "grad":
        set_grad_mode(tracer, bool(context.saved))
    elif context.kind == "autocast":
        tracer.graph.record(torch.amp.autocast_mode._exit_autocast, [context.saved])
        real = tracer.open_contexts.pop()
        real.__exit__(None, None, None)
    elif context.kind == "warnings":
        tracer.side_effects.replay_call(output_calls.exit_catch_warnings, [], {})
    return ConstantValue(None)
