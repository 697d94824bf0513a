"""AOT autograd desugars traceable wrapper subclasses into their inner tensors.

A TwoTensor (PyTorch's test subclass: every op runs on both of its tensors)
among a graph's inputs, lifted parameters, intermediates or outputs: the aten
graphs a backend compiles take and return plain tensors only, and the
compiled function returns what eager returns — the subclass, its metadata,
its inner tensors, its gradients — under `aot_eager` and `inductor`. A
subclass AOT autograd cannot desugar (a `__torch_dispatch__` without
`__tensor_flatten__`) is still refused, naming the subclass.
"""
import re
import warnings

import pytest
import torch
import torch._dynamo
from torch._subclasses.fake_tensor import FakeTensor
from torch.testing._internal.two_tensor import TwoTensor

import graphwright
from graphwright._core import config
from graphwright._core.counters import counters
from graphwright._core.errors import BackendRefusal
from graphwright.aot import GraphCompilers, aot_compile
from graphwright.backends.aot_eager import run_generated_code
from graphwright.backends.registry import lookup_backend

from aot_models import graph_of
from subclass_models import OpaqueWrapper

BACKENDS = ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def two(*shape, requires_grad=False):
    return TwoTensor(torch.randn(*shape), torch.randn(*shape)).requires_grad_(requires_grad)


def copied(value):
    """An equal, independent copy of a tensor or a TwoTensor (keeping requires_grad)."""
    if isinstance(value, TwoTensor):
        return TwoTensor(copied(value.a), copied(value.b)).requires_grad_(value.requires_grad)
    return value.detach().clone().requires_grad_(value.requires_grad)


def assert_same(actual, expected):
    """The same class, metadata and values, inner tensors included."""
    assert type(actual) is type(expected)
    assert actual.shape == expected.shape and actual.stride() == expected.stride()
    assert actual.dtype == expected.dtype and actual.requires_grad == expected.requires_grad
    if isinstance(expected, TwoTensor):
        assert_same(actual.a, expected.a)
        assert_same(actual.b, expected.b)
    else:
        torch.testing.assert_close(actual, expected)


class RecordingBackend:
    """`aot_eager` that keeps the aten graphs it was given, by kind."""

    graphwright_dynamic_shapes = True

    def __init__(self, store=None):
        self.graphs = []
        self.compiled = []
        self._compilers = GraphCompilers(forward=self._record("forward"), backward=self._record("backward"),
                                         inference=self._record("inference"), store=store)

    def _record(self, kind):
        def compile_graph(gm, example_inputs):
            self.graphs.append((kind, gm))
            return run_generated_code(gm, example_inputs)
        return compile_graph

    def __call__(self, gm, example_inputs):
        compiled = aot_compile(gm, example_inputs, self._compilers)
        self.compiled.append(compiled)
        return compiled


def assert_plain_graphs(graphs):
    """Every placeholder and output of every aten graph is a plain fake tensor (or a size)."""
    assert graphs
    for _, gm in graphs:
        output = next(node for node in gm.graph.nodes if node.op == "output")
        values = [node.meta["val"] for node in gm.graph.nodes if node.op == "placeholder"]
        values += [node.meta["val"] for node in output.args[0] if isinstance(node, torch.fx.Node)]
        for value in values:
            assert type(value) is FakeTensor or isinstance(value, (torch.SymInt, int)), type(value)


