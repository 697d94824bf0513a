"""The tensor-subclass protocol as graphwright reads it.

A traceable wrapper subclass (PyTorch's TwoTensor, DTensor, a jagged nested
tensor, a user's scaled tensor) is a `_make_wrapper_subclass` tensor whose
`__tensor_flatten__` names its inner tensors (attributes) and returns a
constant context, and whose `__tensor_unflatten__(inner, context, outer_size,
outer_stride)` rebuilds it. What a compiled graph specialises on is its class,
those attribute names and that context, and its inner tensors' metadata.

An attribute may name an object that is not a tensor (DTensor's
`device_mesh`): PyTorch calls such an object opaque. It is not data of the
graph but a constant of the subclass's structure, which a compiled graph
specialises on by identity.

A subclass may also have a Python API of its own, used on the subclass object
rather than through `__torch_dispatch__` (DTensor's `from_local`,
`redistribute`, `to_local`, `placements`): `is_api_member` says which
attributes of a subclass those are, and `dtensor_from_local` is the function a
captured graph calls for `DTensor.from_local`.

The strict tracer's guards and AOT autograd's desugaring both read subclasses
through this module; it reads, it never builds a tensor or traces. It also says
how fake tensors must be computed where a subclass pairs inner results
(`exact_fake_runs`).
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensor, disable_fake_tensor_cache
from torch.utils._python_dispatch import is_traceable_wrapper_subclass


def is_wrapper_subclass(value: Any) -> bool:
    """A tensor of a traceable wrapper subclass (`__tensor_flatten__` and `__tensor_unflatten__`)."""
    return isinstance(value, torch.Tensor) and type(value) is not torch.Tensor \
        and is_traceable_wrapper_subclass(value)


def is_wrapper_subclass_type(cls: type) -> bool:
    """A tensor class whose instances are traceable wrapper subclasses."""
    return isinstance(cls, type) and issubclass(cls, torch.Tensor) and cls is not torch.Tensor \
        and hasattr(cls, "__tensor_flatten__") and hasattr(cls, "__tensor_unflatten__")


def has_own_dispatch(cls: type) -> bool:
    """Whether tensors of `cls` run Python of their own (`__torch_dispatch__`) on every aten op."""
    return cls.__torch_dispatch__ is not torch.Tensor.__torch_dispatch__


def dispatches_itself(value: Any) -> bool:
    """Whether `value` is a tensor whose class runs Python of its own on every aten op (TwoTensor,
    DTensor, a jagged nested tensor): a custom operator called with one runs once per tensor it
    holds. Plain and fake tensors, `nn.Parameter` and subclasses without a dispatch do not."""
    if not isinstance(value, torch.Tensor) or type(value) is torch.Tensor or isinstance(value, FakeTensor):
        return False
    return has_own_dispatch(type(value))


def flatten_signature(tensor: torch.Tensor) -> tuple[tuple[str, ...], Any]:
    """The inner attribute names and the constant context `__tensor_flatten__` gives."""
    attributes, context = tensor.__tensor_flatten__()
    return tuple(attributes), context


def metadata_guard(cls: type) -> Callable[[Any, Any], Any] | None:
    """The class's own `__metadata_guard__(compiled_context, context)`: whether a tensor with flatten
    context `context` may run what was compiled for `compiled_context` (a context holding a value
    the compiled code does not depend on). None where the class has none, or one that is not a
    classmethod of two arguments (contexts are then compared by equality, as without one)."""
    found = inspect.getattr_static(cls, "__metadata_guard__", None)
    if not isinstance(found, classmethod):
        return None
    try:
        inspect.signature(found.__func__).bind(cls, None, None)
    except TypeError:
        return None
    return getattr(cls, "__metadata_guard__")


def same_flatten(tensor: torch.Tensor, expected: tuple[tuple[str, ...], Any, Callable[[Any, Any], Any]]) -> bool:
    """Whether `tensor` flattens to the attribute names `expected` holds, with a context its
    class's `metadata_guard` (the third item) accepts in place of the compiled one."""
    attributes, context = tensor.__tensor_flatten__()
    names, compiled_context, custom = expected
    return tuple(attributes) == names and bool(custom(compiled_context, context))


