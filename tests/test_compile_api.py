"""graphwright.compile as API.md describes it: call and decorator forms, modules, backends, reset."""
import pytest
import torch
from torch import nn

import graphwright
from graphwright.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def add_sin(x, y):
    return torch.sin(x) + y


def test_compile_called_directly_matches_eager():
    x, y = torch.randn(4), torch.randn(4)
    compiled = graphwright.compile(add_sin, backend="eager")
    torch.testing.assert_close(compiled(x, y), add_sin(x, y))


def test_compile_as_bare_decorator_and_with_options():
    @graphwright.compile
    def bare(x):
        return x * 2

    @graphwright.compile(fullgraph=True, backend="eager")
    def configured(x):
        return x * 3

    x = torch.randn(3)
    torch.testing.assert_close(configured(x), x * 3)
    assert graphwright.compile(backend="eager")(add_sin)(x, x).shape == x.shape
    assert callable(bare)


def test_backend_is_called_once_with_the_graph_and_the_real_first_inputs():
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward

    x, y = torch.randn(2), torch.randn(2)
    compiled = graphwright.compile(add_sin, backend=backend)
    compiled(x, y)
    compiled(x, y)
    assert len(seen) == 1
    gm, inputs = seen[0]
    assert isinstance(gm, torch.fx.GraphModule)
    assert inputs[0] is x and inputs[1] is y
    assert any(node.target is torch.sin for node in gm.graph.nodes)


def test_unknown_backend_name_is_an_error_at_compile_time():
    with pytest.raises(graphwright.GraphwrightError, match="Unknown backend"):
        graphwright.compile(add_sin, backend="no-such-backend")


def test_disable_true_returns_the_function_unchanged():
    assert graphwright.compile(add_sin, disable=True) is add_sin


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.drop = nn.Dropout(0.5)
        self.scale = 2.0

    def forward(self, x):
        return self.drop(self.lin(x)) * self.scale


def test_compiled_module_shares_parameters_and_state_dict_with_the_original():
    net = Net()
    compiled = graphwright.compile(net, backend="eager")
    assert compiled._orig_mod is net
    assert {id(p) for p in compiled.parameters()} == {id(p) for p in net.parameters()}
    assert set(compiled.state_dict()) == {f"_orig_mod.{k}" for k in net.state_dict()}
    assert compiled.scale == 2.0 and compiled.lin is net.lin


def test_compiled_module_follows_train_and_eval_and_attribute_writes():
    torch.manual_seed(0)
    net = Net()
    compiled = graphwright.compile(net, backend="eager", fullgraph=True)
    x = torch.randn(5, 4)
    compiled.eval()
    assert not net.training
    torch.testing.assert_close(compiled(x), net(x))
    compiled.scale = 3.0
    assert net.scale == 3.0
    torch.testing.assert_close(compiled(x), net(x))


