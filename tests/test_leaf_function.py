"""leaf_function: opaque at every level, the original Python runs at run time every call,
output metadata from the registered fake."""
import pytest
import torch

import graphwright
from graphwright.testing import CompileCounterWithBackend
from tests.test_nonstrict_trace_training import Recording

CALLS = []


@graphwright.leaf_function
def compute_and_log_stats(x):
    stats = x.mean(dim=1)
    CALLS.append(float(stats.sum()))  # needs real data: impossible to trace
    return (stats,)


@compute_and_log_stats.register_fake
def compute_and_log_stats_fake(x):
    return (x.new_empty(x.shape[0]),)


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    CALLS.clear()
    yield
    graphwright.reset()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_original_python_runs_at_run_time_on_every_call(backend):
    counter = CompileCounterWithBackend(backend)

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(x):
        return compute_and_log_stats(x)[0] * 2

    x = torch.randn(3, 4)
    torch.testing.assert_close(fn(x), x.mean(dim=1) * 2)
    fn(x)
    assert counter.frame_count == 1
    assert CALLS == pytest.approx([float(x.mean(dim=1).sum())] * 2)


def test_leaf_function_stays_one_opaque_operator_in_the_aten_graph():
    recording = Recording("aot_eager")

    @graphwright.compile(fullgraph=True, backend=recording)
    def fn(x):
        return compute_and_log_stats(x)[0] + 1

    fn(torch.randn(3, 4))
    code = recording.aten_code()
    assert "graphwright.leaf_call" in code
    assert "aten.mean" not in code


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_returning_none_still_runs_for_its_side_effect(backend):
    @graphwright.leaf_function
    def debug_log(t):
        CALLS.append("logged")

    @debug_log.register_fake
    def _(t):
        return None

    @graphwright.compile(fullgraph=True, backend=backend)
    def fn(x):
        debug_log(x)
        return x + 1

    fn(torch.randn(2))
    fn(torch.randn(2))
    assert CALLS == ["logged", "logged"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients_flow_through_a_leaf_function(backend):
    @graphwright.leaf_function
    def scaled(x, w):
        return x * w.exp()

    @scaled.register_fake
    def _(x, w):
        return torch.empty_like(x)

    @graphwright.compile(fullgraph=True, backend=backend)
    def fn(x, w):
        return scaled(x, w).sum()

    x, w = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    fn(x, w).backward()
    x_ref, w_ref = x.detach().requires_grad_(), w.detach().requires_grad_()
    (x_ref * w_ref.exp()).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    torch.testing.assert_close(w.grad, w_ref.grad)


def test_primitive_outputs_come_from_the_fake_at_trace_time():
    counter = {"n": 0}

    @graphwright.leaf_function
    def count_calls(x):
        counter["n"] += 1
        return (x, counter["n"])

    @count_calls.register_fake
    def _(x):
        return (torch.empty_like(x), 999)

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return count_calls(x)[1]

    assert fn(torch.randn(2)) == 999
    assert counter["n"] == 1


def test_missing_fake_is_a_clear_error():
    @graphwright.leaf_function
    def no_fake(x):
        return x + 1

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return no_fake(x)

    with pytest.raises(graphwright.Unsupported) as info:
        fn(torch.randn(2))
    message = str(info.value)
    assert "leaf_function without a fake implementation" in message
    assert "register_fake" in message and "test_leaf_function.py" in message


def test_leaf_function_taking_a_module_runs_it_eagerly_with_its_parameters():
    @graphwright.leaf_function
    def apply(module, x):
        CALLS.append("ran")
        return module(x)

    @apply.register_fake
    def _(module, x):
        return x.new_empty(x.shape[0], module.out_features)

    linear = torch.nn.Linear(3, 2)

    @graphwright.compile(fullgraph=True, backend="aot_eager")
    def fn(x):
        return apply(linear, x)

    x = torch.randn(4, 3)
    torch.testing.assert_close(fn(x), linear(x))
    fn(x).sum().backward()
    assert linear.weight.grad is not None and CALLS == ["ran", "ran"]  # once per call


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_mutates_args_declares_an_in_place_update(backend):
    @graphwright.leaf_function(mutates_args={"buf"})
    def accumulate(buf, x):
        buf.add_(x)
        return (x * 2,)

    @accumulate.register_fake
    def _(buf, x):
        return (torch.empty_like(x),)

    @graphwright.compile(fullgraph=True, backend=backend)
    def fn(buf, x):
        return accumulate(buf, x)[0]

    buf, x = torch.zeros(3), torch.ones(3)
    torch.testing.assert_close(fn(buf, x), x * 2)
    torch.testing.assert_close(buf, torch.ones(3))
    fn(buf, x)
    torch.testing.assert_close(buf, torch.full((3,), 2.0))


@pytest.mark.slow
def test_leaf_function_after_a_nonstrict_trace_call_under_inductor():
    @graphwright.leaf_function
    def doubled(x):
        CALLS.append("ran")
        return x * 2

    @doubled.register_fake
    def _(x):
        return torch.empty_like(x)

    @graphwright.nonstrict_trace
    def body(module, x):
        graphwright.graph_break()
        return module(x).relu()

    linear = torch.nn.Linear(4, 4)

    @graphwright.compile(fullgraph=True, backend="inductor")
    def fn(x):
        return doubled(body(linear, x)).sum()

    x = torch.randn(3, 4)
    out = fn(x)
    out.backward()
    grad = linear.weight.grad.clone()
    linear.weight.grad = None
    expected = (linear(x).relu() * 2).sum()
    expected.backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grad, linear.weight.grad)
    assert CALLS == ["ran"]  # once per call: the backward differentiates the call's own graph


