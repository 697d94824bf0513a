"""Functions users call or apply to steer the strict tracer: `graph_break`, `disable`,
`error_on_graph_break`, `mark_dynamic`, `mark_static`.

They do nothing at run time (or run the function unchanged); their meaning
lives in the tracer, which recognises them by identity or by a mark on the
object itself.

`disable` marks the wrapper it returns with a `DisableMark` naming that very
wrapper, so that a function copying the wrapper's attributes
(`functools.wraps`) is not taken for disabled. A disabled module is wrapped
in a `DisabledModule`; a disabled class has its instances' construction and
calls disabled. With `recursive=False` only the function's own code is kept
uncompiled: code run in plain Python calls it with its calls routed to
compiled wrappers (`residual/call_routing.py`), and compiling it directly
compiles it.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch._compile

from ..._core import rules


def graph_break(msg: str = "") -> None:
    """An explicit graph break: under `fullgraph=True` compiling raises `Unsupported`.

    >>> def f(x):
    ...     x = x + 1
    ...     graphwright.graph_break()
    ...     return x * 2
    """


@dataclass(frozen=True)
class DisableMark:
    """What `disable` made: the wrapper (by id), whether callees stay uncompiled too, and
    the callable it wraps."""

    wrapper_id: int
    recursive: bool
    original: Any


class DisabledModule(torch.nn.Module):
    """A module whose calls are never compiled: `disable(module)`. Calling it calls the
    original module (its hooks included); parameters and state are the original's."""

    def __init__(self, module: torch.nn.Module, recursive: bool) -> None:
        super().__init__()
        self._orig_mod = module
        self.__dict__["_graphwright_disabled"] = DisableMark(id(self), recursive, module)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod(*args, **kwargs)


def disable(fn: Callable | None = None, recursive: bool = True) -> Any:
    """Never compile `fn`: calls to it run eagerly (a graph break inside a compiled region).
    Works on functions, methods, modules and classes (whose instances are then never
    compiled). With `recursive=False`, the functions `fn` calls are still compiled.

    >>> @graphwright.disable
    ... def log_stats(x): ...
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    if isinstance(fn, type):
        fn.__init__ = disable(fn.__init__, recursive)
        fn.__call__ = disable(fn.__call__, recursive)
        return fn
    if isinstance(fn, torch.nn.Module):
        return DisabledModule(fn, recursive)

    @functools.wraps(fn)
    def disabled(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    disabled._graphwright_disabled = DisableMark(id(disabled), recursive, fn)
    return disabled


def disable_mark(target: Any) -> DisableMark | None:
    """The mark of a callable `disable` (graphwright's or torch's) made, or None. A module is
    disabled when it is a disabled module or its class's calls are."""
    mark = getattr(target, "_graphwright_disabled", None)
    if isinstance(mark, DisableMark) and mark.wrapper_id == id(target):
        return mark
    if isinstance(target, torch.nn.Module):
        call = getattr(type(target), "__call__", None)
        return disable_mark(call) if call is not None else None
    if getattr(target, "_torchdynamo_disable", False):
        wrapper_id = getattr(target, "_torchdynamo_wrapper_id", None)
        if wrapper_id is None or wrapper_id == id(target):
            return DisableMark(id(target), getattr(target, "_torchdynamo_disable_recursive", True),
                               getattr(target, "_torchdynamo_orig_callable", target))
        return None
    if getattr(target, "__code__", None) is _LAZY_DISABLE_CODE:
        return DisableMark(id(target), True, target)
    return None


def is_disabling_decorator(fn: Any) -> bool:
    """`graphwright.disable`, `torch.compiler.disable`, or `torch._dynamo.disable` when the program
    imported it."""
    if fn is disable:
        return True
    for module_name in ("torch._dynamo", "torch._dynamo.decorators", "torch.compiler"):
        module = sys.modules.get(module_name)
        if module is not None and fn is getattr(module, "disable", None):
            return True
    return False


def is_disabled(target: Any) -> bool:
    """Marked never to be compiled: by `graphwright.disable`, `torch._dynamo.disable` (or
    `torch.compiler.disable`), or torch's own lazy `torch._disable_dynamo` decorator."""
    return disable_mark(target) is not None or _is_torch_disabled_module(target)


def _is_torch_disabled_module(target: Any) -> bool:
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None or not isinstance(target, torch.nn.Module):
        return False
    return isinstance(target.__dict__.get("dynamo_ctx"), eval_frame.DisableContext)


_LAZY_DISABLE_CODE = torch._compile._disable_dynamo(lambda: None).__code__


# What `error_on_graph_break` set (None: never set, or left); process-wide, as torch's is
_ERROR_ON_GRAPH_BREAK: bool | None = None


