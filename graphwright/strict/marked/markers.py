"""Functions users call or apply to steer the strict tracer: `graph_break`, `disable`,
`mark_dynamic`, `mark_static`.

They do nothing at run time (or run the function unchanged); their meaning
lives in the tracer, which recognises them by identity or by attribute.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch
import torch._compile


def graph_break(msg: str = "") -> None:
    """An explicit graph break: under `fullgraph=True` compiling raises `Unsupported`.

    >>> def f(x):
    ...     x = x + 1
    ...     graphwright.graph_break()
    ...     return x * 2
    """


def disable(fn: Callable | None = None, recursive: bool = True) -> Any:
    """Never compile `fn`: calls to it run eagerly (a graph break inside a compiled region).

    >>> @graphwright.disable
    ... def log_stats(x): ...
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive)

    @functools.wraps(fn)
    def disabled(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    disabled._graphwright_disabled = True
    return disabled


def is_disabled(target: Any) -> bool:
    """Marked never to be compiled: by `graphwright.disable`, `torch._dynamo.disable` (or
    `torch.compiler.disable`), or torch's own lazy `torch._disable_dynamo` decorator."""
    return (getattr(target, "_graphwright_disabled", False) or getattr(target, "_torchdynamo_disable", False)
            or getattr(target, "__code__", None) is _LAZY_DISABLE_CODE)


_LAZY_DISABLE_CODE = torch._compile._disable_dynamo(lambda: None).__code__


def _indices(index: int | list | tuple) -> list[int]:
    return [index] if isinstance(index, int) else list(index)


def mark_dynamic(t: Any, index: int | list | tuple) -> None:
    """Trace dimension(s) `index` of tensor `t` as symbolic sizes from the first compile.

    Uses the tensor attribute PyTorch uses, so marks made by `torch._dynamo.mark_dynamic` count too.

    >>> graphwright.mark_dynamic(x, 0)
    """
    if not hasattr(t, "_dynamo_dynamic_indices"):
        t._dynamo_dynamic_indices = set()
    t._dynamo_dynamic_indices.update(_indices(index))


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
