"""Input mutations and output aliasing under AOT autograd behave as in eager."""
import pytest
import torch

import graphwright
from graphwright.backends.registry import lookup_backend

from aot_models import clone_inputs, graph_of

aot_eager = lookup_backend("aot_eager")


def run_both(fn, *inputs):
    """Run fn eagerly and through aot_eager on separate copies of the inputs."""
    eager_inputs, compiled_inputs = clone_inputs(inputs), clone_inputs(inputs)
    expected = fn(*eager_inputs)
    actual = aot_eager(graph_of(fn), compiled_inputs)(*compiled_inputs)
    return expected, actual, eager_inputs, compiled_inputs


def test_in_place_update_of_an_input_is_written_back():
    def fn(x, buf):
        buf.mul_(0.5).add_(x.sum(0))
        return x * buf

    expected, actual, eager_in, compiled_in = run_both(fn, torch.randn(3, 4), torch.ones(4))
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(compiled_in[1], eager_in[1])


def test_mutation_through_a_view_of_an_input_is_written_back():
    def fn(x, buf):
        buf[1:].add_(x)
        return buf.sum()

    expected, actual, eager_in, compiled_in = run_both(fn, torch.randn(3), torch.zeros(4))
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(compiled_in[1], eager_in[1])


def test_mutated_input_that_backward_needs_keeps_its_old_value_for_backward():
    # Eager saves `scaled`; the partitioner recomputes it from `buf`, which
    # the write-back then overwrites: the backward must read the old value.
    def fn(w, buf):
        scaled = buf * 2
        out = w * scaled
        buf.add_(1.0)
        return out

    w = torch.randn(4, requires_grad=True)
    buf = torch.randn(4)
    expected, actual, eager_in, compiled_in = run_both(fn, w, buf)
    expected.sum().backward()
    actual.sum().backward()
    torch.testing.assert_close(compiled_in[0].grad, eager_in[0].grad)
    torch.testing.assert_close(compiled_in[1], eager_in[1])


def test_returning_an_input_returns_the_same_object():
    def fn(x, y):
        return x, x + y

    x, y = torch.randn(3), torch.randn(3)
    compiled = aot_eager(graph_of(fn), [x, y])
    out = compiled(x, y)
    assert out[0] is x
    torch.testing.assert_close(out[1], x + y)


def test_view_of_an_input_shares_its_storage_and_gradient():
    def fn(x):
        return x.view(-1)[2:], x * 2

    x = torch.randn(2, 3, requires_grad=True)
    compiled = aot_eager(graph_of(fn), [x])
    view, doubled = compiled(x)
    assert view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    torch.testing.assert_close(view, x.detach().view(-1)[2:])
    (view.sum() + doubled.sum()).backward()
    expected = torch.full((2, 3), 2.0)
    expected.view(-1)[2:] += 1
    torch.testing.assert_close(x.grad, expected)


def test_detached_view_of_an_input_does_not_require_grad():
    def fn(x):
        return x.detach(), x.sin()

    x = torch.randn(3, requires_grad=True)
    detached, _ = aot_eager(graph_of(fn), [x])(x)
    assert not detached.requires_grad
    assert detached.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_the_same_output_twice_is_one_object():
    def fn(x):
        y = x.cos()
        return y, y

    x = torch.randn(3, requires_grad=True)
    a, b = aot_eager(graph_of(fn), [x])(x)
    assert a is b


def test_output_that_views_another_output_shares_its_storage():
    def fn(x):
        y = x * 3
        return y, y.view(-1)

    x = torch.randn(2, 2, requires_grad=True)
    y, flat = aot_eager(graph_of(fn), [x])(x)
    assert flat.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    flat.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2, 2), 3.0))


def test_in_place_update_of_an_output_view_is_seen_through_its_base():
    def fn(x):
        y = x + 1
        return y, y[0]

    x = torch.randn(2, 3)
    y, row = aot_eager(graph_of(fn), [x])(x)
    row.zero_()
    assert torch.equal(y[0], torch.zeros(3))


def test_metadata_mutation_of_an_input_is_a_clear_error():
    def fn(x):
        x.t_()
        return x + 1

    x = torch.randn(2, 3)
    with pytest.raises(graphwright.BackendError, match="shape or strides of an input"):
        aot_eager(graph_of(fn), [x])(x)


def test_gradient_flows_through_an_input_mutated_in_place():
    def fn(x, y):
        x.mul_(y)
        return x + y

    def run(compiled):
        w = torch.linspace(-1, 1, 4, requires_grad=True)
        x, y = w * 1.0, torch.full((4,), 3.0)
        fn_ = aot_eager(graph_of(fn), [x, y]) if compiled else fn
        out = fn_(x, y)
        (out.sum() + (x**2).sum()).backward()
        return out, x, w.grad

    for actual, expected in zip(run(compiled=True), run(compiled=False)):
        torch.testing.assert_close(actual, expected)


