"""The AOT cache: what ahead-of-time autograd made for a graph, kept on disk for later processes.

For one captured graph and call signature an entry holds what the runtime needs (the graph's
`GraphMetadata`, the partition's counts) and the backend's handles to the graphs it compiled
(its `GraphStore`; Inductor's are its FX graph cache keys). A process that captures the same
graph again (a restart, or the same function after `graphwright.reset()`) loads the compiled
graphs through those handles and skips the joint trace (with the metadata it reads), the
backend's graph passes, the partition and the code generation, as PyTorch's AOT autograd cache
does.

The key hashes everything that decides those products: the captured graph's code (and its
subgraphs'), each input's fake value (sizes, strides, dtype, device, requires_grad, view-ness,
which inputs share storage; symbolic sizes with their ranges), the call's grad mode, the
recompute setting, the backend's identity (its config, Inductor's), the global state a trace
reads (deterministic algorithms, default dtype, autocast, matmul precision) and the versions of
Python, torch and graphwright (a hash of its source). A graph the key cannot pin down is
bypassed: one calling Python functions from outside torch and graphwright (their code can change
behind an unchanged graph), holding objects other than its subgraphs and its parameters and
buffers (which become inputs), or whose products do not pickle.

An entry that cannot be read (truncated, corrupted, from another format) is reported with a
warning and compiled again; a write that fails warns and leaves the compile's result in use.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pathlib
import pickle
import sys
import tempfile
import types
import warnings
from collections.abc import Sequence
from typing import Any, Protocol

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from .._core import artifacts, config, logs, structured_trace
from .._core.counters import counters
from .._core.specialised_values import carried_value
from .metadata import GraphMetadata

FORMAT = 2
"""The entries' layout; entries of another format are not read."""


class GraphStore(Protocol):
    """A backend's way to find the graphs it compiled again, in a later process."""

    def identity(self) -> str:
        """Everything of the backend's own that decides what it compiles (its config)."""

    def handle(self, compiled: Any) -> Any:
        """A picklable way back to `compiled` in a later process; None when there is none."""

    def load(self, handle: Any, kind: str, fake_mode: Any) -> Any:
        """The compiled graph (`kind`: forward, backward, inference) `handle` leads to; None
        when it is gone."""


@dataclasses.dataclass
class Entry:
    """One signature's AOT products. `backward` is None for an inference signature."""

    meta: GraphMetadata
    forward: Any
    backward: Any = None
    num_saved_tensors: int = 0
    inputs_without_gradient: tuple[int, ...] = ()
    gradient_tangents: tuple[frozenset[int], ...] = ()

    def __getstate__(self) -> dict:
        # A TreeSpec pickles its leaves as pytree's deprecated LeafSpec class (a warning on
        # every load): the output structure travels as nested tuples instead.
        meta = dataclasses.replace(self.meta, out_spec=_spec_as_tuples(self.meta.out_spec))
        return {**self.__dict__, "meta": meta}

    def __setstate__(self, state: dict) -> None:
        meta = state["meta"]
        self.__dict__.update(state, meta=dataclasses.replace(meta, out_spec=_spec_from_tuples(meta.out_spec)))


def _spec_as_tuples(spec: pytree.TreeSpec) -> tuple | None:
    if spec.is_leaf():
        return None
    return spec.type, spec.context, tuple(_spec_as_tuples(child) for child in spec.children())


def _spec_from_tuples(spec: tuple | None) -> pytree.TreeSpec:
    if spec is None:
        return pytree.treespec_leaf()
    kind, context, children = spec
    return pytree.TreeSpec(kind, context, [_spec_from_tuples(child) for child in children])


class Bypass(Exception):
    """The graph cannot be cached; the message says why."""


def enabled() -> bool:
    return config.aot_cache and not config.force_disable_caches


def folder() -> pathlib.Path:
    """Where entries live: `graphwright.config.cache_dir`, else beside Inductor's caches."""
    if config.cache_dir:
        return pathlib.Path(config.cache_dir) / "aot"
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return pathlib.Path(cache_dir()) / "graphwright" / "aot"


