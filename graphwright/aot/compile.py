"""`aot_compile`: a torch-level graph in, a callable that runs its aten graphs out.

For each call signature that matters to autograd (is grad mode on, which
inputs require grad) this module analyzes the graph, traces either the
joint graph (then partitions it) or the inference graph, hands the aten
graphs to the backend's graph compiler and wraps the result with the
runtime. Signatures are compiled lazily, on their first call.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv, free_unbacked_symbols

from .._core import artifacts, config, dump, source_lines
from .._core.counters import phase
from .._core.errors import BackendRefusal, GraphwrightError, TraceError
from .._core.specialised_values import VALUE_KEY, carry_value, value_read
from .._core.subclass_protocol import is_wrapper_subclass, is_wrapper_subclass_type
from .._core.user_stack import user_frames_of_stack, warn_at_user_line
from . import cache as aot_cache
from . import joint
from .cache import Entry, GraphStore
from .desugar import SubclassBoundary
from .partition import Partition, partition_joint
from .subclass_calls import SubclassCalls
from .runtime import (
    BoxedFn,
    LazyBackward,
    make_inference_function,
    make_training_function,
)
from .subclasses import fake_tensors_in, flatten_into, is_fake_value, layout_of, refuse_unsupported_subclasses
from .view_inverses import checked_decompositions

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
    `store`, when given, finds compiled graphs again in a later process: the
    AOT products are then cached on disk (`cache.py`).
    """

    forward: GraphCompiler
    backward: GraphCompiler
    inference: GraphCompiler
    graph_passes: Callable[[torch.fx.GraphModule], torch.fx.GraphModule] | None = None
    store: GraphStore | None = None
    specialises_values: bool = False
    """The code generator cannot branch on a symbol read from an input's value (Inductor lowers
    a slice at such a start by its sign): a graph whose operators read the value of a small
    integer input is compiled once per value (`_PerValueGraph`)."""


@dataclasses.dataclass
class CompiledSignature:
    """What was built for one call signature, kept for inspection (tests, `explain`)."""

    run: Callable[..., Any]
    mutated_inputs: tuple[int, ...] = ()
    inference_graph: torch.fx.GraphModule | None = None
    joint_graph: torch.fx.GraphModule | None = None
    partition: Partition | None = None
    save_entry: Callable[[], None] | None = None
    """Writes the AOT cache entry of an inference signature once it is accepted (a training
    signature writes its own when its backward compiles)."""


def example_values(gm: torch.fx.GraphModule) -> list:
    """The placeholders' fake values, as graph compilers take them."""
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def recorded_outputs(gm: torch.fx.GraphModule) -> list | None:
    """The values the tracer recorded for the graph's flat outputs (None where it recorded none)."""
    output = next((n for n in reversed(gm.graph.nodes) if n.op == "output"), None)
    if output is None:
        return None
    return [n.meta.get("example_value", n.meta.get("val")) if isinstance(n, torch.fx.Node) else None
            for n in pytree.tree_leaves(output.args[0])]


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


def _fake_mode_of(example_inputs: Sequence[Any], gm: torch.fx.GraphModule) -> FakeTensorMode:
    """The inputs' fake mode; else a new one with static sizes, unless the graph computes values
    that depend on data (`.item()`, `nonzero`: unbacked symbols).

    It always has a ShapeEnv: code generators key their caches on the shape environment of
    the graph's fake mode (Inductor's FX graph cache is bypassed without one)."""
    for value in example_inputs:
        for fake in fake_tensors_in(value):
            return fake.fake_mode
    depends_on_data = any("unbacked_bindings" in node.meta or _has_unbacked_symbols(node.meta.get("example_value"))
                          for node in gm.graph.nodes)
    return FakeTensorMode(shape_env=ShapeEnv(), static_shapes=not depends_on_data)


