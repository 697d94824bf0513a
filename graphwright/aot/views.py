"""Views as the chain of aten view ops that made them, read while tracing and replayed at run time.

Functionalization keeps on every functional tensor the view ops that made it
from the base of its storage (PyTorch's "view metas"). An output that aliases
an input, another output or an intermediate is described by that chain: one
`ViewStep` per op, naming the op by its overload and holding its non-tensor
arguments, so that the chain pickles with the rest of the metadata (the AOT
cache). The runtime replays the chain on the real base: a dtype view, a
complex/real view, a conjugate view or the strides of an `out=` target come
back as eager made them, which one geometric `as_strided` cannot express.

A symbolic argument (a size under `dynamic=True`) is kept when it is made of
the call's input sizes and integers with `+`, `*`, `**` and `//`: it is read
again from the call's inputs at run time, exactly. Any other (a data-dependent
size) makes the chain unusable, and the graph computes that output instead.

This module reads functional tensors and builds replays; it never traces.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from torch._C import _functionalization
from torch.utils._sympy.functions import FloorDiv

Replay = Callable[[torch.Tensor, Sequence[Any]], torch.Tensor]
"""`replay(base, call_args)`: the view of `base`; `call_args` feed symbolic arguments."""


@dataclasses.dataclass(frozen=True)
class RuntimeSize:
    """A symbolic argument, as a Python expression over the call's inputs `a` (`a[0].size(1) * 2`)."""

    source: str


@dataclasses.dataclass(frozen=True)
class ViewStep:
    """One aten view op of a chain: `op(base, *args, **dict(kwargs))`, then `[out_index]` for an
    op that returns several views (`split`, `unbind`)."""

    op: str
    args: tuple
    kwargs: tuple[tuple[str, Any], ...] = ()
    out_index: int | None = None


ViewChain = tuple[ViewStep, ...]


def input_size_names(fake_inputs: Sequence[Any]) -> dict[sympy.Symbol, str]:
    """Where each symbol of the inputs' sizes is read at run time: `a[i].size(d)`, or `a[i]` for
    a symbolic int input."""
    names: dict[sympy.Symbol, str] = {}
    for i, value in enumerate(fake_inputs):
        if isinstance(value, torch.SymInt):
            _name_symbol(names, value, f"a[{i}]")
        elif isinstance(value, torch.Tensor):
            for d, size in enumerate(value.shape):
                if isinstance(size, torch.SymInt):
                    _name_symbol(names, size, f"a[{i}].size({d})")
    return names


def _name_symbol(names: dict, value: torch.SymInt, source: str) -> None:
    expr = value.node.expr
    if isinstance(expr, sympy.Symbol):
        names.setdefault(expr, source)


def view_chain(tensor: Any, size_names: dict[sympy.Symbol, str]) -> ViewChain | None:
    """The view ops that made the functional tensor `tensor` from its storage's base; None when
    one of them cannot be described (or replayed exactly)."""
    if not isinstance(tensor, torch.Tensor) or not torch._is_functional_tensor(tensor):
        return None
    steps = []
    for meta in _functionalization.get_view_meta_sequence(tensor):
        step = _step_of(meta, size_names)
        if step is None:
            return None
        steps.append(step)
    return tuple(steps)


def relative_chain(chain: ViewChain | None, base_chain: ViewChain | None) -> ViewChain | None:
    """The steps that lead from the view `base_chain` describes to the one `chain` does; None
    when `chain` does not go through that base, or adds nothing to it."""
    if chain is None or base_chain is None:
        return None
    n = len(base_chain)
    if len(chain) <= n or chain[:n] != base_chain:
        return None
    return chain[n:]


def _step_of(meta: Any, size_names: dict[sympy.Symbol, str]) -> ViewStep | None:
    name = type(meta).__name__
    if not name.endswith("_ViewMeta"):
        return None
    op = _view_op(name[: -len("_ViewMeta")])
    if op is None:
        return None
    # The tuple holds: whether an argument is symbolic, the output index of an op returning
    # several views, two flags of functionalization's own, then the op's arguments after `self`.
    fields = meta.as_tuple()
    arguments = op._schema.arguments[1:]
    multi_output = isinstance(op._schema.returns[0].type, torch.ListType)
    head = 4 if multi_output else 3
    if len(fields) != head + len(arguments):
        return None
    values = [_portable(v, size_names) for v in fields[head:]]
    if any(v is _UNUSABLE for v in values):
        return None
    args = tuple(v for a, v in zip(arguments, values) if not a.kwarg_only)
    kwargs = tuple((a.name, v) for a, v in zip(arguments, values) if a.kwarg_only)
    if _has_runtime_sizes(tuple(v for _, v in kwargs)):
        return None  # no view op takes a size by keyword: not worth a replay of its own
    return ViewStep(str(op), args, kwargs, fields[1] if multi_output else None)


