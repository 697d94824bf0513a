"""`out=` calls under AOT autograd give eager's answer: values, strides, identity of `out`.

Functionalization models `op(..., out=o)` as `o` receiving the op's values at its logical
positions, its layout unchanged. Where eager's kernels do otherwise (a non-contiguous `o`
written in memory order or restrided, a resized `o`, a composite kernel that writes nothing
under a dispatch mode) or functionalization cannot follow an op (a mutation it does not see,
an in-place op without a functional counterpart), the graph runs as captured, with a warning
naming the call; an `out=` functionalization does model stays compiled.
"""
import warnings

import pytest
import torch

import graphwright


def _strided(shape, layout):
    """A fresh `out` of `shape`: contiguous, permuted (the reversed shape, permuted back) or
    every second element of a longer buffer (1-D)."""
    if layout == "contiguous":
        return torch.full(shape, 7.0)
    if layout == "permuted":
        order = tuple(reversed(range(len(shape))))
        return torch.full(tuple(reversed(shape)), 7.0).permute(order)
    return torch.full((2 * shape[0] + 1,), 7.0)[1::2]


def _run_both(fn, make_inputs, backend="aot_eager"):
    """fn eagerly and compiled, each on its own inputs (the same values); the compiled call's
    warnings."""
    torch.manual_seed(0)
    eager_inputs = make_inputs()
    torch.manual_seed(0)
    compiled_inputs = make_inputs()
    expected = fn(*eager_inputs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = graphwright.compile(fn, backend=backend, fullgraph=True)(*compiled_inputs)
    messages = [str(w.message) for w in caught if "as captured" in str(w.message)]
    return expected, actual, eager_inputs, compiled_inputs, messages


def _assert_same(expected, actual):
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    actual = actual if isinstance(actual, (tuple, list)) else (actual,)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert (a.shape, a.stride(), a.storage_offset(), a.dtype) == (e.shape, e.stride(), e.storage_offset(), e.dtype)
        torch.testing.assert_close(a, e, equal_nan=True)


def _returned_out(result, out):
    results = result if isinstance(result, (tuple, list)) else (result,)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [r is o for r, o in zip(results, outs)]


# name: (program(*inputs), inputs, which input is `out`); eager's kernel writes such an `out`
# otherwise than at its logical positions, keeping its layout
NONCONTIGUOUS_OUT = {
    # eager writes the values in memory order into the permuted `out`
    "narrow_copy": (lambda x, out: torch.narrow_copy(x, 1, 2, 2, out=out),
                    lambda: (torch.randn(5, 5, 5), _strided((5, 2, 5), "permuted"))),
    "avg_pool3d": (lambda x, out: torch._C._nn.avg_pool3d(x, (2, 2, 2), out=out),
                   lambda: (torch.randn(2, 3, 4, 4, 4), _strided((2, 3, 2, 2, 2), "permuted"))),
    # eager's vector-matrix product resizes `out` to a row and squeezes it: contiguous strides
    "matmul_of_a_vector": (lambda v, m, out: torch.matmul(v, m, out=out),
                           lambda: (torch.randn(4), torch.randn(4, 3), _strided((3,), "strided"))),
    "linear_of_a_vector": (lambda v, w, out: torch._C._nn.linear(v, w, out=out),
                           lambda: (torch.randn(4), torch.randn(3, 4), _strided((3,), "strided"))),
    # a kernel that honours the strides: the same answer, the graph runs as captured all the same
    "sin": (lambda x, out: torch.sin(x, out=out), lambda: (torch.randn(3, 4), _strided((3, 4), "permuted"))),
}


@pytest.mark.parametrize("name", list(NONCONTIGUOUS_OUT))
def test_out_into_a_non_contiguous_tensor_is_eagers(name):
    fn, make_inputs = NONCONTIGUOUS_OUT[name]
    expected, actual, eager_inputs, compiled_inputs, messages = _run_both(fn, make_inputs)
    _assert_same(expected, actual)
    _assert_same(eager_inputs, compiled_inputs)
    assert actual is compiled_inputs[-1] and expected is eager_inputs[-1]
    assert len(messages) == 1 and "`out` tensor is not contiguous" in messages[0]


def test_out_into_a_non_contiguous_view_made_in_the_graph_is_eagers():
    def fn(x, buffer):
        torch.narrow_copy(x, 1, 2, 2, out=buffer.permute(2, 1, 0))
        return buffer * 1

    expected, actual, _, _, messages = _run_both(fn, lambda: (torch.randn(5, 5, 5), torch.zeros(5, 2, 5)))
    _assert_same(expected, actual)
    assert len(messages) == 1


def test_out_into_a_contiguous_tensor_stays_compiled():
    def fn(x, out):
        return torch.sin(x, out=out)

    expected, actual, eager_inputs, compiled_inputs, messages = _run_both(
        fn, lambda: (torch.randn(3, 4), torch.zeros(3, 4)))
    _assert_same(expected, actual)
    assert actual is compiled_inputs[1] and not messages


def test_out_resized_from_empty_is_eagers():
    def fn(x, out):
        return torch.sin(x, out=out), out.shape

    expected, actual, eager_inputs, compiled_inputs, messages = _run_both(
        fn, lambda: (torch.randn(3, 4), torch.empty(0)))
    _assert_same(expected[0], actual[0])
    assert actual[1] == expected[1] and actual[0] is compiled_inputs[1]
    assert len(messages) == 1 and "changes the shape or strides of its `out` tensor" in messages[0]


def test_linalg_out_whose_functional_op_is_column_major_keeps_eagers_layout():
    def fn(a):
        out = torch.empty(3, 3)
        torch.linalg.inv(a, out=out)
        return out, out + 1

    expected, actual, _, _, messages = _run_both(fn, lambda: (torch.randn(3, 3) + 3 * torch.eye(3),))
    _assert_same(expected, actual)
    assert len(messages) == 1


def test_svd_out_keeps_eagers_layout():
    def fn(a, out):
        return torch.svd(a, out=out)

    make = lambda: (torch.randn(5, 3), (torch.zeros(5, 3), torch.zeros(3), torch.zeros(3, 3)))  # noqa: E731
    expected, actual, eager_inputs, compiled_inputs, _ = _run_both(fn, make)
    _assert_same(expected, actual)
    _assert_same(eager_inputs[1], compiled_inputs[1])
    assert _returned_out(actual, compiled_inputs[1]) == _returned_out(expected, eager_inputs[1]) == [True] * 3


def _batch_norm_inputs():
    return (torch.randn(2, 3, 4), torch.randn(3), torch.randn(3), torch.randn(3), torch.rand(3) + 0.5,
            (torch.zeros(2, 3, 4), torch.zeros(3), torch.zeros(3)))


@pytest.mark.parametrize("op", [torch._native_batch_norm_legit, torch.native_batch_norm])
def test_batch_norm_out_updates_the_running_statistics_and_fills_out(op):
    def fn(x, w, b, running_mean, running_var, out):
        return op(x, w, b, running_mean, running_var, True, 0.5, 0.6, out=out)

    expected, actual, eager_inputs, compiled_inputs, messages = _run_both(fn, _batch_norm_inputs)
    _assert_same(expected, actual)
    _assert_same(eager_inputs[3:5], compiled_inputs[3:5])
    _assert_same(eager_inputs[5], compiled_inputs[5])
    assert _returned_out(actual, compiled_inputs[5]) == [True] * 3
    assert len(messages) == 1


def test_batch_norm_out_matches_torch_compile():
    def fn(x, w, b, running_mean, running_var, out):
        return torch.native_batch_norm(x, w, b, running_mean, running_var, True, 0.5, 0.6, out=out)

    import torch._dynamo
    torch._dynamo.reset()
    torch.manual_seed(0)
    reference_inputs = _batch_norm_inputs()
    torch.manual_seed(0)
    compiled_inputs = _batch_norm_inputs()
    reference = torch.compile(fn, backend="aot_eager", fullgraph=True)(*reference_inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = graphwright.compile(fn, backend="aot_eager", fullgraph=True)(*compiled_inputs)
    _assert_same(reference, actual)
    _assert_same(reference_inputs[3:5], compiled_inputs[3:5])


def test_out_that_tracing_leaves_unwritten_is_eagers():
    # linalg_matrix_rank.out is composite: under a Python dispatch mode it writes nothing
    def fn(a, out):
        return torch.linalg.matrix_rank(a, out=out)

    make = lambda: (torch.randn(5, 5), torch.zeros((), dtype=torch.int64))  # noqa: E731
    expected, actual, eager_inputs, compiled_inputs, messages = _run_both(fn, make)
    assert int(expected) == 5 and torch.equal(actual, expected) and actual is compiled_inputs[1]
    assert len(messages) == 1 and "writes nothing into its `out` tensor" in messages[0]


def test_in_place_op_without_a_functional_counterpart_is_eagers():
    def fn(x):
        return x.polygamma_(1) * 2

    expected, actual, eager_inputs, compiled_inputs, messages = _run_both(fn, lambda: (torch.rand(4) + 0.5,))
    _assert_same(expected, actual)
    _assert_same(eager_inputs, compiled_inputs)
    assert len(messages) == 1 and "`aten::polygamma_`" in messages[0]


def test_a_training_graph_with_an_out_call_it_cannot_model_keeps_its_gradient():
    def fn(w, out):
        y = w * 2
        torch.narrow_copy(y.detach(), 0, 1, 2, out=out)
        return y.sum() * out.sum()

    torch.manual_seed(0)
    w = torch.randn(4, 3)
    grads = []
    for run in (fn, graphwright.compile(fn, backend="aot_eager", fullgraph=True)):
        leaf = w.clone().requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(leaf, _strided((2, 3), "permuted")).backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[0], grads[1])
