"""Tensor parallelism with DTensor: gloo processes on the CPU (tests/dtensor_workers.py).

The programs of `tests/dtensor_programs.py` (an MLP split column- then
row-wise, sequence parallelism around a LayerNorm, a transformer block planned
as PyTorch's tensor-parallel tutorial plans it, DTensor's API inside the
region, `loss_parallel()`, FSDP2 with a nested unit, and FSDP2 over tensor
parallelism on a 2x2 mesh) are trained three SGD steps eagerly and compiled:
the losses and the full weights after the steps equal eager's with every
backend, in as many graphs as torch.compile makes (one), and no graph runs
without its backend. Two processes for the 1-D programs; the 2-D program,
Inductor and torch.compile's counts are slow tests.
"""
from __future__ import annotations

import pytest
import torch

from dtensor_workers import run_scenarios

pytestmark = pytest.mark.skipif(not torch.distributed.is_available()
                                or not torch.distributed.is_gloo_available(), reason="needs gloo")

TENSOR_PARALLEL = ["mlp", "sequence_parallel", "transformer_block", "dtensor_ops", "loss_parallel"]
ONE_D = [*TENSOR_PARALLEL, "fsdp"]


def _fsdp_breaks(count: int) -> dict:
    """FSDP2's hooks run as Python: a break at the pre-forward hook of each `fully_shard` unit."""
    return {"Call to a function marked `graphwright.disable`": count}


BREAKS = {"fsdp": _fsdp_breaks(2), "two_d": _fsdp_breaks(1)}


@pytest.fixture(scope="module")
def ranks():
    return run_scenarios([f"{program}:aot_eager" for program in ONE_D] + ["mlp:eager", "transformer_block:eager"])


@pytest.fixture(scope="module")
def slow_ranks():
    return run_scenarios([f"{program}:{backend}" for program in ONE_D for backend in ("inductor", "torch_compile")])


@pytest.fixture(scope="module")
def two_d_ranks():
    return run_scenarios([f"two_d:{backend}" for backend in ("eager", "aot_eager", "inductor", "torch_compile")],
                         world=4)


def _each_rank(ranks, name):
    return [results[name] for results in ranks]


def _assert_trained_as_eager(result, program):
    assert result["losses_equal"], result["losses"]
    assert result["weights_equal"]
    assert result["graph_breaks"] == BREAKS.get(program, {})
    assert result["fallbacks"] == []
    assert result["graphs"] == 1


@pytest.mark.parametrize("program", ONE_D)
def test_training_equals_eager_under_aot_eager(ranks, program):
    for result in _each_rank(ranks, f"{program}:aot_eager"):
        _assert_trained_as_eager(result, program)


@pytest.mark.parametrize("program", ["mlp", "transformer_block"])
def test_training_equals_eager_under_eager(ranks, program):
    for result in _each_rank(ranks, f"{program}:eager"):
        _assert_trained_as_eager(result, program)


def test_each_rank_trains_its_own_shard_of_the_sequence(ranks):
    """The sequence-parallel block sees other activations on each rank: its losses differ."""
    first, second = _each_rank(ranks, "transformer_block:aot_eager")
    assert first["losses"] != second["losses"]


@pytest.mark.slow
@pytest.mark.parametrize("program", ONE_D)
def test_training_equals_eager_under_inductor(slow_ranks, program):
    for result in _each_rank(slow_ranks, f"{program}:inductor"):
        _assert_trained_as_eager(result, program)


@pytest.mark.slow
@pytest.mark.parametrize("program", ONE_D)
def test_as_many_graphs_as_torch_compile(ranks, slow_ranks, program):
    for ours, theirs in zip(_each_rank(ranks, f"{program}:aot_eager"), _each_rank(slow_ranks, f"{program}:torch_compile")):
        assert theirs["losses_equal"]
        assert ours["graphs"] <= theirs["graphs"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_fsdp2_over_tensor_parallelism_equals_eager(two_d_ranks, backend):
    """FSDP2's hooks run as Python (torch.compile skips them too); the block between them, on 2-D
    DTensor parameters gathered by FSDP over the tensor-parallel mesh, is one graph."""
    for result in _each_rank(two_d_ranks, f"two_d:{backend}"):
        _assert_trained_as_eager(result, "two_d")


@pytest.mark.slow
def test_fsdp2_over_tensor_parallelism_in_as_many_graphs_as_torch_compile(two_d_ranks):
    for ours, theirs in zip(_each_rank(two_d_ranks, "two_d:aot_eager"), _each_rank(two_d_ranks, "two_d:torch_compile")):
        assert theirs["losses_equal"]
        assert ours["graphs"] <= theirs["graphs"]
