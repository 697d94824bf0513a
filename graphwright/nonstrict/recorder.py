"""The dispatch mode that records aten operations into a torch.fx graph.

`GraphRecorder` sits on top of the dispatch-mode stack while the traced
function runs. Every aten call reaches it with the tensors the program
holds (real or fake); it maps each tensor to the graph node that produced
it, runs the call one level down (eagerly, or on the fake mode below it),
and appends a node for it. Tensors it never saw produced are constants of
the graph: a get_attr node, recorded in the `TraceRecord` together with the
user's line that first used them.

What it must not do: capture stacks, traverse pytrees or build strings on
the per-op path. That path runs once per aten call of the traced program
and decides the tracer's speed.
"""
from __future__ import annotations

import operator
import weakref
from typing import Any, Callable

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._ops import HigherOrderOperator, OpOverload
from torch._subclasses.fake_impls import fast_detach
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.fx.experimental.symbolic_shapes import PendingUnbackedSymbolNotFound, compute_unbacked_bindings
from torch.utils._python_dispatch import TorchDispatchMode

from .._core import recompute, source_lines
from .._core.errors import NonFakeInputError, TraceError
from .._core.leaf_op import OPAQUE_CALL_OPERATORS
from .._core.subclass_protocol import has_own_dispatch
from .._core.user_stack import user_frames_of_stack
from .higher_order import record_higher_order
from .symbolic_sizes import SymbolicSizeNodes, is_symbolic
from .trace_record import CapturedConstant, TraceRecord

_aten = torch.ops.aten
_IMPLICIT_KEY = torch._C.DispatchKey.CompositeImplicitAutograd
_FUNCTIONAL_KEY = torch._C._TorchDispatchModeKey.FUNCTIONAL
_PROXY_KEY = torch._C._TorchDispatchModeKey.PROXY
_active_infra_mode = torch._C._get_dispatch_mode
_UNSEEN = object()
_grad_enabled = torch._C.is_grad_enabled

GRAD_ENABLED_KEY = "grad_enabled"
"""`node.meta` key, set to False on operations recorded while grad mode was off."""


