"""Functions users call or apply to steer the strict tracer: `graph_break`, `disable`.

They do nothing at run time (or run the function unchanged); their meaning
lives in the tracer, which recognises them by identity or by attribute.
"""
from __future__ import annotations

import functools
from typing import Any, Callable


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
