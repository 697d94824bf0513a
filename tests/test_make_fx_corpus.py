"""make_fx on a corpus of programs: the graph runs and matches eager.

Each program is traced in every mode where it makes sense and the graph is
run on the tracing inputs (fresh copies, so in-place programs can be
compared too); graphs traced with symbolic sizes also run on inputs of
another size. In fake mode the recorded aten operations are also compared
with PyTorch's own make_fx.
"""
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

import graphwright

MODES = ("real", "fake", "symbolic")


@dataclass
class Program:
    fn: Callable[..., Any]
    inputs: Callable[[int], tuple]  # size -> inputs
    modes: tuple = MODES
    seeded: bool = False  # reseed the generator before each run (random programs)


def inputs_of(*makers):
    return lambda n: tuple(make(n) for make in makers)


def vec(n):
    return torch.randn(n)


def mat(n):
    return torch.randn(n, n + 2)


def square(n):
    return torch.randn(n, n)


def batch(n):
    return torch.randn(2, n, 8)


class Pair:
    def __init__(self, left, right):
        self.left, self.right = left, right


pytree.register_pytree_node(
    Pair,
    lambda p: ([p.left, p.right], None),
    lambda children, _: Pair(*children),
)


def mlp_module():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


MLP = mlp_module()


def _in_place_then_read(x):
    x.add_(1)
    return x * 2


def _in_place_on_view(x):
    row = x[0]
    row.mul_(3)
    return x.sum(0)


def _symbolic_view_and_sizes(x):
    y = x.view(x.shape[0] * 2, -1)
    return y + 1, x.shape[0] + 1, x.shape[1] // 2


def _nested_pytrees(inputs):
    a, (b, c) = inputs["pair"], inputs["rest"]
    return {"sum": a + b, "items": [a * c, (b - c,)], "n": 3}


def _multi_output_ops(x):
    values, indices = x.sort(dim=-1)
    top, _ = x.topk(2, dim=-1)
    first, second = x.chunk(2, dim=0)
    return values, indices, top, first + second


def _foreach_in_place(a, b):
    torch._foreach_add_([a, b], 1)
    return a * b


def _index_put(x, idx):
    x[idx] = 0.0
    return x


def _add_into_slice(x):
    x[:, 1:] += 1
    return x


PROGRAMS = {
    "elementwise": Program(lambda x: torch.sin(x) * 2 + x.exp() - x.abs().sqrt(), inputs_of(vec)),
    "broadcast_binary": Program(lambda x, y: x * y + y, inputs_of(mat, lambda n: torch.randn(1, n + 2))),
    "reductions": Program(lambda x: (x.sum(0), x.mean(), x.amax(-1), x.var(dim=1)), inputs_of(mat)),
    "softmax": Program(lambda x: (F.softmax(x, -1), F.log_softmax(x, 0)), inputs_of(mat)),
    "matmul": Program(lambda x, w: x @ w, inputs_of(mat, lambda n: torch.randn(n + 2, 5))),
    "bmm": Program(lambda a, b: torch.bmm(a, b.transpose(1, 2)), inputs_of(batch, batch)),
    "views": Program(
        lambda x: (x.view(-1), x.t().contiguous(), x.reshape(2, -1), x.unsqueeze(0).squeeze(0)),
        inputs_of(lambda n: torch.randn(n, 4)),
    ),
    "permute": Program(lambda x: x.permute(2, 0, 1).flatten(1), inputs_of(batch)),
    "slicing": Program(lambda x: x[1:, ::2] * x[:, 0:1].sum(), inputs_of(mat)),
    "advanced_indexing": Program(
        lambda x, idx: x[idx] + x[:, idx[:2]].sum(), inputs_of(square, lambda n: torch.tensor([0, 1, 1]))
    ),
    "masked_fill": Program(lambda x, m: x.masked_fill(m, 0.0), inputs_of(mat, lambda n: torch.rand(n, n + 2) > 0.5)),
    "cat_stack": Program(lambda x, y: (torch.cat([x, y]), torch.stack([x, y], 1)), inputs_of(vec, vec)),
    "multi_output_ops": Program(_multi_output_ops, inputs_of(lambda n: torch.randn(2 * n, 6))),
    "linear": Program(
        lambda x, w, b: F.linear(x, w, b), inputs_of(batch, lambda n: torch.randn(3, 8), lambda n: torch.randn(3))
    ),
    "activations_and_norm": Program(
        lambda x: F.layer_norm(F.gelu(x) + F.relu(x) + torch.tanh(x), (8,)), inputs_of(batch)
    ),
    "conv2d": Program(
        lambda x, w: F.max_pool2d(F.conv2d(x, w, padding=1), 2),
        inputs_of(lambda n: torch.randn(1, 3, 2 * n, 2 * n), lambda n: torch.randn(4, 3, 3, 3)),
    ),
    "embedding": Program(
        lambda idx, w: F.embedding(idx, w).sum(1), inputs_of(lambda n: torch.randint(0, 10, (n, 3)), lambda n: torch.randn(10, 4))
    ),
    "einsum": Program(lambda a, b: torch.einsum("bij,bkj->bik", a, b), inputs_of(batch, batch)),
    "where_clamp": Program(lambda x: torch.where(x > 0, x, -x).clamp(0.1, 0.5), inputs_of(mat)),
    "cumsum_and_dtype": Program(lambda x: (x.cumsum(0), x.to(torch.float64) * 2, (x > 0).long().sum()), inputs_of(mat)),
    "tensor_literal": Program(lambda x: x + torch.tensor([1.0, 2.0, 3.0, 4.0]), inputs_of(lambda n: torch.randn(n, 4))),
    "factories": Program(
        lambda x: (torch.ones(x.shape) + x, torch.arange(x.shape[0]) * 2, torch.zeros_like(x)), inputs_of(mat)
    ),
    "expand_repeat": Program(lambda x: (x.unsqueeze(1).expand(-1, 3).sum(), x.repeat(2)), inputs_of(vec)),
    "in_place_then_read": Program(_in_place_then_read, inputs_of(vec)),
    "in_place_on_view": Program(_in_place_on_view, inputs_of(mat)),
    "foreach_in_place": Program(_foreach_in_place, inputs_of(vec, vec)),
    "index_put": Program(_index_put, inputs_of(mat, lambda n: torch.tensor([0, 2]))),
    "add_into_slice": Program(_add_into_slice, inputs_of(square)),
    "unbind": Program(lambda x: [t * i for i, t in enumerate(x.unbind(0))], inputs_of(lambda n: torch.randn(3, n))),
    "attention": Program(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        inputs_of(*[lambda n: torch.randn(1, 2, n, 8)] * 3),
    ),
    "complex_views": Program(
        lambda x: torch.view_as_real(torch.view_as_complex(x) * 2), inputs_of(lambda n: torch.randn(n, 2))
    ),
    "random_with_seed": Program(lambda x: x + torch.randn_like(x), inputs_of(vec), modes=("real",), seeded=True),
    "dropout_with_seed": Program(lambda x: F.dropout(x, 0.5, training=True), inputs_of(mat), modes=("real",), seeded=True),
    "multiple_outputs": Program(lambda x, y: (x + y, {"diff": x - y}, [x * y]), inputs_of(vec, vec)),
    "nested_pytrees": Program(
        _nested_pytrees, lambda n: ({"pair": torch.randn(n), "rest": (torch.randn(n), torch.randn(n))},)
    ),
    "registered_class": Program(lambda p: Pair(p.right, p.left * 2), lambda n: (Pair(torch.randn(n), torch.randn(n)),)),
    "symbolic_view_and_sizes": Program(_symbolic_view_and_sizes, inputs_of(lambda n: torch.randn(n, 6))),
    "module_call": Program(lambda x: MLP(x).relu(), inputs_of(batch), modes=("real",)),
}

