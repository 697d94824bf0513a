"""The cache: its size limit, the eager fallback with a warning that names the
failed guard, recompile reasons in `counters`, and `reset()`.

The reference mode runs the same scenarios through torch.compile, whose
limit is `torch._dynamo.config.recompile_limit` and whose warning is a log
record rather than a Python warning.
"""
from __future__ import annotations

import contextlib
import logging
import warnings

import pytest
import torch

import graphwright

from .harness import REFERENCE, assert_same, compile_counted, reset_compiler


def doubled(x):
    return x * 2 + 1


@contextlib.contextmanager
def cache_limit(limit):
    if REFERENCE:
        import torch._dynamo

        with torch._dynamo.config.patch(recompile_limit=limit):
            yield
        return
    saved = graphwright.config.cache_size_limit
    graphwright.config.cache_size_limit = limit
    try:
        yield
    finally:
        graphwright.config.cache_size_limit = saved


@contextlib.contextmanager
def limit_messages(caplog):
    """Collects the text of every cache-limit message: warnings here, log records in PyTorch."""
    texts: list[str] = []
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield texts
    texts.extend(str(w.message) for w in caught)
    texts.extend(record.getMessage() for record in caplog.records)


def test_default_cache_size_limit_is_eight_then_eager_with_a_warning(caplog):
    compiled, counter = compile_counted(doubled, fullgraph=False, dynamic=False)
    with limit_messages(caplog) as messages:
        for n in range(1, 11):
            x = torch.randn(n)
            assert_same(doubled(x), compiled(x))
    assert counter.frame_count == 8
    limit_texts = [m for m in messages if "limit" in m]
    assert limit_texts, messages
    assert any("tensor 'x' size mismatch at index 0" in m for m in limit_texts), limit_texts


def test_cache_size_limit_is_read_from_config(caplog):
    compiled, counter = compile_counted(doubled, fullgraph=False, dynamic=False)
    with cache_limit(2), limit_messages(caplog):
        for n in range(1, 6):
            x = torch.randn(n)
            assert_same(doubled(x), compiled(x))
    assert counter.frame_count == 2


def test_calls_past_the_limit_with_known_inputs_still_use_their_graphs(caplog):
    compiled, counter = compile_counted(doubled, fullgraph=False, dynamic=False)
    with cache_limit(2), limit_messages(caplog):
        for n in (1, 2, 3, 1, 2):
            x = torch.randn(n)
            assert_same(doubled(x), compiled(x))
    assert counter.frame_count == 2


def test_hitting_the_limit_under_fullgraph_raises_instead_of_running_eagerly(caplog):
    compiled, counter = compile_counted(doubled, fullgraph=True, dynamic=False)
    if REFERENCE:
        from torch._dynamo.exc import FailOnRecompileLimitHit as expected
    else:
        expected = graphwright.GraphwrightError
    with cache_limit(2), limit_messages(caplog):
        compiled(torch.randn(1))
        compiled(torch.randn(2))
        with pytest.raises(expected):
            compiled(torch.randn(3))
    assert counter.frame_count == 2


def test_recompile_reasons_are_counted_in_the_users_terms():
    if REFERENCE:
        pytest.skip("PyTorch 2.13 logs recompile reasons but does not count them")
    graphwright.counters.clear()
    compiled, counter = compile_counted(doubled, fullgraph=True, dynamic=False)
    compiled(torch.randn(4))
    compiled(torch.randn(5))
    compiled(torch.randn(5).double())
    assert counter.frame_count == 3
    reasons = list(graphwright.counters["recompiles"])
    assert sum(graphwright.counters["recompiles"].values()) == 2, reasons
    assert any("'x'" in r and "size mismatch" in r for r in reasons), reasons
    assert any("'x'" in r and "dtype" in r for r in reasons), reasons


SCALE_GLOBAL = 2


def scaled(x, scale_factor):
    return x * scale_factor * SCALE_GLOBAL


class Settings:
    def __init__(self, depth):
        self.depth = depth


def repeated(x, settings):
    for _ in range(settings.depth):
        x = x + 1
    return x


def _set_scale_global(value):
    global SCALE_GLOBAL
    SCALE_GLOBAL = value


def _with_grad_mode(enabled):
    def call(compiled, x):
        with torch.set_grad_enabled(enabled):
            return compiled(x)
    return call


class Residual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.use_residual = True

    def forward(self, x):
        y = x * 2 + (x if self.use_residual else 0)
        return y if self.training else y - 1


def _without_residual(compiled):
    compiled.use_residual = False
    return compiled(torch.ones(2))


