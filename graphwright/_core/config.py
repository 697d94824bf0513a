"""User-settable knobs, read at the moment they matter.

Set them as attributes: `graphwright.config.cache_size_limit = 16`. The compile caches'
knobs also take their first value from the environment, as PyTorch's do.
"""
import os

cache_size_limit: int = 8
"""Compiled entries kept per function; past this, calls run eagerly with a warning."""

dropped_cache_limit: int = 16
"""Caches of compiled functions kept after every wrapper of them is dropped (the most recently
compiled first), so that compiling the same function or module class again reuses its graphs.
Beyond these, a cache and its graphs are freed with its last wrapper."""

reorderable_logging: bool = True
"""Logger and `warnings.warn` calls in a compiled region are replayed after the graph."""

reorderable_print: bool = False
"""Also replay `print` after the graph instead of breaking it."""

capture_scalar_outputs: bool = False
"""`.item()` and `.tolist()` become graph values (unbacked symbols) instead of graph breaks.
On whatever the setting under `fullgraph=True`, as in PyTorch 2.13."""

capture_dynamic_output_shape_ops: bool = False
"""Operators whose output shape depends on data (`nonzero`, boolean masks, `unique`) become
graph nodes with unbacked sizes instead of graph breaks. On under `fullgraph=True`."""

allow_unspec_int_on_nn_module: bool = False
"""An int attribute of an `nn.Module` (a step counter) that changed between calls becomes a
symbol under `dynamic=None`, as other ints do; off, as in PyTorch, it stays a constant and each
new value recompiles."""

allow_rnn: bool = True
"""`nn.RNN`/`nn.GRU`/`nn.LSTM` modules are traced into the graph (ahead-of-time autograd
takes their generic implementation). False breaks the graph around them, as PyTorch's
setting of the same name does by default."""

verbose: bool = False
"""Attach graphwright's internal traceback to errors and fallback warnings."""

leaf_function_validate_outputs: bool = False
"""Check on every call of a compiled `leaf_function` that the real function's outputs have the
shapes and dtypes of its fake implementation's (their structure is always checked, once)."""

leaf_function_check_escaped_gradients: bool = False
"""Raise when a `leaf_function`'s outputs depend on tensors that require grad but are not its
arguments (globals, closures): gradients cannot reach them through the leaf call."""

optimize_ddp: bool = True
"""A graph compiled inside `DistributedDataParallel`'s forward is split at DDP's gradient buckets,
each piece compiled on its own, so that gradient all-reduce overlaps the backward (PyTorch's
DDP optimizer)."""

cache_dir: str | None = os.environ.get("GRAPHWRIGHT_CACHE_DIR") or None
"""The folder of graphwright's compile cache (the AOT cache: what ahead-of-time autograd made
for a graph, reused by later processes). None: a `graphwright` folder inside Inductor's cache
folder (`TORCHINDUCTOR_CACHE_DIR`, by default `torchinductor_<user>` in the system's temporary
folder), whose compiled graphs the AOT cache's entries refer to. Environment:
`GRAPHWRIGHT_CACHE_DIR`."""

aot_cache: bool = os.environ.get("GRAPHWRIGHT_AOT_CACHE", "1") != "0"
"""Keep the AOT products of graphs compiled with a backend that can find its compiled graphs
again (`inductor`) in `cache_dir`, and reuse them in later processes and after
`graphwright.reset()`, as PyTorch's AOT autograd cache does. Environment:
`GRAPHWRIGHT_AOT_CACHE=0` turns it off."""

force_disable_caches: bool = os.environ.get("GRAPHWRIGHT_FORCE_DISABLE_CACHES", "0") == "1"
"""Turn off every compile cache that outlives a process: graphwright's AOT cache, and
Inductor's caches for the graphs graphwright compiles with it (Inductor's
`force_disable_caches`). Environment: `GRAPHWRIGHT_FORCE_DISABLE_CACHES=1`."""
