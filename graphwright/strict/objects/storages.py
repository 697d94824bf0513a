"""A tensor's untyped storage (`t.untyped_storage()`), modelled on the tensor's fake.

The storage's size is the fake storage's: a constant (guarded on the real input's storage,
which the tensor guard does not check) or, where it depends on a symbolic size, a graph
node that reads it. `resize_` is a graph node (`inductor::resize_storage_bytes_`, the
operator PyTorch's tracer records), so it changes the real storage when the graph runs and
the fake one while tracing. After the graph the storage is the tensor's own again
(`t.untyped_storage()`, the one object eager hands out for it). Reading the data (`data_ptr`,
`tolist`) is a graph break; so is any method this module does not model.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..guards.sources import StorageSource
from ..interpreter import graph_breaks as gb
from ..interpreter.symbolic_sizes import holds_symbol
from .values import ConstantValue, MethodValue, StorageValue, TensorValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_SIZES = frozenset({"size", "nbytes"})
_READS_DATA = frozenset({"data_ptr", "tolist", "__getitem__", "__iter__"})
METHODS = _SIZES | {"resize_", "element_size"}


def storage_nbytes(tensor: torch.Tensor) -> int:
    """The size in bytes of the tensor's storage: the graph's node for a symbolic one."""
    return tensor.untyped_storage().nbytes()


def storage_of(tensor: TensorValue) -> StorageValue:
    return StorageValue(tensor, StorageSource(tensor.source) if tensor.source is not None else None)


def same_storage(lhs: StorageValue, rhs: StorageValue) -> bool:
    """Eager hands out one storage object per storage, whichever view asks for it."""
    return lhs.tensor.fake.untyped_storage()._cdata == rhs.tensor.fake.untyped_storage()._cdata


def attribute(tracer: "Tracer", storage: StorageValue, name: str) -> Value | None:
    if name == "device":
        return ConstantValue(storage.tensor.fake.device)
    if name in METHODS or name in _READS_DATA:
        return MethodValue(storage, name)
    if not hasattr(torch.UntypedStorage, name):
        return None
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"untyped_storage().{name}", name=name,
                             type="UntypedStorage")


def call_method(tracer: "Tracer", storage: StorageValue, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    if name in _SIZES and not args and not kwargs:
        return _nbytes(tracer, storage)
    if name == "element_size" and not args and not kwargs:
        return ConstantValue(1)  # an untyped storage counts bytes
    if name == "resize_" and len(args) == 1 and not kwargs:
        tracer.graph.call("call_function", torch.ops.inductor.resize_storage_bytes_.default,
                          [storage.tensor, args[0]], {}, effectful=True)
        return storage
    if name in _READS_DATA:
        raise tracer.graph_break(gb.TENSOR_TO_PYTHON, f"UntypedStorage.{name}()", what=f"UntypedStorage.{name}()")
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"untyped_storage().{name}()", name=f"{name}()",
                             type="UntypedStorage")


def _nbytes(tracer: "Tracer", storage: StorageValue) -> Value:
    size = storage.tensor.fake.untyped_storage().nbytes()
    if holds_symbol(size):
        return tracer.graph.call("call_function", storage_nbytes, [storage.tensor], {})
    real = tracer.real_tensors.get(id(storage.tensor))
    if real is not None and storage.source is not None:  # as the input's storage is when the call starts, before any resize_
        tracer.add_guard(storage.source, "call", ("nbytes", (), real.untyped_storage().nbytes()))
    return ConstantValue(int(size))
