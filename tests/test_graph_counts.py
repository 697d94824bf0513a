"""Graph and operation counts equal to torch.compile's, where the corpus (which compares
frame counts) cannot see the difference: operations in a graph, graph breaks at
TorchDynamo's own functions. Each test runs the same program under both compilers and
compares the counters, and the result with eager's."""
import pytest
import torch
import torch._dynamo
import torch._dynamo.testing

import graphwright
from graphwright.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    torch._dynamo.reset()
    yield
    graphwright.reset()
    torch._dynamo.reset()


def _counts(fn, make_args, calls=1, **options):
    """(frame_count, op_count) under graphwright and under torch.compile, results checked
    against eager's on every call."""
    found = []
    for compile_fn, counter in ((graphwright.compile, CompileCounter()),
                                (torch.compile, torch._dynamo.testing.CompileCounter())):
        compiled = compile_fn(fn, backend=counter, **options)
        for _ in range(calls):
            torch.manual_seed(0)
            expected = fn(*make_args())
            torch.manual_seed(0)
            torch.testing.assert_close(compiled(*make_args()), expected)
        found.append((counter.frame_count, counter.op_count))
    return found


def _switches_grad_mode_back_and_forth(param, y):
    before = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(False)
        torch.set_grad_enabled(True)
        torch.set_grad_enabled(False)
        param.add_(y)
    finally:
        torch.set_grad_enabled(before)
    return param * 1


def test_grad_mode_switched_back_before_any_operation_leaves_no_node():
    ours, theirs = _counts(_switches_grad_mode_back_and_forth,
                           lambda: (torch.nn.Parameter(torch.ones(4)), torch.ones(4)), fullgraph=True)
    assert ours == theirs == (1, 4)


def _calls_dynamos_unsupported(a, b):
    c = torch._dynamo.eval_frame.unsupported(a, b)
    return a + b * 10 + c


def test_a_function_of_dynamos_c_extension_is_a_graph_break_not_an_operator():
    ours, theirs = _counts(_calls_dynamos_unsupported, lambda: (torch.ones(2), torch.ones(2)))
    assert ours == theirs == (1, 3)


def _adds_to_each_row(x):
    for row in x:
        row.add_(1.0)
    return torch.cat([*x], dim=-1)


def test_iterating_a_tensor_indexes_each_row_as_pytorch_does():
    ours, theirs = _counts(_adds_to_each_row, lambda: (torch.randn(3, 2),))
    assert ours == theirs == (1, 3 + 3 + 3 + 1)  # rows read for the loop, again for the unpacking


def _sum_as_float(a, b):
    return (a + b).sum().item()


def test_a_float_item_returned_leaves_the_graph_as_a_tensor(monkeypatch):
    monkeypatch.setattr(graphwright.config, "capture_scalar_outputs", True)
    # PyTorch's config is patched through its own API: pytest's monkeypatch deletes the key on undo.
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        ours, theirs = _counts(_sum_as_float, lambda: (torch.randn(3, 3), torch.randn(3, 3)))
    assert ours == theirs == (1, 4)  # add, sum, item, scalar_tensor


def test_inductor_compiles_a_graph_returning_a_float_item(monkeypatch):
    monkeypatch.setattr(graphwright.config, "capture_scalar_outputs", True)
    a, b = torch.randn(3, 3), torch.randn(3, 3)
    result = graphwright.compile(_sum_as_float, backend="inductor", fullgraph=True)(a, b)
    assert isinstance(result, float)
    assert result == pytest.approx(_sum_as_float(a, b), rel=1e-5)