def test_one_graph_serves_after_an_optimizer_step():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    counter = CompileCounter()
    compiled = graphwright.compile(net, backend=counter, fullgraph=True)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    for _ in range(3):
        loss = compiled(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch.testing.assert_close(compiled(x), net(x))
    assert counter.frame_count == 1


def test_a_method_decorated_on_its_class_binds_self():
    class Scaler:
        factor = 4

        @graphwright.compile(backend="eager", fullgraph=True)
        def apply(self, x):
            return x * self.factor

    x = torch.randn(3)
    torch.testing.assert_close(Scaler().apply(x), x * 4)


def test_a_compiled_function_called_inside_another_is_inlined():
    counter = CompileCounter()
    inner = graphwright.compile(lambda t: t.cos(), backend="eager")

    def outer(x):
        return inner(x) + 1

    compiled = graphwright.compile(outer, backend=counter, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x.cos() + 1)
    assert counter.frame_count == 1


def test_reset_forgets_compiled_entries_and_counters():
    counter = CompileCounter()
    compiled = graphwright.compile(add_sin, backend=counter)
    x = torch.randn(2)
    compiled(x, x)
    assert graphwright.counters["stats"]["unique_graphs"] == 1
    graphwright.reset()
    assert not graphwright.counters["stats"]
    compiled(x, x)
    assert counter.frame_count == 2


def test_explain_reports_graphs_ops_and_break_reasons():
    def captured(x):
        return torch.relu(x) * 2

    def breaks(x):
        y = x + 1
        graphwright.graph_break()
        return y

    out = graphwright.explain(captured)(torch.randn(3))
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    assert torch.relu in out.ops_per_graph[0]
    broken = graphwright.explain(breaks)(torch.randn(3))
    assert broken.graph_break_count == 1
    reason = broken.break_reasons[0]
    assert "graph_break" in reason.reason and reason.user_stack[-1].name == "breaks"
    assert "Graph Break Count: 1" in str(broken)


def test_explain_accepts_modules():
    out = graphwright.explain(nn.Linear(3, 2))(torch.randn(4, 3))
    assert out.graph_count == 1 and out.graph_break_count == 0


@pytest.mark.slow
def test_the_default_backend_is_inductor_and_matches_eager_with_gradients():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x = torch.randn(4, 8, requires_grad=True)
    out = graphwright.compile(net)(x)
    torch.testing.assert_close(out, net(x))
    out.sum().backward()
    compiled_grad = x.grad.clone()
    x.grad = None
    net(x).sum().backward()
    torch.testing.assert_close(compiled_grad, x.grad)


def test_compiling_a_disabled_function_leaves_it_eager():
    @graphwright.disable
    def helper(x):
        return x + 1

    assert graphwright.compile(helper, backend="eager") is helper


def test_parameters_named_like_builtins_and_every_kind_of_parameter():
    def fn(type, /, len=2, *args, tuple=None, **kwargs):
        return type * len + sum(args) + (0 if tuple is None else tuple) + kwargs.get("extra", 0)

    compiled = graphwright.compile(fn, backend="eager", fullgraph=True)
    x = torch.ones(2)
    for call_args, call_kwargs in [((x,), {}), ((x, 3, 1, 2), {"tuple": x, "extra": 5}), ((x,), {})]:
        torch.testing.assert_close(compiled(*call_args, **call_kwargs), fn(*call_args, **call_kwargs))


def test_hooks_of_the_compiled_module_itself_are_captured_in_its_graph():
    torch.manual_seed(0)
    net = nn.Linear(3, 3)
    seen = []
    net.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
    net.register_forward_hook(lambda module, args, output: seen.append(output.detach()) or output + 1)
    counter = CompileCounter()
    compiled = graphwright.compile(net, backend=counter, fullgraph=True)
    x = torch.randn(2, 3)
    out = compiled(x)
    torch.testing.assert_close(out, net.weight.new_tensor(0) + (x * 2) @ net.weight.T + net.bias + 1)
    assert len(seen) == 1 and counter.frame_count == 1


def test_a_functools_partial_can_be_compiled():
    import functools

    def scale(x, factor, shift=0.0):
        return x * factor + shift

    compiled = graphwright.compile(functools.partial(scale, factor=torch.full((2,), 3.0), shift=1.0),
                                   backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 4.0))


@pytest.mark.slow
def test_pytorchs_inductor_as_a_users_backend_serves_every_size_of_a_dynamic_graph():
    # PyTorch's own compilers read the symbolic sizes from the TracingContext that torch.compile
    # calls backends under: without it the recompiled, dynamic graph was compiled for the sizes
    # of its example inputs, and the next size failed Inductor's input check
    import torch._dynamo.testing

    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")

    def reduce_rows(x):
        return (x.sin() * 2).sum(0)

    compiled = graphwright.compile(reduce_rows, backend=counter)
    for size in (3, 4, 5, 6):
        x = torch.randn(size, size)
        torch.testing.assert_close(compiled(x), reduce_rows(x))
    assert counter.frame_count == 2  # the first size, then one dynamic graph for the rest
