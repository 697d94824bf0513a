"""The state torch's optimizers make lazily on their first step, made for real before it is traced.

An optimizer's `_init_group(group, params, grads, ...)` fills the lists it is given and,
for a parameter whose state is still empty, makes that state (moment buffers, a step
count): on the first step only. Traced symbolically, the first step's graph would make the
state and the second step's could not reuse it (the state's keys are guarded), so a
training loop would compile its step twice. As TorchDynamo does, the tracer calls
`_init_group` for real first, on the real parameter group and lists of its own: the state
then exists, as eager's first step would have made it at this very point, and the traced
`_init_group` reads it like any state. Nothing else is run for real: the lists the traced
code passes are filled by the traced call itself.

Only a pre-existing optimizer whose `state` the region has not read yet is initialised so
(a state already read would be stale in the trace).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .values import DictValue, FunctionValue, ObjectValue, SequenceValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


def initialise_before_tracing(tracer: "Tracer", function: FunctionValue, args: list[Value],
                              kwargs: dict[str, Value]) -> None:
    """Before `function` (a bound method) is inlined: if it is the `_init_group` of an optimizer
    read from outside, make the state it would make, for real."""
    if function.name != "_init_group" or kwargs or not args:
        return
    receiver = function.bound_self
    optimizer = receiver.obj if isinstance(receiver, ObjectValue) else None
    if not isinstance(optimizer, torch.optim.Optimizer) or receiver.source is None or receiver.overlay \
            or id(optimizer.state) in tracer.memo_by_id:
        return
    group = tracer.real_by_value.get(id(args[0]))
    if not isinstance(args[0], DictValue) or not any(group is known for known in optimizer.param_groups):
        return
    if not all(isinstance(arg, SequenceValue) and arg.kind is list and not arg.items for arg in args[1:]):
        return
    if all(parameter.grad is None or optimizer.state.get(parameter) for parameter in group["params"]):
        return  # nothing to make
    real_lists: list[Any] = [[] for _ in args[1:]]
    with torch.no_grad():
        optimizer._init_group(group, *real_lists)
