"""`cond`: the target of a `torch.cond` node.

It calls PyTorch's `torch.ops.higher_order.cond`. Ahead-of-time autograd
functionalizes with the Functionalize key in the thread's include set; the
operator's autograd rule records that set and re-enters it when it traces the
branches' backward, where functionalization would then wrap the outputs of a
nested cond and hide that they require grad. So the call runs without the key
in the include set: the operands, functional tensors, still reach the
operator's functionalization rule through their own keys. It lives in layer 1
so that every layer reaches it.
"""
from __future__ import annotations

from typing import Any

import torch

_cond = torch.ops.higher_order.cond
_FUNCTIONALIZE = torch._C.DispatchKey.Functionalize


def cond(pred: Any, true_fn: Any, false_fn: Any, operands: tuple) -> Any:
    """`torch.ops.higher_order.cond(pred, true_fn, false_fn, operands)`."""
    include = torch._C._dispatch_tls_local_include_set()
    if not include.has(_FUNCTIONALIZE):
        return _cond(pred, true_fn, false_fn, operands)
    with torch._C._ForceDispatchKeyGuard(include.remove(_FUNCTIONALIZE),
                                         torch._C._dispatch_tls_local_exclude_set()):
        return _cond(pred, true_fn, false_fn, operands)
