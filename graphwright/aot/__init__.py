"""Layer 3: ahead-of-time autograd on top of the non-strict tracer.

`aot_compile(gm, example_inputs, compilers)` turns a torch-level graph into
functional aten forward/backward (or inference) graphs, compiles them with
the backend's `GraphCompilers` and returns a callable that runs them under
autograd as eager would.
"""
from .compile import (
    USER_OUTPUTS_KEY,
    AOTCompiledGraph,
    GraphCompilers,
    aot_compile,
    example_values,
)
from .partition import Partition, partition_joint

__all__ = [
    "AOTCompiledGraph",
    "GraphCompilers",
    "Partition",
    "USER_OUTPUTS_KEY",
    "aot_compile",
    "example_values",
    "partition_joint",
]
