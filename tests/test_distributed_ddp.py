"""DistributedDataParallel: two gloo processes on the CPU (tests/ddp_workers.py).

Compiled both ways (compile then wrap, wrap then compile), and called inside a
compiled function: the gradients after several optimizer steps equal an
uncompiled DDP run's, DDP's own forward runs as Python without a graph break,
and a graph compiled inside DDP's forward is split at DDP's gradient buckets
(one piece per bucket, as many as torch.compile's DDP optimizer makes), so that
a bucket's all-reduce starts while the backward of earlier pieces still runs.
"""
from __future__ import annotations

import pytest
import torch

from ddp_workers import run_scenarios

pytestmark = pytest.mark.skipif(not torch.distributed.is_available()
                                or not torch.distributed.is_gloo_available(), reason="needs gloo")

_SCENARIOS = ["eager:compile_then_wrap", "eager:wrap_then_compile", "aot_eager:compile_then_wrap",
              "aot_eager:wrap_then_compile", "aot_eager:in_region", "aot_eager:no_buckets", "explain"]


@pytest.fixture(scope="module")
def ranks():
    return run_scenarios(_SCENARIOS)


@pytest.fixture(scope="module")
def slow_ranks():
    return run_scenarios(["torch_compile", "inductor:compile_then_wrap", "inductor:wrap_then_compile"])


def _both(ranks, name):
    return [results[name] for results in ranks]


def _last_step(log: list) -> list:
    """The log of the last training step: DDP rebuilds its buckets after the first step, in the
    order gradients became ready."""
    start = max(i for i, entry in enumerate(log) if entry[0] == "step")
    return log[start + 1:]


def _reduced_before_first_piece(log: list) -> int:
    """Buckets all-reduced before the backward of the graph's first piece started."""
    step = _last_step(log)
    first_piece = step.index(["backward", 0])
    return sum(1 for entry in step[:first_piece] if entry[0] == "allreduce")


@pytest.mark.parametrize("way", ["compile_then_wrap", "wrap_then_compile"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients_equal_uncompiled_ddp(ranks, backend, way):
    for result in _both(ranks, f"{backend}:{way}"):
        assert result["grads_equal"]
        assert result["graph_breaks"] == {}


@pytest.mark.parametrize("way", ["compile_then_wrap", "wrap_then_compile"])
def test_graph_is_split_at_ddp_buckets(ranks, way):
    """Six layers, four of 1 MiB, at bucket_cap_mb=1: five pieces, one per bucket."""
    for result in _both(ranks, f"aot_eager:{way}"):
        assert result["buckets_expected"] == 5
        assert result["graphs"] == 5
        assert result["report"] == ["compiled in 5 pieces, one per DDP gradient bucket"]


@pytest.mark.slow
def test_as_many_pieces_as_torch_compile(ranks, slow_ranks):
    for result, torch_graphs in zip(_both(ranks, "aot_eager:wrap_then_compile"), _both(slow_ranks, "torch_compile")):
        assert result["graphs"] == torch_graphs


@pytest.mark.slow
@pytest.mark.parametrize("way", ["compile_then_wrap", "wrap_then_compile"])
def test_inductor_in_buckets(slow_ranks, way):
    for result in _both(slow_ranks, f"inductor:{way}"):
        assert result["grads_equal"]
        assert result["graph_breaks"] == {}
        assert result["graphs"] == 5
        assert _reduced_before_first_piece(result["log"]) == 4  # all but the first piece's bucket


@pytest.mark.parametrize("way", ["compile_then_wrap", "wrap_then_compile"])
def test_all_reduce_overlaps_the_backward(ranks, way):
    """Each piece's bucket is all-reduced as soon as its backward ends: the last step's log reads
    backward 4, all-reduce, backward 3, all-reduce, ... backward 0, all-reduce."""
    for result in _both(ranks, f"aot_eager:{way}"):
        assert _reduced_before_first_piece(result["log"]) == 4  # all but the first piece's bucket


def test_one_graph_without_ddp_optimization(ranks):
    """`config.optimize_ddp = False`: one graph, every bucket all-reduced after its backward."""
    for result in _both(ranks, "aot_eager:no_buckets"):
        assert result["grads_equal"]
        assert result["graphs"] == 1
        assert _reduced_before_first_piece(result["log"]) == 0


def test_ddp_called_inside_a_compiled_function(ranks):
    """The call of the DDP module is a graph break (its forward runs as Python); the graph before,
    the module's pieces and the graph after are compiled."""
    for result in _both(ranks, "aot_eager:in_region"):
        assert result["grads_equal"]
        assert result["graph_breaks"] == {"Call of a `DistributedDataParallel` module": 1}
        assert result["graphs"] == 1 + 5 + 1


def test_explain_of_a_ddp_model_shows_the_graph_of_the_module_it_wraps(ranks):
    for explained in _both(ranks, "explain"):
        assert explained["graph_count"] == 1 and explained["graph_break_count"] == 0
        assert explained["ops"] == explained["ops_of_the_module"] and explained["ops"]
