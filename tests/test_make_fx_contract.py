"""What other layers build on: fake inputs, functionalization and autograd
inside the traced function, node metadata, the trace record, decompositions
and in-place semantics."""
import torch
import torch.nn.functional as F
import pytest
from torch._decomp import get_decompositions
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import graphwright
from graphwright.nonstrict import TRACE_RECORD_KEY

aten = torch.ops.aten
MODES = ("real", "fake", "symbolic")


def aten_ops(gm):
    return [str(n.target) for n in gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]


def test_fake_inputs_keep_their_fake_mode_and_shape_env():
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    x = fake_mode.from_tensor(torch.randn(4, 3))
    gm = graphwright.make_fx(lambda x: x.sin() * x.shape[0], tracing_mode="symbolic")(x)
    placeholder = next(iter(gm.graph.nodes))
    assert placeholder.meta["val"] is x
    assert gm.meta[TRACE_RECORD_KEY].shape_env is fake_mode.shape_env
    for node in gm.graph.nodes:
        if isinstance(node.meta.get("val"), FakeTensor):
            assert node.meta["val"].fake_mode is fake_mode


def test_functional_mode_entered_inside_the_function_records_functional_ops():
    def f(x):
        with FunctionalTensorMode():
            fx = FunctionalTensor.to_functional(x)
            fx.mul_(2)
            out = fx + 1
        torch._sync(fx)
        return torch._from_functional_tensor(out.elem), torch._from_functional_tensor(fx.elem)

    x = torch.randn(3)
    for mode in MODES:
        gm = graphwright.make_fx(f, tracing_mode=mode)(x)
        assert aten_ops(gm) == ["aten.mul.Tensor", "aten.add.Tensor"]
        out, mutated = gm(x)
        torch.testing.assert_close(out, x * 2 + 1)
        torch.testing.assert_close(mutated, x * 2)


def sin_and_grad(x):
    y = (x.sin() * 2).sum()
    (gx,) = torch.autograd.grad(y, x)
    return y, gx


@pytest.mark.parametrize("mode", MODES)
def test_autograd_grad_inside_the_function_records_the_backward_ops(mode):
    x = torch.randn(5, requires_grad=True)
    gm = graphwright.make_fx(sin_and_grad, tracing_mode=mode)(x)
    assert "aten.cos.default" in aten_ops(gm)
    fresh = torch.randn(5)
    y, gx = gm(fresh)
    torch.testing.assert_close(gx, 2 * fresh.cos())
    torch.testing.assert_close(y, (fresh.sin() * 2).sum())


@pytest.mark.parametrize("mode", MODES)
def test_graph_of_inputs_requiring_grad_differentiates_like_eager(mode):
    def f(x, w):
        return (x @ w).tanh().sum()

    x, w = torch.randn(3, 4), torch.randn(4, 2, requires_grad=True)
    gm = graphwright.make_fx(f, tracing_mode=mode)(x, w)
    w_graph = w.detach().clone().requires_grad_()
    gm(x, w_graph).backward()
    f(x, w).backward()
    torch.testing.assert_close(w_graph.grad, w.grad)


@pytest.mark.parametrize("mode", MODES)
def test_every_placeholder_and_tensor_node_carries_its_metadata(mode):
    def f(x, n):
        y = x.view(x.shape[0] * 2, -1)
        return y.sum(0), x.shape[0] + n

    x = torch.randn(4, 6)
    gm = graphwright.make_fx(f, tracing_mode=mode)(x, 3)
    y_node = next(n for n in gm.graph.nodes if n.target is aten.view.default)
    assert tuple(y_node.meta["val"].shape) == (8, 3) or mode == "symbolic"
    for node in gm.graph.nodes:
        if node.op == "output":
            continue
        assert "val" in node.meta, node
        val = node.meta["val"]
        if mode == "real" and isinstance(val, torch.Tensor):
            assert val.device.type == "meta"
        if mode != "real" and isinstance(val, torch.Tensor):
            assert isinstance(val, FakeTensor)
    if mode == "symbolic":
        sym_nodes = [n for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.SymInt)]
        assert any(n.target is aten.sym_size.int for n in sym_nodes)
        assert str(y_node.meta["val"].shape[0]) == str(sym_nodes[0].meta["val"] * 2)
        other = torch.randn(5, 6)
        torch.testing.assert_close(gm(other, 3)[0], f(other, 3)[0])
        assert gm(other, 3)[1] == 8


captured_weight = torch.nn.Parameter(torch.randn(3))


def uses_captured_weight(x):
    return x * captured_weight


