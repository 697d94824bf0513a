"""Module hooks at the top of the compiled region and inside it: forward pre-hooks and
forward hooks (with keyword arguments, replacing inputs and outputs) inlined into the graph;
full backward hooks and backward pre-hooks (which need autograd's wrapping of the call)
breaking at the call, with the hooks and the forward compiled on their own as torch.compile
does; hooks registered for every module; hooks added or removed after a compile."""
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


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        return self.lin(x).relu() * scale


def _net(hooks):
    """A fresh Net (same seed each time) with `hooks(net, log)` registered; returns (net, log)."""
    torch.manual_seed(0)
    net, log = Net(), []
    hooks(net, log)
    return net, log


def _all_kinds(net, log):
    net.register_forward_pre_hook(lambda module, args: log.append("pre") or (args[0] * 2,))
    net.register_forward_hook(lambda module, args, output: log.append("forward") or output + 1)
    net.register_full_backward_pre_hook(lambda module, grad_output: log.append("backward pre") or
                                        (grad_output[0] * 3,))
    net.register_full_backward_hook(lambda module, grad_input, grad_output: log.append("backward") or
                                    (grad_input[0] * 0.5,))


def _with_kwargs(net, log):
    net.register_forward_pre_hook(lambda module, args, kwargs: ((args[0] + 1,), {**kwargs, "scale": 3.0}),
                                  with_kwargs=True)
    net.register_forward_hook(lambda module, args, kwargs, output: output * kwargs["scale"], with_kwargs=True)


def _run(module, calls=2):
    """Outputs, input gradients and parameter gradients of `calls` calls with backward."""
    torch.manual_seed(1)
    x = torch.randn(3, 4, requires_grad=True)
    outputs = []
    for _ in range(calls):
        out = module(x)
        out.sum().backward()
        outputs.append(out.detach())
    return outputs, x.grad, [p.grad for p in module.parameters()]


def _assert_same(eager, compiled):
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e)


def _torch_frames(hooks, calls=2):
    counter = torch._dynamo.testing.CompileCounter()
    net, _ = _net(hooks)
    _run(torch.compile(net, backend=counter), calls)
    return counter.frame_count


def test_forward_and_full_backward_hooks_compile_each_part_as_torch_compile_does():
    net, eager_log = _net(_all_kinds)
    eager = [_run(net, calls=1), _run(net, calls=1)]
    counter = CompileCounter()
    net, log = _net(_all_kinds)
    compiled_net = graphwright.compile(net, backend=counter)
    compiled = [_run(compiled_net, calls=1)]
    assert counter.frame_count == _torch_frames(_all_kinds, calls=1) == 3
    compiled.append(_run(compiled_net, calls=1))
    # the second call recompiles the hooks that append to `log` (its length is guarded)
    assert counter.frame_count == _torch_frames(_all_kinds, calls=2) == 5
    for e, c in zip(eager, compiled):
        _assert_same(e[0], c[0])
        torch.testing.assert_close(c[1], e[1])
        _assert_same(e[2], c[2])
    assert log == eager_log == ["pre", "forward", "backward pre", "backward"] * 2


@pytest.mark.parametrize("kind", ["full_backward_hook", "full_backward_pre_hook"])
def test_a_backward_hook_alone_leaves_the_forward_one_graph(kind):
    def hooks(net, log):
        if kind == "full_backward_hook":
            net.register_full_backward_hook(lambda module, grad_input, grad_output: (grad_input[0] * 2,))
        else:
            net.register_full_backward_pre_hook(lambda module, grad_output: (grad_output[0] * 2,))

    eager = _run(_net(hooks)[0])
    counter = CompileCounter()
    compiled = _run(graphwright.compile(_net(hooks)[0], backend=counter))
    torch.testing.assert_close(compiled[1], eager[1])
    _assert_same(eager[2], compiled[2])
    assert counter.frame_count == _torch_frames(hooks) == 1


def test_hooks_with_kwargs_replace_inputs_and_output_in_one_graph():
    eager = _run(_net(_with_kwargs)[0])
    counter = CompileCounter()
    compiled = _run(graphwright.compile(_net(_with_kwargs)[0], backend=counter, fullgraph=True))
    _assert_same(eager[0], compiled[0])
    torch.testing.assert_close(compiled[1], eager[1])
    assert counter.frame_count == 1


def test_backward_hook_on_a_submodule_splits_the_caller_and_keeps_gradients():
    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Net()
            self.head = nn.Linear(4, 2)
            self.inner.register_full_backward_hook(lambda module, grad_input, grad_output: (grad_input[0] * 2,))

        def forward(self, x):
            return self.head(self.inner(x * 2) + 1)

    torch.manual_seed(0)
    eager = _run(Outer())
    counter = CompileCounter()
    torch.manual_seed(0)
    compiled = _run(graphwright.compile(Outer(), backend=counter))
    _assert_same(eager[0], compiled[0])
    torch.testing.assert_close(compiled[1], eager[1])
    _assert_same(eager[2], compiled[2])
    torch_counter = torch._dynamo.testing.CompileCounter()
    torch.manual_seed(0)
    _run(torch.compile(Outer(), backend=torch_counter))
    assert counter.frame_count == torch_counter.frame_count == 3


def test_a_full_backward_hook_under_fullgraph_names_the_module():
    net, _ = _net(_all_kinds)
    with pytest.raises(graphwright.Unsupported, match="GB018"):
        graphwright.compile(nn.Sequential(net), backend="eager", fullgraph=True)(torch.randn(3, 4))