class GraphRecorder(TorchDispatchMode):
    """Records every aten call of the program it runs under into `graph`.

    `named_constants` maps `id()` of tensors that are constants by
    construction (the parameters and buffers of a traced `nn.Module`) to their
    qualified names; they are allowed in fake mode without
    `_allow_non_fake_inputs`.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ in a TorchDynamo-disabling
        # wrapper: it imports torch._dynamo on the first op (seconds) and costs
        # time on every op. graphwright never runs TorchDynamo.
        return False

    def __init__(
        self,
        graph: torch.fx.Graph,
        record: TraceRecord,
        sizes: SymbolicSizeNodes,
        *,
        fake_mode: FakeTensorMode | None,
        decomposition_table: dict[OpOverload, Callable[..., Any]] | None,
        allow_non_fake_inputs: bool,
        named_constants: dict[int, str],
    ) -> None:
        super().__init__()
        self.graph = graph
        self.constants: dict[str, Any] = {}  # tensor constants, and subgraphs (higher_order.py)
        self._record = record
        self._sizes = sizes
        self._fake_mode = fake_mode
        self._decompositions = decomposition_table or {}
        self._allow_non_fake_inputs = allow_non_fake_inputs
        # Whether calls of higher-order operators (torch.cond) come to __torch_dispatch__ to be
        # traced (higher_order.py); ahead-of-time autograd asks for it.
        self.supports_higher_order_operators = False
        self._named_constants = named_constants
        # id(tensor) -> (weak reference, node). The reference must stay weak:
        # torch's factory functions copy any result someone else still holds,
        # and the copy would be a tensor the recorder never saw produced.
        self._node_of: dict[int, tuple[weakref.ref, torch.fx.Node]] = {}
        self._constants_alive: list[torch.Tensor] = []
        self._constant_nodes: dict[int, torch.fx.Node] = {}
        self._fake_of_constant: dict[int, torch.Tensor] = {}
        self._node_names: dict[Any, str] = {}
        self._implicit_decompositions: dict[Any, Callable[..., Any] | None] = {}
        self._args_hold_real_constants = False
        self._lifting_literal = False
        self._gradient_origins = source_lines.GradientOrigins()
        # set by make_fx(record_stack_traces=True): each node records the Python lines it ran at
        self.live_stack: source_lines.LiveStack | None = None

    def track(self, tensor: torch.Tensor, node: torch.fx.Node) -> None:
        """From now on, `tensor` is computed by `node`."""
        self._node_of[id(tensor)] = (weakref.ref(tensor), node)

    @property
    def fake_mode(self) -> FakeTensorMode | None:
        return self._fake_mode

    @property
    def tracing_mode(self) -> str:
        return self._record.tracing_mode

    @property
    def decompositions(self) -> dict:
        return self._decompositions

    @property
    def allow_non_fake_inputs(self) -> bool:
        return self._allow_non_fake_inputs

    def add_subgraph(self, prefix: str, subgraph: torch.fx.GraphModule) -> torch.fx.Node:
        """A get_attr node reading `subgraph`, held by the graph module as `<prefix>_<n>`."""
        index = 0
        while f"{prefix}_{index}" in self.constants:
            index += 1
        name = f"{prefix}_{index}"
        self.constants[name] = subgraph
        node = self.graph.get_attr(name)
        return node

    def graph_value(self, value: Any) -> Any:
        """What a graph node argument reads for `value`: a node, or the value itself."""
        return self._to_arg(value)

    def metadata_of(self, tensor: torch.Tensor) -> torch.Tensor:
        """The `meta["val"]` of a node producing `tensor`.

        For a fake tensor it is a detached fake copy, so that later in-place
        changes of the tensor's metadata do not show and the node does not
        keep the tensor itself alive; for a real tensor it is an empty
        meta-device tensor of the same sizes, strides and dtype (cheap, holds
        no data).
        """
        if isinstance(tensor, FakeTensor):
            return fast_detach(tensor.fake_mode, tensor)
        if tensor.layout != torch.strided or tensor.is_quantized:
            return tensor  # the meta device has no such tensors
        return torch.empty_strided(
            tensor.shape, tensor.stride(), dtype=tensor.dtype, device="meta"
        )

    # Hot path: runs once per aten call of the traced program.
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if _active_infra_mode(_PROXY_KEY) is not None:
            # torch's own make_fx traces beneath us, for its own use (a higher-order operator's
            # rules trace its functions to check them): the program did not run these operations
            return func(*args, **kwargs)
        if func.__class__ is not OpOverload and isinstance(func, HigherOrderOperator):
            return record_higher_order(self, func, args, kwargs)
        if _active_infra_mode(_FUNCTIONAL_KEY) is not None:
            return self._below_functional_mode(func, types, args, kwargs)
        for cls in types:
            if cls is not FakeTensor and _runs_own_dispatch(cls) and self._untracked_subclass(args, kwargs):
                # a tensor subclass made while tracing (AOT autograd's desugared inputs): its own
                # __torch_dispatch__ runs and calls the aten ops on its inner tensors, which reach
                # this recorder in turn
                return NotImplemented
        decomposition = self._decompositions.get(func)
        if decomposition is None:
            decomposition = self._implicit_decompositions.get(func, _UNSEEN)
            if decomposition is _UNSEEN:
                decomposition = self._implicit_decompositions[func] = _implicit_decomposition(func)
        if decomposition is not None:
            with self:
                result = decomposition(*args, **kwargs)
            if result is not NotImplemented:
                return result
        literal = func is _aten.lift_fresh.default
        if literal:
            # A tensor literal (`torch.tensor([1, 2])`) in the program: a copy
            # of it, so that running the graph never mutates the constant.
            func = _aten.lift_fresh_copy.default
            self._lifting_literal = True
        self._args_hold_real_constants = False
        to_arg = self._to_arg
        node_args = tuple([to_arg(a) for a in args])
        node_kwargs = {k: to_arg(v) for k, v in kwargs.items()} if kwargs else {}
        self._lifting_literal = False
        if self._args_hold_real_constants and not literal:
            # (a literal is lifted from the real tensor: the fake mode keeps a small one's value,
            # and operators on such constants run for real, as in eager: `unique` of an empty
            # literal has a known size)
            args = self._with_fake_constants(args)
            kwargs = self._with_fake_constants(kwargs)
        out = func(*args, **kwargs)
        if out is None or isinstance(out, (torch.Tensor, tuple, list)):
            node = self._record_call(func, node_args, node_kwargs, out)
            if _depends_on_data(func):
                self._bind_new_sizes(node, out)
        elif is_symbolic(out):  # `.item()` on fake tensors: an unbacked symbol, computed by the node
            self._sizes.bind_symbol(self._record_call(func, node_args, node_kwargs, out), out)
        return out

    def _bind_new_sizes(self, node: torch.fx.Node, out: Any) -> None:
        """Sizes of a data-dependent operator's outputs (`nonzero`...) are read from them."""
        if isinstance(out, torch.Tensor):
            self._sizes.bind_tensor(node, out)
        elif isinstance(out, (tuple, list)):
            for index, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    self._sizes.bind_tensor(self.graph.call_function(operator.getitem, (node, index)), item)

    def _untracked_subclass(self, args: tuple, kwargs: dict) -> bool:
        """Whether a tensor argument of a subclass with its own `__torch_dispatch__` is one no node
        computes: a traced input that is such a subclass is recorded as it is (as torch's make_fx
        records a subclass input that has a proxy)."""
        for value in pytree.tree_leaves((args, kwargs)):
            if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor) \
                    and _runs_own_dispatch(type(value)):
                entry = self._node_of.get(id(value))
                if entry is None or entry[0]() is not value:
                    return True
        return False

    def _below_functional_mode(self, func, types, args, kwargs):
        """Let a FunctionalTensorMode entered inside the program run first.

        PyTorch always dispatches its own modes (functionalization, fake)
        after user modes such as this one. Functionalization must come first
        so that the graph records the functional operations it produces: run
        its handler here, with this recorder back on top to receive them.
        """
        functional_mode = torch._C._unset_dispatch_mode(_FUNCTIONAL_KEY)
        try:
            with self:
                return functional_mode.__torch_dispatch__(func, types, args, kwargs)
        finally:
            torch._C._push_on_torch_dispatch_stack(functional_mode)

    def _to_arg(self, value: Any) -> Any:
        entry = self._node_of.get(id(value))
        if entry is not None and entry[0]() is value:
            return entry[1]
        cls = type(value)
        if cls is list:
            return [self._to_arg(v) for v in value]
        if cls is tuple:
            return tuple([self._to_arg(v) for v in value])
        if isinstance(value, torch.Tensor):
            return self._constant_node(value)
        if is_symbolic(value):
            return self._sizes.node_for(value)
        return value

    def _record_call(self, func: Any, node_args: tuple, node_kwargs: dict, out: Any) -> torch.fx.Node:
        name = self._node_names.get(func)
        if name is None:
            name = self._node_names[func] = _node_name(func)
        node = self.graph.create_node("call_function", func, node_args, node_kwargs, name=name)
        if recompute.regions:  # inside a checkpointed function
            node.meta[recompute.RECOMPUTE_KEY] = recompute.regions[-1]
        if not _grad_enabled():
            node.meta[GRAD_ENABLED_KEY] = False  # replaying the graph must not differentiate it
        self._record_origin(node)
        self.track_output(node, out)
        shape_env = self._fake_mode.shape_env if self._fake_mode is not None else None
        if shape_env is not None and shape_env.pending_fresh_unbacked_symbols:
            # the symbols this call made (`.item()`, `nonzero`) are bound to its output, as a
            # backend that propagates fake tensors again (Inductor) expects of every node
            try:
                bindings = compute_unbacked_bindings(shape_env, out)
            except PendingUnbackedSymbolNotFound:  # made inside an opaque call, not in its output
                bindings = None
            if bindings:
                node.meta["unbacked_bindings"] = bindings
        return node

    def _record_origin(self, node: torch.fx.Node) -> None:
        """The lines `node` comes from: those of the graph node being traced again (a backward
        operation: those of the forward operation it differentiates), else the live stack's."""
        gradients = self._gradient_origins
        meta = gradients.backward_meta() if gradients.started else None
        if meta is None:
            meta = source_lines.current()
            if meta is not None:
                gradients.forward_meta(meta)
        if meta is not None:
            source_lines.copy_onto(node, meta)
        elif self.live_stack is not None:
            text = self.live_stack.stack_trace()
            if text:
                node.meta[source_lines.STACK_TRACE] = text

    def track_output(self, node: torch.fx.Node, out: Any) -> None:
        """From now on, the tensors in `out` are computed by `node` (through getitem nodes)."""
        if isinstance(out, torch.Tensor):
            node.meta["val"] = self.metadata_of(out)
            self._node_of[id(out)] = (weakref.ref(out), node)
        elif isinstance(out, (tuple, list)):
            node.meta["val"] = type(out)(
                self.metadata_of(o) if isinstance(o, torch.Tensor) else o for o in out
            )
            for index, item in enumerate(out):
                if _holds_tensor(item):
                    item_node = self.graph.call_function(operator.getitem, (node, index))
                    self.track_output(item_node, item)
        else:
            node.meta["val"] = out

    # Constants: tensors the program read without receiving them as inputs.

    def _constant_node(self, tensor: torch.Tensor) -> torch.fx.Node:
        node = self._constant_nodes.get(id(tensor))
        if node is None:
            node = self._new_constant(tensor)
        if self._fake_mode is not None:
            self._args_hold_real_constants = True
        return node

    def _new_constant(self, tensor: torch.Tensor) -> torch.fx.Node:
        if isinstance(tensor, FakeTensor):
            raise TraceError(
                "A fake tensor that is not an input of the traced function",
                explanation="The program used a fake tensor that was neither an input nor "
                "computed from one (it belongs to another trace or fake mode), so the graph "
                "has no value for it.",
                hints=["Pass the tensor to the traced function as an input."],
                user_stack=user_frames_of_stack(),
            )
        name = self._named_constants.get(id(tensor))
        if (
            self._fake_mode is not None
            and name is None
            and not self._lifting_literal
            and not self._allow_non_fake_inputs
        ):
            raise NonFakeInputError(
                "A real tensor that is not an input met fake tensors",
                explanation="While tracing with fake tensors, the program used a real tensor "
                "it did not receive as an input (a global, a closure variable or an attribute). "
                "Its value would be baked into the graph as a constant.",
                hints=[
                    "Pass the tensor to the traced function as an input, or call make_fx(..., "
                    "_allow_non_fake_inputs=True) to capture its current value as a constant.",
                ],
                debug_context=f"tensor of shape {tuple(tensor.shape)} and dtype {tensor.dtype}",
                user_stack=user_frames_of_stack(),
            )
        if name is None:
            name = f"_tensor_constant{len(self._record.constants)}"
        node = self.graph.get_attr(name)
        if self._fake_mode is not None:
            fake = self._fake_mode.from_tensor(tensor, static_shapes=True)
            self._fake_of_constant[id(tensor)] = fake
            node.meta["val"] = fake
        else:
            node.meta["val"] = self.metadata_of(tensor)
        self.constants[name] = tensor
        self._constant_nodes[id(tensor)] = node
        self._constants_alive.append(tensor)  # their ids must stay unique
        user_stack = user_frames_of_stack()
        self._record.constants.append(
            CapturedConstant(
                target=name,
                requires_grad=tensor.requires_grad,
                is_parameter=isinstance(tensor, torch.nn.Parameter),
                from_literal=self._lifting_literal,
                user_location=(
                    f"{user_stack[-1].filename}:{user_stack[-1].lineno}" if user_stack else ""
                ),
                is_module_state=id(tensor) in self._named_constants,
            )
        )
        return node

    def _with_fake_constants(self, value: Any) -> Any:
        """`value` with each real constant replaced by its fake copy (fake modes only)."""
        fake = self._fake_of_constant.get(id(value))
        if fake is not None:
            return fake
        if isinstance(value, (list, tuple)):
            return type(value)(self._with_fake_constants(v) for v in value)
        if isinstance(value, dict):
            return {k: self._with_fake_constants(v) for k, v in value.items()}
        return value


