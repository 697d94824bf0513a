"""Partitioning the joint graph: what the backward receives, recomputes, and never re-samples."""
import operator

import pytest
import torch
import torch.nn.functional as F

from graphwright.aot import GraphCompilers, aot_compile
from graphwright.backends.aot_eager import run_generated_code
from graphwright.backends.registry import lookup_backend

from aot_models import MODELS, aten_targets, graph_of

RUN_AS_IS = GraphCompilers(run_generated_code, run_generated_code, run_generated_code)


def compile_and_train_once(model, x, *, recompute):
    compiled = aot_compile(torch.fx.symbolic_trace(model), [x], RUN_AS_IS, recompute=recompute)
    torch.manual_seed(0)
    compiled(x).square().mean().backward()
    (signature,) = compiled.signatures.values()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return signature.partition, grads


def test_recomputing_cheap_ops_saves_fewer_bytes_with_the_same_gradients():
    model_cls, make_input = MODELS["transformer_block"]
    torch.manual_seed(0)
    model, x = model_cls(), make_input()
    saving, grads_saving = compile_and_train_once(model, x, recompute=False)
    recomputing, grads_recomputing = compile_and_train_once(model, x, recompute=True)
    assert recomputing.saved_bytes < saving.saved_bytes
    for a, b in zip(grads_saving, grads_recomputing):
        torch.testing.assert_close(a, b)


def test_gelu_output_is_recomputed_in_the_backward_instead_of_saved():
    def fn(x, w1, w2):
        return F.gelu(x @ w1) @ w2

    inputs = [torch.randn(4, 8), torch.randn(8, 16, requires_grad=True), torch.randn(16, 2, requires_grad=True)]
    compiled = aot_compile(graph_of(fn), inputs, RUN_AS_IS)
    compiled(*inputs).sum().backward()
    (signature,) = compiled.signatures.values()
    assert "aten.gelu.default" in aten_targets(signature.partition.backward)


def test_forward_graph_does_no_backward_work_and_backward_gets_no_tuples():
    model_cls, make_input = MODELS["cnn_batchnorm_dropout"]
    model, x = model_cls(), make_input()
    partition, _ = compile_and_train_once(model, x, recompute=True)
    forward_ops = aten_targets(partition.forward)
    assert not any("backward" in op for op in forward_ops)
    backward_inputs = [n for n in partition.backward.graph.nodes if n.op == "placeholder"]
    assert all(isinstance(n.meta["val"], torch.Tensor) for n in backward_inputs)
    assert not any(
        n.target is operator.getitem and n.args[0].op == "placeholder"
        for n in partition.backward.graph.nodes
        if n.op == "call_function"
    )


def test_dropout_mask_is_sampled_once_and_reused_by_the_backward():
    def fn(x):
        return F.dropout(x, p=0.5, training=True) * 3

    x = torch.randn(64, 64, requires_grad=True)
    compiled = aot_compile(graph_of(fn), [x], RUN_AS_IS)
    out = compiled(x)
    out.sum().backward()
    (signature,) = compiled.signatures.values()
    backward_ops = {n.target for n in signature.partition.backward.graph.nodes if n.op == "call_function"}
    assert not any(
        isinstance(op, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in op.tags
        for op in backward_ops
    )
    kept = out != 0
    torch.testing.assert_close(x.grad, kept * 6.0)


def test_dropout_draws_the_same_numbers_as_eager_from_the_same_seed():
    def fn(x):
        return F.dropout(x, p=0.3, training=True)

    x = torch.randn(256, 256)
    compiled = lookup_backend("aot_eager")(graph_of(fn), [x])
    torch.manual_seed(7)
    expected = fn(x)
    torch.manual_seed(7)
    torch.testing.assert_close(compiled(x), expected)


def test_dropout_keeps_the_eager_fraction_of_values():
    def fn(x):
        return F.dropout(x, p=0.25, training=True)

    x = torch.ones(200, 200, requires_grad=True)
    out = lookup_backend("aot_eager")(graph_of(fn), [x])(x)
    kept = (out != 0).float().mean().item()
    assert abs(kept - 0.75) < 0.02
    torch.testing.assert_close(out[out != 0], torch.full_like(out[out != 0], 1 / 0.75))


def helper_called_from_the_graph(x, scale):
    """Stands for a nonstrict_trace body: opaque to the strict tracer, traced through by AOT."""
    values = [x.sin(), x.cos()]
    return sum(v * scale for v in values)


def test_python_callable_node_is_traced_through_into_the_aten_graphs():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    call = graph.call_function(helper_called_from_the_graph, (x, 2.0))
    graph.output((graph.call_function(torch.relu, (call,)),))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    inp = torch.randn(5, requires_grad=True)
    compiled = aot_compile(gm, [inp], RUN_AS_IS)
    (out,) = compiled(inp)
    out.sum().backward()
    expected = torch.relu(helper_called_from_the_graph(inp, 2.0))
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(inp.grad, torch.autograd.grad(expected.sum(), inp)[0])
    (signature,) = compiled.signatures.values()
    forward_ops = aten_targets(signature.partition.forward)
    assert {"aten.sin.default", "aten.cos.default", "aten.relu.default"} <= forward_ops


@pytest.mark.slow
def test_inductor_dropout_backward_reuses_the_forward_mask():
    def fn(x):
        return F.dropout(x, p=0.5, training=True) * 3

    x = torch.randn(64, 64, requires_grad=True)
    out = lookup_backend("inductor")(graph_of(fn), [x])(x)
    out.sum().backward()
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.5) < 0.05
    torch.testing.assert_close(x.grad, kept * 6.0)
