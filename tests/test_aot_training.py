"""Training steps through AOT autograd match eager: outputs, gradients, buffers, parameters."""
import pytest
import torch

import graphwright
from graphwright.backends.registry import lookup_backend

from aot_models import MODELS, check_training_steps


@pytest.mark.parametrize("model", sorted(MODELS))
def test_aot_eager_training_steps_match_eager(model):
    model_cls, make_input = MODELS[model]
    check_training_steps(model_cls, make_input, lookup_backend("aot_eager"))


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(MODELS))
def test_inductor_training_steps_match_eager(model):
    import torch._inductor.config as inductor_config

    model_cls, make_input = MODELS[model]
    # Inductor's own RNG draws other numbers than eager; its fallback draws the same ones.
    with inductor_config.patch(fallback_random=True):
        check_training_steps(model_cls, make_input, lookup_backend("inductor"), atol=1e-4, rtol=1e-3)


def test_batchnorm_running_stats_are_written_back_to_the_module():
    model_cls, make_input = MODELS["cnn_batchnorm_dropout"]
    torch.manual_seed(0)
    model = model_cls()
    compiled = lookup_backend("aot_eager")(torch.fx.symbolic_trace(model), [make_input()])
    before = model.bn.running_mean.clone()
    compiled(make_input())
    assert not torch.equal(model.bn.running_mean, before)
    assert model.bn.num_batches_tracked.item() == 1


@pytest.mark.parametrize("model", sorted(MODELS))
def test_graphwright_compile_with_aot_eager_trains_like_eager(model):
    model_cls, make_input = MODELS[model]
    check_training_steps(
        model_cls,
        make_input,
        backend=None,
        compile_module=lambda module: graphwright.compile(module, backend="aot_eager"),
    )


def _leaf_made_in_the_graph(x, w):
    hidden = x * 1
    hidden.requires_grad = True  # Wav2Vec2's feature encoder, for gradient checkpointing
    return (hidden * w).sum(), (hidden * 2).sum(), hidden


@pytest.mark.parametrize("w_requires_grad", [True, False])
def test_a_leaf_made_in_the_graph_is_a_leaf_under_aot(w_requires_grad):
    x, w = torch.randn(2, 3), torch.randn(3, requires_grad=w_requires_grad)
    compiled = graphwright.compile(_leaf_made_in_the_graph, backend="aot_eager", fullgraph=True)
    results = []
    for fn in (_leaf_made_in_the_graph, compiled):
        w.grad = None
        first, second, hidden = fn(x, w)
        (first + second).backward()
        results.append((first.detach(), second.requires_grad, hidden.is_leaf, hidden.grad, w.grad))
    eager, ours = results
    torch.testing.assert_close(ours[0], eager[0])
    assert ours[1:3] == eager[1:3] == (True, True)
    torch.testing.assert_close(ours[3], eager[3])
    torch.testing.assert_close(ours[4], eager[4])


def test_a_leaf_made_in_the_graph_and_kept_inside_trains_through_the_aten_graphs():
    def step(x, w):
        hidden = x * 1
        hidden.requires_grad = True
        return (hidden * w).sum(), (hidden * 2).sum()

    x, w = torch.randn(2, 3), torch.randn(3, requires_grad=True)
    counter = graphwright.testing.CompileCounterWithBackend("aot_eager")
    first, second = graphwright.compile(step, backend=counter, fullgraph=True)(x, w)
    (first + second).backward()
    assert second.requires_grad and "CompiledFunction" in type(first.grad_fn).__name__
    torch.testing.assert_close(w.grad, x.sum(0))


@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_an_op_without_a_derivative_runs_its_forward_and_its_backward_raises_as_eager(backend):
    # scatter with reduce= has no derivative formula: eager computes the forward and raises only
    # when the backward runs; no joint graph can be traced for it.
    def f(x, index, src):
        return torch.scatter(x, 0, index, src, reduce="add").sin()

    x, src = torch.randn(3, 5, requires_grad=True), torch.randn(1, 5, requires_grad=True)
    index = torch.tensor([[0, 1, 2, 0, 1]])
    expected = f(x, index, src)
    actual = graphwright.compile(f, fullgraph=True, backend=backend)(x, index, src)
    torch.testing.assert_close(actual, expected)
    assert actual.requires_grad
    with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
        expected.sum().backward()
    with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
        actual.sum().backward()
