"""`torch.func` transforms inside a region: vmap, grad, grad_and_value, jacrev, jacfwd,
hessian, vjp and jvp.

`torch.func.vmap(f, ...)` (and the others that return a function) makes a
`TransformedFunction` value (so does a function a transform returned outside
the region, read from its closure); calling it traces `f` as a subgraph on what `f`
sees (for vmap, one example of the batch: the mapped dimension removed; for
reverse-mode transforms, the differentiated inputs requiring grad) and records
one node calling a `TransformCall` (`_core/transforms.py`) that applies the
real transform to the subgraph. Nesting composes: a transformed function
called inside another's function is a node of that subgraph.

`vjp` returns the primal outputs (a node calling the subgraph) and a
`vjp_fn` value; calling it records a node computing the vector-Jacobian
product from the primals again, so a function that draws random numbers is
refused there (its recomputed outputs would differ).
"""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.utils._pytree as pytree

from ..._core import transforms
from ..interpreter import graph_breaks as gb
from ..marked.pytree_values import output_value
from ..objects import operations
from ..objects.values import ConstantValue, DictValue, FunctionValue, SequenceValue, TensorValue, Value
from . import subgraphs
from .subgraphs import Subgraph, flatten, is_graph_value, trace_subgraph

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_func = torch.func
# transform -> the options it takes after the function, as named in its signature
_FUNCTION_TRANSFORMS = {
    _func.vmap: ("in_dims", "out_dims", "randomness", "chunk_size"),
    _func.grad: ("argnums", "has_aux"),
    _func.grad_and_value: ("argnums", "has_aux"),
    _func.jacrev: ("argnums", "has_aux", "chunk_size", "_preallocate_and_copy"),
    _func.jacfwd: ("argnums", "has_aux", "randomness"),
    _func.hessian: ("argnums",),
}
# reverse-mode transforms: the function sees its differentiated inputs requiring grad
_REVERSE_MODE = (_func.grad, _func.grad_and_value, _func.jacrev, _func.hessian)


class TransformedFunction(Value):
    """What a transform returned: `transform(function, **options)`, called like a function.
    For the `vjp_fn` that `torch.func.vjp` returns, `vjp_of` is the traced function and its
    primals."""

    __slots__ = ("transform", "function", "options", "vjp_of")

    def __init__(self, transform: Callable, function: Value | None, options: dict,
                 vjp_of: tuple[Subgraph, list[Value]] | None = None) -> None:
        super().__init__(None)
        self.transform = transform
        self.function = function
        self.options = options
        self.vjp_of = vjp_of

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
        if self.vjp_of is not None:
            return _call_vjp_fn(tracer, self, args, kwargs)
        name = f"torch.func.{self.transform.__name__}"
        example = None
        if self.transform is _func.vmap:
            example = _example_of_batch(tracer, args, self.options["in_dims"], name)
        elif self.transform in _REVERSE_MODE:
            example = _requiring_grad(tracer, args, self.options["argnums"])
        body = trace_subgraph(tracer, self.function, args, kwargs,
                              purpose=f"The function given to {name}", example=example)
        return record_transform(tracer, name, self.transform, self.options, (args, kwargs), (args, kwargs), body)


