"""Lazy modules compiled with `graphwright.compile(module)`: materialized on the first call as
eager does (the parameter-inferring pre-hook runs eagerly), then compiled, with the values,
parameters, gradients and graph counts of eager and torch.compile; a lazy module met inside a
compiled region breaks there and is initialized by its call in Python."""
import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from torch import nn

import graphwright
from graphwright.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    torch._dynamo.reset()
    yield
    graphwright.reset()
    torch._dynamo.reset()


class UserLazy(nn.modules.lazy.LazyModuleMixin, nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.UninitializedParameter()

    def initialize_parameters(self, x):
        if self.has_uninitialized_params():
            with torch.no_grad():
                self.weight.materialize((x.shape[-1],))
                nn.init.uniform_(self.weight)

    def forward(self, x):
        return x * self.weight + 1


class LazyInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.lazy = nn.LazyLinear(3)

    def forward(self, x):
        return self.lazy(self.first(x).relu()) * 2


MAKERS = {
    "lazy_linear": (lambda: nn.LazyLinear(3), (2, 5)),
    "lazy_conv2d": (lambda: nn.LazyConv2d(2, 3), (1, 3, 6, 6)),
    "user_lazy_module": (UserLazy, (2, 4)),
    "sequential_of_lazy_modules": (lambda: nn.Sequential(nn.LazyLinear(5), nn.ReLU(), nn.LazyLinear(2)), (2, 4)),
}


def _calls(make, shape, compile_with=None, calls=3):
    """(module, outputs, input gradients, counter) of `calls` calls with backward."""
    torch.manual_seed(0)
    module = make()
    counter = None
    target = module
    if compile_with == "graphwright":
        counter = CompileCounter()
        target = graphwright.compile(module, backend=counter)
    elif compile_with == "torch":
        counter = torch._dynamo.testing.CompileCounter()
        target = torch.compile(module, backend=counter)
    torch.manual_seed(1)
    inputs = [torch.randn(shape, requires_grad=True) for _ in range(calls)]
    outputs = []
    for x in inputs:
        out = target(x)
        out.sum().backward()
        outputs.append(out.detach())
    return module, outputs, [x.grad for x in inputs], counter


@pytest.mark.parametrize("name", list(MAKERS))
def test_lazy_module_is_materialized_as_in_eager_then_compiled(name):
    make, shape = MAKERS[name]
    eager, eager_outputs, eager_grads, _ = _calls(make, shape)
    compiled, outputs, grads, counter = _calls(make, shape, "graphwright")
    for e, c in [*zip(eager_outputs, outputs), *zip(eager_grads, grads)]:
        torch.testing.assert_close(c, e)
    assert type(compiled) is type(eager)  # LazyLinear became Linear
    assert [n for n, _ in compiled.named_parameters()] == [n for n, _ in eager.named_parameters()]
    for (_, e), (_, c) in zip(eager.named_parameters(), compiled.named_parameters()):
        torch.testing.assert_close(c, e)
        torch.testing.assert_close(c.grad, e.grad)
    assert not any(isinstance(p, nn.UninitializedParameter) for p in compiled.parameters())


@pytest.mark.parametrize("name", ["lazy_linear", "lazy_conv2d", "user_lazy_module"])
def test_a_lazy_module_compiles_once_as_under_torch_compile(name):
    make, shape = MAKERS[name]
    counter = _calls(make, shape, "graphwright")[3]
    assert counter.frame_count == _calls(make, shape, "torch")[3].frame_count == 1


def test_lazy_submodules_run_their_first_call_eagerly_then_compile_once():
    make, shape = MAKERS["sequential_of_lazy_modules"]
    counter = _calls(make, shape, "graphwright", calls=1)[3]
    assert counter.frame_count == 0
    assert _calls(make, shape, "graphwright")[3].frame_count == 1


def test_a_lazy_module_inside_a_compiled_function_breaks_there_then_recompiles():
    eager, eager_outputs, _, _ = _calls(LazyInside, (2, 4))
    torch.manual_seed(0)
    module = LazyInside()
    counter = CompileCounter()
    step = graphwright.compile(lambda x: module(x) + 1, backend=counter)
    torch.manual_seed(1)
    inputs = [torch.randn(2, 4, requires_grad=True) for _ in range(3)]
    frames = []
    for x, expected in zip(inputs, eager_outputs):
        torch.testing.assert_close(step(x), expected + 1)
        frames.append(counter.frame_count)
    assert type(module.lazy) is nn.Linear
    torch.testing.assert_close(module.lazy.weight, eager.lazy.weight)
    # the first call: graphs around the lazy call; the second recompiles for the initialized
    # module; the third reuses it
    assert frames[0] >= 2 and frames[1] == frames[2] == frames[0] + 1
    explained = graphwright.explain(lambda x: LazyInside()(x))(torch.randn(2, 4))
    assert any("GB025" in str(reason) for reason in explained.break_reasons)


def test_a_lazy_module_under_fullgraph_initializes_before_tracing():
    x = torch.randn(2, 5)
    eager, module = nn.LazyLinear(3), nn.LazyLinear(3)
    compiled = graphwright.compile(module, backend="eager", fullgraph=True)
    torch.manual_seed(0)
    expected = eager(x)
    torch.manual_seed(0)
    torch.testing.assert_close(compiled(x), expected)
    torch.testing.assert_close(compiled(x), eager(x))
