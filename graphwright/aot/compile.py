"""`aot_compile`: a torch-level graph in, a callable that runs its aten graphs out.

For each call signature that matters to autograd (is grad mode on, which
inputs require grad) this module analyzes the graph, traces either the
joint graph (then partitions it) or the inference graph, hands the aten
graphs to the backend's graph compiler and wraps the result with the
runtime. Signatures are compiled lazily, on their first call.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from . import joint
from .metadata import analyze_graph
from .partition import Partition, partition_joint
from .runtime import BoxedFn, LazyBackward, make_inference_function, make_training_function

GraphCompiler = Callable[[torch.fx.GraphModule, list], BoxedFn]
"""Compiles one aten graph: `(gm, fake_example_inputs) -> boxed callable(list) -> outputs`.

The output node of a forward or inference graph lists, in
`meta[USER_OUTPUTS_KEY]`, the indices of the outputs whose layout the user
sees: a compiler must give those the strides they were traced with.
"""

USER_OUTPUTS_KEY = "graphwright_user_outputs"


@dataclasses.dataclass(frozen=True)
class GraphCompilers:
    """The backend's compilers for the three kinds of aten graph.

    `graph_passes`, when given, rewrites the joint graph before it is
    partitioned and the inference graph before it is compiled (a code
    generator's own pattern rewrites, e.g. Inductor's random-op seeding).
    """

    forward: GraphCompiler
    backward: GraphCompiler
    inference: GraphCompiler
    graph_passes: Callable[[torch.fx.GraphModule], torch.fx.GraphModule] | None = None


@dataclasses.dataclass
class CompiledSignature:
    """What was built for one call signature, kept for inspection (tests, `explain`)."""

    run: Callable[..., Any]
    mutates_inputs: bool = False
    inference_graph: torch.fx.GraphModule | None = None
    joint_graph: torch.fx.GraphModule | None = None
    partition: Partition | None = None


def example_values(gm: torch.fx.GraphModule) -> list:
    """The placeholders' fake values, as graph compilers take them."""
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def _static_strides(strides) -> tuple[int, ...] | None:
    try:
        return tuple(int(s) for s in strides)
    except (TypeError, ValueError):
        return None


def _backward_example_values(part: Partition, forward: BoxedFn, fake_mode) -> list:
    """The backward's example inputs, with saved tensors in the layout the forward really returns.

    A compiled forward may choose other strides than the traced ones (Inductor
    makes convolution outputs channels-last); it reports them as
    `output_strides` (one entry per output, None when unknown), and the
    backward must be compiled for what it will receive.
    """
    values = example_values(part.backward)
    reported = getattr(forward, "output_strides", None)
    if not reported:
        return values
    start = part.num_forward_outputs
    saved = reported[start : start + part.num_saved_tensors]
    with fake_mode:
        for i, strides in enumerate(saved):
            value = values[i]
            strides = _static_strides(strides) if strides is not None else None
            if strides is not None and strides != tuple(value.stride()):
                values[i] = torch.empty_strided(
                    value.shape, strides, dtype=value.dtype, device=value.device
                )
    return values


def _fake_mode_of(example_inputs: Sequence[Any]) -> FakeTensorMode:
    for value in example_inputs:
        if isinstance(value, FakeTensor):
            return value.fake_mode
    return FakeTensorMode()


def _lifted_state(gm: torch.fx.GraphModule) -> tuple[list[str], list[tuple[torch.nn.Module, str]]]:
    """Parameters and buffers owned by `gm` itself, which become extra graph inputs.

    Returns their dotted names and (owning module, attribute) slots, read
    again on every call since an optimizer or the user may replace them.
    """
    named = [*gm.named_parameters(remove_duplicate=False), *gm.named_buffers(remove_duplicate=False)]
    names = [name for name, _ in named]
    slots = []
    for name in names:
        owner, _, attribute = name.rpartition(".")
        slots.append((gm.get_submodule(owner), attribute))
    return names, slots


