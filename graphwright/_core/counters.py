"""`graphwright.counters`, laid out as PyTorch's `torch._dynamo.utils.counters`.

`counters["graph_break"][title]`, `counters["stats"]["unique_graphs"]`,
`counters["recompiles"][reason]`. `graphwright.reset()` clears them.
"""
from __future__ import annotations

import collections

counters: collections.defaultdict[str, collections.Counter] = collections.defaultdict(
    collections.Counter
)


def clear_counters() -> None:
    counters.clear()
