"""Jagged nested tensors under functionalization.

Other traceable wrapper subclasses are functionalized whole: a functional
wrapper around the subclass value. Autograd cannot take such a wrapper of a
nested tensor (it asks the wrapper for nested sizes the subclass does not
give), so a jagged tensor is functionalized through its inner tensors
instead: `functional` makes it again around functional wrappers of its
values and offsets, with the same ragged size, and autograd works on the
subclass as in eager. PyTorch's own ahead-of-time autograd does the same.

Functionalization must then run below the subclass, not above it: a call on
a jagged tensor skips it at its top (`JaggedCalls`), and the subclass's
`__torch_dispatch__` runs with it back on (`JaggedDispatch`), so the
operators it calls on the inner tensors are functionalized and recorded.
The backward runs with functionalization skipped throughout (autograd's
formulas call operators on jagged gradients from C++, where no torch function
is seen): `JaggedDispatch` puts every other operator back through it, so the
backward's functional wrappers, like the forward's, hold inner tensors only
(PyTorch's own functionalization is a dispatch mode, below the subclass).

A jagged input whose values are written in place is a mutated input like
any other (`mutated`), written back through the subclass at run time; any
other change of it in place is refused.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .._core.errors import BackendRefusal
from .._core.jagged import bind_ragged_size, is_jagged, is_static_ragged_size, ragged_source
from .._core.subclass_protocol import flatten_signature, inner_tensors
from .._core.user_stack import user_frames_of_stack

_FUNCTIONALIZE = torch._C.DispatchKey.Functionalize
_BACKWARDS = frozenset({torch.autograd.grad, torch.autograd.backward, torch.Tensor.backward})


def with_inner(value: torch.Tensor, convert: Callable[[Any], Any]) -> torch.Tensor:
    """Jagged tensor `value` made again around its inner tensors converted, with its ragged size."""
    attributes, context = flatten_signature(value)
    inner = {name: convert(getattr(value, name)) for name in attributes}
    bind_ragged_size(inner[ragged_source(value)], value.shape[value._ragged_idx])
    return type(value).__tensor_unflatten__(inner, context, value.shape, value.stride())


def holds_functional(value: Any) -> bool:
    """A jagged tensor around functional wrappers."""
    return is_jagged(value) and any(torch._is_functional_tensor(inner) for _, inner in inner_tensors(value))


def mutated(value: torch.Tensor, index: int) -> bool:
    """Whether the functionalized run wrote into jagged input `value` (number `index`): its
    values, in place (`x.mul_(2)`), which the runtime writes back through the subclass. Raise
    `BackendRefusal` for any other change (its offsets, lengths or any inner tensor's shape)."""
    changed = [name for name, inner in inner_tensors(value) if torch._is_functional_tensor(inner)
               and (torch._functionalize_has_data_mutation(inner) or torch._functionalize_has_metadata_mutation(inner))]
    if not changed:
        return False
    if changed == ["_values"] and not torch._functionalize_has_metadata_mutation(value._values):
        return True
    raise BackendRefusal(
        f"A compiled graph changes the {', '.join(changed)} of input {index}, a NestedTensor (jagged layout), "
        "in place",
        explanation="Ahead-of-time autograd writes back an in-place change of a jagged tensor's values only; "
        "its offsets and lengths say what its ragged size is.",
        hints=["With fullgraph=False the graph runs as captured; use the out-of-place operation, "
               "or compile with backend='eager'."],
        user_stack=user_frames_of_stack(),
    )


def dispatch_for(boundary: Any) -> contextlib.AbstractContextManager:
    """The modes a trace whose subclass `boundary` may hold jagged tensors runs under, else nothing
    (a mode costs every operator a Python call)."""
    if boundary is None or not boundary.may_hold_jagged:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    dispatch = stack.enter_context(JaggedDispatch())
    stack.enter_context(JaggedCalls(dispatch))
    return stack


def refuse_static(fakes: Any) -> None:
    """Raise `BackendRefusal` for a jagged input traced with a real nested int for its ragged size
    (PyTorch's meta dummy that `nested_tensor`, `as_nested_tensor` and `nested_tensor_from_jagged`
    read when they make a jagged tensor in the region): its size cannot be desugared."""
    for value in fakes:
        if is_jagged(value) and any(is_static_ragged_size(size) for size in value.shape):
            raise BackendRefusal(
                "AOT autograd does not compile a graph that makes a NestedTensor (jagged layout) from "
                "dense tensors (`torch.nested.nested_tensor`, `as_nested_tensor`, `nested_tensor_from_jagged`)",
                explanation="The graph reads PyTorch's meta NestedTensor that those constructors dispatch on, "
                "whose ragged size is not symbolic.",
                hints=["With fullgraph=False the graph runs as captured; make the nested tensor outside the "
                       "compiled region and pass it in, or compile with backend='eager'."],
                user_stack=user_frames_of_stack(),
            )


class JaggedCalls(TorchFunctionMode):
    """A call with a jagged tensor among its arguments skips functionalization at its top: there
    it would wrap the jagged result in a functional wrapper (when another argument is one, a
    weight), which autograd cannot take. `JaggedDispatch` functionalizes what the call does.

    A backward (`autograd.grad`) skips it throughout: autograd's formulas call operators on
    jagged gradients from C++, where no torch function is seen, so `JaggedDispatch` puts every
    operator that is not the subclass's own back through functionalization."""

    def __init__(self, dispatch: JaggedDispatch) -> None:
        super().__init__()
        self._dispatch = dispatch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _BACKWARDS:
            with _functionalization(included=False), self._dispatch.in_backward():
                return func(*args, **kwargs)
        if not any(is_jagged(leaf) for leaf in pytree.tree_leaves((args, kwargs))):
            return func(*args, **kwargs)
        with _functionalization(included=False):
            return func(*args, **kwargs)


class JaggedDispatch(TorchDispatchMode):
    """Functionalizes what a call on jagged tensors does: runs the subclass's `__torch_dispatch__`
    with functionalization on, and sends an operator on functional wrappers that reached here
    with functionalization skipped (by `JaggedCalls`) back through it; in a backward, every
    operator (a formula's factory too: its result must be a functional wrapper like the rest)."""

    def __init__(self) -> None:
        super().__init__()
        self._backward = False

    @contextlib.contextmanager
    def in_backward(self) -> Iterator[None]:
        backward, self._backward = self._backward, True
        try:
            yield
        finally:
            self._backward = backward

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        jagged = next((cls for cls in types if _jagged_class(cls)), None)
        if jagged is not None:  # the calls it makes on jagged tensors come here too
            with _functionalization(included=True), self:
                return jagged.__torch_dispatch__(func, types, args, kwargs)
        if torch._C._dispatch_tls_is_dispatch_key_excluded(_FUNCTIONALIZE) and (self._backward or any(
                isinstance(leaf, torch.Tensor) and torch._is_functional_tensor(leaf)
                for leaf in pytree.tree_leaves((args, kwargs)))):
            with _functionalization(included=True):
                return func(*args, **kwargs)
        return func(*args, **kwargs)


def _jagged_class(cls: type) -> bool:
    from torch.nested._internal.nested_tensor import NestedTensor

    return issubclass(cls, NestedTensor)


@contextlib.contextmanager
def _functionalization(included: bool) -> Iterator[None]:
    excluded = torch._C._dispatch_tls_is_dispatch_key_excluded(_FUNCTIONALIZE)
    torch._C._dispatch_tls_set_dispatch_key_excluded(_FUNCTIONALIZE, not included)
    try:
        yield
    finally:
        torch._C._dispatch_tls_set_dispatch_key_excluded(_FUNCTIONALIZE, excluded)
