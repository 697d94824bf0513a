"""`leaf_function`: a function every tracer keeps opaque, whose Python runs at run time.

This module owns the decorator and what it records about a function
(`LeafFunctionInfo`): the Python to run, its fake implementation, and the
`mutates_args` expressions. An expression names a parameter and, optionally,
a path into it: `buf`, `buffers` (every tensor in a list, tuple or dict),
`buffers[0]`, `state["key"]`, `model.running_mean`. Expressions are checked
against the signature when decorating, and resolved to the tensors they name
on each call.

A leaf function called outside a compiled region runs its Python with the
checks a compiled call makes: it needs a fake implementation, and an input
tensor it changes in place without declaring it is an error naming that
input. Compiled calls go through the `graphwright::leaf_call` operator
(`leaf_op.py`); the strict tracer turns calls into it (`strict/marked/leaf_calls.py`).
"""
from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from torch._subclasses.fake_tensor import FakeTensor

from . import leaf_op, rules
from .errors import InvalidMarkingError
from .user_stack import user_frames_of_stack

_STEP = re.compile(r"\.([A-Za-z_]\w*)|\[\s*(-?\d+)\s*\]|\[\s*(['\"])(.*?)\3\s*\]")
_ROOT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class MutationTarget:
    """One `mutates_args` expression: a parameter name and the attribute/item steps after it."""

    text: str
    root: str
    steps: tuple[tuple[str, Any], ...] = ()

    def resolve(self, arguments: dict[str, Any]) -> Any:
        value = arguments[self.root]
        for kind, key in self.steps:
            value = getattr(value, key) if kind == "attr" else value[key]
        return value


def parse_mutation_target(text: str) -> MutationTarget | None:
    """`model.running_mean` -> root `model`, steps (attr running_mean); None when malformed."""
    root = _ROOT.match(text.strip())
    if root is None:
        return None
    steps, position, rest = [], 0, text.strip()[root.end():]
    while position < len(rest):
        step = _STEP.match(rest, position)
        if step is None:
            return None
        attribute, index, _, key = step.groups()
        steps.append(("attr", attribute) if attribute else ("item", int(index) if index is not None else key))
        position = step.end()
    return MutationTarget(text, root.group(), tuple(steps))