class ErrorOnGraphBreak:
    """What `error_on_graph_break(value)` returns: a context manager that sets the switch while
    its block runs, and a decorator that runs the function inside that block."""

    def __init__(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"error_on_graph_break() takes True or False, not {type(value).__name__}")
        self.error_on_graph_break = value
        self._saved: list[bool | None] = []

    def __enter__(self) -> None:
        global _ERROR_ON_GRAPH_BREAK
        self._saved.append(_ERROR_ON_GRAPH_BREAK)
        _ERROR_ON_GRAPH_BREAK = self.error_on_graph_break

    def __exit__(self, *exc_info: Any) -> None:
        global _ERROR_ON_GRAPH_BREAK
        _ERROR_ON_GRAPH_BREAK = self._saved.pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def switched(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return switched


def error_on_graph_break(value: bool) -> ErrorOnGraphBreak:
    """Whether a graph break is an error (`graphwright.Unsupported`) or splits the function, in
    code compiled with `fullgraph=False` inside the block or decorated function: the setting at
    the instruction that breaks decides, so a region may allow breaks in one helper and forbid
    them around it. Under `fullgraph=True` every break is an error whatever the switch says.
    `torch._dynamo.error_on_graph_break` is honoured the same way.

    >>> with graphwright.error_on_graph_break(True):
    ...     compiled(x)                       # a break anywhere in it raises
    >>> @graphwright.error_on_graph_break(False)
    ... def log_stats(x): ...                 # may break, inside a region that may not
    """
    return ErrorOnGraphBreak(value)


def errors_on_graph_break() -> bool:
    """The switch a compile starts with: graphwright's where set, else torch's when the program
    imported `torch._dynamo` (its module global, read, never called), else off."""
    if _ERROR_ON_GRAPH_BREAK is not None:
        return _ERROR_ON_GRAPH_BREAK
    return bool(getattr(sys.modules.get("torch._dynamo.utils"), "_error_on_graph_break", False))


def break_switch_class(target: Any) -> type | None:
    """For `graphwright.error_on_graph_break` or torch's: the class of the switch it makes (the
    switches are those classes' instances); None for any other callable."""
    if target is error_on_graph_break:
        return ErrorOnGraphBreak
    decorators = sys.modules.get("torch._dynamo.decorators")
    if decorators is not None and target is getattr(decorators, "error_on_graph_break", None):
        return getattr(decorators, "ErrorOnGraphBreakDecoratorContextManager", None)
    return None


def is_break_switch(obj: Any) -> bool:
    """Whether `obj` is a switch either function made."""
    if isinstance(obj, ErrorOnGraphBreak):
        return True
    decorators = sys.modules.get("torch._dynamo.decorators")
    cls = getattr(decorators, "ErrorOnGraphBreakDecoratorContextManager", None)
    return cls is not None and isinstance(obj, cls)


def _indices(index: int | list | tuple) -> list[int]:
    return [index] if isinstance(index, int) else list(index)


@dataclass(frozen=True)
class DimRange:
    """The sizes `mark_dynamic(t, dim, min=, max=)` allows for one dimension (None: no bound);
    the fields of the entries torch's `mark_dynamic` keeps, so that either function's are read."""

    dim: int
    min: int | None
    max: int | None


@rules.forbid_in_region
def mark_dynamic(t: Any, index: int | list | tuple, *, min: int | None = None, max: int | None = None) -> None:
    """Trace dimension(s) `index` of tensor `t` as symbolic sizes from the first compile, for
    sizes from `min` to `max` (inclusive) when given: compiling for a size outside them raises
    `ConstraintViolationError`.

    Uses the tensor attributes PyTorch uses, so marks made by `torch._dynamo.mark_dynamic` count too.

    >>> graphwright.mark_dynamic(x, 0, min=2, max=64)
    """
    if not hasattr(t, "_dynamo_dynamic_indices"):
        t._dynamo_dynamic_indices = set()
        t._dynamo_dynamic_range = set()
    for dim in _indices(index):
        t._dynamo_dynamic_indices.add(dim)
        t._dynamo_dynamic_range.add(DimRange(dim, min, max))


@rules.forbid_in_region
def maybe_mark_dynamic(t: Any, index: int | list | tuple) -> None:
    """Trace dimension(s) `index` of `t` as symbolic sizes, as a hint: unlike `mark_dynamic`,
    the program may still force the size to a constant (it then specialises, without error).

    >>> graphwright.maybe_mark_dynamic(x, 0)
    """
    if not hasattr(t, "_dynamo_weak_dynamic_indices"):
        t._dynamo_weak_dynamic_indices = set()
    t._dynamo_weak_dynamic_indices.update(_indices(index))


def mark_static(t: Any, index: int | list | tuple | None = None) -> None:
    """Never trace dimension(s) `index` of `t` (all of them when None) as symbolic sizes.

    >>> graphwright.mark_static(x)
    """
    if not hasattr(t, "_dynamo_static_indices"):
        t._dynamo_static_indices = set()
    t._dynamo_static_indices.update(range(t.dim()) if index is None else _indices(index))
