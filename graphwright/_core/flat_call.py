"""Applying a function to flattened inputs: the target of a `nonstrict_trace` graph node.

The strict tracer flattens a call's arguments into a pytree spec, the
constant leaves baked in at that call site, and the flat inputs the graph
passes (tensor leaves and symbolic ints first, then the parameters and
buffers of every `nn.Module` leaf). `FlatCall` is the graph node's target: it
rebuilds the arguments, runs the function with each module's state swapped
for the tensors it was given, and returns the output's tensors and symbolic
sizes as a tuple.

Under the `eager` backend this runs the real function; under ahead-of-time
autograd the same call runs on traced tensors, so the function's body is
traced into the aten graphs: by replaying the operations recorded when the
strict tracer met the call (`traced_body`), so that the body's Python runs
once per compile. It lives in layer 1 so that every layer reaches it.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree
from torch._guards import detect_fake_mode

from .errors import GraphwrightError
from .user_stack import user_frames_of_stack


@dataclass(frozen=True)
class ModuleState:
    """The parameter and buffer names of one module input, in the order the graph passes them."""

    module: torch.nn.Module
    names: tuple[str, ...]


@contextlib.contextmanager
def swapped_module_state(states: Sequence[ModuleState], tensors: Sequence[torch.Tensor]) -> Iterator[None]:
    """Run with each module's parameters and buffers replaced by `tensors`, restored after.

    Entries of `_parameters`/`_buffers` are set directly: traced tensors are not
    `nn.Parameter`s, and `setattr` would reject them.
    """
    saved: list[tuple[dict, str, Any]] = []
    position = 0
    try:
        for state in states:
            for name in state.names:
                owner_path, _, attr = name.rpartition(".")
                owner = state.module.get_submodule(owner_path) if owner_path else state.module
                table = owner._parameters if attr in owner._parameters else owner._buffers
                tensor = tensors[position]
                position += 1
                if table[attr] is not tensor:
                    saved.append((table, attr, table[attr]))
                    table[attr] = tensor
        yield
    finally:
        for table, attr, original in reversed(saved):
            table[attr] = original


def module_state_names(module: torch.nn.Module) -> tuple[str, ...]:
    """Every parameter and buffer path of `module`, tied ones under each of their names."""
    return tuple(name for name, _ in (*module.named_parameters(remove_duplicate=False),
                                      *module.named_buffers(remove_duplicate=False)))


def apply_flat_call(fn: Callable, in_spec: pytree.TreeSpec, leaves: list, input_positions: Sequence[int],
                    module_states: Sequence[ModuleState], flat_inputs: Sequence[Any],
                    reads_constants: bool = True) -> Any:
    """`fn(*args, **kwargs)` with `(args, kwargs)` rebuilt from `in_spec` and the flat inputs.

    `leaves` are the constant leaves of the call site; the first
    `len(input_positions)` flat inputs fill the tensor leaves at those
    positions, the rest are the module states' tensors. Run on fake tensors,
    `fn` may read real tensors that are not inputs (they are constants of the
    trace) unless `reads_constants` is False (a leaf function's fake must not).
    """
    leaves = list(leaves)
    for position, tensor in zip(input_positions, flat_inputs):
        leaves[position] = tensor
    args, kwargs = pytree.tree_unflatten(leaves, in_spec)
    with swapped_module_state(module_states, flat_inputs[len(input_positions):]), \
            _as_traced_when_fake(flat_inputs, reads_constants):
        return fn(*args, **kwargs)


@contextlib.contextmanager
def _as_traced_when_fake(flat_inputs: Sequence[Any], reads_constants: bool) -> Iterator[None]:
    """While a tracer runs the body on fake tensors: the body's captured real tensors
    (globals, closures) are constants, and `torch.compiler.is_compiling()` reads True, as
    under torch.compile. Run on real tensors (the eager backend), the body runs as written."""
    fake_mode = detect_fake_mode(flat_inputs)
    if fake_mode is None:
        yield
        return
    compiler = torch.compiler
    allowed, compiling = fake_mode.allow_non_fake_inputs, compiler._is_compiling_flag
    fake_mode.allow_non_fake_inputs = reads_constants
    compiler._is_compiling_flag = True
    try:
        yield
    finally:
        fake_mode.allow_non_fake_inputs, compiler._is_compiling_flag = allowed, compiling


class FlatCall:
    """One call site of a nonstrict_trace'd function, as a graph node's target.

    `flat_call(*flat_inputs)` returns the tuple of the output leaves at `output_positions`
    (tensors, and sizes that were symbolic when traced); `out_spec` and the other output
    leaves are what the trace saw (the strict tracer specialises on them). `traced_body`,
    when set, replays the body's recorded operations on fake inputs instead of running it.
    """

    def __init__(self, fn: Callable, in_spec: pytree.TreeSpec, leaves: list, input_positions: Sequence[int],
                 module_states: Sequence[ModuleState]) -> None:
        self.fn = fn
        self.in_spec = in_spec
        self.leaves = leaves
        self.input_positions = tuple(input_positions)
        self.module_states = tuple(module_states)
        self.out_spec: pytree.TreeSpec | None = None
        self.output_positions: tuple[int, ...] = ()
        self.traced_body: Callable | None = None
        self.call_site = ""  # the user's `file:line`, set by the tracer
        name = getattr(fn, "__name__", type(fn).__name__)
        # torch.fx names the node's global after these.
        self.__name__ = "nonstrict_" + (re.sub(r"\W+", "_", name).strip("_") or "fn")
        self.__qualname__ = self.__name__
        self.__module__ = __name__

    def call_function(self, *flat_inputs: Any) -> Any:
        """The function's own result (for the trace that records its structure)."""
        return apply_flat_call(self.fn, self.in_spec, self.leaves, self.input_positions,
                               self.module_states, flat_inputs)

    def __call__(self, *flat_inputs: Any) -> tuple:
        if self.traced_body is not None and detect_fake_mode(flat_inputs) is not None:
            with _as_traced_when_fake(flat_inputs, reads_constants=True):
                return tuple(self.traced_body(*flat_inputs))
        leaves, spec = pytree.tree_flatten(self.call_function(*flat_inputs))
        if spec != self.out_spec:
            raise GraphwrightError(
                f"nonstrict_trace-ed function {self.fn.__qualname__} returned another structure at run "
                "time than while it was traced",
                explanation=f"Traced: {self.out_spec}; now: {spec}. Its output structure is specialised "
                            "when the call site is traced and must not change between calls.",
                hints=["Make the output structure independent of tensor values."],
                user_stack=user_frames_of_stack())
        return tuple(leaves[index] for index in self.output_positions)

    def specialised_constants(self) -> dict[str, Any]:
        """The call site's non-tensor inputs, baked into the graph, by argument path
        (`args[1]`, `kwargs['k'][0]`); modules are inputs through their tensors, not constants."""
        paths = self._leaf_paths()
        named = dict(zip(paths, self.leaves))
        tensor_paths = {paths[position] for position in self.input_positions}
        return {path: leaf for path, leaf in named.items()
                if path not in tensor_paths and not isinstance(leaf, torch.nn.Module)}

    def _leaf_paths(self) -> list[str]:
        markers = list(range(len(self.leaves)))
        try:
            with_paths, _ = pytree.tree_flatten_with_path(pytree.tree_unflatten(markers, self.in_spec))
        except Exception:  # no key paths, or a class whose unflatten rejects the markers: number them
            return [f"leaf {index}" for index in markers]
        return [_argument_path(key_path) for key_path, _ in with_paths]

    def describe(self) -> str:
        """One line for `explain`: the function, where it is called, its specialised constants."""
        where = f" at {self.call_site}" if self.call_site else ""
        constants = ", ".join(f"{path}={value!r}" for path, value in self.specialised_constants().items())
        return (f"nonstrict_trace call of {getattr(self.fn, '__qualname__', self.fn)}{where}; "
                f"specialised constants: {constants or 'none'}")

    def __repr__(self) -> str:
        return f"<nonstrict_trace call of {getattr(self.fn, '__qualname__', self.fn)}>"


def _argument_path(key_path: tuple) -> str:
    """`(args, kwargs)` key path to `args[0]['a']` / `kwargs['k']`."""
    head, *rest = key_path
    return ("args" if head.idx == 0 else "kwargs") + pytree.keystr(tuple(rest))


def nonstrict_call_sites(gm: torch.fx.GraphModule) -> list[FlatCall]:
    """The nonstrict_trace calls of a captured graph, in graph order (what `explain` lists)."""
    return [node.target for node in gm.graph.nodes
            if node.op == "call_function" and isinstance(node.target, FlatCall)]
