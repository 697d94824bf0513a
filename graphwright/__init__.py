"""graphwright: a graph-capture compiler for PyTorch programs written in Python.

The public API is documented in the project's API.md; everything public is
importable from here. This file only re-exports.
"""
from ._core import config
from ._core.counters import counters
from ._core.errors import (
    BackendError,
    DataDependentError,
    GraphwrightError,
    InvalidInputError,
    MissingFakeKernelError,
    NonFakeInputError,
    TraceError,
    Unsupported,
)

__all__ = [
    "BackendError",
    "DataDependentError",
    "GraphwrightError",
    "InvalidInputError",
    "MissingFakeKernelError",
    "NonFakeInputError",
    "TraceError",
    "Unsupported",
    "config",
    "counters",
]