@functools.lru_cache(maxsize=None)
def _view_op(unambiguous_name: str) -> torch._ops.OpOverload | None:
    """The aten view overload PyTorch names `view_dtype`, `split_Tensor`, `_reshape_alias`...
    (the op's name, then its overload's unless it is the default one)."""
    candidates = [(unambiguous_name, "default")] + [
        (unambiguous_name[:i], unambiguous_name[i + 1:])
        for i, c in enumerate(unambiguous_name) if c == "_" and i > 0
    ]
    for name, overload in candidates:
        packet = getattr(torch.ops.aten, name, None)
        if isinstance(packet, torch._ops.OpOverloadPacket) and overload in packet.overloads():
            op = getattr(packet, overload)
            # an in-place view op (`t_`) changes its base's metadata: not replayed on a real base
            if op.is_view and not op._schema.is_mutable:
                return op
    return None


_UNUSABLE = object()


def _portable(value: Any, size_names: dict[sympy.Symbol, str]) -> Any:
    """An argument as picklable data: lists as tuples, a symbolic size as a `RuntimeSize`."""
    if isinstance(value, (list, tuple)):
        items = tuple(_portable(v, size_names) for v in value)
        return _UNUSABLE if any(v is _UNUSABLE for v in items) else items
    if isinstance(value, torch.SymInt):
        expr = value.node.expr
        if isinstance(expr, sympy.Integer):
            return int(expr)
        source = _size_source(expr, size_names)
        return _UNUSABLE if source is None else RuntimeSize(source)
    if isinstance(value, (torch.SymFloat, torch.SymBool, torch.Tensor)):
        return _UNUSABLE
    return value


def _size_source(expr: sympy.Expr, size_names: dict[sympy.Symbol, str]) -> str | None:
    if isinstance(expr, sympy.Integer):
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return size_names.get(expr)
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        parts = [_size_source(arg, size_names) for arg in expr.args]
        if None in parts:
            return None
        return "(" + (" + " if isinstance(expr, sympy.Add) else " * ").join(parts) + ")"
    if isinstance(expr, sympy.Pow) and isinstance(expr.exp, sympy.Integer) and expr.exp > 0:
        base = _size_source(expr.base, size_names)
        return None if base is None else f"({base} ** {int(expr.exp)})"
    if isinstance(expr, FloorDiv):
        base, divisor = (_size_source(arg, size_names) for arg in expr.args)
        return None if base is None or divisor is None else f"({base} // {divisor})"
    return None


def make_replay(chain: ViewChain) -> Replay:
    """The callable that replays `chain`, built once (the runtime calls it on every call)."""
    steps = [_replay_step(step) for step in chain]
    if len(steps) == 1:
        return steps[0]

    def replay(base, call_args):
        for step in steps:
            base = step(base, call_args)
        return base

    return replay


def _overload(name: str) -> torch._ops.OpOverload:
    namespace, packet, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


def _replay_step(step: ViewStep) -> Replay:
    op = _overload(step.op)
    kwargs = dict(step.kwargs)
    index = step.out_index
    if not _has_runtime_sizes(step.args):
        args = step.args
        if index is None:
            return lambda base, call_args: op(base, *args, **kwargs)
        return lambda base, call_args: op(base, *args, **kwargs)[index]
    constants: dict[str, Any] = {}
    arguments = eval(f"lambda a: ({''.join(_source(v, constants) + ', ' for v in step.args)})", constants)
    if index is None:
        return lambda base, call_args: op(base, *arguments(call_args), **kwargs)
    return lambda base, call_args: op(base, *arguments(call_args), **kwargs)[index]


def _has_runtime_sizes(value: Any) -> bool:
    if isinstance(value, tuple):
        return any(_has_runtime_sizes(v) for v in value)
    return isinstance(value, RuntimeSize)


def _source(value: Any, constants: dict[str, Any]) -> str:
    """Python source that makes `value` from the call's inputs `a` (constants go by name)."""
    if isinstance(value, RuntimeSize):
        return value.source
    if isinstance(value, tuple):
        return "(" + "".join(_source(v, constants) + ", " for v in value) + ")"
    name = f"c{len(constants)}"
    constants[name] = value
    return name
