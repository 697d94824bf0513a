"""The differential runner catches every kind of difference it claims to compare.

A deliberately wrong "compiler" stands in for graphwright; `check_program`
must fail on each kind of wrong behaviour.
"""
from __future__ import annotations

import copy
import logging
import types

import pytest
import torch

from . import harness
from .harness import Program, corpus_logger, function_program


def _use_compiler(monkeypatch, wrap, frame_count=1):
    """Make `check_program` compile with `wrap(target)` and report `frame_count` graphs."""
    def counting_compiler(*, fullgraph, **options):
        return wrap, types.SimpleNamespace(frame_count=frame_count)
    monkeypatch.setattr(harness, "counting_compiler", counting_compiler)
    monkeypatch.setattr(harness, "reset_compiler", lambda: None)


def _appends_and_logs(x, seen):
    seen.append(x.sum())
    corpus_logger.info("called")
    return x * 2


PROGRAM = function_program("probe", _appends_and_logs,
                           lambda: (torch.randn(3, requires_grad=True), []), grad=True)


def test_a_faithful_compiler_passes(monkeypatch):
    _use_compiler(monkeypatch, lambda fn: fn)
    harness.check_program(PROGRAM)


def test_a_wrong_output_is_caught(monkeypatch):
    _use_compiler(monkeypatch, lambda fn: lambda *a: fn(*a) + 1e-3)
    with pytest.raises(AssertionError, match="output"):
        harness.check_program(PROGRAM)


def test_a_lost_side_effect_is_caught(monkeypatch):
    _use_compiler(monkeypatch, lambda fn: lambda x, seen: fn(x, copy.copy(seen)))
    with pytest.raises(AssertionError, match="arguments after the call"):
        harness.check_program(PROGRAM)


def test_a_missing_log_record_is_caught(monkeypatch):
    def silenced(fn):
        def run(*args):
            logging.disable(logging.CRITICAL)
            try:
                return fn(*args)
            finally:
                logging.disable(logging.NOTSET)
        return run
    _use_compiler(monkeypatch, silenced)
    with pytest.raises(AssertionError, match="logging records"):
        harness.check_program(PROGRAM)


def test_a_wrong_gradient_is_caught(monkeypatch):
    def doubled_gradient(fn):
        def run(*args):
            y = fn(*args)
            return y.detach() + (y - y.detach()) * 2
        return run
    _use_compiler(monkeypatch, doubled_gradient)
    with pytest.raises(AssertionError, match="gradients"):
        harness.check_program(PROGRAM)


def test_an_unexpected_recompile_is_caught(monkeypatch):
    _use_compiler(monkeypatch, lambda fn: fn, frame_count=2)
    with pytest.raises(AssertionError, match="frame_count"):
        harness.check_program(PROGRAM)


def test_a_changed_module_buffer_is_caught(monkeypatch):
    def drifting(module):
        def run(x):
            module.running_mean.add_(1e-3)
            return module(x)
        return run
    _use_compiler(monkeypatch, drifting)
    program = harness.module_program("bn", lambda: torch.nn.BatchNorm1d(3),
                                     lambda: torch.randn(4, 3))
    with pytest.raises(AssertionError, match="state_dict"):
        harness.check_program(program)


def test_a_reference_override_must_say_why():
    with pytest.raises(ValueError, match="why"):
        Program(name="p", make=lambda: None, inputs=lambda: (), reference=dict(frames=2))


def test_a_lost_requires_grad_is_caught(monkeypatch):
    _use_compiler(monkeypatch, lambda fn: lambda *a: fn(*a).detach())
    with pytest.raises(AssertionError, match="requires_grad"):
        harness.check_program(PROGRAM)


def test_different_strides_are_caught(monkeypatch):
    _use_compiler(monkeypatch, lambda fn: lambda x: fn(x).contiguous())
    program = function_program("transposed", lambda x: x.t(), lambda: torch.randn(2, 3))
    with pytest.raises(AssertionError, match="stride"):
        harness.check_program(program)


def _one_input_graph():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.neg, (x,)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_the_backend_contract_accepts_one_real_input_per_placeholder():
    harness.assert_backend_contract(_one_input_graph(), [torch.randn(2)])


def test_the_backend_contract_rejects_a_missing_input():
    with pytest.raises(AssertionError):
        harness.assert_backend_contract(_one_input_graph(), [])


def test_the_backend_contract_rejects_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.randn(2))
    with pytest.raises(AssertionError, match="fake"):
        harness.assert_backend_contract(_one_input_graph(), [fake])
