"""The registries of marked callables and the decorators that fill them.

`nonstrict_trace`, `allow_in_graph`, `leaf_function` and `disallow_in_graph`
mark a callable by its `id()` in a registry; the strict tracer asks
`marking_of(fn)` what a call means. Registrations are dropped by
`weakref.finalize` when the marked object dies, because ids are reused.

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
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import GraphwrightError
from .user_stack import user_frames_of_stack

NONSTRICT = "nonstrict_trace"
ALLOW = "allow_in_graph"
LEAF = "leaf_function"
DISALLOW = "disallow_in_graph"
CONSTANT_RESULT = "assume_constant_result"


class CallableIdRegistry:
    """A set of marked callables, keyed by `id()`, remembering each one's name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.names: dict[int, str] = {}

    def add(self, fn: Any) -> None:
        self.names[id(fn)] = getattr(fn, "__qualname__", repr(fn))

    def remove(self, fn_id: int) -> None:
        self.names.pop(fn_id, None)

    def __contains__(self, fn: Any) -> bool:
        return id(fn) in self.names

    def __repr__(self) -> str:
        return f"<{self.name} registry of {len(self.names)} callables>"


allowed_callables = CallableIdRegistry(ALLOW)
nonstrict_trace_callables = CallableIdRegistry(NONSTRICT)
leaf_function_callables = CallableIdRegistry(LEAF)
disallowed_callables = CallableIdRegistry(DISALLOW)


def _register_while_alive(fn: Any, *registries: CallableIdRegistry) -> None:
    fn_id = id(fn)
    for registry in registries:
        registry.add(fn)

    def deregister() -> None:
        for registry in registries:
            registry.remove(fn_id)

    try:
        weakref.finalize(fn, deregister)
    except TypeError:
        pass  # not weakly referenceable (e.g. a slotted callable): it stays registered


@dataclass
class LeafFunctionInfo:
    """What the tracer needs about a `leaf_function`: the Python to run, its fake, what it mutates."""

    fn: Callable
    mutates_args: frozenset[str] = field(default_factory=frozenset)
    fake: Callable | None = None


def _check_not_marked_as(fn: Any, decorator: str, other: str) -> None:
    if marking_of(fn) == other:
        first, second = sorted([decorator, other])
        raise GraphwrightError(
            f"Function {getattr(fn, '__qualname__', fn)} cannot be both marked as @{first} and @{second}",
            explanation=f"`{other}` already wraps this function, and the two markings ask the "
                        "compiler for opposite things (trace into it, or keep it opaque).",
            hints=["Please use only one decorator."],
            user_stack=user_frames_of_stack())


def _require_callable(fn: Any, decorator: str) -> None:
    if not callable(fn):
        raise GraphwrightError(
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
    _require_callable(traceable_fn, NONSTRICT)
    _check_not_marked_as(traceable_fn, NONSTRICT, LEAF)

    @functools.wraps(traceable_fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return traceable_fn(*args, **kwargs)

    # In both registries: it is an allowed callable whose inputs follow the pytree rules.
    _register_while_alive(wrapped, allowed_callables, nonstrict_trace_callables)
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
    _require_callable(fn, ALLOW)
    disallowed_callables.remove(id(fn))
    _register_while_alive(fn, allowed_callables)
    return fn


def disallow_in_graph(fn: Callable) -> Callable:
    """Make every call of `fn` in a compiled region a graph break. Marks `fn` and returns it.

    >>> graphwright.disallow_in_graph(torch.sub)
    """
    if isinstance(fn, (list, tuple)):
        return [disallow_in_graph(item) for item in fn]
    _require_callable(fn, DISALLOW)
    allowed_callables.remove(id(fn))
    _register_while_alive(fn, disallowed_callables)
    return fn


def leaf_function(fn: Callable | None = None, *, mutates_args: set[str] | None = None) -> Any:
    """Keep `fn` opaque at every level: its Python runs at run time, every call.

    Output shapes come from a fake implementation registered with `@fn.register_fake`:

    >>> @graphwright.leaf_function
    ... def log_stats(x):
    ...     print(x.mean())
    ...     return (x.mean(dim=1),)
    >>> @log_stats.register_fake
    ... def _(x):
    ...     return (x.new_empty(x.shape[0]),)
    """
    if fn is None:
        return functools.partial(leaf_function, mutates_args=mutates_args)
    _require_callable(fn, LEAF)
    _check_not_marked_as(fn, LEAF, NONSTRICT)
    info = LeafFunctionInfo(fn, frozenset(mutates_args or ()))

    @functools.wraps(fn)
    def leaf(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def register_fake(fake: Callable) -> Callable:
        info.fake = fake
        return fake

    leaf.register_fake = register_fake
    leaf._graphwright_leaf = info
    _register_while_alive(leaf, leaf_function_callables)
    return leaf


def leaf_function_info(fn: Any) -> LeafFunctionInfo:
    return fn._graphwright_leaf


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


def is_dynamo_tensor_marking(fn: Any) -> bool:
    """`torch._dynamo`'s tensor markings that only set attributes read by later compilations
    (`mark_dynamic`, `maybe_mark_dynamic`, `mark_static_address`, `mark_unbacked`)."""
    for module_name in ("torch._dynamo", "torch._dynamo.decorators"):
        module = sys.modules.get(module_name)
        if module is not None and any(fn is getattr(module, name, None) for name in
                                      ("mark_dynamic", "maybe_mark_dynamic", "mark_static_address", "mark_unbacked")):
            return True
    return False
