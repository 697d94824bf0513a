"""The registries of marked callables and the decorators that fill them.

`nonstrict_trace`, `allow_in_graph`, `disallow_in_graph` (here) and
`leaf_function` (`leaf_function.py`) mark a callable by its `id()` in a
registry; the strict tracer asks `marking_of(fn)` what a call means. An entry
lives exactly as long as its callable (`CallableIdRegistry`), because ids are
reused.

`nonstrict_trace` and `leaf_function` return a new wrapper per call and mark
the wrapper only, so wrapping a function and ignoring the result changes
nothing for the original ("no action at a distance"). A nonstrict_trace
wrapper is registered in both the allow-in-graph and the nonstrict
registries: it is an allowed callable whose inputs follow the pytree rules.

Functions marked with `torch._dynamo`'s own decorators are honoured too, read
from `sys.modules` only when the user's program imported `torch._dynamo`
(this module never imports it).
"""
from __future__ import annotations

import functools
import sys
import types
import weakref
from typing import Any, Callable

import torch

from .errors import InvalidMarkingError
from .user_stack import user_frames_of_stack

NONSTRICT = "nonstrict_trace"
ALLOW = "allow_in_graph"
LEAF = "leaf_function"
DISALLOW = "disallow_in_graph"
CONSTANT_RESULT = "assume_constant_result"


class CallableIdRegistry:
    """A set of marked callables, keyed by `id()`, remembering each one's name (and, for
    leaf functions, what the tracer needs to know about it).

    An entry lives as long as its callable: `weakref.finalize` drops it when the callable
    dies, and a callable that cannot be weakly referenced is kept alive by the registry, so
    that no other object can get its id while the entry exists.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.names: dict[int, str] = {}
        self.infos: dict[int, Any] = {}
        self._kept_alive: dict[int, Any] = {}

    def add(self, fn: Any, info: Any = None) -> None:
        fn_id = id(fn)
        self.names[fn_id] = getattr(fn, "__qualname__", repr(fn))
        if info is not None:
            self.infos[fn_id] = info
        try:
            weakref.finalize(fn, self.remove, fn_id)
        except TypeError:  # not weakly referenceable: a builtin, a slotted callable object
            self._kept_alive[fn_id] = fn

    def remove(self, fn_id: int) -> None:
        self.names.pop(fn_id, None)
        self.infos.pop(fn_id, None)
        self._kept_alive.pop(fn_id, None)

    def info(self, fn: Any) -> Any:
        return self.infos.get(id(fn))

    def __contains__(self, fn: Any) -> bool:
        return id(fn) in self.names

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"<{self.name} registry of {len(self.names)} callables>"


allowed_callables = CallableIdRegistry(ALLOW)
nonstrict_trace_callables = CallableIdRegistry(NONSTRICT)
leaf_function_callables = CallableIdRegistry(LEAF)
disallowed_callables = CallableIdRegistry(DISALLOW)


def register_leaf_function(fn: Callable, info: Any) -> None:
    """Mark `fn` (a `leaf_function` wrapper) with the info its calls need."""
    leaf_function_callables.add(fn, info)


def check_not_marked_as(fn: Any, decorator: str, other: str) -> None:
    if marking_of(fn) == other:
        first, second = sorted([decorator, other])
        raise InvalidMarkingError(
            f"Function {getattr(fn, '__qualname__', fn)} cannot be both marked as @{first} and @{second}",
            explanation=f"`{other}` already wraps this function, and the two markings ask the "
                        "compiler for opposite things (trace into it, or keep it opaque).",
            hints=["Please use only one decorator."],
            user_stack=user_frames_of_stack())


def require_callable(fn: Any, decorator: str) -> None:
    if not callable(fn):
        raise InvalidMarkingError(
            f"`{decorator}` expects a callable, got {type(fn).__name__}",
            explanation=f"`{decorator}` marks a function or method for the compiler.",
            hints=[f"Apply `{decorator}` to a function: `@graphwright.{decorator}`."],
            user_stack=user_frames_of_stack())


def nonstrict_trace(traceable_fn: Callable) -> Callable:
    """Trace `traceable_fn` non-strictly inside a compiled region: one opaque node for the
    strict tracer, traced into by ahead-of-time autograd.

    >>> @graphwright.nonstrict_trace
    ... def get_magic_num():
    ...     graphwright.graph_break()  # fine: the strict tracer does not look inside
    ...     return torch.tensor([42])

    Also usable inside the region: `graphwright.nonstrict_trace(get_magic_num)()`.
    Returns a new wrapper each time; only the wrapper is marked.
    """
    require_callable(traceable_fn, NONSTRICT)
    check_not_marked_as(traceable_fn, NONSTRICT, LEAF)

    @functools.wraps(traceable_fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return traceable_fn(*args, **kwargs)

    # In both registries: it is an allowed callable whose inputs follow the pytree rules.
    allowed_callables.add(wrapped)
    nonstrict_trace_callables.add(wrapped)
    return wrapped


def allow_in_graph(fn: Callable) -> Callable:
    """Put calls of `fn` into the graph as one node (tensors, numbers, None and lists/tuples
    of those in and out). Marks `fn` itself and returns it.

    >>> @graphwright.allow_in_graph
    ... def scaled(x, k):
    ...     return x * k
    """
    if isinstance(fn, (list, tuple)):
        return [allow_in_graph(item) for item in fn]
    require_callable(fn, ALLOW)
    disallowed_callables.remove(id(fn))
    allowed_callables.add(fn)
    return fn


def disallow_in_graph(fn: Callable) -> Callable:
    """Make every call of the torch operator `fn` in a compiled region a graph break.
    Marks `fn` and returns it.

    >>> graphwright.disallow_in_graph(torch.sub)

    It applies to what the compiler puts into graphs as it is: torch operators, and functions
    marked `allow_in_graph`. The compiler traces into a Python function of the user's; to
    keep it out of one, use `graphwright.disable`.
    """
    if isinstance(fn, (list, tuple)):
        return [disallow_in_graph(item) for item in fn]
    require_callable(fn, DISALLOW)
    if not (fn in allowed_callables or _is_torch_operator(fn) or _dynamo_marking_of(fn) == ALLOW):
        raise InvalidMarkingError(
            "disallow_in_graph is expected to be used on an already allowed callable (like torch.* "
            f"ops), not on {getattr(fn, '__qualname__', repr(fn))}",
            explanation="Allowed callables are the ones the compiler puts into the graph as they are: "
                        "torch operators and functions marked `allow_in_graph`. A Python function is "
                        "traced into, so there is no call of it to keep out of the graph.",
            hints=["To run a Python function uncompiled, decorate it with `graphwright.disable`."],
            user_stack=user_frames_of_stack())
    allowed_callables.remove(id(fn))
    nonstrict_trace_callables.remove(id(fn))
    disallowed_callables.add(fn)
    return fn


def _is_torch_operator(fn: Any) -> bool:
    """A callable of torch's own: an operator of `torch.ops`, a function or method written in C,
    or a Python function of a torch module (`torch.nn.functional.relu`)."""
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator)):
        return True
    if isinstance(fn, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                       types.MethodWrapperType, types.FunctionType)):
        owner = getattr(fn, "__objclass__", None)
        module = getattr(fn, "__module__", None) or getattr(owner, "__module__", None) or ""
        return module == "torch" or module.startswith("torch.")
    return False


def marking_of(fn: Any) -> str | None:
    """What a call of `fn` means to the tracer: one of the marking names above, or None."""
    if fn in nonstrict_trace_callables:
        return NONSTRICT
    if fn in leaf_function_callables:
        return LEAF
    if fn in disallowed_callables:
        return DISALLOW
    if fn in allowed_callables:
        return ALLOW
    return _dynamo_marking_of(fn)


def _dynamo_marking_of(fn: Any) -> str | None:
    """Markings made with `torch._dynamo`'s decorators, when the program imported it."""
    trace_rules = sys.modules.get("torch._dynamo.trace_rules")
    if trace_rules is None:
        return None
    fn_id = id(fn)
    if fn_id in trace_rules._nonstrict_trace_callable_ids:
        return NONSTRICT
    if fn_id in getattr(trace_rules, "_leaf_function_ids", ()):
        return LEAF
    if fn_id in trace_rules._disallowed_callable_ids:
        return DISALLOW
    if fn_id in trace_rules._allowed_callable_ids:
        return ALLOW
    if getattr(fn, "_dynamo_marked_constant", False):
        return CONSTANT_RESULT
    return None


