"""Jagged nested tensors (`torch.nested.nested_tensor(..., layout=torch.jagged)`) in compiled regions.

Inputs and outputs are NestedTensors of eager's type, values, offsets and
requires_grad; the ragged size is a symbol bound to the offsets, so another
batch of other lengths runs the same graph (counted against torch.compile on
the same calls). Every backend compiles training through them (gradients of
weights and of jagged inputs are eager's), jagged tensors made from dense ones
in the region, and jagged inputs whose values are written in place; what needs
the offsets' data (unbind, narrow, SDPA's math kernel) breaks the graph where
torch.compile does.
"""
import copy
import warnings

import pytest
import torch
import torch._dynamo.testing
import torch.nn.functional as F

import graphwright
from graphwright._core.jagged import is_static_ragged_size
from graphwright.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    torch._dynamo.reset()
    yield
    graphwright.reset()


def jagged(lengths, width=4, requires_grad=False, seed=0):
    generator = torch.Generator().manual_seed(seed)
    parts = [torch.randn(length, width, generator=generator) for length in lengths]
    return torch.nested.nested_tensor(parts, layout=torch.jagged, requires_grad=requires_grad)


def assert_same_jagged(actual, expected, atol=1e-5):
    assert type(actual) is type(expected)
    assert actual.is_nested and actual.layout is torch.jagged
    assert actual.requires_grad == expected.requires_grad
    assert torch.equal(actual.offsets(), expected.offsets())
    torch.testing.assert_close(actual.values(), expected.values(), atol=atol, rtol=1e-5)


