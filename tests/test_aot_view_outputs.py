"""Outputs that are views of an input come back from AOT autograd as eager made them.

AOT autograd takes aliasing out of its graphs and the runtime makes such an
output again from its base by replaying the view ops the trace recorded: the
dtype, sizes, strides, storage offset, conjugate bit and storage sharing of
every view op, of an `out=` target that is not contiguous, and their
gradients, are eager's, under `aot_eager` and `inductor`, static or dynamic.
"""
import pickle

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import graphwright
from graphwright.aot import joint
from graphwright.aot.cache import Entry
from graphwright.aot.metadata import OutputKind
from graphwright.aot.runtime import make_inference_function
from graphwright.testing import CompileCounterWithBackend

BACKENDS = ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


def _real(*shape):
    return torch.randn(*shape)


def _complex(*shape):
    return torch.randn(*shape, dtype=torch.complex64)


# name: (function of one input, the input, whether writing through the view is allowed in eager)
VIEWS = {
    "view": (lambda x: x.view(3, 8), lambda: _real(4, 6), True),
    "view_dtype_int32": (lambda x: x.view(torch.int32), lambda: _real(4, 6), True),
    "view_dtype_bfloat16": (lambda x: x.view(torch.bfloat16), lambda: _real(4, 6), True),
    "view_dtype_float64": (lambda x: x.view(torch.float64), lambda: _real(4, 6), True),
    "view_as_real": (torch.view_as_real, lambda: _complex(4, 3), True),
    "view_as_complex": (torch.view_as_complex, lambda: _real(4, 3, 2), True),
    "real": (lambda z: z.real, lambda: _complex(4, 3), True),
    "imag": (lambda z: z.imag, lambda: _complex(4, 3), True),
    "conj": (lambda z: z.conj(), lambda: _complex(4, 3), True),
    "t": (lambda x: x.t(), lambda: _real(4, 6), True),
    "transpose": (lambda x: x.transpose(0, 2), lambda: _real(2, 3, 4), True),
    "permute": (lambda x: x.permute(2, 0, 1), lambda: _real(2, 3, 4), True),
    "expand": (lambda x: x[:, :1].expand(4, 5), lambda: _real(4, 6), False),
    "select": (lambda x: x.select(1, 2), lambda: _real(4, 6), True),
    "slice_with_step": (lambda x: x[1::2, 1:], lambda: _real(5, 6), True),
    "diagonal": (lambda x: x.diagonal(offset=1), lambda: _real(4, 6), True),
    "unfold": (lambda x: x.unfold(1, 2, 2), lambda: _real(4, 6), True),
    "as_strided": (lambda x: x.as_strided((2, 3), (1, 2), 1), lambda: _real(4, 6), True),
    "unsqueeze": (lambda x: x.unsqueeze(1), lambda: _real(4, 6), True),
    "squeeze": (lambda x: x[None].squeeze(0), lambda: _real(4, 6), True),
    "alias": (torch.ops.aten.alias.default, lambda: _real(4, 6), True),
    "reshape_alias": (lambda x: torch.ops.aten._reshape_alias(x, (24,), (1,)), lambda: _real(4, 6), True),
    "unbind": (lambda x: x.unbind(0)[1], lambda: _real(4, 6), True),
    "split": (lambda x: x.split(2, 1)[1], lambda: _real(4, 6), True),
    "narrow": (lambda x: x.narrow(1, 1, 3), lambda: _real(4, 6), True),
    "detach": (lambda x: x.detach(), lambda: _real(4, 6), True),
    "chain_with_a_dtype_view": (lambda x: x.t()[1:].view(torch.int32).unsqueeze(0), lambda: _real(6, 4), True),
}


def _assert_same_view(actual, expected, actual_base, expected_base):
    assert type(actual) is type(expected)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    assert actual.storage_offset() == expected.storage_offset()
    assert actual.is_conj() == expected.is_conj()
    assert (actual._base is actual_base) == (expected._base is expected_base)
    assert actual.untyped_storage().data_ptr() == actual_base.untyped_storage().data_ptr()
    assert expected.untyped_storage().data_ptr() == expected_base.untyped_storage().data_ptr()
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


def _write_through(view):
    with torch.no_grad():
        view.fill_(7)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(VIEWS))
def test_a_view_of_an_input_is_eagers_view_of_the_same_storage(name, backend):
    fn, make, writable = VIEWS[name]
    torch.manual_seed(0)
    x = make()
    x_eager = x.clone()
    compiled = graphwright.compile(fn, backend=backend, fullgraph=True)
    actual, expected = compiled(x), fn(x_eager)
    _assert_same_view(actual, expected, x, x_eager)
    if writable:
        _write_through(actual)
        _write_through(expected)
        assert torch.equal(x.view(torch.uint8), x_eager.view(torch.uint8))