def test_trace_record_lists_captured_constants_with_the_users_line():
    gm = graphwright.make_fx(uses_captured_weight, tracing_mode="fake", _allow_non_fake_inputs=True)(
        torch.randn(3)
    )
    record = gm.meta[TRACE_RECORD_KEY]
    assert record.tracing_mode == "fake"
    (constant,) = record.constants
    assert constant.requires_grad and constant.is_parameter and not constant.from_literal
    line = uses_captured_weight.__code__.co_firstlineno + 1
    assert constant.user_location == f"{__file__}:{line}"
    assert getattr(gm, constant.target) is captured_weight


def test_tensor_literals_are_recorded_as_literal_constants_without_opt_in():
    gm = graphwright.make_fx(lambda x: x + torch.tensor([1.0, 2.0]), tracing_mode="fake")(torch.randn(2))
    (constant,) = gm.meta[TRACE_RECORD_KEY].constants
    assert constant.from_literal
    assert "aten.lift_fresh_copy.default" in aten_ops(gm)


def test_trace_record_exposes_the_shape_env_and_its_guards_in_symbolic_mode():
    def f(x):
        return x * 2 if x.shape[0] > 2 else x

    gm = graphwright.make_fx(f, tracing_mode="symbolic")(torch.randn(4))
    shape_env = gm.meta[TRACE_RECORD_KEY].shape_env
    assert isinstance(shape_env, ShapeEnv)
    assert gm.shape_env is shape_env
    assert any(">" in str(guard.expr) or "<" in str(guard.expr) for guard in shape_env.guards)
    assert graphwright.make_fx(f, tracing_mode="real")(torch.randn(4)).meta[TRACE_RECORD_KEY].shape_env is None


@pytest.mark.parametrize("mode", MODES)
def test_decomposition_table_replaces_ops_with_their_recorded_decomposition(mode):
    def f(x, w, b):
        return torch.addmm(b, x, w).sigmoid()

    table = get_decompositions([aten.addmm, aten.sigmoid])
    inputs = (torch.randn(3, 4), torch.randn(4, 5), torch.randn(5))
    gm = graphwright.make_fx(f, table, tracing_mode=mode)(*inputs)
    assert "aten.addmm.default" not in aten_ops(gm) and "aten.sigmoid.default" not in aten_ops(gm)
    assert aten_ops(gm) == aten_ops(torch_make_fx(f, table, tracing_mode=mode)(*inputs))
    torch.testing.assert_close(gm(*inputs), f(*inputs))


def test_composite_implicit_ops_decompose_as_in_pytorch_even_under_inference_mode():
    def f(x, w):
        with torch.inference_mode():
            return F.linear(x, w)

    x, w = torch.randn(2, 4), torch.randn(3, 4)
    gm = graphwright.make_fx(f, tracing_mode="fake")(x, w)
    assert "aten.linear.default" not in aten_ops(gm)
    assert aten_ops(gm) == aten_ops(torch_make_fx(f, tracing_mode="fake")(x, w))
    torch.testing.assert_close(gm(x, w), F.linear(x, w))


def test_later_uses_of_an_in_place_result_read_the_in_place_node():
    def f(x):
        x.add_(1)
        return x * 2

    gm = graphwright.make_fx(f, tracing_mode="fake")(torch.randn(3))
    add_ = next(n for n in gm.graph.nodes if n.target is aten.add_.Tensor)
    mul = next(n for n in gm.graph.nodes if n.target is aten.mul.Tensor)
    assert mul.args[0] is add_
    x = torch.randn(3)
    expected_input, expected = x.clone(), f(x.clone())
    actual = gm(x)
    expected_input.add_(1)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x, expected_input)


def test_random_factories_in_real_mode_are_recorded_not_baked_in():
    gm = graphwright.make_fx(lambda x: x + torch.randn(x.shape), tracing_mode="real")(torch.randn(3))
    assert "aten.randn.default" in aten_ops(gm)
    assert not gm.meta[TRACE_RECORD_KEY].constants
    torch.manual_seed(7)
    first = gm(torch.zeros(3))
    torch.manual_seed(7)
    torch.testing.assert_close(first, torch.randn(3))


def test_unsupported_output_is_an_invalid_input_error():
    class Opaque:
        pass

    with pytest.raises(graphwright.InvalidInputError, match="Unsupported output type `.*Opaque`"):
        graphwright.make_fx(lambda x: Opaque())(torch.randn(2))