def _sine_weighted(x, w):
    return (x.sin() * w).cos() + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_input_comes_back_as_the_subclass_with_its_gradient(backend):
    x, w = two(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    x2, w2 = copied(x), copied(w)
    actual = graphwright.compile(_sine_weighted, backend=backend, fullgraph=True)(x, w)
    expected = _sine_weighted(x2, w2)
    assert_same(actual, expected)
    actual.sum().backward()
    expected.sum().backward()
    assert_same(x.grad, x2.grad)
    assert_same(w.grad, w2.grad)  # a TwoTensor too: w meets x in the product


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_result_is_the_one_torch_compile_returns(backend):
    x, w = two(3, 4), torch.randn(4)
    actual = graphwright.compile(_sine_weighted, backend=backend, fullgraph=True)(x, w)
    torch._dynamo.reset()
    assert_same(actual, torch.compile(_sine_weighted, backend=backend, fullgraph=True)(x, w))


def test_the_aten_graphs_hold_plain_tensors_only():
    backend = RecordingBackend()
    x = two(3, 4, requires_grad=True)
    graphwright.compile(_sine_weighted, backend=backend, fullgraph=True)(x, torch.randn(4)).sum().backward()
    assert [kind for kind, _ in backend.graphs] == ["forward", "backward"]
    assert_plain_graphs(backend.graphs)
    forward = backend.graphs[0][1]
    assert [n.target for n in forward.graph.nodes].count(torch.ops.aten.sin.default) == 2  # a's and b's


def test_a_subclass_of_subclasses_is_desugared_all_the_way_down():
    backend = RecordingBackend()
    x = TwoTensor(two(3), two(3)).requires_grad_()
    x2 = copied(x)
    actual = graphwright.compile(lambda t: t.exp() * 2, backend=backend, fullgraph=True)(x)
    expected = x2.exp() * 2
    assert_same(actual, expected)
    actual.sum().backward()
    expected.sum().backward()
    assert_same(x.grad, x2.grad)
    placeholders = [n for n in backend.graphs[0][1].graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 4
    assert_plain_graphs(backend.graphs)


def test_a_subclass_parameter_lifted_into_the_graph_trains():
    linear = torch.nn.Linear(3, 3)
    linear.weight = torch.nn.Parameter(two(3, 3))
    reference = torch.nn.Linear(3, 3)
    reference.weight = torch.nn.Parameter(copied(linear.weight.detach()))
    reference.bias = torch.nn.Parameter(linear.bias.detach().clone())
    x = torch.randn(2, 3)
    compiled = lookup_backend("aot_eager")(graph_of(linear), [x])
    actual, expected = compiled(x), reference(x)
    assert_same(actual, expected)
    actual.sum().backward()
    expected.sum().backward()
    assert_same(linear.weight.grad, reference.weight.grad)
    assert_same(linear.bias.grad, reference.bias.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_input_mutated_in_place_is_written_back_through_it(backend):
    def scale_in_place(x, w):
        x.mul_(2)
        return x * w

    x, w = two(3), torch.randn(3, requires_grad=True)
    x2, w2 = copied(x), copied(w)
    a, b = x.a, x.b
    actual = graphwright.compile(scale_in_place, backend=backend, fullgraph=True)(x, w)
    expected = scale_in_place(x2, w2)
    assert_same(actual, expected)
    assert_same(x, x2)
    assert x.a is a and x.b is b  # written into the inner tensors the input holds
    actual.sum().backward()
    expected.sum().backward()
    assert_same(w.grad, w2.grad)


def test_a_subclass_input_that_requires_grad_mutated_in_place_differentiates_its_value_on_entry():
    def add_in_place(x, w):
        x.add_(w)
        return x * 2

    base, w = two(3, requires_grad=True), torch.randn(3, requires_grad=True)
    base2, w2 = copied(base), copied(w)
    x, x2 = base * 1, base2 * 1  # not leaves: eager mutates them in place too
    actual = graphwright.compile(add_in_place, backend="aot_eager", fullgraph=True)(x, w)
    expected = add_in_place(x2, w2)
    assert_same(actual, expected)
    torch.testing.assert_close(x.a, x2.a)
    actual.sum().backward()
    expected.sum().backward()
    assert_same(base.grad, base2.grad)
    assert_same(w.grad, w2.grad)


def test_a_subclass_input_mutated_in_place_is_a_mutation_of_the_aten_graphs():
    backend = RecordingBackend()
    graphwright.compile(lambda x: x.add_(1).sin(), backend=backend, fullgraph=True)(two(3))
    ((kind, graph),) = backend.graphs
    assert kind == "inference"
    assert torch.ops.aten.add.Tensor in [n.target for n in graph.graph.nodes]  # functional in the graph
    (compiled,) = backend.compiled
    (signature,) = compiled.signatures.values()
    assert signature.mutated_inputs == (0,)


def test_a_subclass_holding_one_tensor_twice_runs_as_captured_when_mutated():
    shared = torch.randn(3)
    x = TwoTensor(shared, shared)
    expected_shared = shared.clone()
    x2 = TwoTensor(expected_shared, expected_shared)
    compiled = graphwright.compile(lambda x: x.add_(1) * 2, backend="aot_eager", fullgraph=True)
    compiled(two(3))  # compiled for distinct inner tensors
    assert_same(compiled(x), x2.add_(1) * 2)
    torch.testing.assert_close(shared, expected_shared)  # added twice, as eager does


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_of_a_subclass_input_come_back_as_views_of_it(backend):
    def views(x):
        return x.view(-1), x.t(), x[1], x * 2

    x = two(2, 3, requires_grad=True)
    x2 = copied(x)
    actual = graphwright.compile(views, backend=backend, fullgraph=True)(x)
    expected = views(x2)
    for out, ref in zip(actual, expected):
        assert_same(out, ref)
    for out in actual[:3]:
        assert out._is_view() and out._base is x
        assert isinstance(out.a, torch.Tensor) and out.a.untyped_storage().data_ptr() == x.a.untyped_storage().data_ptr()
    assert not actual[3]._is_view()
    sum(out.sum() for out in actual).backward()
    sum(ref.sum() for ref in expected).backward()
    assert_same(x.grad, x2.grad)


def test_an_input_returned_as_it_is_is_the_same_object():
    x, y = two(3), torch.randn(3)
    out_x, out_y = graphwright.compile(lambda x, y: (x, y.sin()), backend="aot_eager", fullgraph=True)(x, y)
    assert out_x is x
    torch.testing.assert_close(out_y, y.sin())


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gradient_of_an_unused_subclass_output_is_zeros_of_its_subclass(backend):
    def two_outputs(x, y):
        return x.sin() * y, x.cos()

    x, y = two(3, requires_grad=True), torch.randn(3, requires_grad=True)
    x2, y2 = copied(x), copied(y)
    first, _ = graphwright.compile(two_outputs, backend=backend, fullgraph=True)(x, y)
    first.sum().backward()
    two_outputs(x2, y2)[0].sum().backward()
    assert_same(x.grad, x2.grad)
    assert_same(y.grad, y2.grad)


def test_a_plain_gradient_for_a_subclass_output_is_refused():
    x = two(3, requires_grad=True)
    out = graphwright.compile(lambda x: x.sin(), backend="aot_eager", fullgraph=True)(x)
    with pytest.raises(graphwright.BackendError, match="does not have the structure its backward was compiled "
                                                       r"for: it is a `Tensor`, expected TwoTensor"):
        out.backward(torch.ones(3))


def test_a_subclass_gradient_for_a_plain_output_that_a_subclass_gradient_reads_is_refused():
    """As torch.compile refuses it: `y`'s gradient is a TwoTensor desugared into two, each of
    which would become a TwoTensor when the backward runs on the subclass gradient of `y.sin()`."""
    x, y = two(3, requires_grad=True), torch.randn(3, requires_grad=True)
    outs = graphwright.compile(lambda x, y: (x * y, y.sin()), backend="aot_eager", fullgraph=True)(x, y)
    with pytest.raises(graphwright.BackendError, match="gradient of differentiable output 1 .* is a `TwoTensor`, "
                                                       "but the output is a plain tensor and the gradient of a "
                                                       "subclass input depends on it"):
        (outs[0].sum() + outs[1].sum()).backward()  # the sum of a TwoTensor and a tensor is a TwoTensor


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_gradient_for_a_plain_output_runs_the_backward_graph_on_it_as_eager_would(backend):
    """The output is added to a TwoTensor after the call (found by the program generator): its
    gradient is a TwoTensor, and so are the inputs' gradients, as in eager."""
    def scaled_sine(x, w):
        return x.sin() * w

    x, w = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    x2, w2 = copied(x), copied(w)
    t = two(3)
    actual = graphwright.compile(scaled_sine, backend=backend, fullgraph=True)(x, w)
    expected = scaled_sine(x2, w2)
    (actual * t).sum().backward()
    (expected * t).sum().backward()
    assert_same(x.grad, x2.grad)
    assert_same(w.grad, w2.grad)
    assert type(x.grad) is TwoTensor


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_gradient_for_a_plain_output_next_to_a_subclass_input(backend):
    def outputs(x, t):
        return x.cos() * 3, t * 2

    x, t = torch.randn(3, requires_grad=True), two(3, requires_grad=True)
    x2, t2 = copied(x), copied(t)
    actual = graphwright.compile(outputs, backend=backend, fullgraph=True)(x, t)
    expected = outputs(x2, t2)
    (actual[0].sum() + actual[1].sin().sum()).backward()  # a TwoTensor sum: a TwoTensor gradient for both
    (expected[0].sum() + expected[1].sin().sum()).backward()
    assert_same(x.grad, x2.grad)
    assert_same(t.grad, t2.grad)


class _Rescalable(torch.Tensor):
    """Holds `data_` and a constant `scale`; a gradient of another scale is converted
    (`__coerce_same_metadata_as_tangent__`), as DTensor redistributes one of other placements."""

    @staticmethod
    def __new__(cls, data, scale, outer_size=None, outer_stride=None):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, strides=data.stride(), dtype=data.dtype,
                                                   device=data.device, requires_grad=data.requires_grad)

    def __init__(self, data, scale, outer_size=None, outer_stride=None):
        self.data_, self.scale = data, scale

    def __tensor_flatten__(self):
        return ["data_"], self.scale

    @staticmethod
    def __tensor_unflatten__(inner, scale, outer_size, outer_stride):
        return _Rescalable(inner["data_"], scale)

    def __coerce_same_metadata_as_tangent__(self, scale, expected_type=None):
        if expected_type is not None:
            return None
        return _Rescalable(self.data_ * self.scale / scale, scale)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        scale = next(t.scale for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, _Rescalable))
        args, kwargs = torch.utils._pytree.tree_map_only(_Rescalable, lambda t: t.data_ * t.scale, (args, kwargs or {}))
        return torch.utils._pytree.tree_map_only(
            torch.Tensor, lambda t: _Rescalable(t / scale, scale) if t.is_floating_point() else t, func(*args, **kwargs))


def test_a_gradient_of_other_metadata_is_coerced_to_the_traced_one():
    """As torch.compile does (its gradient of `x` has the traced scale, 2.0, too): the values are
    eager's, the gradient's scale the one the backward was traced with."""
    def tripled(x):
        return x * 3

    x = _Rescalable(torch.randn(3), 2.0).requires_grad_()
    eager = _Rescalable(x.data_.clone(), 2.0).requires_grad_()
    gradient = _Rescalable(torch.randn(3), 4.0)
    graphwright.compile(tripled, backend="aot_eager", fullgraph=True)(x).backward(gradient)
    tripled(eager).backward(gradient)
    assert type(x.grad) is _Rescalable and x.grad.scale == 2.0
    torch.testing.assert_close(x.grad.data_ * x.grad.scale, eager.grad.data_ * eager.grad.scale)


def test_a_graph_with_subclass_inputs_bypasses_the_aot_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))

    class Store:
        def identity(self):
            return "store"

        def handle(self, compiled):
            return None

        def load(self, handle, kind, fake_mode):
            return None

    backend = RecordingBackend(store=Store())
    graphwright.compile(lambda x: x * 2, backend=backend, fullgraph=True)(two(3))
    assert counters["aot_cache"]["aot_cache_bypass"] == 1
    assert not list(tmp_path.rglob("*"))


