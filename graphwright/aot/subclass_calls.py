"""The graph's calls that act on tensor subclass objects themselves, as AOT autograd traces them.

Functionalization wraps whole subclass values, and the wrapper hides the
subclass's class: operations reach the subclass through its
`__torch_dispatch__`, but a call made on the subclass object itself cannot
run on the wrapper. Two kinds of node in a captured graph make such calls:

- a call of a traceable wrapper subclass class (`TwoTensor(x, y)`): the
  subclass is made of the current values of its tensor arguments and wrapped
  in turn; as in eager, it is a new leaf of autograd;
- a call of a subclass's own Python API (`DTensor.from_local(x, mesh,
  placements)`, `d.redistribute(...)`, `d.to_local()`, `d.full_tensor()`, an
  attribute such as `d._local_tensor`): it runs on the current values with
  functionalization paused, under an autograd graph of its own
  (`_UnwrappedCall`), whose backward the joint trace runs, so that gradients
  flow through it as in eager. The aten operations it makes on the plain
  tensors (DTensor's functional collectives among them) are recorded as any.

In eager the results of both share memory with their arguments (a view, a
subclass holding the tensor); functionalized, they hold values: a graph that
mutates either afterwards is refused (`check`), and runs as captured.

A third kind of node is routed for the order of dispatch: an in-place call
(`u.add_(tt)`, `u += tt`, `u[i] = tt`, `out=u`) that mutates a plain tensor
with a subclass among its arguments. In eager the subclass's
`__torch_dispatch__` decides what happens to the plain tensor (TwoTensor
adds each inner tensor to it in turn, and it stays plain); functionalization
runs above the subclass and would replace the plain tensor's value with the
subclass result of the functional op. Such a call runs, as an unwrapped call,
on clones of its plain tensors, the subclass dispatching first; the plain
tensors it mutated then take their clones' new values (`copy_`, a
functionalized mutation that autograd records).

Outside a trace (the graph run as captured) every call is made as it is.
"""
from __future__ import annotations

import builtins
import contextlib
import operator
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .._core import artifacts
from .._core.errors import BackendRefusal
from .._core.subclass_protocol import API_FUNCTIONS, holds, is_api_member, is_wrapper_subclass, is_wrapper_subclass_type
from .._core.user_stack import user_frames_of_stack
from .metadata import from_functional, functionalization_paused, to_functional
from .subclasses import flatten_values, layout_of, rebuild_traced


