"""Guards on tensor subclass inputs: what a graph specialised on in a subclass recompiles when it
changes — the class, the flatten context, each inner tensor's metadata — and nothing else does."""
import logging

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import graphwright
from graphwright._core import logs
from graphwright.testing import CompileCounterWithBackend

from subclass_models import LabelledTensor, ScaledTensor


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def _plus_one(x):
    return x * 3 + 1


def compiled_with_counter(fn, backend="aot_eager"):
    counter = CompileCounterWithBackend(backend)
    return graphwright.compile(fn, backend=counter, fullgraph=True), counter


def assert_same_scaled(actual, expected):
    assert type(actual) is ScaledTensor and actual.scale == expected.scale
    torch.testing.assert_close(actual.data_, expected.data_)


def test_equal_subclass_inputs_reuse_the_graph():
    compiled, counter = compiled_with_counter(_plus_one)
    for _ in range(3):
        x = ScaledTensor(torch.randn(3), 2.0)
        assert_same_scaled(compiled(x), _plus_one(x))
    assert counter.frame_count == 1


def test_another_flatten_context_recompiles_and_names_it():
    compiled, counter = compiled_with_counter(_plus_one)
    compiled(ScaledTensor(torch.randn(3), 2.0))
    x = ScaledTensor(torch.randn(3), 3.0)
    assert_same_scaled(compiled(x), _plus_one(x))
    assert counter.frame_count == 2
    assert list(graphwright.counters["recompiles"]) == [
        "tensor 'x' flattens to other inner tensors or context: expected ['data_'] with {'scale': 2.0}, "
        "actual ['data_'] with {'scale': 3.0}"]


def test_an_inner_tensor_of_other_strides_recompiles_and_names_it():
    """The outer tensor is contiguous both times; only the inner one's layout changes."""
    compiled, counter = compiled_with_counter(_plus_one)
    compiled(ScaledTensor(torch.randn(2, 3).t(), 2.0, outer_size=(3, 2), outer_stride=(2, 1)))
    x = ScaledTensor(torch.randn(3, 2), 2.0)
    assert_same_scaled(compiled(x), _plus_one(x))
    assert counter.frame_count == 2
    (reason,) = graphwright.counters["recompiles"]
    assert reason.startswith("tensor 'x.data_' stride mismatch")


def test_another_subclass_recompiles():
    compiled, counter = compiled_with_counter(_plus_one)
    compiled(ScaledTensor(torch.randn(3), 2.0))
    x = TwoTensor(torch.randn(3), torch.randn(3))
    actual = compiled(x)
    assert type(actual) is TwoTensor
    torch.testing.assert_close(actual.a, _plus_one(x).a)
    assert counter.frame_count == 2
    assert list(graphwright.counters["recompiles"]) == [
        "tensor 'x' type mismatch: expected ScaledTensor, actual TwoTensor"]


def test_inner_tensors_of_a_subclass_of_subclasses_are_guarded_all_the_way_down():
    compiled, counter = compiled_with_counter(lambda x: x * 2)
    compiled(TwoTensor(TwoTensor(torch.randn(3), torch.randn(3)), TwoTensor(torch.randn(3), torch.randn(3))))
    compiled(TwoTensor(TwoTensor(torch.randn(3), torch.randn(3)), TwoTensor(torch.randn(3), torch.randn(3))))
    assert counter.frame_count == 1
    double = TwoTensor(TwoTensor(torch.randn(3).double(), torch.randn(3).double()),
                       TwoTensor(torch.randn(3).double(), torch.randn(3).double()))
    torch.testing.assert_close(compiled(double).a.b, double.a.b * 2)
    assert counter.frame_count == 2


def test_the_guards_say_what_they_check():
    class Records(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    handler = Records()
    logs.ROOT.addHandler(handler)
    graphwright.set_logs(guards=True)
    try:
        graphwright.compile(_plus_one, backend="eager")(ScaledTensor(torch.randn(3), 2.0))
    finally:
        graphwright.set_logs()
        logs.ROOT.removeHandler(handler)
    text = "\n".join(handler.messages)
    assert "tensor x flattens to ['data_'] with context {'scale': 2.0}" in text
    assert "tensor x.data_: Tensor, torch.float32, cpu, size=[3]" in text


class LabelledTensorWithPlainGuard(LabelledTensor):
    """`__metadata_guard__` as a plain method: not torch's protocol, so contexts compare equal."""

    def __metadata_guard__(self, compiled, context):
        return True


def _call_with_contexts(cls, contexts, backend):
    compiled, counter = compiled_with_counter(_plus_one, backend)
    frames = []
    for label, version in contexts:
        x = cls(torch.randn(3), label, version)
        actual, expected = compiled(x), _plus_one(x)
        assert type(actual) is type(expected)
        torch.testing.assert_close(actual.data_, expected.data_)
        if backend == "eager":  # the captured graph dispatches to the subclass as eager does
            assert (actual.label, actual.version) == (expected.label, expected.version)
        frames.append(counter.frame_count)
    return frames


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_metadata_guard_decides_which_flatten_contexts_reuse_the_graph(backend):
    contexts = [("a", 1), ("b", 1), ("c", 2), ("d", 2), ("e", 1)]
    assert _call_with_contexts(LabelledTensor, contexts, backend) == [1, 1, 2, 2, 2]


def test_a_metadata_guard_that_is_no_classmethod_is_not_used():
    assert _call_with_contexts(LabelledTensorWithPlainGuard, [("a", 1), ("b", 1)], "eager") == [1, 2]


def test_the_metadata_guard_recompiles_as_often_as_torch_compile():
    import torch._dynamo
    import torch._dynamo.testing

    contexts = [("a", 1), ("b", 1), ("c", 2), ("d", 2), ("e", 1)]
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(_plus_one, backend=counter, fullgraph=True)
    for label, version in contexts:
        compiled(LabelledTensor(torch.randn(3), label, version))
    torch._dynamo.reset()
    assert _call_with_contexts(LabelledTensor, contexts, "eager")[-1] == counter.frame_count