def inner_tensors(tensor: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """The (attribute, inner tensor) pairs of a wrapper subclass tensor, one level down."""
    return [(name, value) for name, value in _inner_values(tensor) if isinstance(value, torch.Tensor)]


def opaque_attributes(tensor: torch.Tensor) -> list[tuple[str, Any]]:
    """The (attribute, object) pairs of the inner values of a wrapper subclass tensor that are not
    tensors (DTensor's device mesh), one level down."""
    return [(name, value) for name, value in _inner_values(tensor) if not isinstance(value, torch.Tensor)]


def _inner_values(tensor: torch.Tensor) -> list[tuple[str, Any]]:
    return [(name, getattr(tensor, name)) for name in tensor.__tensor_flatten__()[0]]


def overrides_torch_function(cls: type) -> bool:
    """A Python tensor subclass whose operations go through its `__torch_function__` (not an
    nn.Parameter, whose `__torch_function__` is disabled, nor a traceable wrapper subclass, whose
    `__torch_dispatch__` decides)."""
    return cls is not torch.Tensor and issubclass(cls, torch.Tensor) \
        and cls.__torch_function__ is not torch._C._disabled_torch_function_impl \
        and not is_wrapper_subclass_type(cls)


class _AnySize:
    """Stands, in a flatten context pattern, for a symbolic size: equal to any value (the input's
    own size guards check what the sizes may be)."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "<any size>"


ANY_SIZE = _AnySize()


def context_pattern(context: Any) -> Any:
    """A flatten context as a graph compiled on symbolic sizes takes it: each symbolic size in it
    (DTensor keeps its sizes in its context) equal to any value. A context without symbols is
    returned as it is."""
    if isinstance(context, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ANY_SIZE
    if isinstance(context, (tuple, list)):
        items = [context_pattern(item) for item in context]
        if all(new is old for new, old in zip(items, context)):
            return context
        if isinstance(context, list):
            return items
        if hasattr(context, "_fields"):  # a named tuple
            return type(context)(*items)
        return tuple(items)  # a torch.Size cannot hold the pattern's stand-ins
    if isinstance(context, dict):
        items = {key: context_pattern(item) for key, item in context.items()}
        return context if all(items[key] is item for key, item in context.items()) else items
    return context


def is_api_member(cls: type, name: str) -> bool:
    """Whether `name` is an attribute a wrapper subclass `cls` defines in Python beyond
    torch.Tensor's (DTensor's `redistribute`, `placements`): it runs on the subclass object itself."""
    return is_wrapper_subclass_type(cls) and hasattr(cls, name) and not hasattr(torch.Tensor, name)


def holds(value: Any, name: str) -> bool:
    """Whether a wrapper subclass tensor holds `name` itself (an inner tensor, a constant its
    `__init__` stored), rather than through its class."""
    return is_wrapper_subclass(value) and name in getattr(value, "__dict__", ()) and not hasattr(type(value), name)


def dtensor_from_local(*args: Any, **kwargs: Any) -> torch.Tensor:
    """`DTensor.from_local`, as a captured graph calls it."""
    from torch.distributed.tensor import DTensor

    return DTensor.from_local(*args, **kwargs)


API_FUNCTIONS = frozenset({dtensor_from_local})
"""Graph targets that make subclasses through their Python API."""


def exact_fake_runs(fake_mode: Any, with_subclasses: bool) -> contextlib.AbstractContextManager:
    """With wrapper subclasses about (`with_subclasses`), `fake_mode` computes every op again,
    without its dispatch cache.

    The cache rebuilds a cached op's output at storage offset 0 (PyTorch 2.13): eager's
    `select_scatter` into a view at offset 3 returns offset 3, and so does the op's first fake
    run, but a second run on equal metadata returns 0. A subclass runs an op once per inner
    tensor: the second, a cache hit, then disagrees with the first, and the subclass refuses to
    be made of them (TwoTensor asserts equal storage offsets). Functionalization runs such ops
    itself, regenerating a view written through. Plain tensors read no offset there.
    """
    return disable_fake_tensor_cache(fake_mode) if with_subclasses else contextlib.nullcontext()