def make_transform(transform: Callable) -> Callable:
    """The handler of `transform(func, ...)`, which returns a transformed function."""
    def handler(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
        bound = subgraphs.bind_arguments(tracer, transform, args, kwargs)
        name = f"torch.func.{transform.__name__}"
        options = {option: _option(tracer, bound[option], name, option)
                   for option in _FUNCTION_TRANSFORMS[transform] if option in bound}
        return TransformedFunction(transform, bound["func"], options)
    return handler


def _probe(x: Any) -> Any:
    return x


# the code of the function each transform returns -> the transform (hessian returns jacfwd's)
_WRAPPER_CODES = {transform(_probe).__code__: transform
                  for transform in (_func.vmap, _func.grad, _func.grad_and_value, _func.jacrev, _func.jacfwd)}


def transformed_from_wrapper(tracer: "Tracer", function: FunctionValue) -> TransformedFunction | None:
    """A function a transform returned outside the region (`batched = torch.vmap(f)`), as the
    transformed function it stands for: its function and options read from its closure
    (guarded there). None for any other function."""
    transform = _WRAPPER_CODES.get(function.code)
    if transform is None or function.bound_self is not None:
        return None
    cells = dict(zip(function.code.co_freevars, function.closure))
    name = f"torch.func.{transform.__name__}"
    options = {option: _option(tracer, tracer.cell_contents(cells[option]), name, option)
               for option in _FUNCTION_TRANSFORMS[transform] if option in cells}
    return TransformedFunction(transform, tracer.cell_contents(cells["func"]), options)


def _option(tracer: "Tracer", value: Value, name: str, option: str) -> Any:
    if not operations.is_constant_tree(value):
        raise _refuse(tracer, name, f"`{option}` must be a Python constant")
    return operations.python_value(tracer, value, f"{name}'s {option}")


def record_transform(tracer: "Tracer", name: str, transform: Callable, options: dict, call_tree: Any,
                     body_tree: Any, body: Subgraph) -> Value:
    """One node applying `transform(body's function, **options)` to the arguments `call_tree`
    (`(args, kwargs)` of values); `body_tree` is what the transform hands the function."""
    spec, leaves, slots = _flatten_call(tracer, name, call_tree)
    body_positions = _flatten_call(tracer, name, body_tree)[2]
    body_spec, body_leaves = _body_output(tracer, name, body)
    target = transforms.TransformCall(transform, options, spec, leaves, [position for position, _ in slots],
                                      [position for position, _ in body_positions], body_spec, body_leaves)
    inputs = [value for _, value in slots] + body.lifted
    fakes = [subgraphs.fake_value(value) for value in inputs]
    result = subgraphs.run_on_fakes(tracer, name, lambda: target(body.module, *fakes))
    graph = tracer.graph
    outputs = graph.call_with_result(target, [graph.add_submodule(_prefix(transform), body.module), *inputs],
                                     result)
    tensors = [item for item in outputs.items if isinstance(item, TensorValue)]
    return output_value(list(result), target.out_spec, tensors.__getitem__)


def _prefix(transform: Callable) -> str:
    return getattr(transform, "__name__", "transform") + "_body"


class _Slot:
    """Marks a graph value among the leaves of a call's arguments."""

    __slots__ = ("value",)

    def __init__(self, value: Value) -> None:
        self.value = value


def _python_tree(tracer: "Tracer", name: str, value: Value, graph_value: Callable[[Value], Any]) -> Any:
    """A tree of values as the Python tree the transform sees, `graph_value(leaf)` for each
    graph value."""
    if is_graph_value(value):
        return graph_value(value)
    if isinstance(value, SequenceValue) and (value.cls is None or hasattr(value.cls, "_fields")):
        items = [_python_tree(tracer, name, item, graph_value) for item in value.items]
        if value.cls is not None:
            return value.cls(*items)
        return value.kind(items)
    if isinstance(value, DictValue) and value.kind is dict and value.cls is None:
        return {key: _python_tree(tracer, name, item, graph_value) for key, item in value.items.items()}
    if operations.is_constant_tree(value):
        return operations.python_value(tracer, value, name)
    raise _refuse(tracer, name, f"a `{value.python_type().__name__}` among its arguments or results "
                                "(tensors, numbers, lists, tuples and dicts only)")


def _flatten_call(tracer: "Tracer", name: str, tree: Any) -> tuple[pytree.TreeSpec, list, list[tuple[int, Value]]]:
    """The spec of a tree of values, its leaves (None for graph values) and where the graph
    values are."""
    def python(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return type(value)(python(item) for item in value)
        if isinstance(value, dict):
            return {key: python(item) for key, item in value.items()}
        return _python_tree(tracer, name, value, _Slot)

    leaves, spec = pytree.tree_flatten(python(tree))
    slots = [(index, leaf.value) for index, leaf in enumerate(leaves) if isinstance(leaf, _Slot)]
    return spec, [None if isinstance(leaf, _Slot) else leaf for leaf in leaves], slots


def _body_output(tracer: "Tracer", name: str, body: Subgraph) -> tuple[pytree.TreeSpec, list]:
    tree = _python_tree(tracer, name, body.output, lambda value: transforms.GRAPH_VALUE)
    leaves, spec = pytree.tree_flatten(tree)
    return spec, leaves


def _example_of_batch(tracer: "Tracer", args: list[Value], in_dims: Any, name: str) -> Callable:
    """What the function of a vmap sees of each tensor argument: one example of the batch."""
    dims = _leaf_dims(tracer, args, in_dims, name)

    def example(position: int, leaf: TensorValue) -> torch.Tensor:
        dim = dims.get(position)
        fake = leaf.fake
        if dim is None:
            return fake
        if not -fake.dim() <= dim < fake.dim():
            raise tracer.user_error(ValueError(
                f"vmap: Got in_dim={dim} for some input, but that input is a Tensor of dimensionality "
                f"{fake.dim()} so expected in_dim to satisfy -{fake.dim()} <= in_dim < {fake.dim()}."))
        dim %= fake.dim()
        with tracer.graph.fake_mode:
            return torch.empty_strided(fake.shape[:dim] + fake.shape[dim + 1:],
                                       fake.stride()[:dim] + fake.stride()[dim + 1:], dtype=fake.dtype,
                                       device=fake.device, requires_grad=fake.requires_grad)
    return example


def _leaf_dims(tracer: "Tracer", args: list[Value], in_dims: Any, name: str) -> dict[int, int | None]:
    """The mapped dimension of each leaf of the positional arguments, by leaf position."""
    if not isinstance(in_dims, (tuple, list)):
        in_dims = [in_dims] * len(args)
    elif len(in_dims) != len(args):
        raise tracer.user_error(ValueError(
            f"vmap: in_dims is a {type(in_dims).__name__} of length {len(in_dims)} but the function "
            f"was called with {len(args)} positional arguments"))
    dims: dict[int, int | None] = {}
    position = 0
    for arg, prefix in zip(args, in_dims):
        for dim in _broadcast(tracer, arg, prefix):
            dims[position] = dim
            position += 1
    return dims


def _broadcast(tracer: "Tracer", value: Value, prefix: Any) -> list[Any]:
    """`prefix` (an in_dims entry) for each leaf of `value`."""
    leaves, _ = flatten(value)
    if prefix is None or isinstance(prefix, int):
        return [prefix] * len(leaves)
    if isinstance(prefix, (tuple, list)) and isinstance(value, SequenceValue) and len(prefix) == len(value.items):
        return [dim for item, part in zip(value.items, prefix) for dim in _broadcast(tracer, item, part)]
    if isinstance(prefix, dict) and isinstance(value, DictValue) and set(prefix) == set(value.items):
        return [dim for key, item in value.items.items() for dim in _broadcast(tracer, item, prefix[key])]
    raise tracer.user_error(ValueError(f"vmap: in_dims {prefix!r} does not match the structure of its input"))


def _requiring_grad(tracer: "Tracer", args: list[Value], argnums: Any) -> Callable:
    """What a reverse-mode transform's function sees: its differentiated inputs require grad."""
    numbers = argnums if isinstance(argnums, (tuple, list)) else (argnums,)
    numbers = {number % len(args) for number in numbers if isinstance(number, int) and args}
    differentiated = set()
    position = 0
    for index, arg in enumerate(args):
        for _ in flatten(arg)[0]:
            if index in numbers:
                differentiated.add(position)
            position += 1

    def example(position: int, leaf: TensorValue) -> torch.Tensor:
        fake = leaf.fake
        if position not in differentiated or not (fake.is_floating_point() or fake.is_complex()):
            return fake
        with tracer.graph.fake_mode:
            return fake.detach().requires_grad_(True)
    return example


def call_vjp(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`torch.func.vjp(func, *primals, has_aux=False)`: `(output, vjp_fn[, aux])`."""
    if len(args) < 1 or set(kwargs) - {"has_aux"}:
        raise tracer.user_error(TypeError("vjp() takes a function, primals and has_aux="))
    function, primals = args[0], list(args[1:])
    has_aux = bool(_option(tracer, kwargs.get("has_aux", ConstantValue(False)), "torch.func.vjp", "has_aux"))
    body = trace_subgraph(tracer, function, primals, purpose="The function given to torch.func.vjp",
                          example=_requiring_grad(tracer, primals, tuple(range(len(primals)))))
    output = record_transform(tracer, "torch.func.vjp", transforms.call, {}, (primals, {}), (primals, {}), body)
    vjp_fn = TransformedFunction(transforms.vjp_apply, None, {"has_aux": has_aux}, vjp_of=(body, primals))
    if not has_aux:
        return SequenceValue([output, vjp_fn], tuple)
    if not (isinstance(output, SequenceValue) and len(output.items) == 2):
        raise tracer.user_error(RuntimeError(
            "vjp(f, *primals): output of function f should be a tuple: (output, aux) if has_aux is True"))
    return SequenceValue([output.items[0], vjp_fn, output.items[1]], tuple)


def _call_vjp_fn(tracer: "Tracer", vjp_fn: TransformedFunction, args: list[Value],
                 kwargs: dict[str, Value]) -> Value:
    body, primals = vjp_fn.vjp_of
    if len(args) != 1 or kwargs:
        raise tracer.user_error(TypeError("the vjp function takes one argument: the cotangents"))
    random = _random_operation(body.module)
    if random is not None:
        raise _refuse(tracer, "torch.func.vjp", f"its function draws random numbers (`{random}`), and the "
                                                "vector-Jacobian product recomputes it")
    return record_transform(tracer, "torch.func.vjp", transforms.vjp_apply, vjp_fn.options,
                            ([SequenceValue(primals, tuple), args[0]], {}), (primals, {}), body)


def call_jvp(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`torch.func.jvp(func, primals, tangents, *, strict=False, has_aux=False)`."""
    bound = subgraphs.bind_arguments(tracer, _func.jvp, args, kwargs)
    primals, tangents = bound["primals"], bound["tangents"]
    if not isinstance(primals, SequenceValue) or primals.cls is not None:
        raise tracer.user_error(RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple"))
    options = {option: _option(tracer, bound[option], "torch.func.jvp", option) for option in ("strict", "has_aux")}
    body = trace_subgraph(tracer, bound["func"], list(primals.items), purpose="The function given to torch.func.jvp")
    return record_transform(tracer, "torch.func.jvp", transforms.jvp_apply, options,
                            ([primals, tangents], {}), (list(primals.items), {}), body)


# torch-level random operations, by name: a graph calling one differs from run to run
_RANDOM_NAMES = frozenset({
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli",
    "bernoulli_", "multinomial", "normal", "normal_", "poisson", "uniform_", "random_", "exponential_",
    "cauchy_", "log_normal_", "geometric_", "dropout", "dropout_", "dropout1d", "dropout2d", "dropout3d",
    "alpha_dropout", "feature_alpha_dropout", "feature_dropout", "rrelu", "rrelu_", "native_dropout"})


def _random_operation(module: torch.nn.Module) -> str | None:
    for submodule in module.modules():
        if isinstance(submodule, torch.fx.GraphModule):
            for node in submodule.graph.nodes:
                name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
                if node.op in ("call_function", "call_method") and name in _RANDOM_NAMES:
                    return name
    return None


def _refuse(tracer: "Tracer", name: str, reason: str) -> Exception:
    return tracer.graph_break(gb.HIGHER_ORDER_CALL, f"{name}: {reason}", op=name, reason=reason)


HANDLERS: dict[Any, Callable] = {transform: make_transform(transform) for transform in _FUNCTION_TRANSFORMS}
HANDLERS[_func.vjp] = call_vjp
HANDLERS[_func.jvp] = call_jvp