def test_a_backward_hook_added_after_the_first_call_is_seen():
    torch.manual_seed(0)
    outer = nn.Sequential(Net(), nn.Linear(4, 2))
    compiled = graphwright.compile(outer, backend=CompileCounter())
    x = torch.randn(3, 4, requires_grad=True)
    compiled(x).sum().backward()
    calls = []
    handle = outer[0].register_full_backward_hook(lambda module, grad_input, grad_output: calls.append(1))
    grad = torch.autograd.grad(compiled(x).sum(), x)[0]
    assert calls == [1]
    handle.remove()
    torch.testing.assert_close(torch.autograd.grad(compiled(x).sum(), x)[0], grad)
    assert calls == [1]


def test_forward_hooks_added_and_removed_after_the_first_call_are_seen():
    torch.manual_seed(0)
    net = Net()
    compiled = graphwright.compile(net, backend=CompileCounter())
    x = torch.randn(3, 4)
    before = compiled(x)
    handle = net.lin.register_forward_hook(lambda module, args, output: output * 10)
    torch.testing.assert_close(compiled(x), net(x))
    handle.remove()
    torch.testing.assert_close(compiled(x), before)


def test_global_forward_hooks_run_once_on_each_module_as_in_eager():
    seen = []

    def pre(module, args):
        seen.append(("pre", type(module).__name__))

    def post(module, args, output):
        seen.append(("post", type(module).__name__))
        return output * 2

    torch.manual_seed(0)
    net = Net()
    counter = CompileCounter()
    compiled = graphwright.compile(net, backend=counter)
    x = torch.randn(3, 4)
    handles = [nn.modules.module.register_module_forward_pre_hook(pre),
               nn.modules.module.register_module_forward_hook(post)]
    try:
        expected = net(x)
        eager_seen, seen[:] = list(seen), []
        torch.testing.assert_close(compiled(x), expected)
        assert seen == eager_seen == [("pre", "Net"), ("pre", "Linear"), ("post", "Linear"), ("post", "Net")]
        assert counter.frame_count == 1
    finally:
        for handle in handles:
            handle.remove()
    torch.testing.assert_close(compiled(x), net(x))  # removing them recompiles
    assert counter.frame_count == 2


def test_a_global_backward_hook_runs_on_each_module_with_the_forward_compiled():
    calls = []
    torch.manual_seed(0)
    net = Net()
    counter = CompileCounter()
    compiled = graphwright.compile(net, backend=counter)
    x = torch.randn(3, 4, requires_grad=True)
    handle = nn.modules.module.register_module_full_backward_hook(
        lambda module, grad_input, grad_output: calls.append(type(module).__name__))
    try:
        compiled(x).sum().backward()
        compiled_calls, calls[:] = list(calls), []
        net(x).sum().backward()
        assert compiled_calls == calls == ["Linear", "Net"]
        assert counter.frame_count >= 1
    finally:
        handle.remove()


def test_always_call_forward_hook_runs_when_the_forward_raises():
    class Fails(nn.Module):
        def forward(self, x):
            raise ValueError("bad input")

    seen = []
    module = Fails()
    module.register_forward_hook(lambda m, args, output: seen.append("hook"), always_call=True)
    compiled = graphwright.compile(module, backend="eager")
    with pytest.raises(ValueError, match="bad input"):
        compiled(torch.randn(2))
    assert seen == ["hook"]


def test_dir_state_dict_and_parameters_of_the_compiled_module_are_the_originals():
    net, _ = _net(lambda net, log: None)
    net.extra = 3
    compiled = graphwright.compile(net, backend="eager")
    reference = torch.compile(net, backend="eager")
    assert {"lin", "extra", "forward", "_orig_mod"} <= set(dir(compiled))
    public = lambda names: {name for name in names if not name.startswith("_")}  # noqa: E731
    assert public(dir(compiled)) == public(dir(reference)) - {"get_compiler_config"}
    assert list(compiled.state_dict()) == list(reference.state_dict()) == ["_orig_mod.lin.weight",
                                                                           "_orig_mod.lin.bias"]
    assert [name for name, _ in compiled.named_parameters()] == \
        [name for name, _ in reference.named_parameters()]
    assert compiled.extra == 3 and compiled.lin is net.lin
    net.eval()
    assert compiled.training is reference.training is False
    compiled.train()
    assert net.training and net.lin.training


def test_layers_with_alike_hooks_share_one_graph_and_a_changed_hook_recompiles():
    def shift(inputs):
        return (inputs[0] + 1,)

    counter = CompileCounter()
    layers = []
    for _ in range(10):
        layer = nn.Linear(4, 4)
        layer.register_forward_pre_hook(lambda module, inputs: shift(inputs))
        layers.append((layer, graphwright.compile(layer, backend=counter)))
    x = torch.randn(2, 4)
    for layer, compiled in layers:
        torch.testing.assert_close(compiled(x), layer(x))
    assert counter.frame_count == 1  # as torch.compile: the hooks' code is guarded, not their ids
    layer, compiled = layers[0]
    layer.register_forward_pre_hook(lambda module, inputs: (inputs[0] * 3,), with_kwargs=False)
    torch.testing.assert_close(compiled(x), layer(x))
    layer._forward_pre_hooks.popitem()
    handle = layer.register_forward_pre_hook(lambda module, args, kwargs: ((args[0] - 1,), kwargs), with_kwargs=True)
    torch.testing.assert_close(compiled(x), layer(x))
    handle.remove()
    torch.testing.assert_close(compiled(x), layer(x))
    assert counter.frame_count == 3
