"""The inputs of a non-strict trace: which leaves are allowed, which fake mode
they run on, and what each leaf becomes while tracing.

Inputs are pytrees. Their leaves may be tensors, numbers, strings, None,
dtypes, devices, layouts, memory formats and SymInts; anything else is an
`InvalidInputError`. Tensors become fake tensors in "fake" mode, fake
tensors with symbolic sizes in "symbolic" mode, and stay as they are in
"real" mode. Inputs that are already fake keep their fake mode untouched.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._guards import GuardSource, Source
from torch._subclasses.fake_tensor import (
    FakeTensor,
    FakeTensorMode,
    UnsupportedFakeTensorException,
)
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from .._core.errors import InvalidInputError
from .._core.user_stack import user_frames_of_stack

TRACING_MODES = ("real", "fake", "symbolic")

_CONSTANT_LEAF_TYPES = (
    int,
    float,
    bool,
    complex,
    str,
    type(None),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    torch.SymInt,
    torch.SymFloat,
    torch.SymBool,
)


# Names the graph module's generated forward() uses itself: an argument
# called `torch` would shadow the module its code calls.
_NAMES_OF_GENERATED_CODE = frozenset(
    {"self", "torch", "device", "inf", "nan", "NoneType", "fx_pytree", "pytree"}
)


@dataclasses.dataclass(frozen=True)
class InputLeafSource(Source):
    """Names one input leaf for `ShapeEnv` (symbols, guards): e.g. `lst[1]`."""

    path: str

    @functools.cached_property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL

    @property
    def _name_template(self) -> str:
        return self.path


def argument_names(f: Any, count: int) -> list[str]:
    """Names for the traced function's positional arguments (`arg{i}` if unknown)."""
    target = f.forward if isinstance(f, torch.nn.Module) else f
    try:
        parameters = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    names = []
    for index in range(count):
        if (
            index < len(parameters)
            and parameters[index].kind
            in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            and parameters[index].name not in _NAMES_OF_GENERATED_CODE
        ):
            names.append(parameters[index].name)
        else:
            names.append(f"arg{index}")
    return names


def flatten_inputs(args: tuple, names: list[str]) -> tuple[list[Any], list[str], pytree.TreeSpec]:
    """Flat leaves, their source paths (`x`, `lst[0]`) and the tree spec of `args`.

    Raises InvalidInputError for a leaf the tracer cannot represent.
    """
    leaves, spec = pytree.tree_flatten(args)
    paths = _leaf_paths(args, names)
    for leaf, path in zip(leaves, paths):
        if not isinstance(leaf, (torch.Tensor, *_CONSTANT_LEAF_TYPES)):
            raise _invalid_input(path, leaf)
    return leaves, paths, spec


def _leaf_paths(args: tuple, names: list[str]) -> list[str]:
    try:
        with_paths, _ = pytree.tree_flatten_with_path(args)
    except ValueError:  # a class registered without key paths: number its leaves
        paths = []
        for name, arg in zip(names, args):
            count = len(pytree.tree_leaves(arg))
            paths.extend([name] if pytree.tree_is_leaf(arg) else [f"{name}[{i}]" for i in range(count)])
        return paths
    return [names[key_path[0].idx] + pytree.keystr(key_path[1:]) for key_path, _ in with_paths]


def _invalid_input(path: str, leaf: Any) -> InvalidInputError:
    kind = type(leaf).__qualname__
    if isinstance(leaf, torch.nn.Module):
        hint = (
            "Pass the module's tensors instead, or trace the module itself: "
            "make_fx(module)(inputs) bakes its parameters into the graph."
        )
    else:
        hint = (
            f"Register `{kind}` with torch.utils._pytree (register_pytree_node or "
            "register_dataclass) so its tensors become inputs, or pass tensors and numbers."
        )
    return InvalidInputError(
        f"Invalid input type `{kind}` for make_fx",
        explanation=f"Input `{path}` is a `{kind}`, which is neither a tensor, a number, a "
        "string, None, a dtype/device/layout/memory_format nor a registered pytree, so it "
        "cannot become a graph input.",
        hints=[hint],
        user_stack=user_frames_of_stack(),
    )


def choose_fake_mode(tracing_mode: str, leaves: list[Any]) -> FakeTensorMode | None:
    """The fake mode to trace on: the inputs' own if they are fake, else a new one."""
    for leaf in leaves:
        if isinstance(leaf, FakeTensor):
            return leaf.fake_mode
    if tracing_mode == "real":
        return None
    shape_env = None
    if tracing_mode == "symbolic":
        # No unbacked sizes: `.item()` and `nonzero` must be clear errors, not symbols.
        shape_env = ShapeEnv(allow_scalar_outputs=False, allow_dynamic_output_shape_ops=False)
    mode = FakeTensorMode(allow_fallback_kernels=False, shape_env=shape_env)
    # Raw memory access on a fake tensor must fail loudly, not read garbage.
    mode._allow_unsafe_data_ptr_access = False
    return mode


def tracing_value(
    leaf: Any, path: str, tracing_mode: str, fake_mode: FakeTensorMode | None
) -> Any:
    """What the traced function receives for one input leaf."""
    if not isinstance(leaf, torch.Tensor) or fake_mode is None or isinstance(leaf, FakeTensor):
        return leaf
    try:
        if tracing_mode == "symbolic":
            return fake_mode.from_tensor(leaf, source=InputLeafSource(path))
        return fake_mode.from_tensor(leaf, static_shapes=True)
    except UnsupportedFakeTensorException as exc:
        raise InvalidInputError(
            f"Input `{path}` has no fake counterpart",
            explanation=f"{tracing_mode.capitalize()} tracing replaces every input tensor with a "
            f"fake tensor, and fake tensors cannot represent this one ({exc}).",
            hints=['Use tracing_mode="real" for this input.'],
            user_stack=user_frames_of_stack(),
        ) from exc