CASES = [(name, mode) for name, program in PROGRAMS.items() for mode in program.modes]


def fresh(inputs):
    return pytree.tree_map_only(torch.Tensor, torch.clone, inputs)


def run(program, fn, inputs):
    if program.seeded:
        torch.manual_seed(1234)
    return fn(*inputs)


def assert_same(actual, expected):
    actual_leaves, actual_spec = pytree.tree_flatten(actual)
    expected_leaves, expected_spec = pytree.tree_flatten(expected)
    assert actual_spec == expected_spec
    for a, e in zip(actual_leaves, expected_leaves):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(a, e)
        else:
            assert a == e


@pytest.mark.parametrize("name,mode", CASES)
def test_graph_matches_eager(name, mode):
    program = PROGRAMS[name]
    inputs = program.inputs(4)
    gm = graphwright.make_fx(program.fn, tracing_mode=mode)(*fresh(inputs))
    eager_inputs, graph_inputs = fresh(inputs), fresh(inputs)
    assert_same(run(program, gm, graph_inputs), run(program, program.fn, eager_inputs))
    assert_same(graph_inputs, eager_inputs)  # in-place programs mutate their inputs alike


@pytest.mark.parametrize("name", [name for name, p in PROGRAMS.items() if "symbolic" in p.modes])
def test_symbolic_graph_runs_on_inputs_of_another_size(name):
    program = PROGRAMS[name]
    gm = graphwright.make_fx(program.fn, tracing_mode="symbolic")(*program.inputs(4))
    inputs = program.inputs(6)
    eager_inputs, graph_inputs = fresh(inputs), fresh(inputs)
    assert_same(run(program, gm, graph_inputs), run(program, program.fn, eager_inputs))
    assert_same(graph_inputs, eager_inputs)


def aten_ops(gm):
    return [str(n.target) for n in gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]


@pytest.mark.parametrize("name", [name for name, p in PROGRAMS.items() if "fake" in p.modes])
def test_fake_mode_records_the_same_aten_ops_as_pytorch(name):
    program = PROGRAMS[name]
    inputs = program.inputs(4)
    ours = graphwright.make_fx(program.fn, tracing_mode="fake")(*fresh(inputs))
    theirs = torch_make_fx(program.fn, tracing_mode="fake")(*fresh(inputs))
    assert aten_ops(ours) == aten_ops(theirs)


def test_traced_module_bakes_parameters_in_as_attributes():
    x = torch.randn(2, 8)
    for mode in MODES:
        gm = graphwright.make_fx(MLP, tracing_mode=mode)(x)
        torch.testing.assert_close(gm(x), MLP(x))
        targets = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
        assert targets == {name for name, _ in MLP.named_parameters()}
        assert gm.get_parameter("0.weight") is MLP[0].weight
        assert all(c.is_module_state for c in gm.meta["nonstrict_trace"].constants)
