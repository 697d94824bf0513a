"""The runtime wrapper of AOT autograd: grad modes, which gradients, outputs, backward reuse."""
import pytest
import torch

import graphwright
from graphwright.backends.registry import lookup_backend

from aot_models import graph_of

aot_eager = lookup_backend("aot_eager")


def mlp(x, w1, w2):
    return torch.tanh(x @ w1) @ w2


def mlp_inputs():
    torch.manual_seed(0)
    return torch.randn(4, 3), torch.randn(3, 5, requires_grad=True), torch.randn(5, 2, requires_grad=True)


def test_only_inputs_that_require_grad_get_gradients():
    x, w1, w2 = mlp_inputs()
    compiled = aot_eager(graph_of(mlp), [x, w1, w2])
    compiled(x, w1, w2).sum().backward()
    expected_w1, expected_w2 = torch.autograd.grad(mlp(x, w1, w2).sum(), [w1, w2])
    assert x.grad is None
    torch.testing.assert_close(w1.grad, expected_w1)
    torch.testing.assert_close(w2.grad, expected_w2)


def test_no_grad_call_runs_the_inference_graph_and_saves_nothing():
    x, w1, w2 = mlp_inputs()
    compiled = aot_eager(graph_of(mlp), [x, w1, w2])
    with torch.no_grad():
        out = compiled(x, w1, w2)
    assert not out.requires_grad
    torch.testing.assert_close(out, mlp(x, w1, w2).detach())
    (signature,) = compiled.signatures.values()
    assert signature.inference_graph is not None and signature.partition is None


def test_grad_mode_and_requires_grad_changes_pick_their_own_graphs():
    x, w1, w2 = mlp_inputs()
    compiled = aot_eager(graph_of(mlp), [x, w1, w2])
    compiled(x, w1, w2)
    with torch.no_grad():
        compiled(x, w1, w2)
    x.requires_grad_(True)
    out = compiled(x, w1, w2)
    out.sum().backward()
    assert len(compiled.signatures) == 3
    torch.testing.assert_close(x.grad, torch.autograd.grad(mlp(x, w1, w2).sum(), x)[0])


def test_outputs_that_do_not_require_grad_are_not_differentiable():
    def fn(x):
        y = x.exp()
        return y, y.argmax(), y.detach() * 2

    x = torch.randn(5, requires_grad=True)
    y, index, doubled = aot_eager(graph_of(fn), [x])(x)
    assert y.requires_grad and not index.requires_grad and not doubled.requires_grad
    assert index.item() == x.argmax().item()
    y.sum().backward()
    torch.testing.assert_close(x.grad, x.detach().exp())


def test_non_tensor_outputs_are_returned_as_in_eager():
    def fn(x):
        return {"out": x + 1, "n": 3, "none": None}

    x = torch.randn(2)
    result = aot_eager(graph_of(fn), [x])(x)
    assert result["n"] == 3 and result["none"] is None
    torch.testing.assert_close(result["out"], x + 1)


def test_an_unused_output_gets_a_zero_gradient():
    def fn(x):
        return x.sin(), x.cos()

    x = torch.randn(3, requires_grad=True)
    sin, _ = aot_eager(graph_of(fn), [x])(x)
    sin.sum().backward()
    torch.testing.assert_close(x.grad, x.detach().cos())


def test_retain_graph_allows_a_second_backward():
    x, w1, w2 = mlp_inputs()
    loss = aot_eager(graph_of(mlp), [x, w1, w2])(x, w1, w2).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    expected = torch.autograd.grad(mlp(x, w1, w2).sum(), w1)[0] * 2
    torch.testing.assert_close(w1.grad, expected)


def test_second_backward_without_retain_graph_fails_as_in_eager():
    x, w1, w2 = mlp_inputs()
    loss = aot_eager(graph_of(mlp), [x, w1, w2])(x, w1, w2).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_double_backward_is_a_clear_error():
    x, w1, w2 = mlp_inputs()
    out = aot_eager(graph_of(mlp), [x, w1, w2])(x, w1, w2)
    (grad_w1,) = torch.autograd.grad(out.sum(), w1, create_graph=True)
    with pytest.raises(graphwright.BackendError, match="Double backward") as info:
        grad_w1.sum().backward()
    assert "test_aot_runtime.py" in str(info.value)
    assert "Hint:" in str(info.value)


def test_create_graph_gradients_have_eager_values():
    x, w1, w2 = mlp_inputs()
    out = aot_eager(graph_of(mlp), [x, w1, w2])(x, w1, w2)
    (grad_w1,) = torch.autograd.grad(out.sum(), w1, create_graph=True)
    torch.testing.assert_close(grad_w1, torch.autograd.grad(mlp(x, w1, w2).sum(), w1)[0])