def test_one_tensor_passed_as_two_inputs_sees_its_own_mutation():
    def fn(a, b):
        a.add_(1)
        return b * 2

    distinct = [torch.zeros(3), torch.zeros(3)]
    compiled = aot_eager(graph_of(fn), distinct)
    shared = torch.zeros(3)
    expected_shared = torch.zeros(3)
    torch.testing.assert_close(compiled(shared, shared), fn(expected_shared, expected_shared))
    torch.testing.assert_close(shared, expected_shared)
    torch.testing.assert_close(compiled(*distinct), torch.zeros(3))


def test_wrapper_subclass_input_mutated_in_place_is_written_back():
    # A TwoTensor has no storage of its own: the overlap guard reads its inner tensors'.
    # Found by the program generator (a TwoTensor input changed under no_grad).
    from torch.testing._internal.two_tensor import TwoTensor

    def fn(x, pair):
        with torch.no_grad():
            pair.clamp_(-0.5, 0.5)
        return x * 2 + pair

    def run(compiled):
        torch.manual_seed(0)
        x, pair = torch.randn(3, requires_grad=True), TwoTensor(torch.randn(3), torch.randn(3))
        out = graphwright.compile(fn, backend="aot_eager")(x, pair) if compiled else fn(x, pair)
        return out, pair

    (actual, pair), (expected, eager_pair) = run(compiled=True), run(compiled=False)
    assert type(actual) is TwoTensor and type(pair) is TwoTensor
    for got, want in ((actual.a, expected.a), (actual.b, expected.b), (pair.a, eager_pair.a), (pair.b, eager_pair.b)):
        torch.testing.assert_close(got, want)


def test_wrapper_subclass_sharing_memory_with_a_mutated_input_sees_the_mutation():
    from torch.testing._internal.two_tensor import TwoTensor

    def fn(buf, pair):
        buf.mul_(2)
        return pair + 1

    def run(compiled):
        buf = torch.arange(3.0)
        pair = TwoTensor(buf, torch.ones(3))  # its first half is `buf` itself
        out = graphwright.compile(fn, backend="aot_eager")(buf, pair) if compiled else fn(buf, pair)
        return out, buf

    (actual, buf), (expected, eager_buf) = run(compiled=True), run(compiled=False)
    torch.testing.assert_close(actual.a, expected.a)
    torch.testing.assert_close(actual.b, expected.b)
    torch.testing.assert_close(buf, eager_buf)


def test_traced_graph_that_still_mutates_an_input_is_refused_but_scratch_buffers_are_fine():
    from graphwright.aot.joint import _check_functional

    def graph_writing(into_input: bool):
        graph = torch.fx.Graph()
        x = graph.placeholder("x")
        target = x if into_input else graph.call_function(torch.ops.aten.empty_like.default, (x,))
        view = graph.call_function(torch.ops.aten.view.default, (target, [-1]))
        graph.output((graph.call_function(torch.ops.aten.add_.Tensor, (view, 1)),))
        return torch.fx.GraphModule(torch.nn.Module(), graph)

    _check_functional(graph_writing(into_input=False))
    with pytest.raises(graphwright.BackendError, match="could not functionalize `aten.add_.Tensor`"):
        _check_functional(graph_writing(into_input=True))


@pytest.mark.slow
def test_inductor_writes_back_mutations_and_rebuilds_aliases():
    def fn(x, w, buf):
        buf.mul_(0.9).add_(x.mean(0))
        y = x @ w
        return y, y.view(-1), x, x.detach()

    def inputs():
        torch.manual_seed(0)
        return [torch.randn(3, 4), torch.randn(4, 2, requires_grad=True), torch.zeros(4)]

    eager_in, compiled_in = inputs(), inputs()
    expected = fn(*eager_in)
    actual = lookup_backend("inductor")(graph_of(fn), compiled_in)(*compiled_in)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    torch.testing.assert_close(compiled_in[2], eager_in[2])
    assert actual[2] is compiled_in[0]
    assert actual[1].untyped_storage().data_ptr() == actual[0].untyped_storage().data_ptr()
    actual[1].sum().backward()
    expected[1].sum().backward()
    torch.testing.assert_close(compiled_in[1].grad, eager_in[1].grad)


