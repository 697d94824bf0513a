"""The `inductor` backend: the aten graphs of our AOT autograd, compiled by PyTorch's Inductor.

Entry point: `torch._inductor.compile_fx.compile_fx_inner`. It compiles one
aten-level graph that is already functional and decomposed, and does not
run PyTorch's AOT autograd again (`compile_fx`, the usual entry point, does:
it would trace our graphs a second time). What `compile_fx` would otherwise
do around it, we do here:
- trace with Inductor's decomposition table (`select_decomp_table`);
- run Inductor's joint-graph passes (`joint_graph_passes`) on the joint
  graph before partitioning and on the inference graph: among them the
  rewrite of random ops into seeded Inductor random ops, which its lowering
  requires;
- mark the outputs the user sees (`user_visible_output_idxs`) so that
  Inductor keeps their traced strides; every backward output is a gradient
  the user sees;
- pass fake tensors as example inputs (the placeholders' `meta["val"]`), call
  the result boxed (with a list), say whether it is a backward or an
  inference graph;
- compile under a TracingContext holding the graphs' fake mode, whose shape
  environment Inductor's FX graph cache needs (`_core/tracing_context.py`): a restarted
  process then loads the compiled graphs from `TORCHINDUCTOR_CACHE_DIR`
  instead of lowering them again;
- apply the configuration that `compile(mode=..., options=...)` asked for
  (`configure`, as `torch.compile` maps them: a mode is a set of Inductor
  config values from `torch._inductor.list_mode_options`, options are
  Inductor config names) around all of the above, the lazily compiled
  backward included.
Beyond what `compile_fx` does, each graph is rewritten where one of Inductor's
own pattern passes would change what it computes (`inductor_rewrites`).
Inductor is imported on first use, so `import graphwright` stays light.
"""
from __future__ import annotations

import contextlib
import difflib
import functools
import os
import time
import typing
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from .._core import artifacts, dump, logs, source_lines
from .._core import config as graphwright_config
from .._core.counters import counters
from .._core.errors import GraphwrightError
from .._core.tracing_context import compiling_with
from ..aot import USER_OUTPUTS_KEY, GraphCompilers, aot_compile
from ..aot.cache import Bypass
from .inductor_rewrites import rewrite_for_inductor
from .registry import register_backend


def _config_patch(config: dict[str, Any]):
    if graphwright_config.force_disable_caches:
        config = {**config, "force_disable_caches": True}
    if not config:
        return contextlib.nullcontext()
    from torch._inductor import config as inductor_config

    return inductor_config.patch(config)


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: list, *, kind: str, config: dict[str, Any]):
    from torch._inductor.compile_fx import compile_fx_inner

    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    if kind == "backward":
        visible = [i for i, value in enumerate(output.args[0]) if isinstance(value, torch.fx.Node)]
    else:
        visible = output.meta.get(USER_OUTPUTS_KEY, [])
    output.meta["user_visible_output_idxs"] = visible
    rewrite_for_inductor(gm)
    with _config_patch(config), compiling_with(_fake_mode(gm, example_inputs)):
        started = time.time_ns()
        compiled = compile_fx_inner(
            gm,
            example_inputs,
            is_backward=kind == "backward",
            is_inference=kind == "inference",
        )
        outcome = _fx_graph_cache_outcome(compiled, started)
    if outcome is not None:
        counters["inductor"][outcome] += 1
    if artifacts.shown("output_code"):  # a compile trace has Inductor's own record of the code
        _publish_output_code(compiled, kind)
    return compiled