def test_compile_counter_with_aot_eager_backend_counts_and_runs():
    x, w1, w2 = mlp_inputs()
    counter = graphwright.testing.CompileCounterWithBackend("aot_eager")
    compiled = counter(graph_of(mlp), [x, w1, w2])
    torch.testing.assert_close(compiled(x, w1, w2), mlp(x, w1, w2))
    assert counter.frame_count == 1 and counter.op_count == 3


def test_symbolic_example_inputs_give_one_graph_for_every_size():
    def fn(x, w):
        return torch.relu(x @ w).sum(0) * x.shape[0]

    symbolic = graphwright.make_fx(fn, tracing_mode="symbolic")(torch.randn(5, 4), torch.randn(4, 3))
    example_inputs = [n.meta["val"] for n in symbolic.graph.nodes if n.op == "placeholder"]
    compiled = aot_eager(graph_of(fn), example_inputs)
    w = torch.randn(4, 3, requires_grad=True)
    for rows in (5, 9):
        x = torch.randn(rows, 4)
        out = compiled(x, w)
        torch.testing.assert_close(out, fn(x, w))
        (grad,) = torch.autograd.grad(out.sum(), w)
        torch.testing.assert_close(grad, torch.autograd.grad(fn(x, w).sum(), w)[0])
    assert len(compiled.signatures) == 1


def test_inference_mode_call_updates_batchnorm_stats_as_eager():
    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))

    eager_model, compiled_model = make(), make()
    x = torch.randn(3, 4)
    compiled = aot_eager(torch.fx.symbolic_trace(compiled_model), [x])
    with torch.inference_mode():
        out = compiled(x)
        expected = eager_model(x)
    assert out.is_inference()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(compiled_model[1].running_var, eager_model[1].running_var)


@pytest.mark.slow
def test_inductor_inference_graph_returns_the_output_structure():
    def fn(x):
        return [x * 2 + k for k in (3, 1)], {"sum": x.sum()}

    x = torch.randn(4)
    with torch.no_grad():
        actual = lookup_backend("inductor")(graph_of(fn), [x])(x)
    expected = fn(x)
    torch.testing.assert_close(actual, expected)


def test_graph_computing_under_no_grad_returns_outputs_without_grad_when_called_with_grad():
    # What the strict tracer records for `with torch.no_grad(): return x @ w`.
    graph = torch.fx.Graph()
    x, w = graph.placeholder("x"), graph.placeholder("w")
    graph.call_function(torch._C._set_grad_enabled, (False,))
    product = graph.call_function(torch.matmul, (x, w))
    graph.call_function(torch._C._set_grad_enabled, (True,))
    graph.output(product)
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    x, w = torch.randn(2, 3), torch.randn(3, 4, requires_grad=True)
    out = aot_eager(gm, [x, w])(x, w)
    assert not out.requires_grad
    torch.testing.assert_close(out, (x @ w).detach())


@pytest.mark.slow
def test_inductor_graph_without_tensor_inputs_creates_real_tensors():
    graph = torch.fx.Graph()
    ones = graph.call_function(torch.ones, (2,))
    graph.output((graph.call_function(torch.add, (ones, 6)),))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    (out,) = lookup_backend("inductor")(gm, [])()
    torch.testing.assert_close(out, torch.full((2,), 7.0))


