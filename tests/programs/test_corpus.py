"""Every corpus program, run eagerly and compiled, behaves the same.

`GW_CORPUS_REFERENCE=1` runs the same programs through PyTorch's
torch.compile: the expectations (frame counts, recompiles) are PyTorch's.
"""
from __future__ import annotations

import dataclasses

import pytest

from . import (
    cases_aot,
    cases_attributes,
    cases_bytecode,
    cases_class_statements,
    cases_classes,
    cases_containers,
    cases_counters,
    cases_data_dependent,
    cases_dtensor,
    cases_exceptions,
    cases_floats,
    cases_generators,
    cases_graph_breaks,
    cases_guards,
    cases_higher_order,
    cases_idioms,
    cases_introspection,
    cases_iteration,
    cases_language,
    cases_markers,
    cases_models,
    cases_modules,
    cases_nested,
    cases_nested_jagged,
    cases_new_libraries,
    cases_numbers,
    cases_numpy,
    cases_observing,
    cases_python_errors,
    cases_real_models,
    cases_side_effects,
    cases_subclasses,
    cases_tensors,
    cases_torch_library,
)
from .harness import REFERENCE, check_program

ALL_PROGRAMS = [
    *cases_language.PROGRAMS, *cases_bytecode.PROGRAMS, *cases_idioms.PROGRAMS,
    *cases_tensors.PROGRAMS, *cases_modules.PROGRAMS, *cases_models.PROGRAMS,
    *cases_side_effects.PROGRAMS, *cases_guards.PROGRAMS, *cases_graph_breaks.PROGRAMS,
    *cases_classes.PROGRAMS, *cases_introspection.PROGRAMS, *cases_real_models.PROGRAMS,
    *cases_higher_order.PROGRAMS, *cases_markers.PROGRAMS, *cases_data_dependent.PROGRAMS,
    *cases_counters.PROGRAMS, *cases_torch_library.PROGRAMS, *cases_floats.PROGRAMS,
    *cases_containers.PROGRAMS,
    *cases_attributes.PROGRAMS,
    *cases_numpy.PROGRAMS,
    *cases_observing.PROGRAMS,
    *cases_exceptions.PROGRAMS,
    *cases_generators.PROGRAMS,
    *cases_iteration.PROGRAMS,
    *cases_nested.PROGRAMS,
    *cases_new_libraries.PROGRAMS,
    *cases_aot.PROGRAMS,
    *cases_subclasses.PROGRAMS,
    *cases_dtensor.PROGRAMS,
    *cases_nested_jagged.PROGRAMS,
    *cases_class_statements.PROGRAMS,
    *cases_python_errors.PROGRAMS,
    *cases_numbers.PROGRAMS,
]


def _param(program):
    marks = []
    if REFERENCE and "xfail" in program.reference:
        reason = f"PyTorch: {program.reference['xfail']}"
        marks.append(pytest.mark.xfail(strict=True, reason=reason))
    elif program.xfail and not REFERENCE:
        marks.append(pytest.mark.xfail(strict=True, reason=f"strict tracer: {program.xfail}"))
    return pytest.param(program, id=program.name, marks=marks)


def test_program_names_are_unique():
    names = [p.name for p in ALL_PROGRAMS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("program", [_param(p) for p in ALL_PROGRAMS])
def test_compiled_program_matches_eager(program):
    check_program(program)


@pytest.mark.skipif(REFERENCE, reason="graphwright's AOT autograd; the reference run checks the captured graphs")
@pytest.mark.parametrize("program", [_param(p) for p in ALL_PROGRAMS if not p.backend])
def test_program_through_aot_autograd_matches_eager(program):
    """The same programs with ahead-of-time autograd behind the counter: its aten graphs, the
    runtime's views, mutations and gradients must keep what the captured graph computes."""
    check_program(dataclasses.replace(program, backend="aot_eager"))
