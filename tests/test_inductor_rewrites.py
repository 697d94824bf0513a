"""The `inductor` backend gives eager's values where one of Inductor's own pattern passes
would not: the rewrites of `graphwright/backends/inductor_rewrites.py`, each checked on the
graph it rewrites and through a compiled program against eager."""
import pytest
import torch

import graphwright
from graphwright.backends.inductor_rewrites import rewrite_for_inductor
from graphwright.nonstrict import make_fx

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def _scaled_sum_of_products(x, a):
    return torch.add(x, torch.mm(a, x), alpha=0.5), torch.add(torch.mm(a, x), x, alpha=-2.0)


def test_an_add_with_alpha_of_a_matrix_product_gets_its_scaling_as_a_multiplication():
    x, a = torch.randn(3, 6), torch.randn(3, 3)
    gm = make_fx(_scaled_sum_of_products)(x, a)
    rewrite_for_inductor(gm)
    adds = [node for node in gm.graph.nodes if node.target is aten.add.Tensor]
    assert len(adds) == 2 and all("alpha" not in node.kwargs for node in adds)
    scales = [node.args[1] for node in adds]
    assert [node.target for node in scales] == [aten.mul.Tensor, aten.mul.Tensor]
    assert [node.args[1] for node in scales] == [0.5, -2.0]
    for got, expected in zip(gm(x, a), _scaled_sum_of_products(x, a)):
        torch.testing.assert_close(got, expected)


def test_an_add_that_promotes_or_has_no_matrix_product_is_left_as_it_is():
    def program(x, a, d):
        return torch.add(d, torch.mm(a, x), alpha=0.5), torch.add(x, x.sin(), alpha=3)

    gm = make_fx(program)(torch.randn(3, 6), torch.randn(3, 3), torch.randn(3, 6, dtype=torch.float64))
    before = gm.code
    rewrite_for_inductor(gm)
    assert gm.code == before


@pytest.mark.parametrize("requires_grad", [False, True], ids=["inference", "training"])
def test_add_with_alpha_of_a_matrix_product_under_inductor_matches_eager(requires_grad):
    # Inductor's addmm fusion reads no alpha: before the rewrite the results were x + a @ x
    x = torch.randn(3, 6, requires_grad=requires_grad)
    a = torch.randn(3, 3, requires_grad=requires_grad)
    expected = _scaled_sum_of_products(x, a)
    got = graphwright.compile(_scaled_sum_of_products, backend="inductor", fullgraph=True)(x, a)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    if requires_grad:
        grads = torch.autograd.grad(sum(t.sum() for t in got), (x, a))
        expected_grads = torch.autograd.grad(sum(t.sum() for t in expected), (x, a))
        for g, e in zip(grads, expected_grads):
            torch.testing.assert_close(g, e)


def _out_into_a_diagonal_then_a_scaled_product(x, y):
    # the program the fuzzer found: a one-column matmul (an mm with k = 1) added with alpha
    v0 = x.flatten()
    o0 = y.mean(0, keepdim=True).detach().clone()
    r1 = torch.clamp(y[0].detach(), -1.0, 1.0, out=o0.diagonal())
    product = torch.matmul(r1.unsqueeze(0), v0.unsqueeze(0))
    return torch.add(torch.maximum(r1.unsqueeze(0), v0.unsqueeze(0)), product, alpha=0.5) - v0.unsqueeze(0), o0


def test_the_found_out_into_a_diagonal_program_under_inductor_matches_eager():
    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 1, requires_grad=True)
    expected = _out_into_a_diagonal_then_a_scaled_product(x, y)
    got = graphwright.compile(_out_into_a_diagonal_then_a_scaled_product, backend="inductor", fullgraph=True)(x, y)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(torch.autograd.grad(got[0].sum(), x), torch.autograd.grad(expected[0].sum(), x))