def _fake_mode(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
    """The fake mode of the graph's example inputs, else of its values (a graph without tensor
    inputs: `torch.manual_seed(3); torch.randint(...)`); None when it has no fake value."""
    for value in [*example_inputs, *(node.meta.get("val") for node in gm.graph.nodes)]:
        if isinstance(value, FakeTensor):
            return value.fake_mode
    return None




def _fx_graph_cache_outcome(compiled: Any, started_ns: int) -> str | None:
    """`fxgraph_cache_hit`, `_miss` or `_bypass`: what Inductor's FX graph cache did for the graph
    compiled since `started_ns` (None when the cache is off).

    Inductor records the key on what it returns when it looked the graph up; the entry's
    folder tells a hit from a miss, which writes a new entry there during the compile."""
    from torch._inductor import config as inductor_config
    from torch._inductor.codecache import FxGraphCache

    key = getattr(compiled, "_fx_graph_cache_key", None)
    if key is None:
        enabled = inductor_config.fx_graph_cache and not inductor_config.force_disable_caches
        return "fxgraph_cache_bypass" if enabled else None
    try:
        written = max(entry.stat().st_mtime_ns for entry in os.scandir(FxGraphCache._get_tmp_dir_for_key(key)))
    except (OSError, ValueError):  # a remote cache's hit: nothing on the local disk
        return "fxgraph_cache_hit"
    return "fxgraph_cache_miss" if written >= started_ns else "fxgraph_cache_hit"


def _publish_output_code(compiled: Any, kind: str) -> None:
    """Where Inductor wrote the module it generated for the graph (logged), and a copy (dumped)."""
    call = getattr(compiled, "current_callable", None)
    path = getattr(getattr(call, "__code__", None), "co_filename", None)
    source = getattr(compiled, "source_code", None)
    if source is None and path is not None:
        with open(path) as file:
            source = file.read()
    copy = dump.write(f"inductor_{kind}.py", _with_source_lines(source, path)) if source is not None else None
    if logs.enabled("output_code"):
        owner = artifacts.scope_name() or "a graph"
        logs.log("output_code", f"Output code of the {kind} graph of {owner} written to: {path}"
                 + (f" (copied to {copy})" if copy else ""))


def _with_source_lines(source: str, path: str | None) -> str:
    """The generated module with, above each line Inductor maps to aten nodes (its `linemaps`, made
    from the nodes' stack_trace), the user's line those nodes came from, as a comment."""
    from torch._inductor.codecache import PyCodeCache

    linemap = PyCodeCache.linemaps.get(path)
    if not linemap:
        return source
    comments = {lineno: source_lines.comment(trace) for lineno, trace in zip(*linemap)}
    lines = source.split("\n")
    out = []
    for lineno, line in enumerate(lines, 1):
        text = comments.get(lineno)
        if text:
            out.append(line[:len(line) - len(line.lstrip())] + text)
        out.append(line)
    return "\n".join(out)


def _joint_graph_passes(gm: torch.fx.GraphModule, config: dict[str, Any]) -> torch.fx.GraphModule:
    from torch._inductor.fx_passes.joint_graph import joint_graph_passes
    from torch._inductor.virtualized import V

    # Some passes make new fake values and look for the fake mode where compile_fx puts it.
    fake_mode = _fake_mode(gm, [])
    with V.set_fake_mode(fake_mode) if fake_mode else contextlib.nullcontext(), _config_patch(config):
        return joint_graph_passes(gm)


class _InductorStore:
    """Finds the graphs Inductor compiled again, in a later process, through its FX graph cache
    (the AOT cache's `GraphStore`): a handle is a graph's cache key, the lines it was computed
    from, and the guards on symbolic sizes Inductor assumed, as PyTorch's AOT autograd cache
    keeps them. A later process loads the graph by that key without computing it again."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def identity(self) -> str:
        from torch._inductor import config as inductor_config
        from torch._inductor.codecache import CacheBase

        with _config_patch(self.config):
            if inductor_config.triton.cudagraphs:
                raise Bypass("CUDA graphs (mode='reduce-overhead') are on")
            settings = inductor_config.save_config_portable(ignore_private_configs=False)
        return f"inductor {CacheBase.get_system()['hash']} {sorted(settings.items())!r}"

    def handle(self, compiled: Any) -> Any:
        key = getattr(compiled, "_fx_graph_cache_key", None)
        if key is None:
            return None
        return key, list(compiled._fx_graph_cache_debug_lines or ()), compiled.guards_expr

    def load(self, handle: Any, kind: str, fake_mode: Any) -> Any:
        from torch._inductor.codecache import FxGraphCache
        from torch._inductor.output_code import CompiledFxGraphConstants
        from torch._inductor.utils import BoxedBool

        key, debug_lines, guards = handle
        constants = CompiledFxGraphConstants()
        with _config_patch(self.config), compiling_with(fake_mode):
            # the AOT cache's key stands for the sizes' guards: the entry must be the one saved
            compiled, _ = FxGraphCache.load_with_key(
                key, debug_lines, [], local=True, remote_cache=None, is_backward=kind == "backward",
                constants=constants, evaluate_guards=lambda expression, hints: expression == guards)
            if compiled is None:
                counters["inductor"]["fxgraph_cache_miss"] += 1
                return None
            compiled._fx_graph_cache_key, compiled._fx_graph_cache_debug_lines = key, debug_lines
            compiled.post_compile([], constants, {
                "cudagraphs": BoxedBool(False), "is_backward": kind == "backward",
                "is_inference": kind == "inference", "boxed_forward_device_index": None})
        counters["inductor"]["fxgraph_cache_hit"] += 1
        return compiled


class InductorBackend:
    """The `inductor` backend with a set of Inductor config values (none: Inductor's defaults).

    >>> backend = lookup_backend("inductor").configure(mode="max-autotune-no-cudagraphs")
    >>> backend.config
    {'max_autotune': True, 'coordinate_descent_tuning': True}
    """

    __name__ = "inductor"
    graphwright_dynamic_shapes = True  # a graph with symbolic sizes is compiled once per size (`aot_compile`)

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = dict(config or {})
        self._compilers = GraphCompilers(
            forward=functools.partial(_compile_graph, kind="forward", config=self.config),
            backward=functools.partial(_compile_graph, kind="backward", config=self.config),
            inference=functools.partial(_compile_graph, kind="inference", config=self.config),
            graph_passes=functools.partial(_joint_graph_passes, config=self.config),
            store=_InductorStore(self.config),
            specialises_values=True,
        )

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        """Trace `gm` with our AOT autograd, then compile each aten graph with Inductor."""
        return aot_compile(gm, example_inputs, self._compilers,
                           decompositions=functools.cache(self._decompositions))

    def _decompositions(self) -> dict:
        """Inductor's decomposition table, made when a graph is first traced: an AOT cache hit
        needs none, nor Inductor's code generator, which making it imports."""
        # Inductor's decompositions call into its lowerings, which `compile_fx` imports.
        import torch._inductor.compile_fx  # noqa: F401
        from torch._inductor.decomposition import select_decomp_table

        with _config_patch(self.config):
            return select_decomp_table()

    def configure(self, mode: str | None, options: dict[str, Any] | None, dynamic: bool | None) -> "InductorBackend":
        """This backend with `mode`'s config values, or with `options`, checked as torch.compile
        checks them: an unknown name or a value of the wrong type is an error."""
        if mode is not None and mode != "default":
            from torch._inductor import list_mode_options

            modes = list_mode_options(None, dynamic)
            if mode not in modes:
                raise GraphwrightError(
                    f"Unknown compile mode {mode!r}",
                    explanation=f"The modes are: {', '.join(repr(m) for m in modes)}.",
                    hints=["Pass one of those, or Inductor config values as `options`."])
            return InductorBackend({**self.config, **modes[mode]})
        return InductorBackend({**self.config, **_checked_options(options or {})})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InductorBackend) and self.config == other.config

    def __hash__(self) -> int:
        return hash(tuple(sorted((key, repr(value)) for key, value in self.config.items())))

    def __repr__(self) -> str:
        return f"InductorBackend({self.config})"


def _checked_options(options: dict[str, Any]) -> dict[str, Any]:
    from torch._inductor import config as inductor_config

    known = inductor_config.get_config_copy()
    checked = {}
    for key, value in options.items():
        name = key.replace("-", "_")
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            raise GraphwrightError(
                f"Unknown Inductor option {key!r}",
                explanation=f"`options` are Inductor config names; the valid ones are: {', '.join(known)}.",
                hints=[f"Did you mean {' or '.join(repr(c) for c in close)}?" if close else
                       "See `torch._inductor.list_options()` and `torch._inductor.config`."])
        expected = inductor_config.get_type(name)
        if typing.get_origin(expected) is None and not isinstance(value, expected):
            raise GraphwrightError(
                f"Inductor option {key!r} takes a {type(known[name]).__name__}, got {type(value).__name__}",
                hints=[f"Its default is {known[name]!r}."])
        checked[name] = value
    return checked


inductor = register_backend(InductorBackend(), name="inductor")
