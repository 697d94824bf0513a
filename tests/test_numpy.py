"""NumPy in a compiled region, where the differential corpus (tests/programs/cases_numpy.py)
does not fit: errors raised as eagerly, graph breaks and their messages, object identity,
memory shared with the caller, guards' reasons, Inductor, and what NumPy's support needs of
torch (no TorchDynamo config)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import graphwright
from graphwright.strict.interpreter import graph_breaks as gb
from graphwright.testing import CompileCounter
from tests.programs.harness import assert_same


def compiled(fn, **options):
    counter = CompileCounter()
    return graphwright.compile(fn, backend=counter, **options), counter


def test_a_pure_numpy_function_is_one_graph_of_numpy_nodes():
    def fn(a, b):
        return np.einsum("ij,kj->ik", a, b).max(axis=1)

    run, counter = compiled(fn, fullgraph=True)
    a, b = np.random.rand(4, 3), np.random.rand(5, 3)
    assert_same(fn(a, b), run(a, b))
    (graph,) = counter.graphs
    targets = [node.target.__name__ for node in graph.graph.nodes if node.op == "call_function"]
    assert targets == ["numpy_np_einsum", "numpy_ndarray_max"]


def test_an_input_array_returned_is_the_callers_object():
    run, _ = compiled(lambda a: (a, a * 2), fullgraph=True)
    a = np.arange(3.0)
    assert run(a)[0] is a


def test_writes_through_tensor_numpy_reach_the_tensor():
    def fn(x):
        view = x.numpy()
        view[0] = 7.0
        return view * 2

    run, counter = compiled(fn, fullgraph=True)
    x, expected = torch.zeros(3), torch.zeros(3)
    assert_same(fn(expected), run(x))
    assert torch.equal(x, expected) and counter.frame_count == 1


def test_a_read_only_array_is_an_input_without_a_warning():
    a = np.broadcast_to(np.arange(3.0), (2, 3))
    run, _ = compiled(lambda a: a.sum(axis=0), fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(a.sum(axis=0), run(a))


def test_numpy_of_a_tensor_that_requires_grad_raises_as_eagerly():
    for fn in (lambda x: x.numpy() * 2, lambda x: np.asarray(x) * 2):
        x = torch.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError) as eager:
            fn(x)
        with pytest.raises(RuntimeError) as traced:
            graphwright.compile(fn, backend="eager")(x)
        assert str(traced.value) == str(eager.value)


def test_an_array_no_tensor_can_hold_breaks_naming_its_dtype():
    def fn(a):
        return a * 2

    words = np.array(["ab", "c"], dtype=object)
    with pytest.raises(graphwright.Unsupported) as caught:
        graphwright.compile(fn, backend="eager", fullgraph=True)(words)
    assert caught.value.gb_id == gb.NUMPY_UNTRACEABLE.gb_id
    assert "array of dtype object" in str(caught.value)
    assert_same(fn(words), graphwright.compile(fn, backend="eager")(words))


def test_numpy_random_breaks_naming_the_generator_and_the_rest_compiles():
    def fn(a):
        noise = np.random.default_rng(0).standard_normal(a.shape)
        return a * 2 + noise

    with pytest.raises(graphwright.Unsupported) as caught:
        graphwright.compile(fn, backend="eager", fullgraph=True)(np.ones(3))
    assert "NumPy's random generator" in str(caught.value)
    run, counter = compiled(fn)
    assert_same(fn(np.ones(3)), run(np.ones(3)))
    assert counter.frame_count == 1


def test_an_array_of_another_dtype_names_the_dtype_in_the_recompile_reason():
    run, counter = compiled(lambda a: a + 1)
    run(np.zeros(3))
    run(np.zeros(3, dtype=np.int32))
    assert counter.frame_count == 2
    reasons = list(graphwright.counters["recompiles"])
    assert any("dtype mismatch" in reason and "torch.int32" in reason for reason in reasons), reasons


def test_the_same_array_passed_twice_is_one_input_and_distinct_arrays_recompile():
    run, counter = compiled(lambda a, b: a + b)
    a = np.ones(3)
    assert_same(a + a, run(a, a))
    assert_same(a + 2 * a, run(a, 2 * a))
    assert counter.frame_count == 2


def test_torch_numpy_defaults_are_numpys_without_reading_torchdynamos_config():
    run, _ = compiled(lambda: np.arange(3) / 2 + np.zeros(2).sum(), fullgraph=True)
    assert run().dtype == np.float64
    from torch._numpy import _dtypes_impl

    assert _dtypes_impl.default_dtypes() == (torch.float64, torch.complex128, torch.int64)


@pytest.mark.slow
def test_inductor_compiles_a_pure_numpy_function_to_the_same_values():
    def fn(points, centers):
        distances = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=-1)
        return np.argmin(distances, axis=1), np.sqrt(distances.min(axis=1))

    counter = graphwright.testing.CompileCounterWithBackend("inductor")
    run = graphwright.compile(fn, backend=counter, fullgraph=True)
    points, centers = np.random.rand(50, 3), np.random.rand(4, 3)
    assert_same(fn(points, centers), run(points, centers))
    assert counter.frame_count == 1
