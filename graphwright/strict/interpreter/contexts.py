"""`with` blocks: grad mode and autocast modelled natively, user context managers inlined;
and the global flags a region may switch (`torch.use_deterministic_algorithms`).

Grad mode, autocast and those flags change how later operations behave, so switching
one both records a node in the graph (the compiled graph switches the mode at
run time, as eager would) and switches the real mode while tracing (so fake
tensors get the right `requires_grad` and dtypes, and queries the right answer).
The tracer undoes the real switch when tracing ends, however it ends.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import torch

from ..objects.values import (
    NONE,
    ConstantValue,
    ContextValue,
    MethodValue,
    ObjectValue,
    Value,
)
from . import graph_breaks as gb

if TYPE_CHECKING:
    from .tracer import Tracer

GRAD_MODE_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled,
                     torch.inference_mode)
AUTOCAST_CLASSES = (torch.autocast, torch.amp.autocast, torch.cpu.amp.autocast)
# Profiler ranges: the graph does not record them (PyTorch ignores them too, with a warning).
PROFILER_CLASSES = (torch.autograd.profiler.record_function,)
MODELLED_CLASSES = (*GRAD_MODE_CLASSES, *AUTOCAST_CLASSES, *PROFILER_CLASSES)
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
    raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, cls.__name__, type=cls.__name__)


def use_deterministic_algorithms(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`torch.use_deterministic_algorithms(mode, warn_only=...)` in the region (the entry's
    global-state guard saw the flags it starts with)."""
    from ..objects import operations

    try:
        mode = bool(operations.python_value(tracer, args[0] if args else kwargs["mode"]))
        warn_only = bool(operations.python_value(tracer, kwargs.get("warn_only", ConstantValue(False))))
    except KeyError:
        raise tracer.user_error(TypeError("use_deterministic_algorithms() missing argument 'mode'")) from None
    tracer.graph.record(torch._C._set_deterministic_algorithms, [mode], {"warn_only": warn_only})
    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
    return NONE


def saved_torch_flags() -> tuple:
    """The global flags a region may switch, to restore when tracing ends."""
    return torch._C._get_deterministic_algorithms(), torch._C._get_deterministic_algorithms_warn_only()


def restore_torch_flags(saved: tuple) -> None:
    deterministic, warn_only = saved
    torch._C._set_deterministic_algorithms(deterministic, warn_only=warn_only)


def set_grad_mode(tracer: "Tracer", enabled: bool) -> None:
    tracer.graph.record(torch._C._set_grad_enabled, [enabled])
    torch._C._set_grad_enabled(enabled)


def enter(tracer: "Tracer", manager: Value) -> tuple[Value, Value]:
    """BEFORE_WITH: returns (the exit callable, the value bound by `as`)."""
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
        return MethodValue(manager, "__exit__"), NONE
    if isinstance(manager, ObjectValue) and isinstance(manager.obj, LOCK_TYPES):
        # A lock read from outside (functools.cached_property takes one): the trace runs in
        # one thread and the graph holds no Python state another thread could race on.
        return MethodValue(ContextValue("lock", ()), "__exit__"), manager
    enter_method = classes.special_method(tracer, manager, "__enter__")
    exit_method = classes.special_method(tracer, manager, "__exit__")
    if enter_method is not None and exit_method is not None:
        return exit_method, calls.call_value(tracer, enter_method, [], {})
    raise tracer.graph_break(gb.UNSUPPORTED_CONTEXT_MANAGER, f"with {manager!r}",
                             type=manager.python_type().__name__)


def exit_context(tracer: "Tracer", context: ContextValue) -> Value:
    if context.kind == "grad":
        set_grad_mode(tracer, bool(context.saved))
    elif context.kind == "autocast":
        tracer.graph.record(torch.amp.autocast_mode._exit_autocast, [context.saved])
        real = tracer.open_contexts.pop()
        real.__exit__(None, None, None)
    return ConstantValue(None)
