"""Layer 4: the backend registry and the `eager`, `aot_eager`, `inductor` backends.

Importing this package registers every built-in backend.
"""
from . import aot_eager, eager, inductor  # noqa: F401  (register the built-in backends)
from .registry import list_backends, lookup_backend, register_backend

__all__ = ["list_backends", "lookup_backend", "register_backend"]