_OWN_DISPATCH: dict[type, bool] = {}


def _runs_own_dispatch(cls: type) -> bool:
    """Whether tensors of `cls` (not a fake tensor) have a `__torch_dispatch__` of their own; one
    dict lookup per type after the first."""
    known = _OWN_DISPATCH.get(cls)
    if known is None:
        known = _OWN_DISPATCH[cls] = not issubclass(cls, (FakeTensor, FunctionalTensor)) and has_own_dispatch(cls)
    return known


def _implicit_decomposition(func: Any) -> Callable[..., Any] | None:
    """`func.decompose` for CompositeImplicitAutograd ops, else None.

    Such ops normally decompose above autograd; they reach a dispatch mode
    only where autograd is skipped (inference mode, functionalization).
    """
    try:
        decomposes = isinstance(func, OpOverload) and func.has_kernel_for_dispatch_key(
            _IMPLICIT_KEY
        )
    except RuntimeError:  # prim:: ops (prim.device) are not in the C++ registry
        decomposes = False
    return func.decompose if decomposes else None


_DATA_DEPENDENT_TAGS = (torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output)
_DEPENDS_ON_DATA: dict[Any, bool] = {}


def _depends_on_data(func: Any) -> bool:
    """Whether `func`'s output sizes can depend on its inputs' data (new unbacked symbols)."""
    known = _DEPENDS_ON_DATA.get(func)
    if known is None:
        tags = getattr(func, "tags", ())
        known = _DEPENDS_ON_DATA[func] = any(tag in tags for tag in _DATA_DEPENDENT_TAGS) \
            or func in OPAQUE_CALL_OPERATORS  # a leaf function's fake may return such sizes
    return known


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (tuple, list)) and any(_holds_tensor(v) for v in value)


def _node_name(func: Any) -> str:
    packet = getattr(func, "overloadpacket", None)
    return getattr(packet if packet is not None else func, "__name__", "call")