def _pointwise(x):
    return x.sin() * 2 + x


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_jagged_input_gives_a_jagged_output_with_its_offsets(backend):
    compiled = graphwright.compile(_pointwise, backend=backend, fullgraph=True)
    x = jagged((3, 5))
    out = compiled(x)
    assert_same_jagged(out, _pointwise(x))
    assert out._offsets is x._offsets  # the same ragged size as eager's: `out + x` works
    assert_same_jagged(out + x, _pointwise(x) + x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_other_lengths_in_a_batch_of_the_same_size_do_not_recompile(backend):
    ours = CompileCounterWithBackend(backend)
    theirs = torch._dynamo.testing.CompileCounterWithBackend(backend)
    compiled = graphwright.compile(_pointwise, backend=ours)
    reference = torch.compile(_pointwise, backend=theirs)
    for seed, lengths in enumerate([(3, 5), (2, 6), (7, 4)]):
        x = jagged(lengths, seed=seed)
        assert_same_jagged(compiled(x), _pointwise(x))
        reference(x)
    assert ours.frame_count == theirs.frame_count == 1


def test_the_ragged_size_is_a_symbol_of_the_graph():
    counter = CompileCounterWithBackend("eager")
    graphwright.compile(_pointwise, backend=counter)(jagged((3, 5)))
    (gm,) = counter.graphs
    (placeholder,) = [node for node in gm.graph.nodes if node.op == "placeholder"]
    ragged = placeholder.meta["example_value"].shape[1]
    assert isinstance(ragged, torch.SymInt) and not is_static_ragged_size(ragged)


def test_a_batch_of_another_size_recompiles_as_torch_compile_does():
    ours = CompileCounterWithBackend("eager")
    theirs = torch._dynamo.testing.CompileCounter()
    compiled, reference = graphwright.compile(_pointwise, backend=ours), torch.compile(_pointwise, backend=theirs)
    for lengths in [(3, 5), (2, 6, 4)]:
        x = jagged(lengths)
        assert_same_jagged(compiled(x), _pointwise(x))
        reference(x)
    assert ours.frame_count == theirs.frame_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_batch_of_another_size_under_dynamic_true_runs_the_same_graph(backend):
    """With `dynamic=True` the batch size (and so the offsets' length) is symbolic too."""
    ours = CompileCounterWithBackend(backend)
    theirs = torch._dynamo.testing.CompileCounter()
    compiled = graphwright.compile(_pointwise, backend=ours, dynamic=True)
    reference = torch.compile(_pointwise, backend=theirs, dynamic=True)
    for seed, lengths in enumerate([(2, 3, 4), (3, 4, 5, 6), (5, 2)]):
        x = jagged(lengths, width=7, seed=seed)  # a width no batch size + 1 equals (duck sizing)
        assert_same_jagged(compiled(x), _pointwise(x))
        reference(x)
    assert ours.frame_count == theirs.frame_count == 1


torch.manual_seed(0)
_linear = torch.nn.Linear(4, 6)


def _projected(x):
    return F.relu(_linear(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_linear_on_a_jagged_tensor(backend):
    compiled = graphwright.compile(_projected, backend=backend, fullgraph=True)
    x = jagged((3, 5))
    with torch.no_grad():
        assert_same_jagged(compiled(x), _projected(x))


def _loss(x):
    return _linear(x).relu().values().pow(2).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_through_a_jagged_tensor_gives_eager_gradients(backend):
    """SGD steps on a Linear over jagged batches of other lengths: the weights stay eager's, with
    no graph run as captured (the backward is compiled too) and one graph, as torch.compile."""
    torch.manual_seed(1)
    model = torch.nn.Linear(4, 6)
    reference = copy.deepcopy(model)

    def step(module, x):
        return module(x).relu().values().pow(2).sum()

    counter = CompileCounterWithBackend(backend)
    compiled = graphwright.compile(step, backend=counter, fullgraph=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    expected_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a graph run as captured warns
        for seed, lengths in enumerate([(3, 5), (2, 6), (7, 4)]):
            x = jagged(lengths, seed=seed)
            for module, opt, run in ((model, optimizer, compiled), (reference, expected_optimizer, step)):
                opt.zero_grad()
                loss = run(module, x)
                loss.backward()
                opt.step()
            torch.testing.assert_close(model.weight.grad, reference.weight.grad)
            torch.testing.assert_close(model.bias.grad, reference.bias.grad)
    torch.testing.assert_close(model.weight, reference.weight)
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gradient_of_a_jagged_input_is_jagged(backend):
    compiled = graphwright.compile(_projected, backend=backend, fullgraph=True)
    x, x2 = jagged((3, 5), requires_grad=True), jagged((3, 5), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = compiled(x)
    expected = _projected(x2)
    assert_same_jagged(out, expected)
    weights = torch.randn(8, 6)
    (out.values() * weights).sum().backward()
    (expected.values() * weights).sum().backward()
    assert_same_jagged(x.grad, x2.grad)


def _two_jagged(x, y):
    return (x * y).sin() + x


@pytest.mark.parametrize("backend", ["aot_eager"])
def test_gradients_of_two_jagged_inputs_sharing_offsets_match_torch_compile(backend):
    x = jagged((3, 5), requires_grad=True)
    y = torch.nested.nested_tensor_from_jagged(torch.randn(8, 4), x.offsets()).requires_grad_()
    results = []
    for compile_fn in (graphwright.compile, torch.compile):
        x.grad = y.grad = None
        compile_fn(_two_jagged, backend=backend, fullgraph=True)(x, y).values().sum().backward()
        results.append((x.grad.values().clone(), y.grad.values().clone()))
    x.grad = y.grad = None
    _two_jagged(x, y).values().sum().backward()
    for actual in results:
        torch.testing.assert_close(actual[0], x.grad.values())
        torch.testing.assert_close(actual[1], y.grad.values())


def _ragged_sum(x):
    return x.sin().sum(dim=1)


def test_a_backward_eager_lacks_raises_only_when_it_runs():
    """Eager's sum over the ragged dimension has no backward for jagged tensors: the forward
    runs, the backward raises eager's own error."""
    x = jagged((3, 5), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = graphwright.compile(_ragged_sum, backend="aot_eager")(x)
    torch.testing.assert_close(out, _ragged_sum(x))
    with pytest.raises(NotImplementedError, match="_nested_sum_backward"):
        out.sum().backward()


def _reductions(x):
    return x.sum(dim=1), x.mean(dim=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sum_and_mean_over_the_ragged_dimension(backend):
    compiled = graphwright.compile(_reductions, backend=backend, fullgraph=True)
    x = jagged((3, 5))
    for actual, expected in zip(compiled(x), _reductions(x)):
        torch.testing.assert_close(actual, expected)


def _padded(x):
    return x.to_padded_tensor(0.0) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_to_padded_tensor(backend):
    compiled = graphwright.compile(_padded, backend=backend, fullgraph=True)
    for lengths in [(3, 5), (6, 2)]:
        x = jagged(lengths)
        torch.testing.assert_close(compiled(x), _padded(x))


def _sizes(x):
    return x.values() * x.size(0), x.offsets() + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_values_offsets_and_sizes(backend):
    compiled = graphwright.compile(_sizes, backend=backend, fullgraph=True)
    x = jagged((3, 5))
    for actual, expected in zip(compiled(x), _sizes(x)):
        torch.testing.assert_close(actual, expected)


def _made(a, b):
    return torch.nested.nested_tensor([a, b], layout=torch.jagged).cos() + 1


def _made_as_nested(a, b):
    return torch.nested.as_nested_tensor([a, b], layout=torch.jagged) * 2


def _made_from_jagged(values, offsets):
    return (torch.nested.nested_tensor_from_jagged(values, offsets) * 3).values()


def _dense_pair(n):
    return torch.randn(n, 4), torch.randn(5, 4)


def _values_and_offsets(n):
    return torch.randn(n + 5, 4), torch.tensor([0, n, n + 5])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("program", "make"), [(_made, _dense_pair), (_made_as_nested, _dense_pair),
                                               (_made_from_jagged, _values_and_offsets)])
def test_a_jagged_tensor_made_in_the_region_compiles_as_in_torch_compile(backend, program, make):
    """Made from dense tensors in the region: compiled by every backend (nothing runs as
    captured), with eager's results and as many graphs as torch.compile over sizes that change."""
    ours = CompileCounterWithBackend(backend)
    theirs = torch._dynamo.testing.CompileCounterWithBackend("aot_eager" if backend == "inductor" else backend)
    compiled, reference = graphwright.compile(program, backend=ours), torch.compile(program, backend=theirs)
    for n in (3, 3, 4, 6):
        args = make(n)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="graphwright")
            actual = compiled(*args)
        # clones: running a program marks its tensors (a jagged tensor made around `values` marks
        # them dynamic), which torch.compile reads on its next compile
        reference(*[arg.clone() for arg in args])
        expected = program(*[arg.clone() for arg in args])
        if expected.is_nested:
            assert_same_jagged(actual, expected)
        else:
            torch.testing.assert_close(actual, expected)
        assert ours.frame_count == theirs.frame_count


def _unbound(x):
    return [t.sum() for t in x.unbind()]


def _attention(q, k, v):
    q, k, v = (t.unflatten(-1, (2, 2)).transpose(1, 2) for t in (q, k, v))
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2)


def _narrowed(x, starts, lengths):
    return torch.nested.narrow(x, 1, starts, lengths, layout=torch.jagged).sin() * 2


def _same_graphs_as_torch_compile(program, args, backend):
    """Runs `program` through graphwright and torch.compile: the same number of graphs and
    operators in them (both break where the offsets' data is needed), eager's results."""
    ours = CompileCounterWithBackend(backend)
    theirs = torch._dynamo.testing.CompileCounterWithBackend(backend)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="graphwright")  # nothing runs as captured
        actual = graphwright.compile(program, backend=ours)(*args)
    torch.compile(program, backend=theirs)(*args)
    assert (ours.frame_count, ours.op_count) == (theirs.frame_count, theirs.op_count)
    return actual


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_unbind_breaks_the_graph_as_in_torch_compile(backend):
    x = jagged((3, 5))
    for actual, expected in zip(_same_graphs_as_torch_compile(_unbound, (x,), backend), _unbound(x)):
        torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_attention_on_transposed_jagged_heads_breaks_as_in_torch_compile(backend):
    """SDPA reads the longest sequence from the offsets' data (`.item()`): torch.compile breaks
    the graph there too (data-dependent operator)."""
    q, k, v = jagged((3, 5), seed=1), jagged((3, 5), seed=2), jagged((3, 5), seed=3)
    with torch.no_grad():
        assert_same_jagged(_same_graphs_as_torch_compile(_attention, (q, k, v), backend), _attention(q, k, v))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_narrow_to_a_jagged_tensor_with_lengths(backend):
    x, starts, lengths = torch.randn(2, 6, 4), torch.tensor([0, 1]), torch.tensor([3, 4])
    actual = _same_graphs_as_torch_compile(_narrowed, (x, starts, lengths), backend)
    expected = _narrowed(x, starts, lengths)
    assert_same_jagged(actual, expected)
    assert torch.equal(actual.lengths(), expected.lengths())


def _mutates(x):
    x.mul_(2)
    return x.sin()


def _mutates_through_values(x, y):
    x.values().add_(y)
    return (x * 3).values().sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_jagged_input_mutated_in_place_is_written_back(backend):
    compiled = graphwright.compile(_mutates, backend=backend, fullgraph=True)
    for seed, lengths in enumerate([(3, 5), (2, 6)]):
        x, x2 = jagged(lengths, seed=seed), jagged(lengths, seed=seed)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="graphwright")
            out = compiled(x)
        expected = _mutates(x2)
        assert_same_jagged(out, expected)
        assert_same_jagged(x, x2)
        assert_same_jagged(out + x, expected + x2)  # the output still has the input's ragged size


@pytest.mark.parametrize("backend", ["aot_eager"])
def test_a_jagged_input_written_through_its_values(backend):
    compiled = graphwright.compile(_mutates_through_values, backend=backend, fullgraph=True)
    x, x2, y = jagged((3, 5)), jagged((3, 5)), torch.randn(4)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="graphwright")
        actual = compiled(x, y)
    torch.testing.assert_close(actual, _mutates_through_values(x2, y))
    assert_same_jagged(x, x2)


def _shrinks_offsets(x):
    x.offsets().sub_(0)
    return x.sin()


def test_an_in_place_change_of_the_offsets_is_refused_by_aot_and_runs_as_captured():
    x, x2 = jagged((3, 5)), jagged((3, 5))
    with pytest.warns(UserWarning, match="_offsets of input 0, a NestedTensor"):
        out = graphwright.compile(_shrinks_offsets, backend="aot_eager")(x)
    assert_same_jagged(out, _shrinks_offsets(x2))


def _no_gradient_reaches_the_jagged_input(x, nt):
    unused = (nt - nt).values()[0]  # the graph reads nt where no gradient flows
    return x * 2, unused.detach()


@pytest.mark.parametrize("backend", ["aot_eager"])
def test_a_jagged_input_no_gradient_reaches_runs_detached(backend):
    """The runtime detaches an input no gradient reaches: a jagged tensor's flatten context says
    whether it requires grad, so the forward checks it against the detached structure (found by
    the program generator: an internal error on the first call)."""
    compiled = graphwright.compile(_no_gradient_reaches_the_jagged_input, backend=backend, fullgraph=True)
    x, nt = torch.randn(3, 4, requires_grad=True), jagged((3, 5), requires_grad=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="graphwright")
        actual = compiled(x, nt)
    for a, e in zip(actual, _no_gradient_reaches_the_jagged_input(x, nt)):
        torch.testing.assert_close(a, e)


def _rebuilt_with_its_max_seqlen(values, offsets, max_seqlen):
    made = torch.nested.nested_tensor_from_jagged(values, offsets, max_seqlen=max_seqlen)
    return torch.nested.nested_tensor_from_jagged(values, made.offsets(), max_seqlen=made._maybe_max_seqlen)


def test_a_symbolic_size_read_from_a_jagged_intermediate_makes_another():
    """`_maybe_max_seqlen` of a jagged tensor made in the region is a symbolic size of the graph.
    (AOT autograd runs this graph as captured: a nested int times the symbolic width of the
    values is no size it can trace.)"""
    ours = CompileCounterWithBackend("eager")
    theirs = torch._dynamo.testing.CompileCounter()
    compiled = graphwright.compile(_rebuilt_with_its_max_seqlen, backend=ours, fullgraph=True, dynamic=True)
    reference = torch.compile(_rebuilt_with_its_max_seqlen, backend=theirs, fullgraph=True, dynamic=True)
    values, offsets = torch.randn(10, 5), torch.tensor([0, 2, 4, 7, 10])
    for max_seqlen in (5, 7, 4):
        expected = _rebuilt_with_its_max_seqlen(values, offsets, max_seqlen)
        actual = compiled(values, offsets, max_seqlen)
        assert actual._maybe_max_seqlen == expected._maybe_max_seqlen == max_seqlen
        assert torch.equal(actual.offsets(), expected.offsets())
        torch.testing.assert_close(actual.values(), expected.values())
        reference(values, offsets, max_seqlen)
    assert ours.frame_count == theirs.frame_count == 1