@dataclass
class LeafFunctionInfo:
    """What calling a leaf function needs: the Python to run, its fake, what it may mutate."""

    fn: Callable
    name: str
    mutates: tuple[MutationTarget, ...] = ()
    fake: Callable | None = field(default=None, repr=False)
    sites: list = field(default_factory=list, repr=False)  # operator call sites made while tracing

    def require_fake(self) -> Callable:
        if self.fake is None:
            raise InvalidMarkingError(
                f"leaf_function '{self.name}' requires a fake implementation",
                explanation="Its body is never traced, so its outputs' shapes and dtypes come "
                            "from a fake implementation, which it does not have.",
                hints=[f"Register one: `@{self.name}.register_fake` on a function with the same "
                       "signature that builds outputs of the right shape, e.g. with `x.new_empty(...)`."],
                user_stack=user_frames_of_stack())
        return self.fake

    def arguments(self, args: tuple | list, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by parameter name, defaults applied."""
        bound = inspect.signature(self.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def declared_tensors(self, arguments: dict[str, Any]) -> list[torch.Tensor]:
        """The tensors the `mutates_args` expressions name in this call."""
        tensors: list[torch.Tensor] = []
        for target in self.mutates:
            value = target.resolve(arguments)
            if isinstance(value, torch.nn.Module) or any(
                    isinstance(leaf, torch.nn.Module) for leaf in _leaves(value)):
                raise InvalidMarkingError(
                    f"mutates_args expression '{target.text}' of leaf_function '{self.name}' "
                    "resolved to a non-leaf value",
                    explanation=f"'{target.text}' is an `nn.Module`; a mutation is declared on the "
                                "tensors it changes.",
                    hints=[f"Name the buffer or parameter, e.g. '{target.text}.running_mean'."],
                    user_stack=user_frames_of_stack())
            tensors += [leaf for leaf in _leaves(value) if isinstance(leaf, torch.Tensor)]
        return tensors


def _leaves(value: Any) -> list[Any]:
    return pytree.tree_leaves(value, is_leaf=lambda node: isinstance(node, torch.nn.Module))


def named_input_tensors(arguments: dict[str, Any]) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor a call receives, named as the user writes it: `x`, `buffers[1]`,
    `model.linear.weight` (a module's parameters and buffers are its inputs too)."""
    for name, value in arguments.items():
        pairs, _ = pytree.tree_flatten_with_path(value, is_leaf=lambda node: isinstance(node, torch.nn.Module))
        for key_path, leaf in pairs:
            path = name + pytree.keystr(key_path)
            if isinstance(leaf, torch.Tensor):
                yield path, leaf
            elif isinstance(leaf, torch.nn.Module):
                for state_name, tensor in (*leaf.named_parameters(remove_duplicate=False),
                                           *leaf.named_buffers(remove_duplicate=False)):
                    yield f"{path}.{state_name}", tensor


def call_eagerly(info: LeafFunctionInfo, args: tuple, kwargs: dict[str, Any]) -> Any:
    """A call outside any compiled region: the Python, with the compiled call's checks. Made
    while a tracer runs (on fake tensors, or under `make_fx`), it is a call of the operator:
    one opaque node in the trace, the Python running when the graph does."""
    fake = info.require_fake()
    arguments = info.arguments(args, kwargs)
    declared = {id(tensor) for tensor in info.declared_tensors(arguments)}
    named = list(named_input_tensors(arguments))
    if _tracing(named):
        names = {id(tensor): path for path, tensor in reversed(named)}
        return leaf_op.call_operator(info.fn, fake, info.name, args, kwargs, declared, names, info.sites)
    watched = [(path, tensor, tensor._version) for path, tensor in named if id(tensor) not in declared]
    output = info.fn(*args, **kwargs)
    for path, tensor, version in watched:
        if tensor._version != version:
            raise leaf_op.undeclared_mutation(info.name, path)
    return output


def _tracing(named: list[tuple[str, torch.Tensor]]) -> bool:
    return torch._C._len_torch_dispatch_stack() > 0 or any(isinstance(t, FakeTensor) for _, t in named)


def leaf_function(fn: Callable | None = None, *, mutates_args: set[str] | None = None) -> Any:
    """Keep `fn` opaque at every level: its Python runs at run time, once per call.

    Output shapes come from a fake implementation registered with `@fn.register_fake`:

    >>> @graphwright.leaf_function
    ... def log_stats(x):
    ...     print(x.mean())
    ...     return (x.mean(dim=1),)
    >>> @log_stats.register_fake
    ... def _(x):
    ...     return (x.new_empty(x.shape[0]),)

    `mutates_args` declares in-place updates of inputs: `{"buf"}`, `{"buffers[0]"}`,
    `{"model.running_mean"}`; an undeclared one is an error naming the input.
    """
    if fn is None:
        return functools.partial(leaf_function, mutates_args=mutates_args)
    rules.require_callable(fn, rules.LEAF)
    rules.check_not_marked_as(fn, rules.LEAF, rules.NONSTRICT)
    info = LeafFunctionInfo(fn, getattr(fn, "__name__", repr(fn)), _mutation_targets(fn, mutates_args or ()))

    @functools.wraps(fn)
    def leaf(*args: Any, **kwargs: Any) -> Any:
        return call_eagerly(info, args, kwargs)

    def register_fake(fake: Callable) -> Callable:
        info.fake = fake
        return fake

    leaf.register_fake = register_fake
    rules.register_leaf_function(leaf, info)
    return leaf


def _mutation_targets(fn: Callable, expressions: Any) -> tuple[MutationTarget, ...]:
    """Parsed `mutates_args`; an expression whose parameter `fn` does not have is an error."""
    try:
        parameters = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        parameters = None
    name = getattr(fn, "__name__", repr(fn))
    targets = []
    for text in sorted(expressions):
        target = parse_mutation_target(text)
        if target is None:
            raise InvalidMarkingError(
                f"mutates_args expression '{text}' of '{name}' is not a parameter path",
                explanation="Each entry names a parameter, optionally followed by attributes and "
                            "indices: 'buf', 'buffers[0]', 'state[\"key\"]', 'model.running_mean'.",
                hints=["Write the entry as you would access the tensor from the parameter."],
                user_stack=user_frames_of_stack())
        if parameters is not None and target.root not in parameters:
            raise InvalidMarkingError(
                f"mutates_args expression '{text}' refers to parameter '{target.root}', which is not "
                f"a parameter of '{name}'",
                explanation=f"'{name}' takes {', '.join(parameters) or 'no parameters'}.",
                hints=["Name one of the function's own parameters."],
                user_stack=user_frames_of_stack())
        targets.append(target)
    return tuple(targets)


def leaf_function_info(fn: Any) -> LeafFunctionInfo:
    """The info of a leaf function: graphwright's, or one marked with torch's `leaf_function`
    (its fake is read now: it may be registered after the first compile)."""
    info = rules.leaf_function_callables.info(fn)
    if info is not None:
        return info
    real = getattr(fn, "_torchdynamo_leaf_real_fn", fn)
    mutates = getattr(fn, "_torchdynamo_leaf_mutates_args", frozenset())
    return LeafFunctionInfo(real, getattr(real, "__name__", repr(real)), _mutation_targets(real, mutates),
                            fake=getattr(fn, "_torchdynamo_leaf_fake_fn", None))