class AOTCompiledGraph:
    """The callable a backend returns: `compiled(*args)` runs `gm(*args)` through aten graphs.

    >>> compiled = aot_compile(gm, example_inputs, compilers)
    >>> out = compiled(*args)
    >>> compiled.signatures  # what was traced, per (grad mode, requires_grad flags)
    """

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[Any],
        compilers: GraphCompilers,
        decompositions: dict | None,
        recompute: bool,
    ) -> None:
        self._compilers = compilers
        self._decompositions = decompositions
        self._recompute = recompute
        self._fake_mode = _fake_mode_of(example_inputs)
        self._state_names, self._state_slots = _lifted_state(gm)
        self._gm = gm
        self._num_user_inputs = len(example_inputs)
        all_inputs = [*example_inputs, *(getattr(m, a) for m, a in self._state_slots)]
        self._tensor_indices = [i for i, v in enumerate(all_inputs) if isinstance(v, torch.Tensor)]
        self._fake_inputs = [self._to_fake(v) for v in all_inputs]
        self.signatures: dict[tuple, CompiledSignature] = {}

    def _to_fake(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor):
            return self._fake_mode.from_tensor(value)
        return value

    def _function(self) -> Callable[..., Any]:
        if not self._state_names:
            return self._gm
        gm, names, n = self._gm, self._state_names, self._num_user_inputs

        def with_state(*inputs):
            return torch.func.functional_call(gm, dict(zip(names, inputs[n:])), tuple(inputs[:n]))

        return with_state

    def __call__(self, *args):
        # Hot path: one tuple of flags per call picks the compiled signature.
        if self._state_slots:
            args = (*args, *[getattr(module, name) for module, name in self._state_slots])
        flags = tuple(args[i].requires_grad for i in self._tensor_indices)
        key = (torch.is_grad_enabled() and True in flags, flags)
        signature = self.signatures.get(key)
        if signature is None:
            signature = self.signatures[key] = self._compile(key)
        return signature.run(*args)

    def _fakes_for(self, requires_grad: tuple[bool, ...]) -> list[Any]:
        fakes = list(self._fake_inputs)
        with self._fake_mode:
            for i, flag in zip(self._tensor_indices, requires_grad):
                if fakes[i].requires_grad != flag:
                    fakes[i] = fakes[i].detach().requires_grad_(flag)
        return fakes

    def _compile(self, key: tuple) -> CompiledSignature:
        grad_enabled, requires_grad = key
        fakes = self._fakes_for(requires_grad)
        signature = self._build(self._function(), fakes, grad_enabled)
        if signature.mutates_inputs:
            signature.run = _DuplicateInputs(
                signature.run,
                self._tensor_indices,
                lambda positions: self._build_deduplicated(positions, fakes, grad_enabled),
            )
        return signature

    def _build_deduplicated(self, positions: tuple[int, ...], fakes: list, grad_enabled: bool):
        """The graph traced for calls passing one tensor as several inputs (`positions[i]`: its first)."""
        unique = sorted(set(positions))
        slot = [unique.index(p) for p in positions]
        fn = self._function()

        def deduplicated(*unique_args):
            return fn(*[unique_args[s] for s in slot])

        signature = self._build(deduplicated, [fakes[i] for i in unique], grad_enabled)
        run = signature.run

        def run_deduplicated(*args):
            return run(*[args[i] for i in unique])

        return run_deduplicated

    def _build(self, fn: Callable[..., Any], fakes: list, grad_enabled: bool) -> CompiledSignature:
        # Functionalization does not run in inference mode: trace outside it, with the grad
        # mode of the call; the graphs then run fine on inference tensors.
        grad_mode = torch.is_grad_enabled()
        with torch.inference_mode(False), torch.set_grad_enabled(grad_mode):
            return self._build_signature(fn, fakes, grad_enabled)

    def _build_signature(self, fn: Callable[..., Any], fakes: list, grad_enabled: bool) -> CompiledSignature:
        meta = analyze_graph(fn, fakes, self._fake_mode, grad_enabled=grad_enabled)
        mutates = bool(meta.mutated_inputs)
        user_outputs = _user_output_indices(meta)
        if not any(meta.forward_requires_grad):
            traced = joint.trace(
                joint.forward_function(fn, meta), fakes, self._fake_mode, self._decompositions
            )
            graph = self._rewrite(traced)
            _mark_user_outputs(graph, user_outputs)
            forward = self._compilers.inference(graph, example_values(graph))
            run = make_inference_function(forward, meta)
            return CompiledSignature(run, mutates, inference_graph=graph)

        tangents = joint.make_tangents(meta.tangent_specs, self._fake_mode)
        joint_graph = self._rewrite(
            joint.trace(
                joint.joint_function(fn, meta, len(fakes)),
                [*fakes, *tangents],
                self._fake_mode,
                self._decompositions,
            )
        )
        part = partition_joint(
            joint_graph,
            len(fakes),
            meta.num_forward_outputs,
            mutated_inputs=meta.mutated_inputs,
            recompute=self._recompute,
        )
        _mark_user_outputs(part.forward, user_outputs)
        forward = self._compilers.forward(part.forward, example_values(part.forward))
        backward = LazyBackward(
            lambda: self._compilers.backward(
                part.backward, _backward_example_values(part, forward, self._fake_mode)
            )
        )
        run = make_training_function(forward, backward, meta, num_saved_tensors=part.num_saved_tensors)
        return CompiledSignature(run, mutates, joint_graph=joint_graph, partition=part)


    def _rewrite(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        passes = self._compilers.graph_passes
        return gm if passes is None else passes(gm)


def _user_output_indices(meta) -> list[int]:
    """Forward values whose layout the user sees: graph outputs and the bases views are rebuilt from."""
    return list(range(len(meta.mutated_inputs), meta.num_forward_outputs))


def _mark_user_outputs(gm: torch.fx.GraphModule, indices: list[int]) -> None:
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    output.meta[USER_OUTPUTS_KEY] = indices


class _DuplicateInputs:
    """Guards a graph that mutates its inputs against one tensor passed as two inputs.

    Traced with distinct inputs, such a graph would let one input miss the
    other's mutation. A call with duplicates runs a graph traced with them
    merged, one per pattern of duplicates. Hot path: one set of ids per call.
    """

    def __init__(self, run, tensor_indices: list[int], build) -> None:
        self._run = run
        self._tensor_indices = tensor_indices
        self._build = build
        self._variants: dict[tuple[int, ...], Callable[..., Any]] = {}

    def __call__(self, *args):
        ids = [id(args[i]) for i in self._tensor_indices]
        if len(set(ids)) == len(ids):
            return self._run(*args)
        first: dict[int, int] = {}
        positions = tuple(
            first.setdefault(id(a), i) if isinstance(a, torch.Tensor) else i for i, a in enumerate(args)
        )
        variant = self._variants.get(positions)
        if variant is None:
            variant = self._variants[positions] = self._build(positions)
        return variant(*args)


def aot_compile(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    compilers: GraphCompilers,
    *,
    decompositions: dict | None = None,
    recompute: bool = True,
) -> AOTCompiledGraph:
    """Ahead-of-time autograd for a torch-level graph.

    `example_inputs` are real or fake tensors (and sizes) like the call's
    arguments; when fake, their fake mode (and shape environment) is used.

    >>> compilers = GraphCompilers(forward=c, backward=c, inference=c)
    >>> compiled = aot_compile(gm, [x, w], compilers)
    >>> compiled(x, w)
    """
    return AOTCompiledGraph(gm, example_inputs, compilers, decompositions, recompute)
