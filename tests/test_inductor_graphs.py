"""Graphs of unusual shape through the `inductor` backend: no tensor inputs, random numbers
after a seed set in the region. Each once crashed inside graphwright's use of Inductor."""
import pytest
import torch

import graphwright


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def test_random_numbers_after_a_seed_set_in_the_region_repeat():
    @graphwright.compile(backend="inductor")
    def seeded():
        torch.manual_seed(3)
        return torch.randint(0, 5, (5,))

    first = seeded()
    assert torch.equal(first, seeded())
    assert first.shape == (5,) and first.dtype == torch.int64


def _doubled_sparse(x):
    return x.to_sparse() * 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_an_operator_returning_a_sparse_tensor_is_a_graph_break(backend):
    x = torch.randn(4, 4)
    result = graphwright.compile(_doubled_sparse, backend=backend)(x)
    assert result.layout is torch.sparse_coo
    torch.testing.assert_close(result.to_dense(), _doubled_sparse(x).to_dense())
    explained = graphwright.explain(_doubled_sparse)(x)
    assert explained.graph_count == 0  # the sparse result, then the resumed code's sparse input
    assert {reason.reason.split(":")[0] for reason in explained.break_reasons} == {"Unsupported tensor input"}


def _narrowed(x, start):
    return torch.narrow(x, 1, start, 2) * 2


@pytest.mark.slow
def test_a_start_read_from_an_integer_input_is_compiled_once_per_value():
    # the graph reads the start from the tensor (an unbacked symbol), and Inductor lowers the
    # backward's slice by the start's sign: the aten graphs are compiled for each value seen
    counter = graphwright.testing.CompileCounterWithBackend("inductor")
    compiled = graphwright.compile(_narrowed, backend=counter, fullgraph=True)
    for value in (2, 2, -2, 1, -2):
        x = torch.randn(4, 5, 3, requires_grad=True)
        reference = x.detach().clone().requires_grad_()
        actual, expected = compiled(x, torch.tensor(value)), _narrowed(reference, torch.tensor(value))
        assert actual.shape == expected.shape and actual.stride() == expected.stride()
        torch.testing.assert_close(actual, expected)
        cotangent = torch.randn_like(expected)
        actual.backward(cotangent)
        expected.backward(cotangent)
        torch.testing.assert_close(x.grad, reference.grad)
    assert counter.frame_count == 1  # one graph for every start, as under eager
    assert graphwright.counters["inductor"]["fxgraph_cache_miss"] + \
        graphwright.counters["inductor"]["fxgraph_cache_hit"] + \
        graphwright.counters["inductor"]["fxgraph_cache_bypass"] >= 6  # forward and backward per value


@pytest.mark.slow
def test_values_past_the_cache_size_limit_run_the_graph_as_captured(monkeypatch):
    monkeypatch.setattr(graphwright.config, "cache_size_limit", 2)
    compiled = graphwright.compile(_narrowed, backend="inductor", fullgraph=True)
    x = torch.randn(4, 5, 3)
    for value in (0, 1):
        torch.testing.assert_close(compiled(x, torch.tensor(value)), _narrowed(x, torch.tensor(value)))
    with pytest.warns(UserWarning, match="as captured, without its backend, for values of its integer inputs"):
        torch.testing.assert_close(compiled(x, torch.tensor(3)), _narrowed(x, torch.tensor(3)))
    torch.testing.assert_close(compiled(x, torch.tensor(1)), _narrowed(x, torch.tensor(1)))
