"""The operators behind `leaf_function` calls: opaque to every tracer, the user's Python once per call.

A leaf call site is a `LeafCall`, found by an integer handle that the graph
passes to the custom operator `graphwright::leaf_call(handle, needs_grad,
tensors, sizes)`; its flat inputs are tensors and symbolic sizes (`SymInt`s,
which stay symbolic in every graph: one compile serves every size). Its real kernel runs the original function, its fake kernel the
function registered with `register_fake`. Being an operator, it stays one
node in the aten graphs of ahead-of-time autograd too, and the function's
side effects happen on every call. The operator is functional: a function
declared with `mutates_args` runs on copies of those inputs, whose new values
are extra outputs that the graph copies back into the inputs (once, under
`no_grad`: a mutation autograd would record is an error).

Gradients, as PyTorch's `leaf_function` does them: the real kernel runs the
function on its inputs detached, those that need a gradient made leaves of a
local autograd graph, and keeps that graph under a ticket, a small tensor it
returns with the outputs. `graphwright::leaf_call_backward` differentiates
the kept graph, so the function's Python never runs again in the backward
pass. A ticket's graph is dropped when the ticket tensor dies (when the
caller's autograd graph is freed).

What the kernel checks on every call: no input changed in place unless
declared (an error naming it), and, on the first call of a site, that the
function returned the structure its fake returned.
"""
from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from . import config
from .errors import LeafFunctionError
from .flat_call import ModuleState, apply_flat_call, module_state_names
from .user_stack import user_frames_of_stack


