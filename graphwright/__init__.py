"""graphwright: a graph-capture compiler for PyTorch programs written in Python.

The public API is documented in the project's API.md; everything public is
importable from here. This file only re-exports.
"""
from . import debug, testing
from ._core import config
from ._core.counters import counters
from ._core.logs import set_logs
from ._core.errors import (
    BackendError,
    ConstraintViolationError,
    DataDependentError,
    ForbiddenCallError,
    GraphwrightError,
    InvalidInputError,
    InvalidMarkingError,
    LeafFunctionError,
    MissingFakeKernelError,
    NonFakeInputError,
    TraceError,
    Unsupported,
)
from ._core.leaf_function import leaf_function
from ._core.rules import (
    allow_in_graph,
    disallow_in_graph,
    nonstrict_trace,
)
from .api import (
    compile,
    disable,
    error_on_graph_break,
    explain,
    graph_break,
    mark_dynamic,
    mark_static,
    maybe_mark_dynamic,
    reset,
)
from .backends import list_backends, register_backend
from .nonstrict import check_nonstrict, make_fx

__all__ = [
    "BackendError",
    "ConstraintViolationError",
    "DataDependentError",
    "ForbiddenCallError",
    "GraphwrightError",
    "InvalidInputError",
    "InvalidMarkingError",
    "LeafFunctionError",
    "MissingFakeKernelError",
    "NonFakeInputError",
    "TraceError",
    "Unsupported",
    "allow_in_graph",
    "disallow_in_graph",
    "leaf_function",
    "nonstrict_trace",
    "compile",
    "disable",
    "error_on_graph_break",
    "explain",
    "graph_break",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "reset",
    "config",
    "counters",
    "list_backends",
    "check_nonstrict",
    "make_fx",
    "register_backend",
    "testing",
    "debug",
    "set_logs",
]
