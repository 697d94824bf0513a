"""torch's own Python utilities that read state the graph does not carry (a parameter's
`.grad`) must not become opaque graph calls: under AOT backends they would run on
stand-in tensors and give a wrong result."""
import pytest
import torch

import graphwright


def _model_with_gradients() -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    model(torch.randn(5, 4)).pow(2).sum().backward()
    return model


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_clip_grad_norm_matches_eager(backend):
    graphwright.reset()
    expected_model, compiled_model = _model_with_gradients(), _model_with_gradients()
    expected = torch.nn.utils.clip_grad_norm_(list(expected_model.parameters()), 0.5)
    clip = graphwright.compile(torch.nn.utils.clip_grad_norm_, backend=backend)
    actual = clip(list(compiled_model.parameters()), 0.5)
    torch.testing.assert_close(actual, expected)
    for want, got in zip(expected_model.parameters(), compiled_model.parameters()):
        torch.testing.assert_close(got.grad, want.grad)
