"""nonstrict_trace under ahead-of-time autograd: the body is traced into the aten graphs and
gradients match eager on every parameter (the seed's MyModule/traced_forward example)."""
import copy

import pytest
import torch

import graphwright
from graphwright.backends import lookup_backend


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


@graphwright.nonstrict_trace
def traced_forward(model, x):
    # a graph break is fine inside a nonstrict_trace body
    graphwright.graph_break()
    return model(x) + x


class MyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(10, 10)

    def forward(self, x):
        return traced_forward(self.inner, x)


class Recording:
    """A backend that keeps what the real backend returned, to read its aten graphs."""

    def __init__(self, name):
        self.backend = lookup_backend(name)
        self.compiled = []

    def __call__(self, gm, example_inputs):
        compiled = self.backend(gm, example_inputs)
        self.compiled.append(compiled)
        return compiled

    def aten_code(self):
        signatures = [s for c in self.compiled for s in c.signatures.values()]
        graphs = [s.partition.forward if s.partition else s.inference_graph for s in signatures]
        graphs += [s.partition.backward for s in signatures if s.partition]
        return "\n".join(g.code for g in graphs)


def _check_training_matches_eager(backend):
    torch.manual_seed(0)
    model = MyModule()
    reference = copy.deepcopy(model)
    compiled = graphwright.compile(model, backend=backend, fullgraph=True)
    x = torch.randn(10, 10)
    out = compiled(x)
    out.sum().backward()
    expected = reference(x)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    for (name, param), ref in zip(model.named_parameters(), reference.parameters()):
        assert param.grad is not None, name
        torch.testing.assert_close(param.grad, ref.grad)


def test_seed_training_example_under_aot_eager_gives_eager_gradients():
    _check_training_matches_eager("aot_eager")


def test_seed_training_example_under_eager_gives_eager_gradients():
    _check_training_matches_eager("eager")


@pytest.mark.slow
def test_seed_training_example_under_inductor_gives_eager_gradients():
    _check_training_matches_eager("inductor")


def test_aot_traces_into_the_body_the_eager_graph_shows_one_call():
    recording = Recording("aot_eager")
    compiled = graphwright.compile(MyModule(), backend=recording, fullgraph=True)
    compiled(torch.randn(10, 10)).sum().backward()
    code = recording.aten_code()
    assert "nonstrict_" not in code
    assert "aten.addmm" in code or "aten.mm" in code  # the Linear inside the body
    assert "aten.add" in code


def test_training_several_steps_with_an_optimizer_matches_eager():
    torch.manual_seed(0)
    model = MyModule()
    reference = copy.deepcopy(model)
    compiled = graphwright.compile(model, backend="aot_eager", fullgraph=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(4, 10)
        for m, o in ((compiled, opt), (reference, ref_opt)):
            o.zero_grad()
            m(x).pow(2).mean().backward()
            o.step()
    for param, ref in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(param, ref)


class ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return grad * 5  # deliberately not the true derivative: it must be used as written


@graphwright.nonstrict_trace
def uses_autograd_function(x):
    graphwright.graph_break()
    return ScaleGrad.apply(x).sin()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_autograd_function_inside_the_body_matches_eager_forward_and_backward(backend):
    @graphwright.compile(fullgraph=True, backend=backend)
    def fn(x):
        return uses_autograd_function(x) * 2

    x = torch.randn(5, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    out = fn(x)
    expected = uses_autograd_function(x_ref) * 2
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)


def test_buffers_of_a_module_input_are_updated_as_in_eager():
    @graphwright.nonstrict_trace
    def normalise(bn, x):
        graphwright.graph_break()
        return bn(x)

    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(3)
    reference = copy.deepcopy(bn)

    @graphwright.compile(fullgraph=True, backend="aot_eager")
    def fn(x):
        return normalise(bn, x)

    x = torch.randn(8, 3)
    torch.testing.assert_close(fn(x), reference(x))
    torch.testing.assert_close(bn.running_mean, reference.running_mean)
    torch.testing.assert_close(bn.running_var, reference.running_var)


def test_mutating_a_tensor_argument_warns_once_at_the_user_line():
    @graphwright.nonstrict_trace
    def bump(t):
        t.add_(1)
        return t * 2

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return bump(x)

    x = torch.zeros(3)
    with pytest.warns(UserWarning, match="mutates one of its inputs") as caught:
        out = fn(x)
    assert any(w.filename == __file__ for w in caught)
    torch.testing.assert_close(out, torch.full((3,), 2.0))
    torch.testing.assert_close(x, torch.ones(3))