def test_unknown_tracing_mode_is_an_invalid_input_error():
    with pytest.raises(graphwright.InvalidInputError, match="tracing_mode"):
        graphwright.make_fx(lambda x: x, tracing_mode="lazy")


def test_symint_inputs_become_placeholders_that_compute_sizes():
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    x = fake_mode.from_tensor(torch.randn(4, 6))

    def f(n, x):
        return x.view(n * 3, -1), n + 1

    gm = graphwright.make_fx(f, tracing_mode="symbolic")(x.shape[0], x)
    n_placeholder = next(iter(gm.graph.nodes))
    assert n_placeholder.meta["val"].node.expr == x.shape[0].node.expr
    assert aten.sym_size.int not in [n.target for n in gm.graph.nodes]
    y = torch.randn(5, 6)
    view, n_plus_one = gm(5, y)
    torch.testing.assert_close(view, y.view(15, -1))
    assert n_plus_one == 6


def test_traced_module_buffers_are_updated_by_the_graph_as_by_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    reference = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    reference.load_state_dict(model.state_dict())
    x = torch.randn(8, 4)
    gm = graphwright.make_fx(model, tracing_mode="fake")(x)
    torch.testing.assert_close(model[1].running_mean, torch.zeros(4))  # tracing touched nothing
    torch.testing.assert_close(gm(x), reference(x))
    for name, buffer in reference.named_buffers():
        torch.testing.assert_close(model.get_buffer(name), buffer)


def test_arguments_named_like_names_of_the_generated_code_still_work():
    def f(torch_, device):
        return torch_ * 2, device

    def g(torch):
        return torch + 1

    x = torch.randn(3)
    gm = graphwright.make_fx(f)(x, torch.device("cpu"))
    torch.testing.assert_close(gm(x, torch.device("cpu"))[0], x * 2)
    torch.testing.assert_close(graphwright.make_fx(g)(x)(x), x + 1)


def test_constants_read_only_by_dead_code_are_not_recorded():
    def f(x):
        unused = x + captured_weight  # noqa: F841
        return x * 2

    gm = graphwright.make_fx(f, tracing_mode="fake", _allow_non_fake_inputs=True)(torch.randn(3))
    assert gm.meta[TRACE_RECORD_KEY].constants == []
    assert "get_attr" not in [n.op for n in gm.graph.nodes]


def test_graph_module_constants_are_module_state_in_fake_mode():
    def f(x):
        return x + torch.tensor([1.0, 2.0, 3.0])

    real_graph = graphwright.make_fx(f)(torch.randn(3))  # holds a plain tensor attribute
    gm = graphwright.make_fx(real_graph, tracing_mode="fake")(torch.randn(3))
    (constant,) = gm.meta[TRACE_RECORD_KEY].constants
    assert constant.is_module_state
    x = torch.randn(3)
    torch.testing.assert_close(gm(x), f(x))


def test_keyword_arguments_to_the_traced_function_are_a_clear_error():
    with pytest.raises(graphwright.InvalidInputError, match="positional arguments only"):
        graphwright.make_fx(lambda x, y=1: x * y)(torch.randn(2), y=2)


def test_unused_random_draws_stay_in_the_graph_so_the_generator_advances_as_in_eager():
    def f(x):
        torch.rand(3)  # result unused, but it moves the generator
        return x + torch.rand(3)

    gm = graphwright.make_fx(f)(torch.zeros(3))
    assert aten_ops(gm).count("aten.rand.default") == 2
    torch.manual_seed(3)
    expected = f(torch.zeros(3))
    torch.manual_seed(3)
    torch.testing.assert_close(gm(torch.zeros(3)), expected)


def test_late_inputs_join_the_graph_after_the_others_and_what_makes_them_is_not_recorded():
    from graphwright.nonstrict.make_fx import LateInputs, trace_aten_graph

    fake_mode = FakeTensorMode()
    x = fake_mode.from_tensor(torch.randn(4, 3))
    late = LateInputs()

    def f(x):
        y = x.sin()
        (t,) = late.add(lambda: [torch.ones(y.shape)])  # its shape known only now
        return (y * t,)

    with fake_mode:
        gm = trace_aten_graph(f, (x,), None, generate_code=False, late_inputs=late)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 2 and list(gm.graph.nodes)[:2] == placeholders
    assert tuple(placeholders[1].meta["val"].shape) == (4, 3)
    assert aten_ops(gm) == ["aten.sin.default", "aten.mul.Tensor"]
    real_x, real_t = torch.randn(4, 3), torch.randn(4, 3)
    torch.testing.assert_close(gm(real_x, real_t)[0], real_x.sin() * real_t)
