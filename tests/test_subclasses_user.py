"""Tensor subclasses as users write them, compiled with the strict tracer, `aot_eager` and `inductor`.

- a `_make_wrapper_subclass` subclass with its own `__torch_dispatch__` and the flatten
  protocol (`ScaledTensor`: data and a constant scale, unwrapped, computed, rewrapped);
- a subclass with `__torch_function__` only (`LoggedTensor`);
- a plain Python subclass (`TaggedTensor`);
- a traceable wrapper subclass made inside the region (`TwoTensor(x, x * 2)`).

Each: the values, class, metadata and gradients eager gives, and as many graphs as
`torch.compile` captures of the same program.
"""
import warnings

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from torch.testing._internal.two_tensor import TwoTensor

import graphwright
from graphwright.testing import CompileCounterWithBackend

from subclass_models import LoggedTensor, RoundedTensor, ScaledTensor, TaggedTensor

BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    torch._dynamo.reset()
    yield
    graphwright.reset()


def copied(value):
    if isinstance(value, ScaledTensor):
        return ScaledTensor(copied(value.data_), value.scale).requires_grad_(value.requires_grad)
    if isinstance(value, TwoTensor):
        return TwoTensor(copied(value.a), copied(value.b)).requires_grad_(value.requires_grad)
    return value.detach().clone().as_subclass(type(value)).requires_grad_(value.requires_grad)


def assert_same(actual, expected):
    assert type(actual) is type(expected)
    assert actual.shape == expected.shape and actual.stride() == expected.stride()
    assert actual.dtype == expected.dtype and actual.requires_grad == expected.requires_grad
    if isinstance(expected, ScaledTensor):
        assert actual.scale == expected.scale
        assert_same(actual.data_, expected.data_)
    elif isinstance(expected, TwoTensor):
        assert_same(actual.a, expected.a)
        assert_same(actual.b, expected.b)
    else:
        torch.testing.assert_close(actual.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor))


def torch_compile_frames(fn, *args):
    counter = torch._dynamo.testing.CompileCounter()
    torch.compile(fn, backend=counter)(*args)
    return counter.frame_count


def check(fn, make_args, backend, grad=True, frames=None):
    """`fn` compiled vs eager: outputs, gradients of every input that requires grad, and the
    number of graphs against torch.compile's (or `frames`, where torch.compile fails)."""
    args = make_args()
    eager_args = [copied(a) for a in args]
    counter = CompileCounterWithBackend(backend)
    actual = graphwright.compile(fn, backend=counter)(*args)
    expected = fn(*eager_args)
    assert_same(actual, expected)
    if grad:
        actual.sum().backward()
        expected.sum().backward()
        for arg, eager_arg in zip(args, eager_args):
            if arg.requires_grad and eager_arg.grad is None:
                assert arg.grad is None
            elif arg.requires_grad:
                assert_same(arg.grad, eager_arg.grad)
    assert counter.frame_count == (frames if frames is not None else
                                   torch_compile_frames(fn, *[copied(a) for a in make_args()]))
    return counter