def _has_unbacked_symbols(value: Any) -> bool:
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)) \
                and free_unbacked_symbols(leaf):
            return True
    return False


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
        decompositions: dict | Callable[[], dict] | None,
        recompute: bool,
        size_generic: bool = False,
        values: dict[int, int | bool] | None = None,
    ) -> None:
        self._state_names, self._state_slots = _lifted_state(gm)
        state = [getattr(m, a) for m, a in self._state_slots]
        refuse_unsupported_subclasses(gm, example_inputs, list(zip(self._state_names, state)))
        self._compilers = compilers
        self._size_generic = size_generic
        self._decompositions = decompositions
        self._checked_decompositions: dict | None = None
        self._recompute = recompute
        self._fake_mode = _fake_mode_of(example_inputs, gm)
        self._gm = gm
        self._constructions = SubclassCalls(gm)
        self._num_user_inputs = len(example_inputs)
        all_inputs = [*example_inputs, *state]
        self._tensor_indices = [i for i, v in enumerate(all_inputs) if isinstance(v, torch.Tensor)]
        self._fake_inputs = [self._to_fake(v) for v in all_inputs]
        placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
        # the values of small integer inputs the graph is specialised on: by the strict tracer
        # (guarded), or by `_PerValueGraph` (which compares them on every call)
        self._values = {index: node.meta[VALUE_KEY] for index, node in enumerate(placeholders)
                        if VALUE_KEY in node.meta}
        self._values.update(values or {})
        self._explicitly_read = {index for index, node in enumerate(placeholders)
                                 if any(user.op == "call_method" and user.target in ("item", "tolist")
                                        for user in node.users)}
        self.signatures: dict[tuple, CompiledSignature] = {}
        self._makes_leaves, self._returns_leaf = _new_leaves(gm)
        self._enables_grad = _enables_grad(gm)
        self._input_grad_changes = _input_requires_grad_changes(gm)
        self._scope = dump.current()  # signatures compile on later calls: for the same entry

    def _to_fake(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and not is_fake_value(value):
            return self._fake_mode.from_tensor(value)
        return value

    def _function(self, traced: bool = False) -> Callable[..., Any]:
        """The graph as a function of its inputs and lifted state. `traced`: as AOT autograd traces
        it, where the subclasses the graph makes are made by `SubclassCalls`, which checks
        each run."""
        gm = self._constructions.graph_module if traced else self._gm
        # traced, node by node: each aten node records the lines of the node it comes from
        module, prefix = (source_lines.RerunModule(gm), "gm.") if traced else (gm, "")
        run = module
        if self._state_names:
            names, n = [prefix + name for name in self._state_names], self._num_user_inputs

            def run(*inputs):
                return torch.func.functional_call(module, dict(zip(names, inputs[n:])), tuple(inputs[:n]))

        if gm is self._gm:
            return run
        constructions = self._constructions

        def checked(*inputs):
            outputs = run(*inputs)
            constructions.check()
            return outputs

        return checked

    def __call__(self, *args):
        # Hot path: one tuple of flags per call picks the compiled signature.
        if self._state_slots:
            args = (*args, *[getattr(module, name) for module, name in self._state_slots])
        for index, flag in self._input_grad_changes:
            args[index].requires_grad_(flag)
        flags = tuple(args[i].requires_grad for i in self._tensor_indices)
        grad_somewhere = torch.is_grad_enabled() or self._enables_grad
        key = (grad_somewhere and (True in flags or self._makes_leaves), flags)
        signature = self.signatures.get(key)
        if signature is None:
            signature = self.signatures[key] = self._compile(key)
        return signature.run(*args)

    def _fakes_for(self, requires_grad: tuple[bool, ...]) -> list[Any]:
        fakes = list(self._fake_inputs)
        for index, value in self._values.items():
            # set before each trace: a symbolic graph's fakes are the strict tracer's, shared
            # by the graphs compiled per value
            carry_value(fakes[index], value)
        with self._fake_mode:
            for i, flag in zip(self._tensor_indices, requires_grad):
                if fakes[i].requires_grad != flag:
                    fakes[i] = fakes[i].detach().requires_grad_(flag)
        return fakes

    def _compile(self, key: tuple) -> CompiledSignature:
        with dump.within(self._scope), phase("aot"):
            return self._compile_signature(key)

    def _compile_signature(self, key: tuple) -> CompiledSignature:
        grad_enabled, requires_grad = key
        if self._returns_leaf or self._makes_leaves and grad_enabled and True not in requires_grad:
            # A leaf made in the graph that the user can see (it is returned), or the only thing
            # that makes outputs differentiable: the aten graphs' autograd.Function cannot be
            # that leaf, so this signature runs the torch-level graph as captured.
            return CompiledSignature(self._function())
        fakes = self._fakes_for(requires_grad)
        cache_key = self._cache_key(fakes, grad_enabled)
        signature = self._cached_signature(cache_key) if cache_key is not None else None
        if signature is None:
            shape_env = self._fake_mode.shape_env if self._size_generic else None
            assumptions = _size_assumptions(shape_env)
            try:
                signature = self._build(self._function(traced=True), fakes, grad_enabled, cache_key)
            except joint.NoDerivative:
                # Its backward raises eager's own error when (and only if) the user runs it:
                # this signature runs the torch-level graph as captured, as eager does.
                return CompiledSignature(self._function())
            except BackendRefusal as refusal:
                owner = artifacts.scope_name() or "a graph"
                warn_at_user_line(f"graphwright runs {owner} as captured, without its backend:\n{refusal}",
                                  refusal.user_stack)
                return CompiledSignature(self._function())
            except GraphwrightError:
                raise
            except Exception as error:  # an internal failure is never the user's crash: as captured
                owner = artifacts.scope_name() or "a graph"
                warn_at_user_line(f"graphwright could not compile {owner} with AOT autograd and runs it as "
                                  f"captured, without its backend: {type(error).__name__}: {error}",
                                  user_frames_of_stack())
                return CompiledSignature(self._function())
            if _size_assumptions(shape_env) != assumptions:
                raise SizesSpecialised()
            if self._compilers.specialises_values:
                # the user's inputs only: `_PerValueGraph` reads them from the call's arguments
                read = [index for index, fake in enumerate(fakes[:self._num_user_inputs])
                        if index not in self._values and index not in self._explicitly_read and value_read(fake)]
                if read:
                    raise ValuesRead(read)
            if signature.save_entry is not None:
                signature.save_entry()
        if signature.mutated_inputs:
            signature.run = _OverlappingInputs(
                signature.run, signature.mutated_inputs, self._tensor_indices, self._function(), fakes
            )
        return signature

    def _cache_key(self, fakes: list, grad_enabled: bool) -> str | None:
        """The signature's AOT cache key; None when it is not cached."""
        store = self._compilers.store
        if store is None or not aot_cache.enabled():
            return None
        if any(is_wrapper_subclass(value) for value in fakes):
            aot_cache.bypassed("a tensor subclass is among its inputs (the key does not describe subclasses)")
            return None
        if artifacts.shown("aot_graphs") or artifacts.shown("output_code"):
            aot_cache.bypassed("its AOT graphs or generated code are logged or dumped (a hit would have none)")
            return None
        try:
            return aot_cache.signature_key(self._gm, fakes, self._fake_mode, grad_enabled, self._recompute, store)
        except aot_cache.Bypass as why:
            aot_cache.bypassed(str(why))
            return None

    def _cached_signature(self, cache_key: str) -> CompiledSignature | None:
        """The signature rebuilt from its AOT cache entry and the backend's compiled graphs."""
        entry = aot_cache.load(cache_key)
        if entry is None:
            aot_cache.counted("miss", f"compiling (key {cache_key[:12]})")
            return None
        store = self._compilers.store
        kinds = ("inference",) if entry.backward is None else ("forward", "backward")
        graphs = []
        with phase("backend"):
            for handle, kind in zip((entry.forward, entry.backward), kinds):
                graphs.append(store.load(handle, kind, self._fake_mode))
                if graphs[-1] is None:
                    aot_cache.counted("miss", f"the backend's compiled graphs are gone, compiling (key {cache_key[:12]})")
                    return None
        aot_cache.counted("hit", f"key {cache_key[:12]}")
        mutated = tuple(entry.meta.mutated_inputs)
        if len(graphs) == 1:
            return CompiledSignature(make_inference_function(graphs[0], entry.meta), mutated)
        run = make_training_function(*graphs, entry.meta, num_saved_tensors=entry.num_saved_tensors,
                                     detached_inputs=entry.inputs_without_gradient,
                                     gradient_tangents=entry.gradient_tangents, enables_grad=self._enables_grad)
        return CompiledSignature(run, mutated)

    def _save_entry(self, cache_key: str, meta, forward: BoxedFn, backward: BoxedFn | None = None,
                    part: Partition | None = None) -> None:
        store = self._compilers.store
        handles = [store.handle(graph) for graph in (forward, backward) if graph is not None]
        if None in handles:
            aot_cache.bypassed("the backend cannot find its compiled graphs again (its own cache is off "
                               "or bypassed them)")
            return
        counts = {} if part is None else {"num_saved_tensors": part.num_saved_tensors,
                                          "inputs_without_gradient": part.inputs_without_gradient,
                                          "gradient_tangents": part.gradient_tangents}
        # the tangents' specs serve tracing only, and may hold symbolic sizes
        aot_cache.save(cache_key, Entry(dataclasses.replace(meta, forward_specs=[]), *handles, **counts))

    def _build(self, fn: Callable[..., Any], fakes: list, grad_enabled: bool, cache_key: str | None) -> CompiledSignature:
        # Functionalization does not run in inference mode: trace outside it, with the grad
        # mode of the call; the graphs then run fine on inference tensors.
        grad_mode = torch.is_grad_enabled()
        with torch.inference_mode(False), torch.set_grad_enabled(grad_mode):
            return self._build_signature(fn, fakes, grad_enabled, cache_key)

    def _build_signature(self, fn: Callable[..., Any], fakes: list, grad_enabled: bool,
                         cache_key: str | None) -> CompiledSignature:
        boundary = SubclassBoundary.of(fakes, self._constructions.made_in_graph)
        meta, traced = joint.trace_signature(fn, fakes, self._fake_mode, self._decomposition_table(),
                                             grad_enabled=grad_enabled, boundary=boundary,
                                             eager_outputs=recorded_outputs(self._gm))
        mutates = tuple(meta.mutated_inputs)
        user_outputs = _user_output_indices(meta)
        if boundary is not None:
            boundary.check_plain(traced)
            user_outputs = boundary.flat_values_of(user_outputs)
        if not any(meta.forward_requires_grad):
            graph = self._rewrite(traced)
            _mark_user_outputs(graph, user_outputs)
            _publish(graph, "inference")
            with phase("backend"):
                forward = self._compilers.inference(graph, example_values(graph))
            if boundary is not None:
                forward = boundary.forward(forward, graph)
            run = make_inference_function(forward, meta)
            save = None if cache_key is None else functools.partial(self._save_entry, cache_key, meta, forward)
            return CompiledSignature(run, mutates, inference_graph=graph, save_entry=save)

        joint_graph = self._rewrite(traced)
        if boundary is None:
            part = partition_joint(joint_graph, len(fakes), meta.num_forward_outputs,
                                   mutated_inputs=meta.mutated_inputs, recompute=self._recompute)
        else:
            part = partition_joint(joint_graph, boundary.num_flat_inputs, boundary.num_flat_values,
                                   mutated_inputs=boundary.flat_inputs_of(meta.mutated_inputs),
                                   recompute=self._recompute)
        _mark_user_outputs(part.forward, user_outputs)
        _publish(part.forward, "forward")
        _publish(part.backward, "backward")
        with phase("backend"):
            forward = self._compilers.forward(part.forward, example_values(part.forward))
        scope = self._scope

        def compile_backward():  # on the first backward call
            with dump.within(scope):
                with phase("backend"):
                    backward = self._compilers.backward(
                        part.backward, _backward_example_values(part, forward, self._fake_mode))
                if cache_key is not None:
                    self._save_entry(cache_key, meta, forward, backward, part)
            return backward

        backward = LazyBackward(compile_backward)
        if boundary is None:
            run = make_training_function(forward, backward, meta, num_saved_tensors=part.num_saved_tensors,
                                         detached_inputs=part.inputs_without_gradient,
                                         gradient_tangents=part.gradient_tangents, enables_grad=self._enables_grad,
                                         backward_graph=part.backward)
        else:
            run = make_training_function(boundary.forward(forward, part.forward), boundary.backward(backward, part),
                                         meta, num_saved_tensors=part.num_saved_tensors,
                                         detached_inputs=boundary.inputs_without_gradient(part),
                                         gradient_tangents=boundary.gradient_tangents(part), subclass_tangents=True,
                                         enables_grad=self._enables_grad)
        return CompiledSignature(run, mutates, joint_graph=joint_graph, partition=part)

    def _decomposition_table(self) -> dict:
        # made on the first trace: a backend's table may import its whole code generator
        if self._checked_decompositions is None:
            table = self._decompositions() if callable(self._decompositions) else self._decompositions
            self._checked_decompositions = checked_decompositions(table)
        return self._checked_decompositions

    def _rewrite(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        passes = self._compilers.graph_passes
        return gm if passes is None else passes(gm)


def _publish(gm: torch.fx.GraphModule, kind: str) -> None:
    if artifacts.wanted("aot_graphs"):
        owner = artifacts.scope_name() or "a graph"
        artifacts.publish_graph("aot_graphs", f"AOT {kind.upper()} GRAPH of {owner}", gm, f"aot_{kind}",
                                record=f"aot_{kind}_graph")


def _user_output_indices(meta) -> list[int]:
    """Forward values whose layout the user sees: graph outputs and the bases views are rebuilt from."""
    return list(range(len(meta.mutated_inputs), meta.num_forward_outputs))


def _mark_user_outputs(gm: torch.fx.GraphModule, indices: list[int]) -> None:
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    output.meta[USER_OUTPUTS_KEY] = indices


class _OverlappingInputs:
    """Guards a graph that mutates inputs against inputs sharing memory with a mutated one.

    Traced as distinct tensors, such a call (one tensor passed twice, a view
    of another input, a subclass holding one tensor twice) would miss the
    mutation through the other input; it runs the captured torch-level graph
    as it is instead, as the `eager` backend would. Hot path: one storage
    address per tensor input per call (per inner tensor of a subclass input).
    """

    def __init__(self, run, mutated_inputs, tensor_indices: list[int], original, fakes: Sequence[Any]) -> None:
        self._run = run
        self._mutated = mutated_inputs
        self._tensor_indices = tensor_indices
        self._original = original
        self._subclasses = {i: layout_of(fakes[i]) for i in tensor_indices if is_wrapper_subclass(fakes[i])}

    def _addresses(self, args, indices) -> list[int]:
        if not self._subclasses:
            return [args[i].untyped_storage().data_ptr() for i in indices]
        addresses = []
        for i in indices:
            layout = self._subclasses.get(i)
            if layout is None:
                addresses.append(args[i].untyped_storage().data_ptr())
            else:
                inner: list = []
                flatten_into(args[i], layout, inner)
                addresses.extend(t.untyped_storage().data_ptr() for t in inner)
        return addresses

    def __call__(self, *args):
        addresses = self._addresses(args, self._tensor_indices)
        if len(set(addresses)) == len(addresses):
            return self._run(*args)
        mutated = set(self._addresses(args, self._mutated))
        if sum(address in mutated for address in addresses) > len(mutated):
            return self._original(*args)
        return self._run(*args)


def _enables_grad(gm: torch.fx.GraphModule) -> bool:
    """Does the graph switch grad mode on (`with torch.enable_grad():` in the region)? Then a
    call made under `no_grad` still differentiates what the graph computes with grad on."""
    return any(node.op == "call_function" and node.target is torch._C._set_grad_enabled and node.args
               and node.args[0] is True for node in gm.graph.nodes)


def _new_leaves(gm: torch.fx.GraphModule) -> tuple[bool, bool]:
    """Does the graph make tensors it computes into leaves that require grad (`t.requires_grad_()`,
    `t.requires_grad = True`), and does it return one of them?"""
    leaves = set()
    for node in gm.graph.nodes:
        made_leaf = (node.op == "call_method" and node.target == "requires_grad_") or \
            (node.op == "call_function" and node.target is torch.Tensor.requires_grad_)
        if made_leaf and node.args and isinstance(node.args[0], torch.fx.Node) \
                and node.args[0].op != "placeholder" and node.kwargs.get("requires_grad", True) is not False \
                and (len(node.args) < 2 or node.args[1] is not False):
            leaves.update((node, node.args[0]))
        value = node.meta.get("example_value")
        if node.op == "call_function" and is_wrapper_subclass_type(node.target) \
                and isinstance(value, torch.Tensor) and value.requires_grad:
            leaves.add(node)  # a subclass made of tensors that require grad: a new leaf, as in eager
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    returned: set = set()
    torch.fx.node.map_arg(output.args, returned.add)
    return bool(leaves), bool(returned & leaves)


def _input_requires_grad_changes(gm: torch.fx.GraphModule) -> list[tuple[int, bool]]:
    """`x.requires_grad_(flag)` on graph inputs, as (input index, flag): the user's tensor
    changes, as eagerly (vector-quantize-pytorch's `loss = self.zero; loss.requires_grad_()`
    on a buffer), where the aten graphs' trace would change only its fake. Set before the call,
    the gradient reaches the input as in eager."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    changes = []
    for node in gm.graph.nodes:
        sets_flag = (node.op == "call_method" and node.target == "requires_grad_") or \
            (node.op == "call_function" and node.target is torch.Tensor.requires_grad_)
        if sets_flag and node.args and node.args[0] in placeholders:
            flag = node.args[1] if len(node.args) > 1 else node.kwargs.get("requires_grad", True)
            if isinstance(flag, bool):
                changes.append((placeholders.index(node.args[0]), flag))
    return changes


class SizesSpecialised(Exception):
    """Tracing a graph on symbolic sizes assumed something about them (a new shape guard)."""


class ValuesRead(Exception):
    """Operators of the graph read the values of these small integer inputs (by index), which
    the backend wants as numbers (`GraphCompilers.specialises_values`)."""

    def __init__(self, indices: list[int]) -> None:
        super().__init__(indices)
        self.indices = indices


def _size_assumptions(shape_env) -> tuple[int, int] | None:
    if shape_env is None:
        return None
    return len(shape_env.guards), len(shape_env.replacements)


class _SizeGenericGraph:
    """A graph compiled once on symbolic sizes, for every size.

    The captured graph's own guards were fixed before we traced, so if our
    tracing had to assume something about a size, the symbolic graph is not
    valid for every size: then each input layout gets its own compile from
    the call's real inputs, as a size-specialising backend would do.
    """

    def __init__(self, generic: AOTCompiledGraph, compile_for: Callable[[list], AOTCompiledGraph]) -> None:
        self.generic = generic
        self._compile_for = compile_for
        self.per_layout: dict[tuple, AOTCompiledGraph] | None = None
        self._scope = dump.current()  # the entry the graphs compiled per layout belong to

    def __call__(self, *args):
        if self.per_layout is None:
            try:
                return self.generic(*args)
            except (SizesSpecialised, TraceError):
                # TraceError: the non-strict tracer cannot express some symbolic size here.
                self.per_layout = {}
        layout = tuple(
            (tuple(a.shape), a.stride()) if isinstance(a, torch.Tensor) else a for a in args
        )
        compiled = self.per_layout.get(layout)
        if compiled is None:
            with dump.within(self._scope):
                compiled = self.per_layout[layout] = self._compile_for(list(args))
        return compiled(*args)


def _symbolic_inputs(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list | None:
    """The graph's own fake placeholder values, when they carry symbolic sizes."""
    values = [
        n.meta.get("val", n.meta.get("example_value")) for n in gm.graph.nodes if n.op == "placeholder"
    ]
    if len(values) != len(example_inputs):
        return None
    symbolic = False
    for value, example in zip(values, example_inputs):
        if isinstance(example, torch.Tensor):
            if not is_fake_value(value):
                return None
            symbolic = symbolic or any(isinstance(d, torch.SymInt) for fake in fake_tensors_in(value)
                                       for d in fake.shape)
        elif isinstance(value, (torch.SymInt, torch.SymFloat)):
            symbolic = True
    return values if symbolic else None


def aot_compile(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    compilers: GraphCompilers,
    *,
    decompositions: dict | Callable[[], dict] | None = None,
    recompute: bool = True,
) -> Callable[..., Any]:
    """Ahead-of-time autograd for a torch-level graph.

    `example_inputs` are real or fake tensors (and sizes) like the call's
    arguments; when fake, their fake mode (and shape environment) is used.
    When the graph's placeholders carry fake values with symbolic sizes (the
    strict tracer's `dynamic` graphs), the graph is compiled once for every
    size; the result is then a `_SizeGenericGraph` whose `.generic` is the
    `AOTCompiledGraph`.

    >>> compilers = GraphCompilers(forward=c, backward=c, inference=c)
    >>> compiled = aot_compile(gm, [x, w], compilers)
    >>> compiled(x, w)
    """
    symbolic = _symbolic_inputs(gm, example_inputs)

    def build(values: dict[int, int | bool]) -> Callable[..., Any]:
        if symbolic is None:
            return AOTCompiledGraph(gm, example_inputs, compilers, decompositions, recompute, values=values)
        return _SizeGenericGraph(
            AOTCompiledGraph(gm, symbolic, compilers, decompositions, recompute, size_generic=True, values=values),
            lambda real_inputs: AOTCompiledGraph(gm, real_inputs, compilers, decompositions, recompute,
                                                 values=values),
        )

    if not compilers.specialises_values:
        return build({})
    generic = build({})
    aot = generic.generic if isinstance(generic, _SizeGenericGraph) else generic
    return _PerValueGraph(build, generic, aot._function())


class _PerValueGraph:
    """A graph compiled once for every value of the small integer inputs its operators read,
    for a backend that wants them as numbers (`GraphCompilers.specialises_values`): the first
    compile finds which inputs those are (`ValuesRead`); from then on every call reads their
    values again and picks, or compiles, the graph for them; past `config.cache_size_limit`
    values, the graph runs as captured (with a warning)."""

    def __init__(self, build: Callable[[dict[int, int | bool]], Callable[..., Any]], generic: Callable[..., Any],
                 captured: Callable[..., Any]) -> None:
        self._build = build
        self.generic = generic
        self._captured = captured
        self._warned = False
        self.read: list[int] | None = None
        self.per_value: dict[tuple, Callable[..., Any]] = {}
        self._scope = dump.current()

    def __call__(self, *args):
        if self.read is None:
            try:
                return self.generic(*args)
            except ValuesRead as read:
                self.read = read.indices
        values = tuple(args[index].item() for index in self.read)
        compiled = self.per_value.get(values)
        if compiled is None and len(self.per_value) >= config.cache_size_limit:
            if not self._warned:
                owner = artifacts.scope_name() or "a graph"
                warn_at_user_line(f"graphwright runs {owner} as captured, without its backend, for values of its "
                                  f"integer inputs {self.read} beyond the first {config.cache_size_limit} (the "
                                  "backend compiles it once per value; graphwright.config.cache_size_limit)", [])
                self._warned = True
            return self._captured(*args)
        if compiled is None:
            with dump.within(self._scope):
                compiled = self.per_value[values] = self._build(dict(zip(self.read, values)))
        return compiled(*args)
