"""Symbolic sizes of tensor subclass inputs: one compile serves every size.

Under `dynamic=True` a TwoTensor's outer and inner sizes are symbolic (one
symbol for a dimension they share, by a guard); AOT autograd traces its aten
graphs once on the symbolic inner tensors, and the compiled function then
runs, for other sizes, without tracing or compiling again.
"""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.testing._internal.two_tensor import TwoTensor

import graphwright
from graphwright.testing import CompileCounterWithBackend

from subclass_models import RowScaledTensor
from test_aot_subclasses import RecordingBackend, assert_same, copied

BACKENDS = ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def two(*shape, requires_grad=False):
    return TwoTensor(torch.randn(*shape), torch.randn(*shape)).requires_grad_(requires_grad)


def _scaled_by_length(x, y):
    return (x.sin() + y).view(-1, 2) * x.size(0)


def test_one_trace_of_the_aten_graphs_serves_two_sizes():
    backend = RecordingBackend()
    compiled = graphwright.compile(_scaled_by_length, backend=backend, dynamic=True, fullgraph=True)
    for rows in (4, 6):
        x, y = two(rows, 2, requires_grad=True), torch.randn(rows, 2, requires_grad=True)
        x2, y2 = copied(x), copied(y)
        actual, expected = compiled(x, y), _scaled_by_length(x2, y2)
        assert_same(actual, expected)
        actual.sum().backward()
        expected.sum().backward()
        assert_same(x.grad, x2.grad)
        assert_same(y.grad, y2.grad)
    assert [kind for kind, _ in backend.graphs] == ["forward", "backward"]  # traced once
    (generic,) = backend.compiled
    assert generic.per_layout is None  # no size made it fall back to one compile per size
    forward = backend.graphs[0][1]
    sizes = [n.meta["val"].shape[0] for n in forward.graph.nodes if n.op == "placeholder"
             and isinstance(n.meta["val"], FakeTensor)]
    assert all(isinstance(size, torch.SymInt) for size in sizes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_input_compiles_once_for_every_size(backend):
    counter = CompileCounterWithBackend(backend)
    compiled = graphwright.compile(_scaled_by_length, backend=counter, dynamic=True)
    for rows in (4, 6, 9):
        x, y = two(rows, 2), torch.randn(rows, 2)
        assert_same(compiled(x, y), _scaled_by_length(x, y))
    assert counter.frame_count == 1


def test_under_automatic_dynamic_a_size_change_recompiles_once():
    counter = CompileCounterWithBackend("aot_eager")
    compiled = graphwright.compile(lambda x: x.cos() * 2, backend=counter)
    for rows in (3, 5, 7):
        x = two(rows)
        assert_same(compiled(x), x.cos() * 2)
    assert counter.frame_count == 2


def test_an_outer_size_other_than_its_inner_ones_recompiles():
    """The graph was traced with one symbol for the outer and inner sizes (TwoTensor's are equal
    when made plainly); a TwoTensor given another outer size fails that guard."""
    counter = CompileCounterWithBackend("aot_eager")
    compiled = graphwright.compile(lambda x: x * 2, backend=counter, dynamic=True)
    compiled(two(4))
    compiled(two(6))
    assert counter.frame_count == 1
    a, b = torch.randn(6), torch.randn(6)
    odd = TwoTensor(a, b, outer_size=(5,), outer_stride=(1,))
    actual = compiled(odd)
    assert counter.frame_count == 2
    assert actual.shape == (6,) and type(actual) is TwoTensor  # as eager: the result's size is its tensors'
    torch.testing.assert_close(actual.a, a * 2)


def _row_sums(x, w):
    return (x * w).sum(1)


def _dense(t):
    return t.data_ * t.scale[:, None] if isinstance(t, RowScaledTensor) else t


def _frames_over_row_counts(compile_fn, rows):
    for n in rows:
        x = RowScaledTensor(torch.randn(n, 4), torch.randn(n)).requires_grad_()
        w = torch.randn(4, requires_grad=True)
        x2, w2 = RowScaledTensor(x.data_.clone(), x.scale.clone()).requires_grad_(), w.detach().clone().requires_grad_()
        actual, expected = compile_fn(x, w), _row_sums(x2, w2)
        torch.testing.assert_close(actual, expected)
        actual.sum().backward()
        expected.sum().backward()
        assert type(x.grad) is type(x2.grad)
        torch.testing.assert_close(_dense(x.grad), _dense(x2.grad))
        torch.testing.assert_close(w.grad, w2.grad)


@pytest.mark.parametrize("dynamic", [True, False])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_inner_tensor_of_another_rank_is_symbolic_under_dynamic_true(backend, dynamic):
    """The per-row scale's length is a size of its own: symbolic with `dynamic=True`, so other
    row counts run the same graph; each recompiles with `dynamic=False`, as in torch.compile."""
    import torch._dynamo
    import torch._dynamo.testing

    rows = (3, 5, 7)
    counter = CompileCounterWithBackend(backend)
    _frames_over_row_counts(graphwright.compile(_row_sums, backend=counter, dynamic=dynamic), rows)
    torch._dynamo.reset()
    reference = torch._dynamo.testing.CompileCounter()
    for n in rows:
        torch.compile(_row_sums, backend=reference, dynamic=dynamic)(
            RowScaledTensor(torch.randn(n, 4), torch.randn(n)), torch.randn(4))
    torch._dynamo.reset()
    assert counter.frame_count == reference.frame_count == (1 if dynamic else 3)
