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
mutates either afterwards is refused (`check`), and runs as captured. Outside
a trace (the graph run as captured) every call is made as it is.
"""
from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from .._core import artifacts
from .._core.errors import BackendRefusal
from .._core.subclass_protocol import API_FUNCTIONS, is_api_member, is_wrapper_subclass, is_wrapper_subclass_type
from .._core.user_stack import user_frames_of_stack
from .metadata import from_functional, functionalization_paused, to_functional


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
            name, call, makes_leaf = routed
            if makes_leaf:
                self._classes.add(name)
            node.op, node.target = "call_function", _Routed(self, name, call, makes_leaf)
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

    def call(self, name: str, call: Callable[..., Any], makes_leaf: bool, args: tuple, kwargs: dict) -> Any:
        flat, spec = pytree.tree_flatten((args, kwargs))
        positions = [i for i, value in enumerate(flat) if isinstance(value, torch.Tensor)]
        functional = [flat[i] for i in positions if torch._is_functional_tensor(flat[i])]
        if not functional:
            return call(*args, **kwargs)
        if makes_leaf:
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


def _routed_call(node: torch.fx.Node) -> tuple[str, Callable[..., Any], bool] | None:
    """(name, the call, whether it makes a new autograd leaf) for a node this module routes."""
    if node.op == "call_function" and is_wrapper_subclass_type(node.target):
        return node.target.__qualname__, node.target, True
    if node.op == "call_function" and any(node.target is function for function in API_FUNCTIONS):
        return node.target.__name__, node.target, False
    receiver = node.args[0].meta.get("example_value") if node.args and isinstance(node.args[0], torch.fx.Node) \
        else None
    if not is_wrapper_subclass(receiver):
        return None
    cls = type(receiver)
    if node.op == "call_method" and is_api_member(cls, node.target):
        name = node.target
        return f"{cls.__qualname__}.{name}", lambda self, *args, **kwargs: getattr(self, name)(*args, **kwargs), False
    if node.op == "call_function" and node.target is builtins.getattr and len(node.args) == 2 \
            and isinstance(node.args[1], str) and is_api_member(cls, node.args[1]):
        return f"{cls.__qualname__}.{node.args[1]}", builtins.getattr, False
    return None


class _Routed:
    """A graph node's call, routed through `SubclassCalls`."""

    def __init__(self, calls: SubclassCalls, name: str, call: Callable[..., Any], makes_leaf: bool) -> None:
        self._calls = calls
        self._name = name
        self._call = call
        self._makes_leaf = makes_leaf
        self.__name__ = name.replace(".", "_")
        self.__module__ = __name__

    def __call__(self, *args, **kwargs):
        return self._calls.call(self._name, self._call, self._makes_leaf, args, kwargs)


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

    def __init__(self, call: Callable[..., Any], flat: list, spec: pytree.TreeSpec, positions: list[int]) -> None:
        self._grad_enabled = torch.is_grad_enabled()  # the call's: autograd.Function.forward runs without
        self._call = call
        self._flat = flat
        self._spec = spec
        self._positions = positions
        self._inputs: list[torch.Tensor] = []
        self._outputs: list[Any] = []
        self._out_spec: pytree.TreeSpec | None = None

    def run(self, tensors: tuple[torch.Tensor, ...]) -> list[Any]:
        flat = list(self._flat)
        with functionalization_paused(), torch.set_grad_enabled(self._grad_enabled):
            for position, tensor in zip(self._positions, tensors):
                value = from_functional(tensor).detach()
                if tensor.requires_grad:
                    value.requires_grad_(True)
                    self._inputs.append(value)
                flat[position] = value
            args, kwargs = pytree.tree_unflatten(flat, self._spec)
            outputs, self._out_spec = pytree.tree_flatten(self._call(*args, **kwargs))
            detached = [out.detach() if isinstance(out, torch.Tensor) else out for out in outputs]
        self._outputs = outputs
        return [to_functional(out) for out in detached]

    def rebuild(self, outputs: list[Any]) -> Any:
        return pytree.tree_unflatten(outputs, self._out_spec)

    def gradients(self, grads: tuple[Any, ...]) -> list[torch.Tensor | None]:
        pairs = [(out, grad) for out, grad in zip(self._outputs, grads)
                 if isinstance(out, torch.Tensor) and out.requires_grad and grad is not None]
        if not pairs or not self._inputs:
            return [None] * len(self._inputs)
        with functionalization_paused():
            found = torch.autograd.grad([out for out, _ in pairs], self._inputs,
                                        [from_functional(grad) for _, grad in pairs], allow_unused=True)
        return [None if grad is None else torch._to_functional_tensor(grad) for grad in found]

    def requires_grad(self) -> list[bool]:
        return [isinstance(out, torch.Tensor) and out.requires_grad for out in self._outputs]


class _RunUnwrapped(torch.autograd.Function):
    """The autograd node of an `_UnwrappedCall` among the functional tensors of the trace."""

    @staticmethod
    def forward(ctx, call: _UnwrappedCall, *tensors: torch.Tensor) -> tuple:
        ctx.call = call
        ctx.needs = [tensor.requires_grad for tensor in tensors]
        outputs = call.run(tensors)
        ctx.mark_non_differentiable(*[out for out, differentiable in zip(outputs, call.requires_grad())
                                      if isinstance(out, torch.Tensor) and not differentiable])
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads: Any) -> tuple:
        found = iter(ctx.call.gradients(grads))
        return (None, *[next(found) if needs else None for needs in ctx.needs])