# name: (the `out=` target made from `y`, y)
OUT_TARGETS = {
    "transposed": (lambda y: y.T, lambda: torch.zeros(4, 3)),
    "slice_with_a_step": (lambda y: y[::2], lambda: torch.zeros(6, 4)),
    "diagonal": (lambda y: y.diagonal().unflatten(0, (3, 4)), lambda: torch.zeros(12, 12)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(OUT_TARGETS))
def test_an_out_target_that_is_not_contiguous_is_returned_with_its_strides(name, backend):
    target, make = OUT_TARGETS[name]

    def fn(x, y):
        return torch.abs(x, out=target(y))

    torch.manual_seed(0)
    x, y = torch.randn(3, 4), make()
    y_eager = y.clone()
    actual = graphwright.compile(fn, backend=backend, fullgraph=True)(x, y)
    expected = fn(x, y_eager)
    _assert_same_view(actual, expected, y, y_eager)
    assert torch.equal(y, y_eager)
    _write_through(actual)
    _write_through(expected)
    assert torch.equal(y, y_eager)


def _loss(out, weight):
    real = torch.view_as_real(out.resolve_conj()) if out.is_complex() else out
    return (real * weight).sum()


# name: (function of one input, the input's shape and dtype)
DIFFERENTIABLE_VIEWS = {
    "view_as_real": (torch.view_as_real, (4, 3), torch.complex64),
    "view_as_complex": (torch.view_as_complex, (4, 3, 2), torch.float32),
    "t": (lambda x: x.t(), (4, 6), torch.float32),
    "diagonal": (lambda x: x.diagonal(offset=1), (4, 6), torch.float32),
    "expand": (lambda x: x[:, :1].expand(4, 5), (4, 6), torch.float32),
    "slice_with_step": (lambda x: x[1::2, 1:], (5, 6), torch.float32),
    "unbind": (lambda x: x.unbind(0)[1], (4, 6), torch.float32),
    "conj": (lambda z: z.conj(), (4, 3), torch.complex64),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(DIFFERENTIABLE_VIEWS))
def test_the_gradient_through_a_rebuilt_view_is_eagers(name, backend):
    fn, shape, dtype = DIFFERENTIABLE_VIEWS[name]
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=dtype, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    actual = graphwright.compile(fn, backend=backend, fullgraph=True)(x)
    expected = fn(x_eager)
    assert actual.requires_grad and actual._base is x
    assert type(actual.grad_fn) is type(expected.grad_fn)
    weight = torch.randn(expected.shape + ((2,) if expected.is_complex() else ()))
    _loss(actual, weight).backward()
    _loss(expected, weight).backward()
    torch.testing.assert_close(x.grad, x_eager.grad)


def test_a_dtype_view_of_an_input_that_requires_grad_is_not_differentiable_as_in_eager():
    x = torch.randn(4, requires_grad=True)
    actual = graphwright.compile(lambda x: x.view(torch.int32), backend="aot_eager", fullgraph=True)(x)
    expected = x.view(torch.int32)
    assert (actual.dtype, actual.requires_grad, actual.grad_fn) == (expected.dtype, expected.requires_grad, None)
    assert actual.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_a_view_made_under_no_grad_is_eagers():
    def fn(x):
        with torch.no_grad():
            return x.t()[1:]

    x = torch.randn(4, 6, requires_grad=True)
    actual = graphwright.compile(fn, backend="aot_eager", fullgraph=True)(x)
    expected = fn(x)
    assert (actual.requires_grad, actual.is_leaf) == (expected.requires_grad, expected.is_leaf)
    _assert_same_view(actual, expected, x, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_of_a_view_made_under_no_grad_stops_its_gradient_there_as_in_eager(backend):
    def fn(x):
        with torch.no_grad():
            flat = x.flatten()
        return flat.unsqueeze(0)[:, 1:]

    results = []
    for run in (fn, graphwright.compile(fn, backend=backend, fullgraph=True)):
        x = torch.randn(3, 3, requires_grad=True)
        out = run(x)
        out.sum().backward()
        results.append((out.requires_grad, out.is_leaf, type(out.grad_fn).__name__, x.grad,
                        out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()))
    assert results[0] == results[1]


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_intermediate_written_through_an_out_view_keeps_eagers_layout(backend, dynamic):
    def written_through(x, y):
        o = (1.0 * x).detach().clone()
        return torch.maximum(y, y * 2, out=o.permute(1, 0))

    def and_returned(x, y):
        o = (1.0 * x).detach().clone()
        r = torch.maximum(y, y * 2, out=o.permute(1, 0))
        return o, r

    def read_then_viewed(x, y):
        # reading `o` after the write syncs it: its functional value ends transposed
        o = (1.0 * x).detach().clone()
        r = torch.maximum(y, y * 2, out=o.permute(1, 0))
        first = o.amax().clone()
        return r, o.contiguous().view(torch.int32), first.view(torch.int32)

    for fn in (written_through, and_returned, read_then_viewed):
        compiled = graphwright.compile(fn, backend=backend, fullgraph=True, dynamic=dynamic)
        for rows in (2, 5):
            x, y = torch.randn(rows, 3), torch.randn(3, rows)
            expected, actual = fn(x, y), compiled(x, y)
            for e, a in zip(expected if isinstance(expected, tuple) else (expected,),
                            actual if isinstance(actual, tuple) else (actual,)):
                assert (a.shape, a.stride(), a.dtype) == (e.shape, e.stride(), e.dtype)
                torch.testing.assert_close(a, e)
        if fn is and_returned:
            assert actual[1].untyped_storage().data_ptr() == actual[0].untyped_storage().data_ptr()


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_of_an_output_and_of_an_intermediate_keep_their_dtype_and_share_its_storage(backend):
    def fn(x):
        y = x * 2
        z = x + 1
        return y, torch.view_as_complex(y), z.view(torch.int32), z.t(), y.view(torch.int32)

    x = torch.randn(4, 2, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    actual = graphwright.compile(fn, backend=backend, fullgraph=True)(x)
    expected = fn(x_eager)
    for got, want in zip(actual, expected):
        assert (got.dtype, got.shape, got.stride(), got.requires_grad) == \
            (want.dtype, want.shape, want.stride(), want.requires_grad)
        torch.testing.assert_close(got, want)
    assert actual[1].untyped_storage().data_ptr() == actual[0].untyped_storage().data_ptr()
    assert actual[2].untyped_storage().data_ptr() == actual[3].untyped_storage().data_ptr()
    assert actual[4].untyped_storage().data_ptr() == actual[0].untyped_storage().data_ptr()
    weight = torch.randn(4, 2)
    for outputs in (actual, expected):
        (_loss(outputs[1], weight) + (outputs[3] * weight.t()).sum()).backward()
    torch.testing.assert_close(x.grad, x_eager.grad)


# name: (function of one input, the first input's shape, the second's)
DYNAMIC_VIEWS = {
    "flatten": (lambda x: x.flatten(), (4, 6), (6, 8)),
    "view_with_a_size": (lambda x: x.view(x.size(0), -1, 2), (4, 6), (6, 8)),
    "view_dtype": (lambda x: x.view(torch.int32), (4, 6), (6, 8)),
    "t": (lambda x: x.t(), (4, 6), (6, 8)),
    "slice_to_a_size": (lambda x: x[: x.size(0) - 1], (4, 6), (6, 8)),
    "expand_to_a_size": (lambda x: x[0].expand(2 * x.size(0), -1), (4, 6), (6, 8)),
    "narrow_to_a_size": (lambda x: x.narrow(1, 1, x.size(1) - 2), (4, 6), (6, 8)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(DYNAMIC_VIEWS))
def test_a_view_with_symbolic_sizes_is_replayed_for_every_size(name, backend, monkeypatch):
    fn, *shapes = DYNAMIC_VIEWS[name]
    kinds = []
    describe = joint.describe_run

    def recording(*args, **kwargs):
        meta = describe(*args, **kwargs)
        kinds.extend(info.kind for info in meta.outputs)
        return meta

    monkeypatch.setattr(joint, "describe_run", recording)
    counter = CompileCounterWithBackend(backend)
    compiled = graphwright.compile(fn, backend=counter, dynamic=True, fullgraph=True)
    for shape in shapes:
        x = torch.randn(*shape)
        _assert_same_view(compiled(x), fn(x), x, x)
    assert counter.frame_count == 1
    assert kinds == [OutputKind.INPUT_VIEW]


def test_a_view_whose_size_cannot_be_read_from_the_inputs_is_computed_with_eagers_layout(monkeypatch):
    def fn(x):
        return x[: x.size(0) % 3 + 1].view(torch.int32)

    kinds = []
    describe = joint.describe_run

    def recording(*args, **kwargs):
        meta = describe(*args, **kwargs)
        kinds.extend(info.kind for info in meta.outputs)
        return meta

    monkeypatch.setattr(joint, "describe_run", recording)
    compiled = graphwright.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)
    for rows in (4, 6, 8):
        x = torch.randn(rows, 2)
        actual, expected = compiled(x), fn(x)
        assert (actual.dtype, actual.shape, actual.stride()) == (expected.dtype, expected.shape, expected.stride())
        assert torch.equal(actual, expected)
    assert kinds == [OutputKind.GRAPH]


def test_a_view_chain_travels_in_an_aot_cache_entry():
    def fn(x):
        return x.view(torch.int32), torch.view_as_complex(x.view(-1, 2)).conj().t()

    x = torch.randn(4, 6)
    mode = FakeTensorMode()
    meta, gm = joint.trace_signature(fn, [mode.from_tensor(x)], mode, None, grad_enabled=False)
    entry = pickle.loads(pickle.dumps(Entry(meta, forward=None)))
    actual = make_inference_function(lambda args: gm(*args), entry.meta)(x)
    for got, want in zip(actual, fn(x)):
        _assert_same_view(got, want, x, x)