def _doubled(x):
    return x * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_aot_cannot_desugar_runs_as_captured_with_a_warning(backend):
    x = OpaqueWrapper(torch.randn(3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = graphwright.compile(_doubled, backend=backend)(x)
    assert type(actual) is OpaqueWrapper
    torch.testing.assert_close(actual.elem, x.elem * 2)
    refusals = [w for w in caught if "without its backend" in str(w.message)]
    assert len(refusals) == 1 and "`OpaqueWrapper`" in str(refusals[0].message)
    assert refusals[0].filename == __file__


def test_under_fullgraph_the_refusal_names_the_subclass_the_operation_and_the_users_code():
    with pytest.raises(BackendRefusal, match="tensor subclass `OpaqueWrapper`") as info:
        graphwright.compile(_doubled, backend="aot_eager", fullgraph=True)(OpaqueWrapper(torch.randn(3)))
    message = str(info.value)
    assert "input `x`" in message and "__tensor_flatten__" in message
    assert re.search(r"of _doubled \(.*test_aot_subclasses.py:\d+\)", message)
    assert info.value.user_location.startswith(__file__)


def test_an_intermediate_the_subclass_cannot_desugar_is_named_with_its_operation():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    wrapped = graph.call_function(OpaqueWrapper, (x,))
    wrapped.meta["val"] = OpaqueWrapper(torch.empty(3))
    graph.output((graph.call_function(torch.mul, (wrapped, 2)),))
    with pytest.raises(BackendRefusal, match=r"is a `subclass_models.OpaqueWrapper`, made by `OpaqueWrapper`"):
        lookup_backend("aot_eager")(torch.fx.GraphModule(torch.nn.Module(), graph), [torch.randn(3)])


def _add_in_place(x, t):
    u = x[0].clone()
    u.add_(t)
    return u


def _augmented_assignment(x, t):
    u = x[0].clone()
    u += t
    return u * 2


def _item_assignment(x, t):
    u = x.clone()
    u[0] = t
    return u


def _multiply_a_view_in_place(x, t):
    u = x * 1
    v = u[0]
    v.mul_(t).add_(1)
    return u.sum(), v


IN_PLACE_ON_PLAIN = [_add_in_place, _augmented_assignment, _item_assignment, _multiply_a_view_in_place]


def _flat(result):
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", IN_PLACE_ON_PLAIN, ids=lambda f: f.__name__.strip("_"))
def test_a_plain_tensor_mutated_with_a_subclass_argument_is_what_the_subclass_dispatch_makes_it(program, backend):
    """In eager TwoTensor's dispatch runs the in-place op on the plain tensor once per inner
    tensor, and it stays plain; its gradients (plain, or TwoTensor where eager's are) match."""
    x, t = torch.randn(2, 3, requires_grad=True), two(3, requires_grad=True)
    x2, t2 = copied(x), copied(t)
    actual = _flat(graphwright.compile(program, backend=backend, fullgraph=True)(x, t))
    expected = _flat(program(x2, t2))
    for out, ref in zip(actual, expected):
        assert_same(out, ref)
    sum(out.sum() for out in actual).backward()
    sum(ref.sum() for ref in expected).backward()
    assert_same(x.grad, x2.grad)
    assert_same(t.grad, t2.grad)


def test_out_into_a_plain_tensor_with_a_subclass_argument_matches_torch_compile():
    def add_out(x, t):
        u = x[0].clone()
        torch.add(u, t, out=u)
        return u

    x, t = torch.randn(2, 3), two(3)
    actual = graphwright.compile(add_out, backend="aot_eager", fullgraph=True)(x, t)
    assert_same(actual, add_out(x, t))
    torch._dynamo.reset()
    assert_same(actual, torch.compile(add_out, backend="aot_eager", fullgraph=True)(x, t))


def _written_through_a_select(z, tt):
    u = torch.minimum(z, tt.sum()).clone()
    row = u.select(1, -1)
    row[..., 0] = 0.5
    return row, u


def _scattered_into_a_view(tt):
    return torch.select_scatter((tt * 2).view(2, 4).select(1, -1), tt.sum(), 0, 0) + 1


@pytest.mark.parametrize("program, make_inputs", [
    (_written_through_a_select, lambda: (torch.randn(2, 4, requires_grad=True), two(3, requires_grad=True))),
    (_scattered_into_a_view, lambda: (two(8, requires_grad=True),)),
], ids=["written_through_a_select", "select_scatter_into_a_view"])
def test_a_subclass_view_at_an_offset_regenerated_after_a_write_compiles(program, make_inputs):
    # The regenerated view comes from `select_scatter` on each inner tensor; PyTorch's fake
    # tensor cache returned the second one at storage offset 0 (the first at 3), and TwoTensor
    # refused to pair them: the graph ran as captured
    inputs = make_inputs()
    copies = [copied(t) for t in inputs]
    expected = program(*inputs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = graphwright.compile(program, backend="aot_eager", fullgraph=True)(*copies)
    assert not [w for w in caught if "graphwright" in str(w.message)]
    expected, actual = (expected, actual) if isinstance(expected, tuple) else ((expected,), (actual,))
    for a, e in zip(actual, expected):
        assert_same(a, e)
        assert a.storage_offset() == e.storage_offset()
    torch.autograd.backward([t.sum() for t in expected])
    torch.autograd.backward([t.sum() for t in actual])
    for a, e in zip(copies, inputs):
        assert_same(a.grad, e.grad)
