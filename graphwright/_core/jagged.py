"""Jagged nested tensors as graphwright reads them.

A jagged nested tensor (`torch.nested.nested_tensor([...], layout=torch.jagged)`,
PyTorch's `NestedTensor`) is a traceable wrapper subclass around `_values`
(the sequences concatenated along the ragged dimension), `_offsets` (where
each sequence starts) and optionally `_lengths` and two tensors whose sizes
hold the shortest and longest sequence. Its ragged size is a *nested int*, a
SymInt that stands for "the lengths these offsets describe": equal only to
itself. Under a fake mode with a ShapeEnv it is a size symbol whose value is
a `SingletonInt`, bound to the offsets tensor it came from.

The nested int is never a number: a compiled graph cannot read it as one at
run time, and a guard cannot compare it. `is_ragged_size` says which sizes are
made of it; everything else about the layout is the subclass protocol's
(`subclass_protocol.py`). This module reads; the one tensor it builds is PyTorch's own
meta dummy (`make_view_dummy`).
"""
from __future__ import annotations

from typing import Any

import torch
from torch.utils._sympy.singleton_int import SingletonInt

RUNTIME_RAGGED_SIZE = -1
"""What a ragged outer size is at run time when a compiled graph rebuilds a jagged tensor:
`__tensor_unflatten__` on real offsets takes the nested int of the offsets themselves, so the
outer size it is given there is a placeholder (PyTorch's own compiler passes the same)."""


def is_jagged(value: Any) -> bool:
    """A tensor of the jagged layout (a `NestedTensor` or its fake)."""
    return isinstance(value, torch.Tensor) and value.layout is torch.jagged


def is_jagged_class(cls: type) -> bool:
    """PyTorch's `NestedTensor` or a subclass of it."""
    from torch.nested._internal.nested_tensor import NestedTensor

    return issubclass(cls, NestedTensor)


def make_view_dummy() -> None:
    """Make PyTorch's meta NestedTensor, the dummy that a jagged tensor made from dense ones
    dispatches on, as eager's first such construction does. Made lazily by the construction
    itself, it would be made inside the graph that first constructs one (meta tensors the graph
    returns for a module global), and that graph would not run again once the global is set."""
    from torch.nested._internal.nested_tensor import _nt_view_dummy

    _nt_view_dummy()


def is_static_ragged_size(size: Any) -> bool:
    """A real nested int: the ragged size of a jagged tensor traced without a symbol for it."""
    from torch.nested._internal.nested_int import NestedIntNode

    return isinstance(size, torch.SymInt) and isinstance(size.node, NestedIntNode)


def is_ragged_size(size: Any) -> bool:
    """Whether `size` (a size or stride) is made of a nested int: a real one, or a symbol whose
    value in its ShapeEnv is a `SingletonInt`."""
    if not isinstance(size, torch.SymInt):
        return False
    node = size.node
    if is_static_ragged_size(size):
        return True
    shape_env = getattr(node, "shape_env", None)
    if shape_env is None:
        return False
    values = shape_env.backed_var_to_val
    return any(isinstance(values.get(symbol), SingletonInt) for symbol in node.expr.free_symbols)


def ragged_source(value: torch.Tensor) -> str:
    """The inner attribute the ragged size of jagged tensor `value` is bound to: its lengths
    when it has them, else its offsets (as `NestedTensor` itself chooses)."""
    return "_offsets" if value._lengths is None else "_lengths"


def bind_ragged_size(tensor: torch.Tensor, size: torch.SymInt) -> None:
    """Make `size` the nested int of `tensor`, a stand-in for a jagged tensor's offsets or lengths
    (a functional wrapper of them while tracing): a jagged tensor made around it then has the
    same ragged size as the one it stands for, as PyTorch's own functional tensors do."""
    from torch.nested._internal.nested_tensor import _tensor_symint_registry

    _tensor_symint_registry[tensor] = size
