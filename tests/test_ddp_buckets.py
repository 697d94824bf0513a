"""Cutting a captured graph at DDP's gradient buckets, in one process (no DDP needed):
where the cuts fall, and that the pieces compiled on their own compute what the graph did."""
from __future__ import annotations

import pytest
import torch

import graphwright
from graphwright.backends.ddp_buckets import compile_in_buckets, graph_buckets
from graphwright.testing import CompileCounter


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Linear(4, 32)
        self.hidden = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(3))
        self.last = torch.nn.Linear(32, 2)

    def forward(self, x):
        x = torch.tanh(self.first(x))
        for layer in self.hidden:
            x = x + torch.relu(layer(x))
        return self.last(x), x.mean()


def _captured(module: torch.nn.Module, x: torch.Tensor):
    graphs = []
    graphwright.compile(module, backend=lambda gm, inputs: graphs.append((gm, inputs)) or gm.forward,
                        fullgraph=True)(x)
    return graphs[0]


_LAYER = 32 * 32 * 4 + 32 * 4  # bytes of one hidden layer's parameters


def test_a_head_without_parameters_joins_the_next_bucket():
    class Scaled(Stack):
        def forward(self, x):
            return super().forward(torch.cos(x) * 2)

    first_layer = 4 * 32 * 4 + 32 * 4  # fills its bucket: the nodes before it are left alone
    gm, inputs = _captured(Scaled(), torch.randn(3, 4))
    buckets = graph_buckets(gm, inputs, first_layer, first_layer)
    assert len(buckets) == 4
    assert [node.name for node in buckets[0].nodes] == ["cos", "mul", "linear", "tanh"]


def test_one_bucket_when_everything_fits():
    gm, inputs = _captured(Stack(), torch.randn(3, 4))
    buckets = graph_buckets(gm, inputs, 2 ** 20, 2 ** 20)
    assert len(buckets) == 1
    assert len(buckets[0].parameters) == 10


def test_buckets_are_counted_from_the_end_of_the_graph():
    """At one hidden layer per bucket: the last layer joins the last hidden layer's bucket (the
    first bucket to fill, counting backwards); what is left at the start is a bucket too."""
    gm, inputs = _captured(Stack(), torch.randn(3, 4))
    buckets = graph_buckets(gm, inputs, _LAYER, _LAYER)
    assert [bucket.parameters for bucket in buckets] == [
        ["self_first_weight", "self_first_bias"],
        ["self_hidden_0_weight", "self_hidden_0_bias"],
        ["self_hidden_1_weight", "self_hidden_1_bias"],
        ["self_hidden_2_weight", "self_hidden_2_bias", "self_last_weight", "self_last_bias"],
    ]
    nodes = [node for node in gm.graph.nodes if node.op not in ("placeholder", "output")]
    assert [node for bucket in buckets for node in bucket.nodes] == nodes


def test_a_smaller_first_bucket():
    gm, inputs = _captured(Stack(), torch.randn(3, 4))
    buckets = graph_buckets(gm, inputs, 32 * 2 * 4, _LAYER)
    assert buckets[-1].parameters == ["self_last_weight", "self_last_bias"]
    assert [node.name for node in buckets[-1].nodes] == ["linear_4", "mean"]
    assert len(buckets) == 5


def test_pieces_compute_what_the_graph_did():
    module = Stack()
    x = torch.randn(3, 4)
    gm, inputs = _captured(module, x)
    counter = CompileCounter()
    run = compile_in_buckets(gm, inputs, counter, graph_buckets(gm, inputs, _LAYER, _LAYER))
    assert counter.frame_count == 4
    expected = gm(*inputs)
    torch.autograd.backward([expected[0].sum(), expected[1]])
    grads = [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    actual = run(*inputs)
    torch.autograd.backward([actual[0].sum(), actual[1]])
    for want, got in zip(expected, actual):
        torch.testing.assert_close(got, want)
    for want, p in zip(grads, module.parameters()):
        torch.testing.assert_close(p.grad, want)


def test_aot_pieces_give_the_same_gradients():
    module = Stack()
    x = torch.randn(3, 4)
    gm, inputs = _captured(module, x)
    expected = gm(*inputs)
    expected[0].sum().backward()
    grads = [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    aot_eager = graphwright.backends.lookup_backend("aot_eager")
    run = compile_in_buckets(gm, inputs, aot_eager, graph_buckets(gm, inputs, _LAYER, _LAYER))
    run(*inputs)[0].sum().backward()
    for want, p in zip(grads, module.parameters()):
        torch.testing.assert_close(p.grad, want)


def test_outside_ddp_the_backend_compiles_the_whole_graph_and_caches_are_shared():
    counter = CompileCounter()

    def f(x):
        return torch.sin(x) * 2

    x = torch.randn(3)
    graphwright.compile(f, backend=counter)(x)
    graphwright.compile(f, backend=counter)(x)  # another wrapper, the same backend: the same cache
    assert counter.frame_count == 1


def test_backend_errors_name_the_users_backend():
    def broken(gm, example_inputs):
        raise RuntimeError("no")

    with pytest.raises(graphwright.BackendError, match="Backend broken failed"):
        graphwright.compile(lambda x: x + 1, backend=broken)(torch.randn(2))