class SubclassCalls:
    """The graph's subclass constructions and subclass API calls (see the module docstring)."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        """`graph_module` is `gm`, or when `gm` makes such calls a copy that routes them here."""
        self._made: list[tuple[str, list[torch.Tensor], list[torch.Tensor]]] = []
        self._classes: set[str] = set()  # the names of the calls that make a subclass of its class
        self.graph_module = gm
        self.made_in_graph = any(_routed_call(node) is not None for node in gm.graph.nodes)
        if not self.made_in_graph:
            return
        graph = torch.fx.Graph()
        graph.output(graph.graph_copy(gm.graph, {}))
        for node in graph.nodes:
            routed = _routed_call(node)
            if routed is None:
                continue
            name, call, kind = routed
            if kind is _Kind.CONSTRUCTION:
                self._classes.add(name)
            node.op, node.target = "call_function", _Routed(self, name, call, kind)
        self.graph_module = torch.fx.GraphModule(gm, graph)

    def check(self) -> None:
        """Refuse the trace just made if a value such a call made, or a tensor it was made of, was
        mutated afterwards."""
        made, self._made = self._made, []
        for name, results, arguments in made:
            if any(torch._is_functional_tensor(t) and torch._functionalize_has_data_mutation(t)
                   for t in [*results, *arguments]):
                graph = artifacts.scope_name() or "a captured graph"
                what = f"makes a `{name}` and mutates it" if name in self._classes \
                    else f"calls `{name}` and mutates its result"
                raise BackendRefusal(
                    f"AOT autograd cannot compile {graph}: it {what}, or a tensor it was made of, in place",
                    explanation=f"In eager the result of `{name}` shares memory with the tensors it is made "
                    "of; ahead-of-time autograd traces it as a value of its own, and a mutation through one "
                    "would not show through the other.",
                    hints=["This call runs the captured graph as it is (as backend='eager' runs it).",
                           f"Call `{name}` outside the compiled region, or mutate a clone."],
                    user_stack=user_frames_of_stack(),
                )

    def call(self, name: str, call: Callable[..., Any], kind: str, args: tuple, kwargs: dict) -> Any:
        flat, spec = pytree.tree_flatten((args, kwargs))
        positions = [i for i, value in enumerate(flat) if isinstance(value, torch.Tensor)]
        functional = [flat[i] for i in positions if torch._is_functional_tensor(flat[i])]
        if not functional:
            return call(*args, **kwargs)
        if kind is _Kind.MUTATION:
            return _mutate_plain(call, flat, spec, positions)
        if kind is _Kind.CONSTRUCTION:
            args, kwargs = pytree.tree_map_only(torch.Tensor, _current_value, (args, kwargs))
            with functionalization_paused():
                result = call(*args, **kwargs)
            outputs = [to_functional(result)]
            result = outputs[0]
        else:
            unwrapped = _UnwrappedCall(call, flat, spec, positions)
            outputs = list(_RunUnwrapped.apply(unwrapped, *[flat[i] for i in positions]))
            result = unwrapped.rebuild(outputs)
        self._made.append((name, [t for t in outputs if isinstance(t, torch.Tensor)], functional))
        return result


class _Kind:
    """What a routed node does (see the module docstring)."""

    CONSTRUCTION = "makes a subclass"
    API = "calls a subclass's own Python API"
    MUTATION = "mutates a plain tensor with a subclass argument"


def _routed_call(node: torch.fx.Node) -> tuple[str, Callable[..., Any], str] | None:
    """(name, the call, its `_Kind`) for a node this module routes."""
    if node.op == "call_function" and is_wrapper_subclass_type(node.target):
        return node.target.__qualname__, node.target, _Kind.CONSTRUCTION
    if node.op == "call_function" and any(node.target is function for function in API_FUNCTIONS):
        return node.target.__name__, node.target, _Kind.API
    if _mutates_plain_with_subclass(node):
        return _call_name(node), _node_call(node), _Kind.MUTATION
    receiver = node.args[0].meta.get("example_value") if node.args and isinstance(node.args[0], torch.fx.Node) \
        else None
    if not is_wrapper_subclass(receiver):
        return None
    cls = type(receiver)
    if node.op == "call_method" and is_api_member(cls, node.target):
        name = node.target
        return f"{cls.__qualname__}.{name}", _method_call(name), _Kind.API
    if node.op == "call_function" and node.target is builtins.getattr and len(node.args) == 2 \
            and isinstance(node.args[1], str) and (is_api_member(cls, node.args[1]) or holds(receiver, node.args[1])):
        return f"{cls.__qualname__}.{node.args[1]}", builtins.getattr, _Kind.API
    return None


# The Python operators that mutate their first operand when it is a tensor.
_IN_PLACE_OPERATORS = frozenset({
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
    operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
    operator.imatmul, operator.setitem,
})


def _mutated_arguments(node: torch.fx.Node) -> list[Any]:
    """The arguments a call mutates, by the conventions of torch's names: an in-place method or
    function (`add_`, `torch.relu_`), an in-place operator (`+=`, `x[i] = v`), `inplace=True`, `out=`."""
    if node.op not in ("call_method", "call_function"):
        return []
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    first = list(node.args[:1])
    if isinstance(name, str) and name.endswith("_") and not name.startswith("_"):
        mutated = first
    elif node.op == "call_function" and node.target in _IN_PLACE_OPERATORS:
        mutated = first
    elif node.kwargs.get("inplace") is True:
        mutated = first
    else:
        mutated = []
    return mutated + pytree.tree_leaves(node.kwargs.get("out"))


def _example(value: Any) -> Any:
    return value.meta.get("example_value") if isinstance(value, torch.fx.Node) else None


def _mutates_plain_with_subclass(node: torch.fx.Node) -> bool:
    mutated = [_example(value) for value in _mutated_arguments(node)]
    if not any(isinstance(value, torch.Tensor) and not is_wrapper_subclass(value) for value in mutated):
        return False
    return any(is_wrapper_subclass(_example(value)) for value in pytree.tree_leaves((node.args, node.kwargs)))


def _call_name(node: torch.fx.Node) -> str:
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    return getattr(node.target, "__qualname__", getattr(node.target, "__name__", str(node.target)))


def _method_call(name: str) -> Callable[..., Any]:
    return lambda self, *args, **kwargs: getattr(self, name)(*args, **kwargs)


def _node_call(node: torch.fx.Node) -> Callable[..., Any]:
    return _method_call(node.target) if node.op == "call_method" else node.target


def _mutate_plain(call: Callable[..., Any], flat: list, spec: pytree.TreeSpec, positions: list[int]) -> Any:
    """Make an in-place `call` whose mutated tensors are plain, with subclasses among its arguments,
    as eager dispatches it: on clones of its plain tensors, each subclass's `__torch_dispatch__`
    deciding what they become; then the plain tensors it mutated take their clones' values.

    A plain argument that is a view is made again on a clone of its base, which the call then
    mutates through the view: its gradient is the one eager's autograd gives a view mutated in
    place (through the base's `CopySlices`)."""
    bases: list[torch.Tensor] = []
    base_of: dict[int, int] = {}
    views: dict[int, tuple[int, tuple, tuple, Any]] = {}
    for i in positions:
        tensor = flat[i]
        base = tensor._base
        if base is None or is_wrapper_subclass(torch._from_functional_tensor(tensor)):
            continue
        k = base_of.setdefault(id(base), len(bases))
        if k == len(bases):
            bases.append(base)
        views[i] = (k, tuple(tensor.size()), tuple(tensor.stride()), tensor.storage_offset() - base.storage_offset())
    roots = {i: base_of[id(flat[i])] for i in positions if i not in views and id(flat[i]) in base_of}
    on_clones = _OnClones(call, views, roots)
    packed, packed_spec = pytree.tree_flatten(((pytree.tree_unflatten(flat, spec), bases), {}))
    tensors = [i for i, value in enumerate(packed) if isinstance(value, torch.Tensor)]
    unwrapped = _UnwrappedCall(on_clones, packed, packed_spec, tensors, subclasses_first=True)
    outputs = list(_RunUnwrapped.apply(unwrapped, *[packed[i] for i in tensors]))
    returned = len(on_clones.returns_argument)
    for (kind, index), value in zip(on_clones.mutated, outputs[returned:]):
        (bases if kind == "base" else flat)[index].copy_(value)
    leaves = [outputs[k] if argument is None else flat[argument]
              for k, argument in enumerate(on_clones.returns_argument)]
    return pytree.tree_unflatten(leaves, on_clones.result_spec)


class _OnClones:
    """A call made on clones of its plain tensor arguments: one clone per tensor, so that an
    argument passed twice stays one tensor, and a view (`views`: flat position -> base, size,
    stride, offset) made on a clone of its base, shared with the base's own position (`roots`).

    Returns the flat leaves of its result, then the clones it mutated; `mutated` names those
    as ("argument", flat position) or ("base", index), and `returns_argument` says which result
    leaves were an argument's clone (eager returns the argument)."""

    def __init__(self, call: Callable[..., Any], views: dict[int, tuple[int, tuple, tuple, Any]],
                 roots: dict[int, int]) -> None:
        self._call = call
        self._views = views
        self._roots = roots
        self.mutated: list[tuple[str, int]] = []
        self.returns_argument: list[int | None] = []
        self.result_spec: pytree.TreeSpec | None = None

    def __call__(self, call_args: tuple, bases: list[torch.Tensor]) -> list[Any]:
        flat, spec = pytree.tree_flatten(call_args)
        base_clones = [base.new_empty_strided(base.size(), base.stride()).copy_(base) for base in bases]
        clones: dict[Any, tuple[tuple[str, int], torch.Tensor, int]] = {
            ("base", k): (("base", k), clone, clone._version) for k, clone in enumerate(base_clones)}
        position_of: dict[int, int] = {}
        for i, value in enumerate(flat):
            if not isinstance(value, torch.Tensor) or is_wrapper_subclass(value):
                continue
            if i in self._views:
                k, size, stride, offset = self._views[i]
                flat[i] = base_clones[k].as_strided(size, stride, offset)
            elif i in self._roots:
                flat[i] = base_clones[self._roots[i]]
            else:
                if id(value) not in clones:
                    clone = value.clone()
                    clones[id(value)] = (("argument", i), clone, clone._version)
                flat[i] = clones[id(value)][1]
            position_of.setdefault(id(flat[i]), i)
        args, kwargs = pytree.tree_unflatten(flat, spec)
        leaves, self.result_spec = pytree.tree_flatten(self._call(*args, **kwargs))
        mutated = [(target, clone) for target, clone, version in clones.values() if clone._version != version]
        self.mutated = [target for target, _ in mutated]
        self.returns_argument = [position_of.get(id(leaf)) if isinstance(leaf, torch.Tensor) else None
                                 for leaf in leaves]
        return [None if at is not None else leaf for leaf, at in zip(leaves, self.returns_argument)] \
            + [clone for _, clone in mutated]


class _Routed:
    """A graph node's call, routed through `SubclassCalls`."""

    def __init__(self, calls: SubclassCalls, name: str, call: Callable[..., Any], kind: str) -> None:
        self._calls = calls
        self._name = name
        self._call = call
        self._kind = kind
        self.__name__ = name.replace(".", "_")
        self.__module__ = __name__

    def __call__(self, *args, **kwargs):
        return self._calls.call(self._name, self._call, self._kind, args, kwargs)


def _current_value(tensor: torch.Tensor) -> torch.Tensor:
    """What a functional tensor holds now, with its requires_grad (a subclass made of it is, as in
    eager, a new leaf of autograd that requires grad when its tensors do)."""
    if not torch._is_functional_tensor(tensor):
        return tensor
    value = from_functional(tensor)
    if value.requires_grad != tensor.requires_grad:
        value = value.detach().requires_grad_(tensor.requires_grad)
    return value


class _UnwrappedCall:
    """One call made on the current values of its functional tensor arguments, differentiably.

    `run` makes the call on detached values (those of tensors that require
    grad require grad again) in the grad mode of the call, and keeps its
    autograd graph; `gradients` runs that graph backward. Both run with
    functionalization paused: what they compute is made of plain aten
    operations on the unwrapped tensors, which the trace records.
    """

    def __init__(self, call: Callable[..., Any], flat: list, spec: pytree.TreeSpec, positions: list[int],
                 subclasses_first: bool = False) -> None:
        self._grad_enabled = torch.is_grad_enabled()  # the call's: autograd.Function.forward runs without
        self._subclasses_first = subclasses_first
        self._call = call
        self._flat = flat
        self._spec = spec
        self._positions = positions
        self._inputs: list[torch.Tensor] = []
        self._gets_gradient: list[bool] = []  # per tensor argument: the first of its tensor that requires grad
        self._outputs: list[Any] = []
        self._out_spec: pytree.TreeSpec | None = None

    def run(self, tensors: tuple[torch.Tensor, ...]) -> list[Any]:
        flat = list(self._flat)
        values: dict[int, torch.Tensor] = {}  # a tensor passed twice is one value, as in eager
        with functionalization_paused(), torch.set_grad_enabled(self._grad_enabled):
            for position, tensor in zip(self._positions, tensors):
                first = id(tensor) not in values
                if first:
                    value = from_functional(tensor).detach()
                    values[id(tensor)] = _functional_copy(value) if self._subclasses_first else value
                value = flat[position] = values[id(tensor)]
                self._gets_gradient.append(first and tensor.requires_grad)
                if first and tensor.requires_grad:
                    value.requires_grad_(True)
                    self._inputs.append(value)
            args, kwargs = pytree.tree_unflatten(flat, self._spec)
            if self._subclasses_first:
                with _SubclassesFirst.active():
                    outputs, self._out_spec = pytree.tree_flatten(self._call(*args, **kwargs))
            else:
                outputs, self._out_spec = pytree.tree_flatten(self._call(*args, **kwargs))
            detached = [out.detach() if isinstance(out, torch.Tensor) else out for out in outputs]
        self._outputs = outputs
        return [_functional(out) if self._subclasses_first else to_functional(out) for out in detached]

    def rebuild(self, outputs: list[Any]) -> Any:
        return pytree.tree_unflatten(outputs, self._out_spec)

    def gradients(self, grads: tuple[Any, ...]) -> list[torch.Tensor | None]:
        """One gradient per tensor argument (None where it needs none, or its tensor came earlier)."""
        pairs = [(out, grad) for out, grad in zip(self._outputs, grads)
                 if isinstance(out, torch.Tensor) and out.requires_grad and grad is not None]
        if not pairs or not self._inputs:
            return [None] * len(self._gets_gradient)
        outputs = [out for out, _ in pairs]
        if self._subclasses_first:
            # functionalized below the subclasses as the forward was: a backward formula's in-place
            # ops on its own buffers (`CopySlices` fills a slice of a gradient) become functional
            # ops, which the partitioner follows by their data
            with _SubclassesFirst.active():
                found = torch.autograd.grad(outputs, self._inputs, [_functional_copy(from_functional(grad))
                                                                     for _, grad in pairs], allow_unused=True)
            found = [_functional(grad) for grad in found]
        else:
            with functionalization_paused():
                found = torch.autograd.grad(outputs, self._inputs, [from_functional(grad) for _, grad in pairs],
                                            allow_unused=True)
            found = [None if grad is None else torch._to_functional_tensor(grad) for grad in found]
        gradients = iter(found)
        return [next(gradients) if gets else None for gets in self._gets_gradient]

    def requires_grad(self) -> list[bool]:
        return [isinstance(out, torch.Tensor) and out.requires_grad for out in self._outputs]


def _functional_copy(value: torch.Tensor) -> torch.Tensor:
    """A new functional tensor holding `value`; for a subclass, the subclass around functional
    tensors holding its inner tensors (it dispatches first, its inner ops are functionalized)."""
    layout = layout_of(value)
    if layout is None:
        return torch._to_functional_tensor(value)
    inner = flatten_values([value], [layout])
    return rebuild_traced(layout, [torch._to_functional_tensor(t) for t in inner])


_FUNCTIONALIZE = torch._C.DispatchKey.Functionalize


class _SubclassesFirst(TorchDispatchMode):
    """Functionalization below tensor subclasses, as eager orders them: while active, an op with a
    wrapper subclass among its arguments goes to the subclass's `__torch_dispatch__` first (the
    functionalization key is excluded, this mode declines it), and an op on plain tensors alone
    is functionalized (the key included again for it)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # see GraphRecorder: graphwright never runs TorchDynamo

    @staticmethod
    @contextlib.contextmanager
    def active() -> Iterator[None]:
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_FUNCTIONALIZE)), _SubclassesFirst():
            yield

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(is_wrapper_subclass(value) for value in pytree.tree_leaves((args, kwargs))):
            return NotImplemented
        torch._C._dispatch_tls_set_dispatch_key_excluded(_FUNCTIONALIZE, False)
        try:
            return func(*args, **(kwargs or {}))
        finally:
            torch._C._dispatch_tls_set_dispatch_key_excluded(_FUNCTIONALIZE, True)


def _functional(value: torch.Tensor | None) -> torch.Tensor | None:
    """`value` as the trace holds tensors: a functional tensor (around a subclass whose inner
    tensors are plain, for a subclass made below functionalization by `_functional_copy`)."""
    if value is None or torch._is_functional_tensor(value):
        return value
    layout = layout_of(value)
    if layout is not None:
        value = rebuild_traced(layout, [from_functional(t) for t in flatten_values([value], [layout])])
    return torch._to_functional_tensor(value)


class _RunUnwrapped(torch.autograd.Function):
    """The autograd node of an `_UnwrappedCall` among the functional tensors of the trace."""

    @staticmethod
    def forward(ctx, call: _UnwrappedCall, *tensors: torch.Tensor) -> tuple:
        ctx.call = call
        outputs = call.run(tensors)
        ctx.mark_non_differentiable(*[out for out, differentiable in zip(outputs, call.requires_grad())
                                      if isinstance(out, torch.Tensor) and not differentiable])
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads: Any) -> tuple:
        return (None, *ctx.call.gradients(grads))