class LeafCall:
    """One call site of a leaf function: how to rebuild its arguments from the flat inputs
    (tensor and size leaves, then module states), which of them it mutates, which are sizes
    (`size_positions`), and what the fake returned.

    `input_names` name the flat inputs as the user writes them (`x`, `model.running_mean`)."""

    def __init__(self, fn: Callable, fake: Callable, name: str, in_spec: pytree.TreeSpec, leaves: list,
                 input_positions: Sequence[int], module_states: Sequence[ModuleState],
                 mutated: Sequence[int], input_names: Sequence[str], size_positions: Sequence[int] = ()) -> None:
        self.fn = fn
        self.fake = fake
        self.name = name
        self.in_spec = in_spec
        self.leaves = leaves
        self.input_positions = tuple(input_positions)
        self.module_states = tuple(module_states)
        self.mutated = tuple(mutated)
        self.input_names = tuple(input_names)
        self.out_spec: pytree.TreeSpec | None = None
        self.constant_leaves: list[Any] = []  # the output's leaves, tensors and scalars as None
        self.scalar_outputs: list[tuple[int, torch.dtype]] = []  # symbolic in the fake: (leaf, dtype)
        self.fake_metadata: list[tuple[Any, torch.dtype]] = []
        self._structure_checked = False
        self.size_positions = frozenset(size_positions)
        self.handle = next(_HANDLES)
        self.__name__ = "leaf_" + getattr(fn, "__name__", "fn")
        self.__qualname__ = self.__name__
        self.__module__ = __name__
        _SITES[self.handle] = self

    def __call__(self, *flat_inputs: Any) -> tuple:
        """The operator on the flat inputs: tensors, and ints (sizes) at `size_positions`."""
        grad = torch.is_grad_enabled()
        tensors = [item for item in flat_inputs if isinstance(item, torch.Tensor)]
        sizes = [item for item in flat_inputs if not isinstance(item, torch.Tensor)]
        needs_grad = [grad and tensor.requires_grad and _differentiable(tensor) for tensor in tensors]
        return tuple(leaf_call(self.handle, needs_grad, tensors, sizes))

    def flat_inputs(self, tensors: Sequence[torch.Tensor], sizes: Sequence[Any]) -> list[Any]:
        """The operator's tensors and sizes back in the order of the call's flat inputs."""
        tensor_items, size_items = iter(tensors), iter(sizes)
        return [next(size_items) if index in self.size_positions else next(tensor_items)
                for index in range(len(tensors) + len(sizes))]

    def record_fake_output(self, output: Any) -> None:
        """What the fake returned when the site was traced: the real output must match it."""
        leaves, self.out_spec = pytree.tree_flatten(output)
        self.scalar_outputs = [(index, _SCALAR_DTYPES[type(leaf)]) for index, leaf in enumerate(leaves)
                               if type(leaf) in _SCALAR_DTYPES]
        self.constant_leaves = [None if isinstance(leaf, torch.Tensor) or type(leaf) in _SCALAR_DTYPES else leaf
                                for leaf in leaves]
        self.fake_metadata = [(tuple(leaf.shape), leaf.dtype) for leaf in leaves if isinstance(leaf, torch.Tensor)]

    @property
    def num_outputs(self) -> int:
        """The operator's results before the mutated inputs' new values and the ticket."""
        return len(self.fake_metadata) + len(self.scalar_outputs)

    def output_tree(self, results: Sequence[torch.Tensor]) -> Any:
        """The output from the operator's results: tensors, then scalars (as 0-dim tensors),
        the other leaves as the fake returned them."""
        tensors = iter(results[:len(self.fake_metadata)])
        scalars = {index: value.item() for (index, _), value in zip(self.scalar_outputs,
                                                                    results[len(self.fake_metadata):])}
        leaves = [scalars[index] if index in scalars else next(tensors) if leaf is None else leaf
                  for index, leaf in enumerate(self.constant_leaves)]
        return pytree.tree_unflatten(leaves, self.out_spec)

    def _results(self, output: Any, local: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """What the operator returns for `output` (the ticket aside): its tensors (copied where
        they alias an input), its symbolic scalars as 0-dim tensors, the mutated inputs."""
        leaves = pytree.tree_leaves(output)
        scalars = [torch.empty((), dtype=dtype) if isinstance(leaves[index], _SYMBOLIC)
                   else torch.tensor(leaves[index], dtype=dtype) for index, dtype in self.scalar_outputs]
        return _fresh_tensor_leaves(output, local) + scalars + [local[index] for index in self.mutated]

    # -- running the function -------------------------------------------------------
    def run_fake(self, flat_inputs: Sequence[Any]) -> tuple[Any, list[torch.Tensor]]:
        """The fake's output, and the operator's tensor outputs for it (the ticket aside)."""
        versions = _versions(flat_inputs)
        local = [item if index in self.size_positions else item.clone() if index in self.mutated
                 else item.detach() for index, item in enumerate(flat_inputs)]
        output = apply_flat_call(self.fake, self.in_spec, self.leaves, self.input_positions, self.module_states,
                                 local, reads_constants=False)
        self._check_mutations(flat_inputs, versions)
        if self.out_spec is None:
            self.record_fake_output(output)
        return output, self._results(output, local)

    def run(self, flat_inputs: Sequence[Any], needs_grad: Sequence[bool]) -> list[torch.Tensor]:
        """The function, once: the output's tensor leaves, the mutated inputs' new values, the ticket.
        `needs_grad` says it for each tensor input."""
        versions = _versions(flat_inputs)
        with _autograd_reenabled(), torch.enable_grad():
            grad_leaves: list[torch.Tensor | None] = []
            local = []
            wanted_by_tensor = iter(needs_grad)
            for index, item in enumerate(flat_inputs):
                if index in self.size_positions:
                    local.append(item)
                    continue
                wanted = next(wanted_by_tensor)
                leaf = item.detach().requires_grad_(wanted)
                grad_leaves.append(leaf if wanted else None)
                local.append(leaf.clone() if index in self.mutated else leaf)
            histories = [local[index].grad_fn for index in self.mutated]
            output = apply_flat_call(self.fn, self.in_spec, self.leaves, self.input_positions,
                                     self.module_states, local)
            self._check_mutations(flat_inputs, versions)
            if any(needs_grad):
                self._check_mutations_not_differentiated(local, histories)
            self._check_output(output)
            outputs = self._results(output, local)
            ticket = _ticket(outputs, grad_leaves) if any(needs_grad) else torch.tensor(-1)
        return [tensor.detach() for tensor in outputs] + [ticket]

    def _check_mutations_not_differentiated(self, local: Sequence[torch.Tensor], histories: Sequence[Any]) -> None:
        """A declared mutation is copied back into the input out of autograd's sight (as a
        buffer's running statistics are): one autograd would have recorded is an error."""
        for index, history in zip(self.mutated, histories):
            if local[index].requires_grad and local[index].grad_fn is not history:
                raise LeafFunctionError(
                    f"leaf_function '{self.name}' changes its input `{self.input_names[index]}` in place "
                    "in a way autograd records",
                    explanation="A compiled call copies a declared mutation back into the input without "
                                "recording it for autograd; here the new value depends on tensors that "
                                "require grad.",
                    hints=["Make the change under `torch.no_grad()` or with detached values, or return "
                           "the new value instead of changing the input."],
                    user_stack=user_frames_of_stack())

    def _check_mutations(self, flat_inputs: Sequence[Any], versions: Sequence[int | None]) -> None:
        for index, (item, version) in enumerate(zip(flat_inputs, versions)):
            if version is not None and item._version != version and index not in self.mutated:
                raise undeclared_mutation(self.name, self.input_names[index])

    def _check_output(self, output: Any) -> None:
        validate = config.leaf_function_validate_outputs
        if self._structure_checked and not validate:
            return
        if self.out_spec is None:  # called on real tensors under make_fx: no fake ran
            self.record_fake_output(output)
        leaves, spec = pytree.tree_flatten(output)
        if spec != self.out_spec:
            raise LeafFunctionError(
                f"leaf_function '{self.name}': output structure mismatch",
                explanation=f"Its fake implementation returned {self.out_spec}, the function returned {spec}.",
                hints=["Return the same containers, in the same order, from both."],
                user_stack=user_frames_of_stack())
        self._structure_checked = True
        if validate:
            tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
            for position, (tensor, (shape, dtype)) in enumerate(zip(tensors, self.fake_metadata)):
                _check_metadata(self.name, position, tensor, shape, dtype)


def _versions(flat_inputs: Sequence[Any]) -> list[int | None]:
    return [item._version if isinstance(item, torch.Tensor) else None for item in flat_inputs]


def _check_metadata(name: str, position: int, tensor: torch.Tensor, shape: tuple, dtype: torch.dtype) -> None:
    static = all(isinstance(size, int) for size in shape)
    if static and tuple(tensor.shape) != shape:
        what = f"Shape mismatch at output position {position}: fake {list(shape)}, real {list(tensor.shape)}"
    elif tensor.dtype != dtype:
        what = f"Dtype mismatch at output position {position}: fake {dtype}, real {tensor.dtype}"
    else:
        return
    raise LeafFunctionError(
        f"leaf_function '{name}': its output differs from its fake implementation's",
        explanation=what + ".",
        hints=["Make the fake build outputs of the real function's shapes and dtypes."],
        user_stack=user_frames_of_stack())


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_SCALAR_DTYPES = {torch.SymInt: torch.int64, torch.SymFloat: torch.float64, torch.SymBool: torch.bool}


def undeclared_mutation(name: str, path: str) -> LeafFunctionError:
    return LeafFunctionError(
        f"leaf_function '{name}' mutates its input `{path}` in place without declaring it",
        explanation="Undeclared in-place mutation: a compiled call gives the function its "
                    "inputs as they are and assumes they come back unchanged.",
        hints=[f"Declare it: `@graphwright.leaf_function(mutates_args={{'{path}'}})`.",
               "Or clone the input before changing it."],
        user_stack=user_frames_of_stack())


def call_operator(fn: Callable, fake: Callable, name: str, args: tuple, kwargs: dict, declared: set[int],
                  names: dict[int, str], sites: list) -> Any:
    """`fn(*args, **kwargs)` as one call of the operator, made where a tracer runs: the trace
    records it as one node. `declared` and `names` are the ids of the tensors the call may
    mutate and the user's names of its tensors; the new call site is kept in `sites` (the leaf
    function's own list: the site lives as long as the function)."""
    def is_module(node: Any) -> bool:
        return isinstance(node, torch.nn.Module)

    leaves, in_spec = pytree.tree_flatten((tuple(args), dict(kwargs)), is_leaf=is_module)
    positions = [index for index, leaf in enumerate(leaves) if isinstance(leaf, (torch.Tensor, torch.SymInt))]
    flat = [leaves[index] for index in positions]
    states = []
    for module in dict.fromkeys(leaf for leaf in leaves if is_module(leaf)):
        state_names = module_state_names(module)
        states.append(ModuleState(module, state_names))
        flat += [_state_tensor(module, state_name) for state_name in state_names]
    constants = [None if index in positions else leaf for index, leaf in enumerate(leaves)]
    mutated = [index for index, tensor in enumerate(flat) if id(tensor) in declared]
    input_names = [names.get(id(tensor), f"input {index}") for index, tensor in enumerate(flat)]
    sizes = [index for index, item in enumerate(flat) if not isinstance(item, torch.Tensor)]
    site = LeafCall(fn, fake, name, in_spec, constants, positions, states, mutated, input_names, sizes)
    sites.append(site)
    results = site(*flat)
    num_outputs = site.num_outputs
    with torch.no_grad():  # once, out of autograd's sight (LeafCall._check_mutations_not_differentiated)
        for index, new_value in zip(mutated, results[num_outputs:]):
            flat[index].copy_(new_value)
    return site.output_tree(results[:num_outputs])


def _state_tensor(module: torch.nn.Module, name: str) -> torch.Tensor:
    """The parameter or buffer at `name`, whatever tensor stands in it now (a traced one)."""
    owner_path, _, attribute = name.rpartition(".")
    owner = module.get_submodule(owner_path) if owner_path else module
    return owner._parameters[attribute] if attribute in owner._parameters else owner._buffers[attribute]


_HANDLES = itertools.count()
_SITES: weakref.WeakValueDictionary[int, LeafCall] = weakref.WeakValueDictionary()
_TICKETS = itertools.count()
_LOCAL_GRAPHS: dict[int, tuple[list[torch.Tensor], list[torch.Tensor | None]]] = {}


def _ticket(outputs: list[torch.Tensor], grad_leaves: list[torch.Tensor | None]) -> torch.Tensor:
    """Keep the call's local autograd graph for its backward, as long as the ticket lives."""
    _check_escaped_gradients(outputs, grad_leaves)
    key = next(_TICKETS)
    ticket = torch.tensor(key)
    _LOCAL_GRAPHS[key] = (outputs, grad_leaves)
    weakref.finalize(ticket, _LOCAL_GRAPHS.pop, key, None)
    return ticket


def _check_escaped_gradients(outputs: list[torch.Tensor], grad_leaves: list[torch.Tensor | None]) -> None:
    """With `config.leaf_function_check_escaped_gradients`: the outputs must not depend on
    tensors requiring grad that are not inputs (their gradients would be lost)."""
    if not config.leaf_function_check_escaped_gradients:
        return
    inputs = {id(leaf) for leaf in grad_leaves if leaf is not None}
    escaped, seen = [], set()
    stack = [out.grad_fn for out in outputs if out.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)
        if variable is not None and id(variable) not in inputs:
            escaped.append(variable)
        stack += [next_node for next_node, _ in node.next_functions]
    if escaped:
        details = ", ".join(f"Tensor(shape={list(t.shape)}, dtype={t.dtype})" for t in escaped)
        raise LeafFunctionError(
            f"leaf_function outputs depend on {len(escaped)} tensor(s) requiring grad that are not its inputs",
            explanation=f"{details}: closures or globals. Gradients do not flow back to them through a "
                        "leaf call.",
            hints=["Pass them to the function as arguments."],
            user_stack=user_frames_of_stack())


def _fresh_tensor_leaves(output: Any, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The output's tensor leaves, as an operator may return them (`_unaliased`)."""
    return _unaliased([leaf for leaf in pytree.tree_leaves(output) if isinstance(leaf, torch.Tensor)], inputs)


def _unaliased(tensors: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """An operator's outputs may alias neither its inputs nor each other: such outputs are copied."""
    taken = {tensor.untyped_storage()._cdata for tensor in inputs if isinstance(tensor, torch.Tensor)}
    fresh = []
    for leaf in tensors:
        storage = leaf.untyped_storage()._cdata
        if storage in taken:
            leaf = leaf.clone()
            storage = leaf.untyped_storage()._cdata
        taken.add(storage)
        fresh.append(leaf)
    return fresh


@torch.library.custom_op("graphwright::leaf_call", mutates_args=())
def leaf_call(handle: int, needs_grad: list[bool], inputs: list[torch.Tensor],
              sizes: list[int]) -> list[torch.Tensor]:
    site = _SITES[handle]
    return site.run(site.flat_inputs(inputs, sizes), needs_grad)


@leaf_call.register_fake
def _leaf_call_fake(handle: int, needs_grad: list[bool], inputs: list[torch.Tensor],
                    sizes: list[int]) -> list[torch.Tensor]:
    site = _SITES[handle]
    _, tensors = site.run_fake(site.flat_inputs(inputs, sizes))
    return tensors + [torch.empty((), dtype=torch.int64)]


@torch.library.custom_op("graphwright::leaf_call_backward", mutates_args=())
def leaf_call_backward(handle: int, ticket: torch.Tensor, likes: list[torch.Tensor],
                       grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """Gradients of one leaf call, from the local autograd graph its forward kept."""
    kept = _LOCAL_GRAPHS.get(int(ticket))
    if kept is None:
        raise LeafFunctionError(
            f"Backward of a call of leaf_function '{_SITES[handle].name}' whose forward state is gone",
            explanation="The call's local autograd graph is kept as long as its outputs' graph lives.",
            hints=["Call backward while the outputs of the compiled call are alive."])
    outputs, grad_leaves = kept
    pairs = [(out, grad) for out, grad in zip(outputs, grads) if out.requires_grad]
    wanted = [leaf for leaf in grad_leaves if leaf is not None]
    found: Sequence[torch.Tensor | None] = [None] * len(wanted)
    if pairs and wanted:
        # The graph stays until the ticket dies: a gradient that is a tensor subclass (a
        # TwoTensor) runs this operator once per tensor it holds, on the same graph.
        with _autograd_reenabled():
            found = torch.autograd.grad([out for out, _ in pairs], wanted, [grad for _, grad in pairs],
                                        allow_unused=True, retain_graph=True)
    by_leaf = dict(zip(map(id, wanted), found))
    computed = [_zeros_if_none(by_leaf.get(id(leaf)), like) for leaf, like in zip(grad_leaves, likes)]
    return _unaliased(computed, [ticket, *likes, *grads])


@leaf_call_backward.register_fake
def _leaf_call_backward_fake(handle: int, ticket: torch.Tensor, likes: list[torch.Tensor],
                             grads: list[torch.Tensor]) -> list[torch.Tensor]:
    return [torch.empty(like.shape, dtype=like.dtype, device=like.device) for like in likes]


def _autograd_reenabled() -> Any:
    """An operator's kernel runs below autograd; the local graph needs it back."""
    excluded = torch._C._dispatch_tls_local_exclude_set()
    for key in (torch._C.DispatchKey.AutogradOther, torch._C.DispatchKey.AutogradNestedTensor,
                torch._C.DispatchKey.AutogradCPU, torch._C.DispatchKey.AutogradCUDA):
        excluded = excluded.remove(key)
    return torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), excluded)


def _differentiable(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point() or tensor.is_complex()


def _zeros_if_none(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros(like.shape, dtype=like.dtype, device=like.device) if grad is None else grad


def _shape_of(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor of `tensor`'s shape, dtype and device holding one element: what the backward's
    fake needs to know, without keeping the input (which a declared mutation may change) alive."""
    return tensor.new_empty(()).expand(tensor.shape)


def _setup_context(ctx, inputs, output) -> None:
    handle, _, tensors, sizes = inputs
    ctx.handle = handle
    # No gradient for the sizes: autograd takes a list of ints as one leaf (None), an empty one as a list.
    ctx.sizes_gradient = None if sizes else []
    ctx.likes = [_shape_of(tensor) for tensor in tensors]
    ctx.save_for_backward(output[-1])


def _backward(ctx, grads):
    (ticket,) = ctx.saved_tensors
    computed = torch.ops.graphwright.leaf_call_backward(ctx.handle, ticket, ctx.likes, list(grads[:-1]))
    return None, None, [grad if _differentiable(like) else None for grad, like in zip(computed, ctx.likes)], \
        ctx.sizes_gradient


leaf_call.register_autograd(_backward, setup_context=_setup_context)


# The user's Python runs for its side effects too: dead-code elimination must keep every call.
torch.fx.node.has_side_effect(torch.ops.graphwright.leaf_call.default)

OPAQUE_CALL_OPERATORS = frozenset({torch.ops.graphwright.leaf_call.default})
"""Operators that run user Python: their outputs' sizes may be decided by data (unbacked)."""
