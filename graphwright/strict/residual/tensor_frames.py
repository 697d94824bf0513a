"""Which calls from plain-Python code are worth compiling: those whose frame touches torch.

A function called from plain Python (code run with its calls routed) is compiled only
when its frame would hold something of torch's: its code names a torch module (or NumPy,
whose arrays the tracer models) among its globals, or its arguments, defaults or closure
cells hold a tensor, a module, a module class or a NumPy array, directly or inside lists,
tuples, dicts and named tuples. Any other call runs as Python (its own calls still routed),
as TorchDynamo's frame hook leaves such frames alone: a library's own
`is_torchdynamo_compiling()`, which imports torch inside its body, then answers False where
the program runs as Python, and the code that asked takes eager's path.

The test runs on every such call; it reads only the arguments' containers, never calls
user code.
"""
from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import torch

_PLAIN = (str, int, float, bool, type(None))


def names_torch(fn: types.FunctionType) -> bool:
    """Whether `fn`'s code reads a global that is torch, one of its modules, or NumPy."""
    numpy = sys.modules.get("numpy")
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        if isinstance(value, types.ModuleType) and (
                value is torch or value.__name__.startswith("torch.") or (numpy is not None and value is numpy)):
            return True
    return False


def _holds_tensor(value: Any, seen: set[int]) -> bool:
    if id(value) in seen:
        return False
    seen.add(id(value))
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        return True
    kind = type(value)
    if kind in _PLAIN:
        return False
    if kind is type:
        return issubclass(value, torch.nn.Module)
    if kind in (list, tuple):
        return any(_holds_tensor(item, seen) for item in value)
    if kind is dict:
        return any(_holds_tensor(item, seen) for item in list(value.values()))
    if isinstance(value, tuple) and hasattr(kind, "_fields"):
        return any(_holds_tensor(item, seen) for item in value)
    numpy = sys.modules.get("numpy")
    return numpy is not None and (kind is numpy.ndarray or isinstance(value, numpy.generic))


def _frame_holds_tensor(fn: types.FunctionType, args: tuple, kwargs: dict) -> bool:
    seen: set[int] = set()
    if any(_holds_tensor(arg, seen) for arg in args) or any(_holds_tensor(v, seen) for v in kwargs.values()):
        return True
    if fn.__defaults__ and _holds_tensor(fn.__defaults__, seen):
        return True
    if fn.__kwdefaults__ and any(_holds_tensor(v, seen) for v in fn.__kwdefaults__.values()):
        return True
    for cell in fn.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # a cell not yet filled
            continue
        if _holds_tensor(contents, seen):
            return True
    return False


class TensorGate:
    """`fn` called from plain Python: `compiled` when the call's frame holds a tensor (see the
    module docstring), else `python` (its body, its calls routed)."""

    __slots__ = ("fn", "compiled", "python")

    def __init__(self, fn: types.FunctionType, compiled: Callable, python: Callable) -> None:
        self.fn, self.compiled, self.python = fn, compiled, python

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _frame_holds_tensor(self.fn, args, kwargs):
            return self.compiled(*args, **kwargs)
        return self.python(*args, **kwargs)
