"""The backend registry: names to compiler functions.

A backend is `backend(gm: torch.fx.GraphModule, example_inputs: list) -> callable`,
the protocol torch.compile backends use. Backends register themselves by name
(`register_backend`); `lookup_backend` turns a name or a callable into one.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .._core.errors import GraphwrightError

CompilerFn = Callable[[torch.fx.GraphModule, list], Callable[..., Any]]

_BACKENDS: dict[str, CompilerFn] = {}
_TAGS: dict[str, tuple[str, ...]] = {}


def register_backend(
    compiler_fn: CompilerFn | None = None,
    name: str | None = None,
    tags: Sequence[str] = (),
):
    """Register a backend under `name` (default: the function's name).

    >>> @register_backend
    ... def my_backend(gm, example_inputs):
    ...     return gm.forward
    """
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name, tags=tags)
    if not callable(compiler_fn):
        raise TypeError(f"a backend must be callable, got {type(compiler_fn).__name__}")
    name = name or compiler_fn.__name__
    if name in _BACKENDS and _BACKENDS[name] is not compiler_fn:
        raise GraphwrightError(
            f"Backend {name!r} is already registered",
            hints=["Choose another name, or pass the callable to `graphwright.compile` directly."],
        )
    _BACKENDS[name] = compiler_fn
    _TAGS[name] = tuple(tags)
    return compiler_fn


def list_backends(exclude_tags: Sequence[str] = ("debug", "experimental")) -> list[str]:
    """Names of the registered backends, sorted, without those carrying `exclude_tags`."""
    excluded = set(exclude_tags or ())
    return sorted(name for name, tags in _TAGS.items() if not excluded.intersection(tags))


def lookup_backend(backend: str | CompilerFn) -> CompilerFn:
    """The compiler function for a backend name, or the callable itself."""
    if callable(backend):
        return backend
    if backend not in _BACKENDS:
        raise GraphwrightError(
            f"Unknown backend {backend!r}",
            explanation=f"graphwright knows these backends: {', '.join(list_backends(()))}.",
            hints=["Pass one of those names, or a callable `backend(gm, example_inputs)`."],
        )
    return _BACKENDS[backend]
