"""Public test helpers: `graphwright.testing.CompileCounter` and friends."""
from .backends.testing import CompileCounter, CompileCounterWithBackend

__all__ = ["CompileCounter", "CompileCounterWithBackend"]
