"""`torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=..., **kwargs)` inside a region.

`fn` is traced as a subgraph and the graph calls a `CheckpointCall`
(`_core/recompute.py`) with it: run eagerly it is PyTorch's non-reentrant
checkpoint; under ahead-of-time autograd its operations are marked, and the
partitioner recomputes them in the backward instead of saving their results.
Values and gradients are those of the plain call. As under `torch.compile`,
both `use_reentrant` settings are captured this way. A custom `context_fn`
(selective checkpointing) is not modelled: a graph break.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch.utils.checkpoint

from ..._core.recompute import CheckpointCall
from ..interpreter import graph_breaks as gb
from ..objects import operations
from ..objects.values import ConstantValue, Value
from . import subgraphs
from .subgraphs import trace_subgraph

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_checkpoint = torch.utils.checkpoint.checkpoint
_OWN_OPTIONS = ("preserve_rng_state", "determinism_check")


def call_checkpoint(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = subgraphs.bind_arguments(tracer, _checkpoint, args, kwargs)
    context_fn = bound["context_fn"]
    if not (isinstance(context_fn, ConstantValue) and context_fn.value is torch.utils.checkpoint.noop_context_fn):
        reason = "a `context_fn` (selective checkpointing) is not modelled"
        raise tracer.graph_break(gb.HIGHER_ORDER_CALL, f"checkpoint: {reason}",
                                 op="torch.utils.checkpoint.checkpoint", reason=reason)
    function_kwargs = dict(bound["kwargs"].items)
    options = {"determinism_check": operations.python_value(tracer, bound["determinism_check"])}
    if "preserve_rng_state" in function_kwargs:
        options["preserve_rng_state"] = operations.truth(tracer, function_kwargs.pop("preserve_rng_state"))
    function_args = list(bound["args"].items)
    body = trace_subgraph(tracer, bound["function"], function_args, function_kwargs,
                          purpose="A checkpointed function")
    inputs = [*subgraphs.graph_arguments([*function_args, *function_kwargs.values()]), *body.lifted]
    target = CheckpointCall(options)
    fakes = [subgraphs.fake_value(value) for value in inputs]
    result = subgraphs.run_on_fakes(tracer, "torch.utils.checkpoint.checkpoint",
                                    lambda: target(body.module, *fakes))
    graph = tracer.graph
    outputs = graph.call_with_result(target, [graph.add_submodule("checkpoint_body", body.module), *inputs], result)
    return body.rebuild(outputs.items)


HANDLERS = {_checkpoint: call_checkpoint}
