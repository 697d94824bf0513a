"""Errors of non-strict tracing: typed, naming the user's line, ending with a hint."""
import pytest
import torch

import graphwright

FAKE_MODES = ("fake", "symbolic")


def line_of(fn, offset=1):
    return fn.__code__.co_firstlineno + offset


class NotRegistered:
    def __init__(self):
        self.t = torch.randn(2)


def test_unregistered_class_input_names_the_call_line_and_suggests_registering():
    with pytest.raises(graphwright.InvalidInputError) as info:
        graphwright.make_fx(lambda o: o.t * 2)(NotRegistered())  # the call line
    error = info.value
    assert "NotRegistered" in error.title
    assert "# the call line" in str(error)
    assert any("torch.utils._pytree" in hint for hint in error.hints)


def test_module_passed_as_an_argument_is_an_invalid_input_with_a_module_hint():
    with pytest.raises(graphwright.InvalidInputError) as info:
        graphwright.make_fx(lambda m, x: m(x))(torch.nn.Linear(2, 2), torch.randn(2))
    assert "`Linear`" in info.value.title
    assert "make_fx(module)" in info.value.hints[0]


def branch_on_data(x):
    if x.sum() > 0:
        return x
    return -x


def item_of(x):
    return x * x.sum().item()


def tolist_of(x):
    return x[: int(x.tolist()[0])]


def nonzero_of(x):
    return x.nonzero()


@pytest.mark.parametrize("mode", FAKE_MODES)
@pytest.mark.parametrize("fn", [branch_on_data, item_of, tolist_of, nonzero_of])
def test_data_dependent_python_on_fake_tensors_is_a_data_dependent_error(fn, mode):
    x = torch.arange(1.0, 4.0)
    with pytest.raises(graphwright.DataDependentError) as info:
        graphwright.make_fx(fn, tracing_mode=mode)(x)
    assert info.value.user_location == f"{__file__}:{line_of(fn)}"
    assert any('tracing_mode="real"' in hint for hint in info.value.hints)


@pytest.mark.parametrize("fn", [branch_on_data, item_of, nonzero_of])
def test_data_dependent_python_traces_in_real_mode(fn):
    x = torch.arange(1.0, 4.0)
    gm = graphwright.make_fx(fn, tracing_mode="real")(x)
    torch.testing.assert_close(gm(x), fn(x))


@torch.library.custom_op("gw_make_fx_test::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


@torch.library.custom_op("gw_make_fx_test::with_fake", mutates_args=())
def with_fake(x: torch.Tensor) -> torch.Tensor:
    return x.cos()


@with_fake.register_fake
def _(x):
    return torch.empty_like(x)


def calls_no_fake(x):
    return no_fake(x) + 1


@pytest.mark.parametrize("mode", FAKE_MODES)
def test_op_without_fake_kernel_is_a_missing_fake_kernel_error(mode):
    with pytest.raises(graphwright.MissingFakeKernelError) as info:
        graphwright.make_fx(calls_no_fake, tracing_mode=mode)(torch.randn(3))
    assert info.value.user_location == f"{__file__}:{line_of(calls_no_fake)}"
    assert "torch.library.register_fake" in info.value.hints[0]
    x = torch.randn(3)
    torch.testing.assert_close(graphwright.make_fx(calls_no_fake, tracing_mode="real")(x)(x), calls_no_fake(x))


@pytest.mark.parametrize("mode", FAKE_MODES)
def test_op_with_registered_fake_kernel_traces_as_one_node(mode):
    x = torch.randn(3)
    gm = graphwright.make_fx(lambda x: with_fake(x) * 2, tracing_mode=mode)(x)
    assert torch.ops.gw_make_fx_test.with_fake.default in [n.target for n in gm.graph.nodes]
    torch.testing.assert_close(gm(x), x.cos() * 2)


closure_tensor = torch.ones(3)


def reads_global(x):
    return x - closure_tensor


@pytest.mark.parametrize("mode", FAKE_MODES)
def test_real_tensor_that_is_not_an_input_is_a_non_fake_input_error(mode):
    with pytest.raises(graphwright.NonFakeInputError) as info:
        graphwright.make_fx(reads_global, tracing_mode=mode)(torch.randn(3))
    assert info.value.user_location == f"{__file__}:{line_of(reads_global)}"
    assert "_allow_non_fake_inputs=True" in info.value.hints[0]


def test_real_tensor_that_is_not_an_input_is_a_constant_in_real_mode():
    gm = graphwright.make_fx(reads_global)(torch.randn(3))
    assert [n.op for n in gm.graph.nodes].count("get_attr") == 1
    x = torch.randn(3)
    torch.testing.assert_close(gm(x), reads_global(x))


def reads_memory(x):
    return x.data_ptr()


@pytest.mark.parametrize("mode", FAKE_MODES)
def test_data_ptr_on_fake_tensors_is_a_trace_error_naming_the_line(mode):
    with pytest.raises(graphwright.TraceError) as info:
        graphwright.make_fx(reads_memory, tracing_mode=mode)(torch.randn(3))
    assert "cannot follow raw memory access" in info.value.explanation
    assert info.value.user_location == f"{__file__}:{line_of(reads_memory)}"
    assert info.value.hints


def test_error_text_has_title_explanation_hint_and_user_code():
    with pytest.raises(graphwright.DataDependentError) as info:
        graphwright.make_fx(item_of, tracing_mode="fake")(torch.randn(3))
    text = str(info.value)
    assert text.splitlines()[0] == info.value.title
    assert "  Explanation: " in text and "  Hint: " in text
    assert "from user code:" in text and "return x * x.sum().item()" in text


def uses_cond(x):
    return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))


@pytest.mark.parametrize("mode", ("real", "fake"))
def test_higher_order_operator_is_a_trace_error_naming_the_line(mode):
    with pytest.raises(graphwright.TraceError) as info:
        graphwright.make_fx(uses_cond, tracing_mode=mode)(torch.randn(3))
    assert "`cond`" in info.value.title
    assert info.value.user_location == f"{__file__}:{line_of(uses_cond)}"


@pytest.mark.filterwarnings("ignore:.*quantized tensor creation:UserWarning")
def test_input_fake_tensors_cannot_represent_is_an_invalid_input_error():
    quantized = torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.quint8)
    with pytest.raises(graphwright.InvalidInputError) as info:
        graphwright.make_fx(lambda q: q.dequantize(), tracing_mode="fake")(quantized)
    assert "`q`" in info.value.title
    assert 'tracing_mode="real"' in info.value.hints[0]
    gm = graphwright.make_fx(lambda q: q.dequantize())(quantized)
    torch.testing.assert_close(gm(quantized), quantized.dequantize())