RECOMPILES = [
    pytest.param(scaled, [lambda c: c(torch.ones(2), 2), lambda c: c(torch.ones(2), 3)],
                 ["scale_factor"], id="int_argument"),
    pytest.param(scaled, [lambda c: c(torch.ones(2), 2),
                          lambda c: (_set_scale_global(5), c(torch.ones(2), 2))],
                 ["SCALE_GLOBAL"], id="global"),
    pytest.param(repeated, [lambda c: c(torch.ones(2), Settings(2)),
                            lambda c: c(torch.ones(2), Settings(3))],
                 ["depth"], id="object_attribute"),
    pytest.param(doubled, [lambda c: c(torch.ones(2)), lambda c: c(torch.ones(3))],
                 ["'x'", "size mismatch"], id="tensor_size"),
    pytest.param(doubled, [lambda c: c(torch.ones(2)), lambda c: c(torch.ones(2).double())],
                 ["'x'", "dtype"], id="tensor_dtype"),
    pytest.param(doubled, [lambda c: c(torch.ones(2)), lambda c: c(torch.ones(2, requires_grad=True))],
                 ["'x'", "requires_grad"], id="tensor_requires_grad"),
    pytest.param(doubled, [lambda c: _with_grad_mode(True)(c, torch.ones(2)),
                           lambda c: _with_grad_mode(False)(c, torch.ones(2))],
                 ["grad"], id="grad_mode"),
    pytest.param(Residual, [lambda c: c(torch.ones(2)), _without_residual],
                 ["use_residual"], id="module_attribute"),
    pytest.param(Residual, [lambda c: c(torch.ones(2)), lambda c: (c.eval(), c(torch.ones(2)))],
                 ["training"], id="module_training_flag"),
]


@contextlib.contextmanager
def recompile_reasons(caplog):
    """The reasons given for recompiling: graphwright's counters, PyTorch's recompile log."""
    reasons: list[str] = []
    if REFERENCE:
        torch._logging.set_logs(recompiles=True)
        try:
            with caplog.at_level(logging.DEBUG):
                yield reasons
        finally:
            torch._logging.set_logs()
        reasons.extend(r.getMessage() for r in caplog.records if "triggered by" in r.getMessage())
        return
    graphwright.counters.clear()
    yield reasons
    reasons.extend(graphwright.counters["recompiles"])


@pytest.mark.parametrize("fn, calls, words", RECOMPILES)
def test_recompile_reason_names_what_changed_in_the_users_terms(fn, calls, words, caplog):
    target = fn() if isinstance(fn, type) else fn  # a module class: a fresh instance
    compiled, counter = compile_counted(target, fullgraph=True, dynamic=False)
    try:
        with recompile_reasons(caplog) as reasons:
            for call in calls:
                call(compiled)
    finally:
        _set_scale_global(2)
    assert counter.frame_count == 2
    assert len(reasons) == 1, reasons
    assert all(word in reasons[0] for word in words), reasons


def test_unique_graphs_are_counted_in_stats():
    if REFERENCE:
        from torch._dynamo.utils import counters
    else:
        counters = graphwright.counters
    counters.clear()
    compiled, counter = compile_counted(doubled, fullgraph=True, dynamic=False)
    for n in (2, 3, 2):
        compiled(torch.randn(n))
    assert counters["stats"]["unique_graphs"] == counter.frame_count == 2


def test_reset_clears_the_cache_so_the_next_call_compiles_again():
    compiled, counter = compile_counted(doubled, fullgraph=True)
    compiled(torch.randn(3))
    compiled(torch.randn(3))
    assert counter.frame_count == 1
    reset_compiler()
    compiled(torch.randn(3))
    assert counter.frame_count == 2


def test_two_compilations_of_one_function_with_different_backends_each_compile():
    first, first_counter = compile_counted(doubled, fullgraph=True)
    second, second_counter = compile_counted(doubled, fullgraph=True)
    x = torch.randn(3)
    assert_same(doubled(x), first(x))
    assert_same(doubled(x), second(x))
    assert_same(doubled(x), first(x))
    assert (first_counter.frame_count, second_counter.frame_count) == (1, 1)


def test_a_helper_inlined_into_two_compiled_functions_is_traced_for_each():
    def uses_twice(x):
        return doubled(x) + doubled(x)

    outer, outer_counter = compile_counted(uses_twice, fullgraph=True)
    inner, inner_counter = compile_counted(doubled, fullgraph=True)
    x = torch.randn(3)
    assert_same(uses_twice(x), outer(x))
    assert_same(doubled(x), inner(x))
    assert (outer_counter.frame_count, inner_counter.frame_count) == (1, 1)
