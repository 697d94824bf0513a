"""Activation checkpointing: the target of its graph nodes, and the mark left on what to recompute.

The strict tracer traces a function given to `torch.utils.checkpoint.checkpoint`
as a subgraph and records one node calling a `CheckpointCall` with it. Run on
real tensors (the `eager` backend) the call is PyTorch's non-reentrant
checkpoint of the subgraph: activations are dropped and recomputed in the
backward. Traced (ahead-of-time autograd runs the graph on fake tensors) it runs
the subgraph inside a recompute region: the non-strict recorder marks every
operation recorded there with `RECOMPUTE_KEY`, and the partitioner recomputes
marked operations in the backward graph instead of saving their results (but
for random ones, whose results are saved). It lives in layer 1 so that every
layer reaches it.
"""
from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils.checkpoint

RECOMPUTE_KEY = "graphwright_recompute"
"""`node.meta` key of an operation recorded inside a checkpointed function (its region's number)."""

regions: list[int] = []
"""The recompute regions being traced, innermost last (the recorder reads the last)."""
_region_numbers = itertools.count()
_FAKE = torch._C._TorchDispatchModeKey.FAKE


@contextlib.contextmanager
def recompute_region() -> Iterator[None]:
    """Operations recorded inside are marked for recomputation in the backward."""
    regions.append(next(_region_numbers))
    try:
        yield
    finally:
        regions.pop()


class CheckpointCall:
    """One checkpointed call, as a graph node's target: `call(body, *inputs)` returns the
    body's outputs. `options` are the checkpoint's own (`preserve_rng_state`,
    `determinism_check`), used when it runs on real tensors."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.__name__ = self.__qualname__ = "checkpoint"  # torch.fx names the node's global after it

    def __call__(self, body: Any, *inputs: Any) -> Any:
        if torch._C._get_dispatch_mode(_FAKE) is not None:  # traced: by us, on fake tensors
            with recompute_region():
                return body(*inputs)
        return torch.utils.checkpoint.checkpoint(body, *inputs, use_reentrant=False, **self.options)

    def __repr__(self) -> str:
        return f"<checkpoint {self.options}>"

    def cache_description(self) -> str | None:
        """The call for the AOT cache's key (its body is a subgraph, keyed by its code); None when
        an option is the user's code (a `context_fn`)."""
        if any(callable(value) for value in self.options.values()):
            return None
        return repr(self)