def _scaled_product(x, w):
    return (x * w).tanh().sum(0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_users_dispatch_subclass_computes_and_differentiates_as_eager(backend):
    counter = check(_scaled_product, lambda: [ScaledTensor(torch.randn(3, 2), 0.5).requires_grad_(),
                                              torch.randn(3, 2, requires_grad=True)], backend)
    assert counter.frame_count == 1


def _logged(x, w):
    return (x * 2 + w).sin()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_torch_function_subclass_keeps_its_class_and_gradients(backend):
    LoggedTensor.calls.clear()
    check(_logged, lambda: [torch.randn(3).as_subclass(LoggedTensor).requires_grad_(),
                            torch.randn(3, requires_grad=True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_torch_function_subclass_sees_the_calls_eager_makes_and_no_other(backend):
    x, w = torch.randn(3).as_subclass(LoggedTensor), torch.randn(3)
    compiled = graphwright.compile(_logged, backend=backend, fullgraph=True)
    LoggedTensor.calls.clear()
    compiled(x, w)  # compiles: reading the input's metadata runs no __torch_function__
    compiled_calls = list(LoggedTensor.calls)
    LoggedTensor.calls.clear()
    _logged(x, w)
    assert compiled_calls == LoggedTensor.calls == ["mul", "add", "sin"]


def _reads_properties(x):
    return x.T * x.shape[0] + x.ndim, x.dtype, x.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_torch_function_subclass_sees_the_property_reads_eager_makes(backend):
    """Reading `x.T`, `x.shape`... on a subclass calls its hook with `Tensor.<name>.__get__`."""
    x = torch.randn(2, 3).as_subclass(LoggedTensor)
    compiled = graphwright.compile(_reads_properties, backend=backend, fullgraph=True)
    LoggedTensor.calls.clear()
    actual = compiled(x)
    compiled_calls = list(LoggedTensor.calls)
    LoggedTensor.calls.clear()
    expected = _reads_properties(x)
    assert compiled_calls == LoggedTensor.calls == ["__get__", "__get__", "mul", "__get__", "add", "__get__",
                                                    "__get__"]
    assert_same(actual[0], expected[0])
    assert actual[1:] == expected[1:]


class _TenDimensions(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func == torch.Tensor.ndim.__get__:
            return 10
        return super().__torch_function__(func, types, args, kwargs)


def _ndim_plus_ones(w):
    return w.ndim + torch.ones(2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_torch_function_subclass_answers_a_property_read_as_in_eager(backend):
    w = torch.ones(2, 2).as_subclass(_TenDimensions)
    counter = CompileCounterWithBackend(backend)
    actual = graphwright.compile(_ndim_plus_ones, backend=counter, fullgraph=True)(w)
    assert_same(actual, _ndim_plus_ones(w))
    torch.testing.assert_close(actual, torch.full((2,), 11.0))
    assert counter.frame_count == torch_compile_frames(_ndim_plus_ones, w) == 1


def _reads_what_intermediates_hold(x, w):
    t = x * 2 + w
    s = ScaledTensor(w.detach() * 1, 3.0) + 1
    return t.a.sin() + t.b, s.data_ * s.scale, s.scale


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_a_wrapper_subclass_intermediate_holds_is_read_as_in_eager(backend):
    """Inner tensors and constants of a subclass made by an operation in the region."""
    x = TwoTensor(torch.randn(3), torch.randn(3)).requires_grad_()
    w = torch.randn(3, requires_grad=True)
    counter = CompileCounterWithBackend(backend)
    actual = graphwright.compile(_reads_what_intermediates_hold, backend=counter, fullgraph=True)(x, w)
    expected = _reads_what_intermediates_hold(x, w)
    assert_same(actual[0], expected[0])
    assert_same(actual[1], expected[1])
    assert actual[2] == expected[2]
    assert counter.frame_count == torch_compile_frames(_reads_what_intermediates_hold, x, w) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_torch_function_subclass_with_its_own_semantics_keeps_them(backend):
    # torch.compile fails on this program (RecursionError in TorchDynamo): one graph
    check(_logged, lambda: [torch.randn(3).as_subclass(RoundedTensor).requires_grad_(),
                            torch.randn(3, requires_grad=True)], backend, frames=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_plain_python_subclass_keeps_its_class_and_gradients(backend):
    check(_logged, lambda: [torch.randn(3).as_subclass(TaggedTensor).requires_grad_(),
                            torch.randn(3, requires_grad=True)], backend)


def _made_in_the_region(x):
    return TwoTensor(x, x * 2) * 3


def _scaled_in_the_region(x, w):
    return (ScaledTensor(x.cos(), 0.25) * w).sum(0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_made_in_the_region_is_one_graph_as_in_torch_compile(backend):
    counter = check(_made_in_the_region, lambda: [torch.randn(3)], backend, grad=False)
    assert counter.frame_count == 1 and counter.op_count == 3  # mul, TwoTensor, mul


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_made_in_the_region_carries_gradients_of_what_it_meets(backend):
    check(_scaled_in_the_region, lambda: [torch.randn(3, 2), torch.randn(3, 2, requires_grad=True)], backend)


def test_a_subclass_made_of_tensors_that_require_grad_is_a_new_leaf_as_in_eager():
    def made(x):
        return TwoTensor(x, x * 2)

    x = torch.randn(3, requires_grad=True)
    actual = graphwright.compile(made, backend="aot_eager", fullgraph=True)(x)
    expected = made(x)
    assert actual.requires_grad and actual.is_leaf and expected.is_leaf
    actual.sum().backward()
    assert x.grad is None  # no gradient reaches x through the constructor, in eager neither


@pytest.mark.parametrize("mutation", ["of_the_subclass", "of_a_tensor_it_holds"])
def test_a_subclass_made_in_the_region_and_mutated_runs_as_captured(mutation):
    def made_then_mutated(x, y):
        t = TwoTensor(x, y)
        (t if mutation == "of_the_subclass" else x).add_(1)
        return t * 2

    x, y = torch.randn(3), torch.randn(3)
    x2, y2 = x.clone(), y.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = graphwright.compile(made_then_mutated, backend="aot_eager", fullgraph=True)(x, y)
    assert_same(actual, made_then_mutated(x2, y2))
    torch.testing.assert_close(x, x2)
    torch.testing.assert_close(y, y2)
    refusals = [str(w.message) for w in caught if "without its backend" in str(w.message)]
    assert len(refusals) == 1 and "makes a `TwoTensor` and mutates it" in refusals[0]


def test_a_subclass_made_from_other_arguments_breaks_naming_it():
    def made_with_a_list(x):
        return TwoTensor(x, x, outer_size=list(x.shape)) * 2

    x = torch.randn(3)
    explanation = graphwright.explain(made_with_a_list)(x)
    assert explanation.graph_break_count == 1
    assert "the tensor subclass TwoTensor from arguments other than tensors and constants" \
        in str(explanation.break_reasons[0].reason)
    assert_same(graphwright.compile(made_with_a_list, backend="aot_eager")(x), made_with_a_list(x))


def test_isinstance_of_an_operation_on_a_subclass_sees_the_subclass():
    def branch(x):
        y = x.sin()
        return y + 1 if isinstance(y, TwoTensor) else y - 1

    x = TwoTensor(torch.randn(3), torch.randn(3))
    assert_same(graphwright.compile(branch, backend="eager", fullgraph=True)(x), branch(x))


class _StandsForATensor:
    """Not a tensor: an object whose class's `__torch_function__` takes torch's functions, as
    `torch.overrides` allows (it unwraps the tensor it holds and counts the calls)."""

    calls = 0

    def __init__(self, tensor):
        self.tensor = tensor

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls += 1
        unwrap = lambda value: value.tensor if isinstance(value, _StandsForATensor) else value  # noqa: E731
        args = [[unwrap(item) for item in arg] if isinstance(arg, list) else unwrap(arg) for arg in args]
        return func(*args, **{key: unwrap(value) for key, value in (kwargs or {}).items()})


def _add_and_stack(w, x):
    return torch.add(w, x, alpha=2.0), torch.stack([w, x])


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_object_with_torch_function_takes_the_torch_functions_it_is_given_as_in_eager(backend):
    w, x = _StandsForATensor(torch.randn(3)), torch.randn(3)
    _StandsForATensor.calls = 0
    expected = _add_and_stack(w, x)
    eager_calls = _StandsForATensor.calls
    actual = graphwright.compile(_add_and_stack, backend=backend, fullgraph=True)(w, x)
    for out, ref in zip(actual, expected):
        torch.testing.assert_close(out, ref)
    assert _StandsForATensor.calls == 2 * eager_calls  # the trace ran the hook as eager does
    torch._dynamo.reset()
    for out, ref in zip(torch.compile(_add_and_stack, backend=backend, fullgraph=True)(w, x), expected):
        torch.testing.assert_close(out, ref)


class _Marked(torch.Tensor):
    """A Python subclass with its own `__torch_function__`, a class attribute, a method and a
    property (found on the class before torch's, as Python looks them up)."""

    unit = 10

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})

    def doubled(self):
        return self * 2

    @property
    def offset(self):
        return self.unit + 1


class _Quantized(torch.nn.Parameter):
    """A Parameter subclass made with `_make_subclass` (diffusers' GGUFParameter's pattern): its
    `__torch_function__` goes through Parameter's disabled one and rewraps with its metadata."""

    def __new__(cls, data, requires_grad=False, quant_type=None):
        return torch.Tensor._make_subclass(cls, data, requires_grad)

    def __init__(self, *args, quant_type=None, **kwargs):
        self.quant_type = quant_type

    def as_tensor(self):
        return torch.Tensor._make_subclass(torch.Tensor, self, self.requires_grad)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        quant_type = next((arg.quant_type for arg in args if isinstance(arg, _Quantized)), None)
        return cls(result, quant_type=quant_type) if isinstance(result, torch.Tensor) else result


def _construct_and_read(x):
    made = _Marked(x + 1)  # an alias of its tensor, in autograd's graph
    return made.doubled() + made.unit + made.offset, _Marked(x).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_python_subclass_made_in_the_region_and_its_class_members_are_eagers(backend):
    x = torch.randn(3, requires_grad=True)
    x2 = copied(x)
    actual = graphwright.compile(_construct_and_read, backend=backend, fullgraph=True)(x)
    expected = _construct_and_read(x2)
    for out, ref in zip(actual, expected):
        assert type(out) is type(ref) is _Marked
        torch.testing.assert_close(out.as_subclass(torch.Tensor), ref.as_subclass(torch.Tensor))
    sum(out.sum() for out in actual).backward()
    sum(ref.sum() for ref in expected).backward()
    torch.testing.assert_close(x.grad, x2.grad)


def _dequantize(x):
    scaled = x * 2
    return (scaled + scaled.quant_type).as_tensor() * 3


def test_a_parameter_subclass_made_with_make_subclass_keeps_its_metadata_through_operations():
    x = _Quantized(torch.ones(2), quant_type=42)
    actual = graphwright.compile(_dequantize, backend="eager", fullgraph=True)(x)
    expected = _dequantize(x)
    assert type(actual) is type(expected) is torch.Tensor
    torch.testing.assert_close(actual, expected)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(_dequantize, backend="eager", fullgraph=True)(x), expected)


class _PlainMethodHook(torch.Tensor):
    """`__torch_function__` as a plain method (deprecated, still allowed): torch binds it to the
    argument it reads it on."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {})) * 2


def test_a_torch_function_defined_as_a_plain_method_is_bound_to_the_argument():
    x = torch.randn(3).as_subclass(_PlainMethodHook)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = x + 1
        actual = graphwright.compile(lambda x: x + 1, backend="eager", fullgraph=True)(x)
    assert type(actual) is type(expected)
    torch.testing.assert_close(actual, expected)
