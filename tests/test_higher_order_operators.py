"""Control-flow and function-transform operators in a region: what the graphs hold, what is
refused and why, and that checkpointing recomputes. Values against eager are the corpus's job
(tests/programs/cases_higher_order.py); these tests pin what the corpus cannot see."""
from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import graphwright
from graphwright._core.autograd_function import FunctionCall
from graphwright._core.recompute import CheckpointCall
from graphwright._core.transforms import TransformCall
from graphwright.backends.aot_eager import aot_eager


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(index for index, line in enumerate(lines) if text in line)


def captured(fn, *args, **options):
    """The torch-level graphs `fn(*args)` compiles to (fullgraph), and the result."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    result = graphwright.compile(fn, backend=backend, fullgraph=True, **options)(*args)
    return graphs, result


def targets(gm: torch.fx.GraphModule) -> list:
    return [node.target for node in gm.graph.nodes if node.op == "call_function"]


# torch.cond

def test_cond_with_a_tensor_predicate_is_one_graph_holding_both_branches():
    def fn(x):
        return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))

    graphs, _ = captured(fn, torch.randn(3))
    (gm,) = graphs
    assert [name for name, _ in gm.named_children()] == ["cond_true_0", "cond_false_0"]
    assert [node.target for node in gm.cond_true_0.graph.nodes if node.op == "call_method"] == ["sin"]
    assert [node.target for node in gm.cond_false_0.graph.nodes if node.op == "call_method"] == ["cos"]
    for x in (torch.randn(3).abs(), -torch.randn(3).abs()):
        # eager torch.cond compiles itself with torch.compile, whose state depends on what else
        # this process compiled: the reference takes the branch in Python
        torch.testing.assert_close(gm(x)[0], x.sin() if x.sum() > 0 else x.cos())


def test_cond_branches_read_outer_tensors_as_extra_operands():
    w = torch.randn(3)

    def fn(x, bias):
        return torch.cond(x.sum() > 0, lambda t: t * w, lambda t: t + bias, (x,))

    graphs, result = captured(fn, torch.randn(3).abs(), torch.randn(3))
    cond_node = next(node for node in graphs[0].graph.nodes if "cond" in getattr(node.target, "__name__", ""))
    assert len(cond_node.args[3]) == 3  # x, then w and bias lifted, each branch taking all three


def test_cond_branch_mutating_an_outer_list_is_an_error_naming_the_line():
    seen = []

    def fn(x):
        def true_fn(t):
            seen.append(1)
            return t.sin()

        return torch.cond(x.sum() > 0, true_fn, lambda t: t.cos(), (x,))

    with pytest.raises(graphwright.Unsupported) as info:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.randn(3))
    assert info.value.gb_id == "GB040"
    assert "a mutation of a list made outside it" in str(info.value)
    assert info.value.user_location.endswith(f":{line_of(fn, 'seen.append(1)')}")
    assert seen == []


def test_cond_branch_changing_its_operand_in_place_under_grad_mode_is_an_error():
    def fn(x):
        return torch.cond(x.sum() > 0, lambda t: t.add_(1) * 2, lambda t: t * 3, (x,))

    with pytest.raises(graphwright.Unsupported) as info:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.randn(3))
    assert info.value.gb_id == "GB040" and "in-place change (`add_`)" in str(info.value)


def test_cond_branches_returning_different_structures_are_refused():
    def fn(x):
        return torch.cond(x.sum() > 0, lambda t: (t * 4, t * 2), lambda t: t * 3, (x,))

    with pytest.raises(graphwright.Unsupported) as info:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.randn(3))
    assert info.value.gb_id == "GB041" and "different structures" in str(info.value)


def test_cond_on_a_symbolic_size_compiles_once_for_every_size():
    def fn(x):
        return torch.cond(x.shape[0] > 4, lambda t: t * 2, lambda t: t - 1, (x,))

    counter = graphwright.testing.CompileCounter()
    compiled = graphwright.compile(fn, backend=counter, fullgraph=True, dynamic=True)
    for size in (3, 6, 9, 2):
        x = torch.randn(size)
        torch.testing.assert_close(compiled(x), fn(x))
    assert counter.frame_count == 1


# torch.func transforms

def test_vmap_is_one_node_over_the_traced_per_example_function():
    def fn(batch, w):
        return torch.vmap(lambda row: (row @ w).relu(), in_dims=0)(batch)

    graphs, result = captured(fn, torch.randn(5, 3), torch.randn(3, 2))
    (gm,) = graphs
    (call,) = [target for target in targets(gm) if isinstance(target, TransformCall)]
    assert call.transform is torch.vmap and call.options["in_dims"] == 0
    body = gm.vmap_body_0
    example = next(node for node in body.graph.nodes if node.op == "placeholder").meta["example_value"]
    assert tuple(example.shape) == (3,)  # one row: the mapped dimension removed


def test_vmap_in_dims_out_of_range_raises_the_eager_error():
    def fn(x):
        return torch.vmap(lambda row: row * 2, in_dims=3)(x)

    with pytest.raises(ValueError, match="expected in_dim to satisfy -2 <= in_dim < 2"):
        graphwright.compile(fn, backend="eager")(torch.randn(2, 3))


def test_vjp_of_a_function_drawing_random_numbers_is_refused_when_applied():
    def fn(x):
        out, vjp_fn = torch.func.vjp(lambda t: torch.nn.functional.dropout(t, 0.5), x)
        return vjp_fn(torch.ones_like(out))

    with pytest.raises(graphwright.Unsupported) as info:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.randn(4))
    assert info.value.gb_id == "GB041" and "random numbers (`dropout`)" in str(info.value)


def test_functional_call_refuses_a_module_reading_a_replaced_parameter_by_its_table():
    class ReadsTable(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return x @ self.lin._parameters["weight"]

    module = ReadsTable()

    def fn(x, w):
        return torch.func.functional_call(module, {"lin.weight": w}, (x,))

    with pytest.raises(graphwright.Unsupported) as info:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.randn(2, 3), torch.randn(3, 3))
    assert "reads its replaced tensor 'lin.weight' other than as an attribute" in str(info.value)


def test_functional_call_strict_with_a_missing_key_raises_the_eager_error():
    module = nn.Linear(3, 3)

    def fn(x, w):
        return torch.func.functional_call(module, {"weight": w}, (x,), strict=True)

    with pytest.raises(RuntimeError, match="Missing key"):
        graphwright.compile(fn, backend="eager")(torch.randn(2, 3), torch.randn(3, 3))


# activation checkpointing

def _checkpointed_mlp():
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 4), nn.GELU())

    def fn(x):
        return checkpoint(block, x, use_reentrant=False).sin()
    return block, fn


def test_checkpoint_is_one_node_over_the_traced_function():
    _, fn = _checkpointed_mlp()
    graphs, _ = captured(fn, torch.randn(2, 4, requires_grad=True))
    assert sum(isinstance(target, CheckpointCall) for target in targets(graphs[0])) == 1


def test_checkpoint_under_aot_saves_the_inputs_and_recomputes_the_activations():
    block, fn = _checkpointed_mlp()
    compiled_graphs = []

    def backend(gm, example_inputs):
        compiled = aot_eager(gm, example_inputs)
        compiled_graphs.append(compiled)
        return compiled

    x = torch.randn(2, 4, requires_grad=True)
    graphwright.compile(fn, backend=backend, fullgraph=True)(x).sum().backward()
    (signature,) = compiled_graphs[0].signatures.values()
    partition = signature.partition
    forward_inputs = [node for node in partition.forward.graph.nodes if node.op == "placeholder"]
    saved = next(node for node in partition.forward.graph.nodes if node.op == "output").args[0][1:]
    assert set(saved) <= set(forward_inputs)  # only inputs (x and the weights) cross over
    backward_ops = {node.target for node in partition.backward.graph.nodes if node.op == "call_function"}
    assert {torch.ops.aten.tanh.default, torch.ops.aten.gelu.default} <= backward_ops  # recomputed there


def test_checkpoint_under_aot_gives_eager_gradients():
    block, fn = _checkpointed_mlp()
    x = torch.randn(2, 4, requires_grad=True)
    fn(x).sum().backward()
    expected = [x.grad.clone(), *(p.grad.clone() for p in block.parameters())]
    x.grad = None
    block.zero_grad()
    graphwright.compile(fn, backend="aot_eager", fullgraph=True)(x).sum().backward()
    for got, want in zip([x.grad, *(p.grad for p in block.parameters())], expected):
        torch.testing.assert_close(got, want)


def test_checkpointed_function_reading_outer_values_named_like_its_own_operations():
    def fn(x):
        a, b, c = x * 2, x * 3, x * 4  # nodes mul, mul_1, mul_2
        # the body's own operations are mul and mul_1 when b and c are lifted into it
        return checkpoint(lambda t: t * 5 * 7 + b * c, x, use_reentrant=False) + a

    x = torch.randn(3)
    torch.testing.assert_close(graphwright.compile(fn, backend="eager", fullgraph=True)(x), fn(x))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_hugging_face_gradient_checkpointing_trains_like_eager(backend):
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(config)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    ids = torch.randint(0, 64, (2, 8))

    def step(ids):
        return model(input_ids=ids, labels=ids).loss

    expected = step(ids)
    expected.backward()
    expected_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    counter = graphwright.testing.CompileCounterWithBackend(backend)
    loss = graphwright.compile(step, backend=counter, fullgraph=True)(ids)
    loss.backward()
    torch.testing.assert_close(loss, expected)
    for param, want in zip(model.parameters(), expected_grads):
        torch.testing.assert_close(param.grad, want)
    assert counter.frame_count == 1


def test_checkpoint_with_a_context_fn_is_refused():
    def fn(x):
        return checkpoint(torch.sin, x, use_reentrant=False,
                          context_fn=lambda: (torch.no_grad(), torch.no_grad()))

    with pytest.raises(graphwright.Unsupported, match="context_fn"):
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.randn(3))


# autograd.Function

class Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x  # not the true gradient: the user's backward decides


def test_autograd_function_is_traced_forward_and_backward_not_an_opaque_apply():
    graphs, _ = captured(lambda x: Doubled.apply(x), torch.randn(3, requires_grad=True))
    (gm,) = graphs
    (call,) = [target for target in targets(gm) if isinstance(target, FunctionCall)]
    assert call.spec.name == "Doubled"
    assert [node.target for node in gm.Doubled_backward_0.graph.nodes if node.op == "call_function"] == \
        [__import__("operator").mul]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_autograd_function_gradient_is_the_users_backward(backend):
    x = torch.randn(3, requires_grad=True)
    graphwright.compile(lambda t: Doubled.apply(t).sum(), backend=backend, fullgraph=True)(x).backward()
    torch.testing.assert_close(x.grad, x.detach())


class DirtyInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_autograd_function_with_mark_dirty_stays_one_opaque_apply():
    def fn(x):
        y = x.clone()
        return DirtyInPlace.apply(y) + 1

    x = torch.randn(3, requires_grad=True)
    graphs, result = captured(fn, x)
    assert not any(isinstance(target, FunctionCall) for target in targets(graphs[0]))
    torch.testing.assert_close(result, fn(x))


# Inductor

@pytest.mark.slow
def test_cond_branches_changing_tensors_in_place_compile_with_inductor():
    def copied(t):
        y = t.clone()
        y.add_(1)  # an in-place change inside: the operator's own checks trace it (not into our graph)
        return y * 2

    def operand_changed(t):
        t.mul_(3)
        return t + 1

    def fn(x):
        with torch.no_grad():
            y = x.clone()
            return torch.cond(x.sum() > 0, copied, operand_changed, (y,)) + y, y

    def expected(x):
        # what the cond means, without PyTorch's eager torch.cond (which compiles itself with
        # TorchDynamo, and so depends on TorchDynamo's state in this process)
        y = x.clone()
        return (copied if x.sum() > 0 else operand_changed)(y) + y, y

    for x in (torch.rand(4), -torch.rand(4)):
        compiled = graphwright.compile(fn, backend="inductor", fullgraph=True)
        for got, want in zip(compiled(x), expected(x)):
            torch.testing.assert_close(got, want)

@pytest.mark.slow
def test_cond_vmap_checkpoint_and_autograd_function_compile_with_inductor():
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 8), nn.Tanh())

    def python_cond(predicate, true_fn, false_fn, operands):
        return true_fn(*operands) if predicate else false_fn(*operands)

    def fn(x, w, cond=torch.cond):
        gated = cond(x.sum() > 0, lambda t: t * w, lambda t: t - w, (x,))
        mapped = torch.vmap(lambda row: (row * w).softmax(0))(gated)
        return Doubled.apply(checkpoint(block, mapped, use_reentrant=False)).sum()

    for sign in (1, -1):
        x = (torch.randn(3, 4).abs() * sign).requires_grad_()
        w = torch.randn(4, requires_grad=True)
        compiled = graphwright.compile(fn, backend="inductor", fullgraph=True)
        out = compiled(x, w)
        grads = torch.autograd.grad(out, [x, w, *block.parameters()])
        expected_out = fn(x, w, cond=python_cond)  # as above: eager torch.cond depends on torch.compile's state
        expected = torch.autograd.grad(expected_out, [x, w, *block.parameters()])
        torch.testing.assert_close(out, expected_out)
        for got, want in zip(grads, expected):
            torch.testing.assert_close(got, want)
