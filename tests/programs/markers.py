"""`graph_break`, `disable`, `error_on_graph_break` and the marking decorators of the compiler under test:
graphwright's, or PyTorch's own in the reference mode (PyTorch does not know graphwright's)."""
from __future__ import annotations

import graphwright

from .harness import REFERENCE

if REFERENCE:
    import torch._dynamo

    graph_break = torch._dynamo.graph_break
    disable = torch._dynamo.disable
    error_on_graph_break = torch._dynamo.error_on_graph_break
else:
    graph_break = graphwright.graph_break
    disable = graphwright.disable
    error_on_graph_break = graphwright.error_on_graph_break

if REFERENCE:
    from torch._dynamo.decorators import leaf_function

    allow_in_graph = torch._dynamo.allow_in_graph
    disallow_in_graph = torch._dynamo.disallow_in_graph
    nonstrict_trace = torch._dynamo.nonstrict_trace
else:
    allow_in_graph = graphwright.allow_in_graph
    disallow_in_graph = graphwright.disallow_in_graph
    leaf_function = graphwright.leaf_function
    nonstrict_trace = graphwright.nonstrict_trace