def test_outputs_that_view_one_intermediate_share_its_storage():
    def fn(x):
        y = x * 2
        return y[0], y[:, 0]

    x = torch.randn(3, 3, requires_grad=True)
    row, column = aot_eager(graph_of(fn), [x])(x)
    expected_row, expected_column = fn(x)
    torch.testing.assert_close(row, expected_row)
    torch.testing.assert_close(column, expected_column)
    assert row.untyped_storage().data_ptr() == column.untyped_storage().data_ptr()
    (row.sum() + 2 * column.sum()).backward()
    (grad,) = torch.autograd.grad(expected_row.sum() + 2 * expected_column.sum(), x)
    torch.testing.assert_close(x.grad, grad)
    with torch.no_grad():
        row, column = aot_eager(graph_of(fn), [x])(x)
        row.zero_()
        assert column[0].item() == 0


def test_parameter_mutated_under_no_grad_is_written_back_without_autograd():
    def fn(x, weight):
        with torch.no_grad():
            weight.clamp_(-0.2, 0.2)
        return x @ weight

    # symbolic_trace would drop the grad-mode switch; the strict tracer records it as calls.
    graph = torch.fx.Graph()
    x, weight = graph.placeholder("x"), graph.placeholder("weight")
    graph.call_function(torch._C._set_grad_enabled, (False,))
    graph.call_method("clamp_", (weight, -0.2, 0.2))
    graph.call_function(torch._C._set_grad_enabled, (True,))
    graph.output(graph.call_function(torch.matmul, (x, weight)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)

    def run(compiled):
        torch.manual_seed(0)
        x, weight = torch.randn(2, 3), torch.nn.Parameter(torch.randn(3, 3))
        out = aot_eager(gm, [x, weight])(x, weight) if compiled else fn(x, weight)
        out.sum().backward()
        return out, weight, weight.grad

    for actual, expected in zip(run(compiled=True), run(compiled=False)):
        torch.testing.assert_close(actual, expected)


def test_view_of_an_input_follows_where_a_later_input_starts_in_its_storage():
    def fn(x):
        return x[1:], x * 2

    storage = torch.arange(10.0)
    compiled = aot_eager(graph_of(fn), [storage[:4]])
    tail, _ = compiled(storage[5:9])
    torch.testing.assert_close(tail, storage[6:9])


def test_input_viewing_a_mutated_input_sees_the_mutation():
    def fn(base, row):
        base.mul_(2)
        return row + 1

    compiled = aot_eager(graph_of(fn), [torch.ones(2, 3), torch.ones(3)])
    base = torch.ones(2, 3)
    expected_base = torch.ones(2, 3)
    torch.testing.assert_close(compiled(base, base[0]), fn(expected_base, expected_base[0]))
    torch.testing.assert_close(base, expected_base)


def test_embedding_max_norm_renormalises_the_weight_through_a_detached_alias():
    def run(compiled):
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(10, 4, max_norm=1.0)
        indices = torch.tensor([[1, 2, 3], [3, 4, 1]])
        forward = aot_eager(torch.fx.symbolic_trace(embedding), [indices]) if compiled else embedding
        out = forward(indices)
        out.sum().backward()
        return out, embedding.weight, embedding.weight.grad

    for actual, expected in zip(run(compiled=True), run(compiled=False)):
        torch.testing.assert_close(actual, expected)


def _write_through_windows(step_cols):
    size, step, cols = step_cols

    def fn(x, buf):
        windows = buf.unfold(1, size, step)
        windows[0] = -1.5
        return x * 2, (x * 3).unfold(1, 2, 1).sum()
    return fn, cols


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("windows", [(2, 2, 3), (2, 1, 3), (2, 3, 5)], ids=["leave_one_out", "overlap", "gaps"])
def test_a_write_through_unfold_windows_that_do_not_tile_runs_as_captured(backend, windows):
    # AOT autograd would write the windows back with unfold_backward: zeros where no window
    # is, sums where windows overlap (torch.compile gives those values)
    fn, cols = _write_through_windows(windows)
    x = torch.randn(4, cols, requires_grad=True)
    buf = torch.randn(4, cols)
    expected_buf, actual_buf = buf.clone(), buf.clone()
    expected = fn(x, expected_buf)
    with pytest.warns(UserWarning, match="unfold|internal overlap"):
        actual = graphwright.compile(fn, backend=backend)(x, actual_buf)
    assert torch.equal(actual_buf, expected_buf)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e)
    expected[1].backward()
    grad, x.grad = x.grad, None
    actual[1].backward()
    torch.testing.assert_close(x.grad, grad)


def test_a_write_through_unfold_windows_that_tile_is_compiled(recwarn):
    fn, _ = _write_through_windows((2, 2, 4))
    x, buf = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4)
    expected_buf, actual_buf = buf.clone(), buf.clone()
    expected = fn(x, expected_buf)
    actual = graphwright.compile(fn, backend="aot_eager")(x, actual_buf)
    assert torch.equal(actual_buf, expected_buf)
    torch.testing.assert_close(actual[1], expected[1])
    assert not [w for w in recwarn if "graphwright" in str(w.message)]