def test_fake_that_raises_is_a_clear_error_at_the_users_line_in_the_fake():
    @graphwright.leaf_function
    def f(x):
        return x + 1

    @f.register_fake
    def _(x):
        return x.new_empty(int(x.sum()))  # needs data: a fake cannot do this

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return f(x)

    with pytest.raises(graphwright.Unsupported) as info:
        fn(torch.randn(2))
    assert "Error in the fake implementation of a leaf_function" in str(info.value)
    assert info.value.user_stack[-1].line.startswith("return x.new_empty(int(x.sum()))")


@graphwright.leaf_function
def _doubled_if_positive(t):
    CALLS.append(type(t).__name__)
    return (t * 2,) if t.sum() > 0 else (t * 3,)


@_doubled_if_positive.register_fake
def _doubled_if_positive_fake(t):
    return (torch.empty_like(t),)


def test_tensor_subclass_argument_is_a_graph_break_and_the_function_runs_once_on_it():
    # As an operator, a TwoTensor's __torch_dispatch__ would run the function once per
    # half, each half taking its own branch (found by the program generator).
    from torch.testing._internal.two_tensor import TwoTensor

    def fn(x, pair):
        return _doubled_if_positive(pair)[0] + x

    def pair():
        return TwoTensor(torch.tensor([1.0, 2.0]), torch.tensor([-5.0, 1.0]))

    with pytest.raises(graphwright.Unsupported, match="Tensor subclass passed to leaf_function"):
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.zeros(2), pair())
    expected = fn(torch.zeros(2), pair())
    for backend in ("eager", "aot_eager"):
        graphwright.reset()
        CALLS.clear()
        out = graphwright.compile(fn, backend=backend)(torch.zeros(2), pair())
        assert CALLS == ["TwoTensor"]
        assert type(out) is TwoTensor
        torch.testing.assert_close(out.a, expected.a)
        torch.testing.assert_close(out.b, expected.b)


@graphwright.leaf_function
def _halved(t):
    return (t * 0.5,)


@_halved.register_fake
def _halved_fake(t):
    return (torch.empty_like(t),)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradient_that_is_a_tensor_subclass_runs_the_kept_graph_once_per_inner_tensor(backend):
    # The leaf's output meets a TwoTensor later, so the gradient reaching the leaf's backward
    # operator is one, and its __torch_dispatch__ calls that operator once per half: the
    # local graph must survive the first (found by the program generator: "backward through
    # the graph a second time").
    from torch.testing._internal.two_tensor import TwoTensor

    weight = TwoTensor(torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0]))

    def fn(x):
        return _halved(x.sin())[0] * weight

    def grad(compiled):
        graphwright.reset()
        x = torch.tensor([0.3, -0.7], requires_grad=True)
        out = graphwright.compile(fn, backend=backend)(x) if compiled else fn(x)
        out.sum().backward()
        return x.grad

    actual, expected = grad(compiled=True), grad(compiled=False)
    assert type(actual) is type(expected) is TwoTensor
    torch.testing.assert_close(actual.a, expected.a)
    torch.testing.assert_close(actual.b, expected.b)
