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