def decorator_name(fn: Any) -> str | None:
    """Which marking decorator `fn` is (graphwright's, or torch's when imported), or None."""
    if fn is nonstrict_trace:
        return NONSTRICT
    if fn is allow_in_graph:
        return ALLOW
    if fn is disallow_in_graph:
        return DISALLOW
    for module_name in ("torch._dynamo", "torch._dynamo.decorators", "torch.compiler"):
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for name in (NONSTRICT, ALLOW, DISALLOW):
            if fn is getattr(module, name, None):
                return name
    return None


def is_compiling_function(fn: Any) -> bool:
    """`torch.compiler.is_compiling` and the other spellings libraries test."""
    candidates = [("torch.compiler", "is_compiling"), ("torch._dynamo", "is_compiling"),
                  ("torch._dynamo.external_utils", "is_compiling"), ("torch._utils", "is_compiling")]
    for module_name, name in candidates:
        module = sys.modules.get(module_name)
        if module is not None and fn is getattr(module, name, None):
            return True
    return False


def forbid_in_region(fn: Callable) -> Callable:
    """Mark `fn` as a function no compiled region may call (tracing a call raises), with the
    attribute torch's `forbid_in_graph` sets, so that torch's markings are honoured too."""
    fn._dynamo_forbidden = True
    return fn


def is_forbidden(fn: Any) -> bool:
    """Whether tracing a call of `fn` is an error (`forbid_in_region`, torch's `forbid_in_graph`)."""
    return getattr(fn, "_dynamo_forbidden", False) is True
