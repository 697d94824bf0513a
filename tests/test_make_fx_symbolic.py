"""Symbolic sizes in make_fx graphs: derived sizes are computed in the graph
from `aten.sym_size.int` nodes, once per distinct expression."""
import operator

import torch

import graphwright

aten = torch.ops.aten


def size_arithmetic(x):
    n, m = x.shape
    return (
        n // 2,
        n % 3,
        n - m,
        -n,
        torch.sym_max(n, m),
        torch.sym_min(n, m),
        n * m + 1,
        x.new_zeros(n // 2, m * 2),
    )


def test_size_arithmetic_is_computed_by_the_graph_on_other_sizes():
    gm = graphwright.make_fx(size_arithmetic, tracing_mode="symbolic")(torch.randn(6, 4))
    for shape in [(6, 4), (9, 5), (4, 7)]:
        x = torch.randn(shape)
        *numbers, zeros = gm(x)
        *expected_numbers, expected_zeros = size_arithmetic(x)
        assert numbers == expected_numbers
        assert zeros.shape == expected_zeros.shape


def test_each_distinct_size_expression_gets_one_node():
    def f(x, y):
        return x.view(x.shape[0] * 2, -1), y.view(x.shape[0] * 2, -1)

    gm = graphwright.make_fx(f, tracing_mode="symbolic")(torch.randn(4, 6), torch.randn(4, 6))
    targets = [n.target for n in gm.graph.nodes]
    assert targets.count(operator.mul) == 1
    assert targets.count(aten.sym_size.int) == 1


def test_size_specialised_by_a_guard_becomes_a_constant():
    def f(x):
        if x.shape[0] == 4:
            return x.view(x.shape[0] * 2, -1)
        return x

    gm = graphwright.make_fx(f, tracing_mode="symbolic")(torch.randn(4, 6))
    view = next(n for n in gm.graph.nodes if n.target is aten.view.default)
    assert view.args[1] == [8, -1]
    assert aten.sym_size.int not in [n.target for n in gm.graph.nodes]


def test_duck_sized_dims_share_one_symbol():
    def f(x, y):
        return x + y.shape[0]

    gm = graphwright.make_fx(f, tracing_mode="symbolic")(torch.randn(5), torch.randn(5))
    (size,) = [n for n in gm.graph.nodes if n.target is aten.sym_size.int]
    assert size.args[0].name == "x_1"  # the first input that has the size names it
    x = torch.randn(7)
    torch.testing.assert_close(gm(x, torch.randn(7)), x + 7)


def test_symbolic_strides_of_a_non_contiguous_input_are_read_from_the_input():
    def f(x):
        return x.as_strided((2, 2), x.stride()) + 1

    gm = graphwright.make_fx(f, tracing_mode="symbolic")(torch.randn(4, 12)[:, ::2])
    assert aten.sym_stride.int in [n.target for n in gm.graph.nodes]
    other = torch.randn(5, 20)[:, ::4]
    torch.testing.assert_close(gm(other), f(other))
