"""The backend registry: names to compiler functions.

A backend is `backend(gm: torch.fx.GraphModule, example_inputs: list) -> callable`,
the protocol torch.compile backends use. Backends register themselves by name
(`register_backend`); `lookup_backend` turns a name or a callable into one.
"""
from __future__ import annotations

import inspect
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


def configured_backend(compiler: CompilerFn, mode: str | None, options: dict | None,
                       dynamic: bool | None) -> CompilerFn:
    """`compiler` with `compile`'s `mode` and `options`, as `torch.compile` hands them over: a
    backend that knows them (`inductor`) makes its configured self with `configure`; any other
    receives them as keyword arguments of every call, when given (`mode="default"` is not).
    Both at once is an error, as in PyTorch."""
    if mode is not None and options is not None:
        raise GraphwrightError(
            "Either mode or options can be specified, but both can't be specified at the same time.",
            hints=["Pass `mode` alone, or the config values you want as `options`."])
    if hasattr(compiler, "configure"):
        return compiler.configure(mode, options, dynamic) if mode or options else compiler
    kwargs = {}
    if mode and mode != "default":
        kwargs["mode"] = mode
    if options:
        kwargs["options"] = options
    if not kwargs:
        return compiler
    try:
        inspect.signature(compiler).bind(None, [], **kwargs)
    except (TypeError, ValueError):
        name = getattr(compiler, "__name__", type(compiler).__name__)
        raise GraphwrightError(
            f"Backend {name!r} takes no {' or '.join(f'`{key}`' for key in kwargs)}",
            explanation="Modes and options configure the `inductor` backend; another backend receives them "
                        "as keyword arguments, and this one does not accept them.",
            hints=["Drop `mode`/`options`, or use `backend=\"inductor\"`."]) from None
    return BackendWithOptions(compiler, kwargs)


class BackendWithOptions:
    """A backend called with `compile`'s `mode`/`options` as keyword arguments."""

    def __init__(self, backend: CompilerFn, kwargs: dict[str, Any]) -> None:
        self.backend = backend
        self.kwargs = kwargs
        self.__name__ = getattr(backend, "__name__", type(backend).__name__)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
        return self.backend(gm, example_inputs, **self.kwargs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BackendWithOptions) and (self.backend, self.kwargs) == (other.backend, other.kwargs)

    def __hash__(self) -> int:
        return hash((self.backend, repr(self.kwargs)))
