"""`config.reorderable_print` and `config.reorderable_logging` decide whether
`print` and logger calls are replayed after the graph or break it.

The reference mode uses PyTorch's equivalent knob,
`torch._dynamo.config.reorderable_logging_functions`.
"""
from __future__ import annotations

import contextlib

import pytest
import torch

import graphwright

from .harness import REFERENCE, assert_same, compile_counted, corpus_logger


@contextlib.contextmanager
def reorderable_print():
    if REFERENCE:
        import torch._dynamo

        with torch._dynamo.config.patch(reorderable_logging_functions={print}):
            yield
        return
    saved = graphwright.config.reorderable_print
    graphwright.config.reorderable_print = True
    try:
        yield
    finally:
        graphwright.config.reorderable_print = saved


@contextlib.contextmanager
def logging_not_reorderable():
    if REFERENCE:
        yield  # PyTorch never reorders logger calls
        return
    saved = graphwright.config.reorderable_logging
    graphwright.config.reorderable_logging = False
    try:
        yield
    finally:
        graphwright.config.reorderable_logging = saved


def _unsupported_type():
    if REFERENCE:
        from torch._dynamo.exc import Unsupported

        return Unsupported
    return graphwright.Unsupported


def prints_progress(x, step):
    y = x * 2
    print("step", step, "of", 3)
    z = y + 1
    print("done", end="!\n")
    return z


def logs_progress(x):
    y = x.exp()
    corpus_logger.info("computed %d values", 3)  # gb:logger-call
    return y


@pytest.mark.xfail(REFERENCE, strict=True,
                   reason="PyTorch 2.13 drops print's keyword arguments (end=) when it reorders print")
def test_print_is_replayed_after_the_graph_when_reorderable_print_is_on(capsys):
    with reorderable_print():
        compiled, counter = compile_counted(prints_progress, fullgraph=True)
        for step in (1, 1):
            x = torch.randn(3)
            expected = prints_progress(x, step)
            eager_out = capsys.readouterr().out
            assert_same(expected, compiled(x, step))
            assert capsys.readouterr().out == eager_out
    assert counter.frame_count == 1


def test_logger_call_breaks_the_graph_when_reorderable_logging_is_off():
    with logging_not_reorderable():
        compiled, _ = compile_counted(logs_progress, fullgraph=True)
        with pytest.raises(_unsupported_type()) as caught:
            compiled(torch.randn(3))
    text = str(caught.value)
    number = next(i for i, line in enumerate(open(__file__), 1) if line.rstrip().endswith("# gb:logger-call"))
    assert f'File "{__file__}", line {number}, in logs_progress' in text, text
