"""PyTorch's opaque objects as graphwright reads them.

PyTorch registers some classes as opaque (`torch._library.opaque_object`):
objects a graph takes as they are, never looking inside. A *value* type (a
DTensor placement: `Shard(0)`, `Replicate()`) is a constant compared by
equality; a *reference* type (a `DeviceMesh`, a `ProcessGroup`) is a constant
that is the same object, compared by identity. The strict tracer holds both
as constants of the graph, guarded accordingly, and runs their methods on the
real objects. This module answers which kind a class is; it keeps no state.
"""
from __future__ import annotations

from typing import Literal

import torch
from torch._library import opaque_object

OpaqueKind = Literal["value", "reference"]


def opaque_kind(cls: type) -> OpaqueKind | None:
    """"value" or "reference" for a class registered as opaque (or a subclass of one), else None.

    `torch.Generator` is registered too, but it is state that random operations advance, not a
    constant: it stays what the tracer makes of it otherwise (a graph break where it is used)."""
    if issubclass(cls, torch.Generator):
        return None
    info = opaque_object.get_opaque_obj_info(cls)
    return None if info is None else info.opaque_typ