def signature_key(gm: fx.GraphModule, fakes: Sequence[Any], fake_mode: Any, grad_enabled: bool,
                  recompute: bool, store: GraphStore) -> str:
    """The entry key of `gm` called with inputs like `fakes`; raises `Bypass`."""
    parts = [
        f"format {FORMAT}", _versions(), store.identity(), _global_state(), _settings(),
        f"grad {grad_enabled} recompute {recompute}",
        *_graph_parts(gm, gm),
        *_input_parts(fakes, fake_mode),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def load(key: str) -> Entry | None:
    path = folder() / key
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        _warn(f"cannot read the AOT cache entry {path} ({error}); compiling the graph again")
        return None
    try:
        stored = pickle.loads(data)
        if stored["format"] != FORMAT:
            raise ValueError(f"format {stored['format']}, not {FORMAT}")
        entry = stored["entry"]
        if not isinstance(entry, Entry):
            raise TypeError(f"holds a {type(entry).__name__}")
    except Exception as error:  # any damage a file can have: the compile reruns
        _warn(f"the AOT cache entry {path} is unreadable ({type(error).__name__}: {error}); "
              "compiling the graph again")
        return None
    return entry


def save(key: str, entry: Entry) -> None:
    """Write `entry` atomically (a reader sees the old file or the new one, never a part)."""
    try:
        data = pickle.dumps({"format": FORMAT, "entry": entry})
    except Exception as error:  # a constant output or metadata that does not pickle
        bypassed(f"its AOT products do not pickle ({type(error).__name__}: {error})")
        return
    directory = folder()
    temporary = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{key}.")
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, directory / key)
    except OSError as error:
        if temporary is not None and os.path.exists(temporary):
            os.remove(temporary)
        _warn(f"cannot write the AOT cache entry into {directory} ({error}); the graph compiled "
              "in this process is used, and a later process compiles it again")


def counted(outcome: str, detail: str) -> None:
    """Count a lookup's outcome (`hit`, `miss`, `bypass`) in `counters["aot_cache"]`, and log it
    with `detail` on the `caches` channel."""
    counters["aot_cache"][f"aot_cache_{outcome}"] += 1
    if logs.enabled("caches"):
        owner = artifacts.scope_name() or "a graph"
        logs.log("caches", f"AOT cache {outcome} for {owner}: {detail}")
    if structured_trace.on:
        structured_trace.artifact(f"aotautograd_cache_{outcome}", {"detail": detail}, "json")


def bypassed(why: str) -> None:
    counted("bypass", f"not cached, {why}")


def _warn(message: str) -> None:
    warnings.warn(f"graphwright: {message}", stacklevel=2)


@functools.cache
def _versions() -> str:
    return f"python {sys.version} torch {torch.__version__} {torch.version.git_version} graphwright {_source_hash()}"


def _source_hash() -> str:
    """A hash of graphwright's own source: any change of the compiler is another key."""
    root = pathlib.Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _settings() -> str:
    """graphwright's own knobs (`graphwright.config`)."""
    return repr(sorted((name, value) for name, value in vars(config).items()
                       if not name.startswith("_") and isinstance(value, (bool, int, float, str, type(None)))))


def _global_state() -> str:
    return " ".join(str(value) for value in (
        torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.get_default_dtype(), torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
        *((torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)) for device in ("cpu", "cuda")),
    ))


_PLAIN = (type(None), bool, int, float, complex, str, torch.dtype, torch.device, torch.layout,
          torch.memory_format, type(...), slice)
_TRUSTED_MODULES = ("torch", "operator", "_operator", "math", "builtins", "graphwright")