def test_dynamic_graph_from_the_strict_tracer_is_compiled_once_for_every_size():
    def fn(x, w):
        return (torch.cat([x, x[: x.shape[0] // 2]]) @ w).relu().mean(0) + x.shape[0]

    counter = graphwright.testing.CompileCounterWithBackend("aot_eager")
    compiled = graphwright.compile(fn, backend=counter, dynamic=True)
    w = torch.randn(3, 5, requires_grad=True)
    for rows in (4, 6, 9):
        x = torch.rand(rows, 3)
        out = compiled(x, w)
        torch.testing.assert_close(out, fn(x, w))
        (grad,) = torch.autograd.grad(out.sum(), w)
        torch.testing.assert_close(grad, torch.autograd.grad(fn(x, w).sum(), w)[0])
    assert counter.frame_count == 1


def _scaled_by_detached(x, old):
    return x * old.detach().sum() + x


def test_an_input_that_gets_no_gradient_does_not_reach_its_autograd_graph():
    # `old` comes from an autograd graph whose backward already ran (a tensor an earlier call
    # stored): eager never goes back into it, nor may the compiled backward.
    x = torch.randn(3, requires_grad=True)
    source = torch.randn(3, requires_grad=True)
    old = source * 2
    old.sum().backward()
    compiled = aot_eager(graph_of(_scaled_by_detached), [x, old])
    compiled(x, old).sum().backward()
    expected = torch.autograd.grad(_scaled_by_detached(x, old).sum(), [x])[0]
    torch.testing.assert_close(x.grad, expected)


def _two_outputs(x, y):
    return x * 2, y.exp() + x.sum()


def test_an_input_only_an_unused_output_depends_on_gets_no_gradient():
    # Backpropagating through the second output only: `y`'s gradient comes from it, `x`'s
    # too (through the sum); a third input reached only from the first output gets None.
    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    compiled = aot_eager(graph_of(_two_outputs), [x, y])
    compiled(x, y)[1].sum().backward()
    expected_x, expected_y = torch.autograd.grad(_two_outputs(x, y)[1].sum(), [x, y])
    torch.testing.assert_close(x.grad, expected_x)
    torch.testing.assert_close(y.grad, expected_y)


def _doubled_and_exp(x, y):
    return x * 2, y.exp()


def test_an_input_reached_only_through_an_unused_output_has_no_gradient_as_in_eager():
    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    compiled = aot_eager(graph_of(_doubled_and_exp), [x, y])
    compiled(x, y)[1].sum().backward()
    assert x.grad is None  # eager: no gradient reaches x (not a zero one)
    torch.testing.assert_close(y.grad, y.exp().detach())


def _flat_and_no_grad_view(x):
    flat = x.flatten()
    with torch.no_grad():
        view = x.unsqueeze(0)
    return view, flat


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_view_made_under_no_grad_is_a_leaf_that_requires_grad_as_in_eager(dynamic):
    compiled = graphwright.compile(_flat_and_no_grad_view, backend="aot_eager", dynamic=dynamic)
    x = torch.randn(2, 3, requires_grad=True)
    view, flat = compiled(x)
    expected, _ = _flat_and_no_grad_view(x)
    assert (view.requires_grad, view.is_leaf) == (expected.requires_grad, expected.is_leaf) == (True, True)
    view.sin().sum().backward()
    assert x.grad is None  # eager: no gradient flows through a no-grad view to its base
    assert flat.grad_fn is not None


def test_a_size_that_depends_on_data_fixed_by_a_later_reshape_is_traced_with_unbacked_symbols():
    # torchmetrics' confusion counts: `torch.bincount(x, minlength=25).reshape(5, 5)` under
    # fullgraph=True; the reshape fixes the data-dependent size to 25, and AOT's own trace must
    # still make the bincount's size a symbol (it raised DynamicOutputShapeException)
    def confusion(logits, target):
        bins = torch.bincount(target * 5 + logits.argmax(-1), minlength=25)
        return bins.reshape(5, 5).float() * logits.sum()

    logits, target = torch.randn(6, 5, requires_grad=True), torch.randint(0, 5, (6,))
    compiled = graphwright.compile(confusion, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(logits, target), confusion(logits, target))


def test_operators_on_small_tensor_literals_run_on_their_values_as_the_strict_trace_did():
    # torchdiffeq's adaptive solvers check `torch.cat([step_t, jump_t]).unique(return_counts=True)`
    # on two empty literals: the fake mode computes such constants for real (the strict tracer's
    # did, so the graph holds `unique`); AOT's trace raised DataDependentError
    def with_literals(x):
        empty = torch.tensor([], dtype=x.dtype)
        counts = torch.cat([empty, empty]).unique(return_counts=True)[1]
        return x * 2, counts, torch.tensor(3.0) * x

    x = torch.randn(3, requires_grad=True)
    for fullgraph in (True, False):
        graphwright.reset()
        compiled = graphwright.compile(with_literals, fullgraph=fullgraph, backend="aot_eager")
        for got, expected in zip(compiled(x), with_literals(x)):
            torch.testing.assert_close(got, expected)


class _LossFromAZeroBuffer(torch.nn.Module):
    """vector-quantize-pytorch's auxiliary loss: starts from a zero buffer made to require grad."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3))
        self.register_buffer("zero", torch.tensor(0.0))

    def forward(self, x):
        loss = self.zero
        loss.requires_grad_()
        return loss + (x * self.weight).sum()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_requires_grad_set_on_an_input_changes_the_users_tensor_and_gets_its_gradient(backend):
    torch.manual_seed(0)
    eager, compiled_module = _LossFromAZeroBuffer(), _LossFromAZeroBuffer()
    compiled_module.load_state_dict(eager.state_dict())
    compiled = graphwright.compile(compiled_module, backend=backend)
    for _ in range(2):
        x = torch.randn(3)
        eager(x).backward()
        compiled(x).backward()
        assert compiled_module.zero.requires_grad and eager.zero.requires_grad
        torch.testing.assert_close(compiled_module.zero.grad, eager.zero.grad)
        torch.testing.assert_close(compiled_module.weight.grad, eager.weight.grad)
