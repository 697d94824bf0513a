"""Compiled functions and modules called from many threads at once: each entry is compiled once,
the cache size limit holds, and every thread gets eager's answer."""
from __future__ import annotations

import threading
import warnings

import pytest
import torch
import torch._dynamo.testing

import graphwright
from graphwright.testing import CompileCounter

THREADS = 8
SIZES = (2, 3, 4, 2, 3, 4)


def _run_in_threads(call) -> list:
    """Each thread calls `call(n)` for every n in SIZES; returns [(n, result), ...] per thread."""
    barrier = threading.Barrier(THREADS)
    results: list = [None] * THREADS
    errors: list = []

    def work(index: int) -> None:
        try:
            barrier.wait()
            results[index] = [(n, call(n)) for n in SIZES]
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return results


def _inputs(n: int) -> torch.Tensor:
    return torch.arange(float(n))


def _f(x):
    return (x.sin() + 1).cos() * x.shape[0]


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        return torch.tanh(x * self.scale) + x.shape[0]


def _check_answers(results, eager) -> None:
    for per_thread in results:
        for n, value in per_thread:
            torch.testing.assert_close(value, eager(_inputs(n)))


def test_a_function_called_from_many_threads_compiles_each_entry_once():
    graphwright.reset()
    counter = CompileCounter()
    compiled = graphwright.compile(_f, backend=counter, dynamic=False)
    results = _run_in_threads(lambda n: compiled(_inputs(n)))
    _check_answers(results, _f)
    assert counter.frame_count == len(set(SIZES))


def test_a_module_called_from_many_threads_compiles_each_entry_once():
    graphwright.reset()
    counter = CompileCounter()
    block = _Block()
    compiled = graphwright.compile(block, backend=counter, dynamic=False)
    with torch.no_grad():
        results = _run_in_threads(lambda n: compiled(_inputs(n)))
        _check_answers(results, block)
    assert counter.frame_count == len(set(SIZES))


def test_the_cache_size_limit_holds_when_threads_miss_together(monkeypatch):
    graphwright.reset()
    monkeypatch.setattr(graphwright.config, "cache_size_limit", 2)
    counter = CompileCounter()
    compiled = graphwright.compile(_f, backend=counter, dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = _run_in_threads(lambda n: compiled(_inputs(n)))
    _check_answers(results, _f)
    assert counter.frame_count == 2
    assert sum("cache_size_limit" in str(w.message) for w in caught) == 1


@pytest.mark.slow
def test_torch_compile_compiles_no_fewer_entries_from_many_threads():
    """graphwright's count (one per size) is at most torch.compile's, which was 8 here."""
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(_f, backend=counter, dynamic=False)
    _run_in_threads(lambda n: compiled(_inputs(n)))
    assert counter.frame_count >= len(set(SIZES))