def _graph_parts(gm: fx.GraphModule, root: fx.GraphModule) -> list[str]:
    """The code of `gm` and of the graphs it holds; raises `Bypass` for what code cannot pin."""
    parts = [gm.code]
    for node in gm.graph.nodes:
        if "unbacked_bindings" in node.meta:
            raise Bypass("its values depend on data (unbacked symbols)")
        if node.op == "call_function":
            parts.append(_target_part(node.target))
        elif node.op == "call_module":
            raise Bypass(f"it calls the module {node.target!r} ({type(gm.get_submodule(node.target)).__name__})")
        elif node.op == "get_attr":
            parts.append(_attribute_part(gm, node.target, root))
        fx.node.map_aggregate((node.args, node.kwargs), _check_argument)
    return parts


def _target_part(target: Any) -> str:
    """What the graph's code does not say about a call's target (its name is in the code)."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator)):
        return ""
    describe = getattr(target, "cache_description", None)
    if describe is not None and _trusted_module(type(target).__module__):
        description = describe()  # graphwright's own call objects, None when they hold user code
        if description is not None:
            return description
        trusted = False
    elif isinstance(target, types.FunctionType):
        trusted = _trusted_module(target.__module__) and "<locals>" not in target.__qualname__
    elif isinstance(target, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)):
        owner = getattr(target, "__objclass__", None) or getattr(target, "__self__", None)
        module = getattr(target, "__module__", None) or getattr(owner, "__module__", None) \
            or getattr(owner, "__name__", "")
        trusted = _trusted_module(module)
    else:
        trusted = False
    if not trusted:
        raise Bypass(f"it calls {getattr(target, '__qualname__', type(target).__name__)}, user code "
                     "(which can change behind the same graph)")
    return ""


def _trusted_module(module: str | None) -> bool:
    return bool(module) and module.partition(".")[0] in _TRUSTED_MODULES


def _check_argument(value: Any) -> Any:
    if not isinstance(value, (fx.Node, *_PLAIN)):
        raise Bypass(f"a node takes a {type(value).__name__}")
    return value


def _attribute_part(gm: fx.GraphModule, target: str, root: fx.GraphModule) -> str:
    value = gm
    for name in target.split("."):
        value = getattr(value, name)
    if isinstance(value, fx.GraphModule):
        return "\n".join([f"subgraph {target}", *_graph_parts(value, root)])
    if isinstance(value, torch.Tensor) and gm is root and _is_state(gm, target):
        return f"state {target}"  # an input of the aten graphs: its fake value is keyed
    raise Bypass(f"it holds {target!r}, a {type(value).__name__}")


def _is_state(gm: fx.GraphModule, target: str) -> bool:
    owner, _, name = target.rpartition(".")
    module = gm.get_submodule(owner)
    return name in module._parameters or name in module._buffers


def _tensor_part(value: torch.Tensor) -> str:
    return (f"{value.dtype} {value.device} {value.layout} {tuple(map(str, value.shape))} "
            f"{tuple(map(str, value.stride()))} {value.storage_offset()} rg={value.requires_grad} "
            f"leaf={value.is_leaf} view={value._is_view()}")


def _input_parts(fakes: Sequence[Any], fake_mode: Any) -> list[str]:
    storages: dict[int, int] = {}
    symbols: set = set()
    parts = []
    for value in fakes:
        if isinstance(value, torch.Tensor):
            storage = storages.setdefault(value.untyped_storage()._cdata, len(storages))
            parts.append(f"tensor {type(value).__name__} {_tensor_part(value)} storage={storage} "
                         f"value={carried_value(value)}")
            for size in (*value.shape, *value.stride(), value.storage_offset()):
                if isinstance(size, torch.SymInt):
                    symbols |= size.node.expr.free_symbols
        elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            parts.append(f"symbolic {type(value).__name__} {value.node.expr}")
            symbols |= value.node.expr.free_symbols
        elif isinstance(value, (bool, int, float, type(None))):
            parts.append(f"constant {value!r}")
        else:
            raise Bypass(f"an input is a {type(value).__name__}")
    shape_env = getattr(fake_mode, "shape_env", None)
    if symbols and shape_env is not None:
        parts += [f"range {symbol} {shape_env.var_to_range.get(symbol)}" for symbol in sorted(symbols, key=str)]
    return parts
