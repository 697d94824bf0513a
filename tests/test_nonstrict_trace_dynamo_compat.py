"""Programs written for torch.compile run unchanged under graphwright.compile: functions marked
with torch._dynamo's decorators are honoured, and is_compiling() reads True while tracing."""
import pytest
import torch
import torch._dynamo  # the user's program imports it: its markings are honoured

import graphwright
from graphwright.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


@torch._dynamo.nonstrict_trace
def get_magic_num():
    # This explicit graph break call emulates any kind of Dynamo graph break.
    torch._dynamo.graph_break()
    return torch.tensor([42])


def get_magic_num_unmarked():
    torch._dynamo.graph_break()
    return torch.tensor([42])


@torch._dynamo.nonstrict_trace
def traced_forward(model, x):
    torch._dynamo.graph_break()
    return model(x) + x


def test_torch_dynamo_graph_break_is_a_graph_break():
    @graphwright.compile(fullgraph=True, backend="eager")
    def func(x):
        return x + get_magic_num_unmarked()

    with pytest.raises(graphwright.Unsupported, match="graph_break"):
        func(torch.rand(10))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_seed_decorator_form_with_torch_dynamo_nonstrict_trace(backend):
    @graphwright.compile(fullgraph=True, backend=backend)
    def func(x):
        n = get_magic_num()
        return x + n

    x = torch.rand(10)
    torch.testing.assert_close(func(x), x + 42)


def test_seed_wrapper_form_with_torch_dynamo_nonstrict_trace():
    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def func(x):
        n = torch._dynamo.nonstrict_trace(get_magic_num_unmarked)()
        return x + n

    x = torch.rand(10)
    torch.testing.assert_close(func(x), x + 42)
    assert counter.frame_count == 1


def test_seed_training_example_with_torch_dynamo_nonstrict_trace():
    linear = torch.nn.Linear(10, 10)

    @graphwright.compile(fullgraph=True, backend="aot_eager")
    def func(x):
        return traced_forward(linear, x)

    x = torch.randn(10, 10)
    func(x).sum().backward()
    grad = linear.weight.grad.clone()
    linear.weight.grad = None
    traced_forward(linear, x).sum().backward()
    torch.testing.assert_close(grad, linear.weight.grad)


def test_torch_dynamo_allow_in_graph_is_one_node():
    @torch._dynamo.allow_in_graph
    def triple(x):
        torch._dynamo.graph_break()
        return x * 3

    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def func(x):
        return triple(x) + 1

    x = torch.randn(3)
    torch.testing.assert_close(func(x), x * 3 + 1)
    assert any(node.target is triple for node in counter.graphs[0].graph.nodes)


@pytest.mark.parametrize("disable", [torch._dynamo.disable, torch.compiler.disable])
def test_torch_disable_is_a_graph_break(disable):
    @disable
    def helper(x):
        return x + 1

    @graphwright.compile(fullgraph=True, backend="eager")
    def func(x):
        return helper(x)

    with pytest.raises(graphwright.Unsupported):
        func(torch.randn(2))


@pytest.mark.parametrize("mark", [torch._dynamo.assume_constant_result, torch.compiler.assume_constant_result])
def test_assume_constant_result_is_evaluated_at_trace_time(mark):
    calls = []

    @mark
    def magic():
        calls.append(1)
        return 7

    @graphwright.compile(fullgraph=True, backend="eager")
    def func(x):
        return x * magic()

    x = torch.randn(3)
    torch.testing.assert_close(func(x), x * 7)
    torch.testing.assert_close(func(x), x * 7)
    assert len(calls) == 1


@pytest.mark.parametrize("is_compiling", [torch.compiler.is_compiling, torch._dynamo.is_compiling])
def test_is_compiling_reads_true_while_tracing(is_compiling):
    @graphwright.compile(fullgraph=True, backend="eager")
    def func(x):
        return x + 1 if is_compiling() else x - 1

    x = torch.randn(3)
    torch.testing.assert_close(func(x), x + 1)
    assert not is_compiling()


def test_is_compiling_reads_true_inside_a_nonstrict_body_traced_by_aot():
    @torch._dynamo.nonstrict_trace
    def body(x):
        return x + 1 if torch.compiler.is_compiling() else x - 1

    @graphwright.compile(fullgraph=True, backend="aot_eager")
    def func(x):
        return body(x)

    x = torch.randn(3)
    torch.testing.assert_close(func(x), x + 1)
    assert not torch.compiler.is_compiling()


def test_torch_dynamo_disallow_in_graph_is_a_graph_break():
    torch._dynamo.disallow_in_graph(torch.special.expit)
    try:
        @graphwright.compile(fullgraph=True, backend="eager")
        def func(x):
            return torch.special.expit(x)

        with pytest.raises(graphwright.Unsupported, match="disallow_in_graph"):
            func(torch.randn(2))
    finally:
        torch._dynamo.trace_rules._disallowed_callable_ids.remove(id(torch.special.expit))


def test_torch_compiler_allow_in_graph_is_honoured():
    def quadruple(x):
        torch._dynamo.graph_break()
        return x * 4

    torch.compiler.allow_in_graph(quadruple)

    @graphwright.compile(fullgraph=True, backend="eager")
    def func(x):
        return quadruple(x)

    x = torch.randn(2)
    torch.testing.assert_close(func(x), x * 4)


class _Activation(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


def test_module_built_in_the_region_after_torch_compile_patched_module_init():
    # torch.compile replaces nn.Module.__init__ with one that files each new module for
    # TorchDynamo's own guards (by id()); graphwright builds modules in the region all the same
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
    assert torch.nn.Module.__init__.__module__ == "torch._dynamo.mutation_guard"

    def f(x):
        return _Activation(2.0)(x)

    x = torch.randn(4)
    assert torch.equal(graphwright.compile(f, backend="eager", fullgraph=True)(x), f(x))
