"""The statement dispatcher: which kind of statement comes next, with what weight.

`statement(b)` draws one statement kind among those that make sense where the builder
is (no nested blocks past two levels, no graph break where the program has none) and
writes it. The first kind, a plain assignment, is what shrinking falls back to.
"""
from __future__ import annotations

from collections.abc import Callable

from . import (
    breaks,
    containers,
    control_flow,
    exceptions,
    iterators,
    markers,
    modules,
    mutation,
    python_objects,
    side_effects,
    views,
)
from .builder import Builder
from .expressions import new_value
from .jagged import jagged_statement


def assignment(b: Builder) -> None:
    new_value(b)
    b.feature("assign")


Kind = tuple[str, Callable[[Builder], None], int]

PLAIN: list[Kind] = [
    ("assign", assignment, 8),
    ("list", containers.tensor_list, 2),
    ("tuple", containers.tensor_tuple, 1),
    ("dict", containers.tensor_dict, 2),
    ("sizes", containers.size_values, 1),
    ("helper", python_objects.helper_function, 2),
    ("closure", python_objects.closure, 1),
    ("lambda", python_objects.lambda_call, 1),
    ("nonlocal", python_objects.nonlocal_counter, 1),
    ("partial", python_objects.partial_call, 1),
    ("factory", python_objects.scaler_from_factory, 1),
    ("user_object", python_objects.user_object, 2),
    ("global_object", python_objects.global_object, 1),
    ("context_manager", python_objects.user_context_manager, 1),
    ("generator", python_objects.generator_call, 1),
    ("module_call", modules.module_call, 4),
    ("inplace", mutation.fresh_inplace, 2),
    ("view_mutation", views.written_view, 5),
    ("view_returned", views.returned_view, 5),
    ("out_target", views.out_target, 3),
    ("iterator", iterators.consume, 14),
    ("input_mutation", mutation.input_mutation, 2),
    ("view", mutation.view_statement, 1),
    ("nonstrict_trace", markers.nonstrict_call, 1),
    ("allow_in_graph", markers.allow_in_graph_call, 1),
    ("leaf_function", markers.leaf_call, 1),
    ("global_list", side_effects.global_list, 1),
    ("global_dict", side_effects.global_dict, 1),
    ("global_counter", side_effects.global_counter, 1),
    ("global_tensor", side_effects.global_tensor, 1),
    ("object_attribute", side_effects.object_attribute, 1),
    ("module_attribute", side_effects.module_attribute, 3),
    ("argument_list", side_effects.argument_list, 3),
    ("exception_across_frames", exceptions.raise_across_frames, 1),
    ("exception_in_loop", exceptions.raise_in_loop, 1),
    ("exception_suppressed", exceptions.suppressed_by_with, 1),
]
BLOCKS: list[Kind] = [
    ("if_else", control_flow.if_else, 3),
    ("conditional_update", control_flow.conditional_update, 1),
    ("for_loop", control_flow.for_loop, 2),
    ("while_loop", control_flow.while_loop, 1),
    ("grad_mode", control_flow.grad_mode_block, 1),
    ("try", control_flow.try_block, 1),
]
BREAKS: list[Kind] = [
    ("graph_break", breaks.explicit_break, 1),
    ("print", breaks.print_call, 1),
    ("item", breaks.item_call, 1),
    ("data_branch", breaks.data_dependent_branch, 1),
    ("unsupported_call", breaks.unsupported_call, 1),
    ("disabled_call", breaks.disabled_call, 1),
    ("dynamic_shape", breaks.dynamic_shape_call, 1),
    ("observed_exception", exceptions.raised_only_when_compiling, 1),
]
MAX_BLOCK_DEPTH = 2
SUBCLASS_FAILS = {"dynamic_shape"}
"""Kinds eager PyTorch cannot run on a TwoTensor (each half would get its own output shape)."""


def statement(b: Builder) -> None:
    kinds = list(PLAIN)
    if b.jagged:
        kinds.append(("jagged", jagged_statement, 20))
    if b.depth < MAX_BLOCK_DEPTH:
        kinds += BLOCKS
    if b.allow_breaks:
        kinds += [kind for kind in BREAKS if not (b.subclass and kind[0] in SUBCLASS_FAILS)]
    names = [name for name, _, weight in kinds for _ in range(weight)]
    chosen = b.choice(names)
    dict((name, write) for name, write, _ in kinds)[chosen](b)
