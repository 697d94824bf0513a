"""DTensor's conversions inside a compiled region: one graph node each.

`DTensor.from_local` makes a DTensor of a plain tensor through an
autograd.Function whose arguments are a device mesh and placements: the
tracer records the call as one node, with the mesh and placements as
constants of the graph, and its fake result computed by DTensor itself
(`redistribute`, `to_local` and `full_tensor` are Tensor methods of a
DTensor value, recorded the same way by the tracer's method calls). Under
ahead-of-time autograd these calls run on the DTensors themselves
(`aot/subclass_calls.py`), and the collectives DTensor makes are recorded as
functional collectives.

What DTensor's dispatch does also depends on global state (`loss_parallel()`,
`implicit_replication()`): a graph computing on DTensors is guarded on it.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..._core.subclass_protocol import dtensor_from_local
from ..guards.sources import FunctionSource
from ..objects.values import Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


def _from_local(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    guard_dispatch_state(tracer)
    return tracer.graph.call("call_function", dtensor_from_local, args, kwargs)


def guard_dispatch_state(tracer: "Tracer") -> None:
    """A graph computing on DTensors was traced with DTensor's dispatch in one state: whether
    plain tensors count as replicated (`implicit_replication()`) and which operators have
    handlers of their own (`loss_parallel()` adds some). A call in another state recompiles."""
    tracer.add_guard(FunctionSource(), "query", (dispatch_state, dispatch_state()))


def dispatch_state() -> tuple[bool, frozenset]:
    """DTensor's dispatch state beyond its sharding rules (see `guard_dispatch_state`)."""
    dispatcher = sys.modules["torch.distributed.tensor"].DTensor._op_dispatcher
    return bool(dispatcher._allow_implicit_replication), frozenset(dispatcher._custom_op_handlers)


def is_dtensor(value: Any) -> bool:
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(value, module.DTensor)


def handler_for(target: Any) -> Callable | None:
    """The handler of `DTensor.from_local`; None for anything else. DTensor is looked up only
    once the program imported it (importing it takes half a second)."""
    module = sys.modules.get("torch.distributed.tensor")
    if module is None:
        return None
    from_local = module.DTensor.from_local  # a staticmethod or a classmethod, by torch version
    if getattr(target, "__func__", target) is not getattr(from_local, "__func__", from_local):
        return None
    return _from_local
