"""`graph_break` and `disable` of the compiler under test: graphwright's, or
PyTorch's own in the reference mode (PyTorch does not know graphwright's)."""
from __future__ import annotations

import graphwright

from .harness import REFERENCE

if REFERENCE:
    import torch._dynamo

    graph_break = torch._dynamo.graph_break
    disable = torch._dynamo.disable
else:
    graph_break = graphwright.graph_break
    disable = graphwright.disable
