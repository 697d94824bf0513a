"""Symbolic sizes end to end: the size-marking functions, sweeps over sizes, generation loops.

Compiled results are compared with eager at every size (values and gradients), and the
number of graphs with what torch.compile needs on the same program, run in this module.
"""
import os

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch.nn as nn
from torch.fx.experimental.symbolic_shapes import (
    guard_or_false,
    has_static_value,
    statically_known_false,
    statically_known_true,
)

import graphwright
from graphwright.testing import CompileCounter, CompileCounterWithBackend

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    torch._dynamo.reset()
    yield
    graphwright.reset()
    torch._dynamo.reset()


def _forces_four_rows(x):
    y = x * 2
    if x.shape[0] == 4:  # the line that forces the size
        return y + 1
    return y


@pytest.mark.parametrize("fullgraph", [True, False])
def test_forcing_a_mark_dynamic_dimension_names_the_line(fullgraph):
    x = torch.randn(4, 3)
    graphwright.mark_dynamic(x, 0)
    compiled = graphwright.compile(_forces_four_rows, fullgraph=fullgraph, backend="eager")
    with pytest.raises(graphwright.ConstraintViolationError, match="Dimension 0 of x") as caught:
        compiled(x)
    assert caught.value.user_stack[-1].lineno == _forces_four_rows.__code__.co_firstlineno + 2
    assert "maybe_mark_dynamic" in str(caught.value)


def test_maybe_mark_dynamic_may_specialise_without_error():
    x = torch.randn(4, 3)
    graphwright.maybe_mark_dynamic(x, 0)
    torch.testing.assert_close(graphwright.compile(_forces_four_rows, fullgraph=True, backend="eager")(x),
                               _forces_four_rows(x))


def test_mark_dynamic_serves_every_size_with_one_graph():
    counter = CompileCounter()
    compiled = graphwright.compile(lambda x: x.sum(0) * x.shape[0], backend=counter)
    for rows in (5, 6, 7, 9):
        x = torch.randn(rows, 3)
        graphwright.mark_dynamic(x, 0)
        torch.testing.assert_close(compiled(x), x.sum(0) * rows)
    assert counter.frame_count == 1


def _marks_inside(x):
    torch._dynamo.mark_dynamic(x, 0)
    return x * x


def _marks_graphwright_inside(x):
    graphwright.mark_dynamic(x, 0)
    return x * x


@pytest.mark.parametrize("fn", [_marks_inside, _marks_graphwright_inside])
@pytest.mark.parametrize("fullgraph", [True, False])
def test_mark_dynamic_inside_the_region_is_an_error_as_in_pytorch(fn, fullgraph):
    with pytest.raises(AssertionError, match="forbidden callable"):
        torch.compile(fn, backend="eager", fullgraph=fullgraph)(torch.randn(3, 3))
    with pytest.raises(graphwright.ForbiddenCallError, match="forbidden callable") as caught:
        graphwright.compile(fn, backend="eager", fullgraph=fullgraph)(torch.randn(3, 3))
    assert caught.value.user_stack[-1].lineno == fn.__code__.co_firstlineno + 1


def test_mark_dynamic_inside_an_untaken_branch_is_no_error():
    def fn(x):
        if x.shape[0] == 3:
            return x + 1
        graphwright.mark_dynamic(x, 0)
        return x

    x = torch.randn(3)
    torch.testing.assert_close(graphwright.compile(fn, backend="eager")(x), fn(x))


def _scaled_by_rows(x):
    return x * x.shape[0]


@pytest.mark.parametrize("mark", [torch._dynamo.mark_dynamic, graphwright.mark_dynamic])
def test_mark_dynamic_range_serves_its_sizes_and_rejects_others_as_pytorch(mark):
    def outcomes(compile_fn, counter):
        compiled, seen = compile_fn(_scaled_by_rows, backend=counter), []
        for rows in (8, 3, 4, 5, 6, 1):
            x = torch.randn(rows, 2)
            mark(x, 0, min=2, max=5)
            try:
                torch.testing.assert_close(compiled(x), x * rows)
                seen.append(counter.frame_count)
            except torch.fx.experimental.symbolic_shapes.ConstraintViolationError:
                seen.append("rejected")
        return seen

    ours = outcomes(graphwright.compile, CompileCounter())
    assert ours == outcomes(torch.compile, torch._dynamo.testing.CompileCounter())
    assert ours == ["rejected", 1, 1, 1, "rejected", "rejected"]


def _knowledge(x):
    before = statically_known_true(x.shape[0] > 9)
    torch._check(x.shape[0] >= 10)
    after = statically_known_true(x.shape[0] > 9), statically_known_false(x.shape[0] < 10)
    return x * 2, before, after, has_static_value(x.shape[0]), guard_or_false(x.shape[0] == 12)


def test_shape_queries_answer_what_the_compilation_knows_as_in_pytorch():
    x = torch.zeros(10)
    graphwright.mark_dynamic(x, 0)
    ours = graphwright.compile(_knowledge, fullgraph=True, backend="eager")(x)[1:]
    torch._dynamo.reset()
    assert ours == torch.compile(_knowledge, fullgraph=True, backend="eager")(x)[1:]
    assert ours == (False, (True, True), False, False)  # eagerly: (True, (True, True), True, False)


def test_a_check_pinning_an_item_makes_it_static_and_is_asserted_at_run_time():
    def fn(x):
        n = x.item()
        torch._check(n == 3)
        return torch.ones(n), has_static_value(n)

    compiled = graphwright.compile(fn, fullgraph=True, dynamic=True, backend="eager")
    ones, static = compiled(torch.tensor([3]))
    assert torch.equal(ones, torch.ones(3)) and static
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        compiled(torch.tensor([4]))


def test_sym_max_called_by_the_program_is_a_graph_node_as_in_pytorch():
    def fn(x):
        return x.sum() + torch.sym_max(x.size(0), x.size(1))

    def sym_max_nodes(compile_fn, dynamic):
        graphs = []
        compile_fn(fn, backend=lambda gm, inputs: graphs.append(gm) or gm, fullgraph=True,
                   dynamic=dynamic)(torch.randn(4, 8))
        return [node.target for graph in graphs for node in graph.graph.nodes].count(torch.sym_max)

    for dynamic in (False, True):
        assert sym_max_nodes(graphwright.compile, dynamic) == sym_max_nodes(torch.compile, dynamic) == 1
        torch._dynamo.reset()


def _graph_counts(fn, sizes, dynamic):
    ours, theirs = CompileCounter(), torch._dynamo.testing.CompileCounter()
    compiled = graphwright.compile(fn, backend=ours, dynamic=dynamic)
    reference = torch.compile(fn, backend=theirs, dynamic=dynamic)
    for size in sizes:
        x = torch.randn(size, 3)
        torch.testing.assert_close(compiled(x), fn(x))
        reference(x)
    return ours.frame_count, theirs.frame_count


@pytest.mark.parametrize("dynamic", [True, None])
def test_sizes_zero_and_one_specialise_as_in_pytorch(dynamic):
    def fn(x):
        return x * 2 + x.shape[0]

    ours, theirs = _graph_counts(fn, [0, 1, 2, 3, 5, 1, 0], dynamic)
    assert ours == theirs


def test_a_user_backend_sees_symbolic_inputs_in_the_graph():
    seen = []

    def backend(gm, example_inputs):
        seen.append([node.meta["example_value"] for node in gm.graph.nodes if node.op == "placeholder"])
        return gm.forward

    graphwright.compile(lambda x: x.relu() * 2, backend=backend, dynamic=True)(torch.randn(4, 5))
    (placeholders,) = seen
    assert all(isinstance(size, torch.SymInt) for size in placeholders[0].shape)


# -- sweeps: ten sizes through real models ---------------------------------------------------


class TransformerBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                                batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.layer(x)).mean(1)


def _mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def _sweep(model, inputs_for, backend, dynamic):
    """Ten sizes, forward and backward: values and gradients as eager; the compile count."""
    counter = CompileCounterWithBackend(backend)
    compiled = graphwright.compile(model, backend=counter, dynamic=dynamic)
    for size in range(2, 12):
        x = inputs_for(size)
        expected = model(x)
        expected.sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        got = compiled(x)
        got.sum().backward()
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        for param, grad in zip(model.parameters(), grads):
            torch.testing.assert_close(param.grad, grad, rtol=1e-5, atol=1e-5)
        model.zero_grad()
    return counter.frame_count


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("dynamic, most", [(None, 2), (True, 1)])
def test_mlp_over_ten_batch_sizes(backend, dynamic, most):
    torch.manual_seed(0)
    assert _sweep(_mlp(), lambda size: torch.randn(size, 16), backend, dynamic) <= most


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("dynamic, most", [(None, 2), (True, 1)])
def test_transformer_block_over_ten_sequence_lengths(backend, dynamic, most):
    torch.manual_seed(0)
    assert _sweep(TransformerBlock(), lambda size: torch.randn(2, size, 16), backend, dynamic) <= most


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mlp", "transformer"])
def test_inductor_kernels_serve_every_size(model):
    torch.manual_seed(0)
    build, inputs = ((_mlp, lambda size: torch.randn(size, 16)) if model == "mlp"
                     else (TransformerBlock, lambda size: torch.randn(2, size, 16)))
    assert _sweep(build(), inputs, "inductor", None) <= 2


def _tiny_llama():
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                      hidden_size=32, intermediate_size=64, vocab_size=100,
                                      pad_token_id=0, eos_token_id=None)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_causal_lm_over_ten_sequence_lengths_compiles_twice(backend):
    model = _tiny_llama()
    counter = CompileCounterWithBackend(backend)
    compiled = graphwright.compile(model, backend=counter, fullgraph=True)
    with torch.no_grad():
        for length in range(3, 13):
            ids = torch.randint(0, 100, (2, length))
            torch.testing.assert_close(compiled(ids).logits, model(ids).logits, rtol=1e-5, atol=1e-5)
    assert counter.frame_count == 2


def _decode(model, ids, steps=16):
    from transformers import DynamicCache

    out = model(ids, past_key_values=DynamicCache(), use_cache=True)
    tokens = []
    for _ in range(steps):
        token = out.logits[:, -1:].argmax(-1)
        tokens.append(token)
        out = model(token, past_key_values=out.past_key_values, use_cache=True)
    return torch.cat(tokens, 1)


@pytest.mark.parametrize("dynamic, compiles", [(None, 3), (True, 2)])
def test_decoding_with_a_dynamic_cache_matches_eager_tokens_with_pytorchs_compile_count(dynamic, compiles):
    """Prefill, then decoding: with automatic dynamic shapes the first step sees the cache for
    the first time (static) and the second makes its length symbolic; with `dynamic=True` every
    step shares one graph from the first. PyTorch compiles as often."""
    model = _tiny_llama()
    ids = torch.randint(1, 100, (1, 5))
    ours, theirs = CompileCounter(), torch._dynamo.testing.CompileCounter()
    with torch.no_grad():
        expected = _decode(model, ids)
        tokens = _decode(graphwright.compile(model, backend=ours, fullgraph=True, dynamic=dynamic), ids)
        torch._dynamo.reset()
        _decode(torch.compile(model, backend=theirs, fullgraph=True, dynamic=dynamic), ids)
    assert torch.equal(tokens, expected)
    assert ours.frame_count <= theirs.frame_count == compiles


def test_generate_through_a_compiled_forward_matches_eager():
    model = _tiny_llama()
    ids = torch.randint(1, 100, (1, 5))
    expected = model.generate(ids, max_new_tokens=16, do_sample=False)
    counter = CompileCounter()
    model.forward = graphwright.compile(model.forward, backend=counter, fullgraph=True)
    assert torch.equal(model.generate(ids, max_new_tokens=16, do_sample=False), expected)
    assert counter.frame_count <= 3


class NanoLM(nn.Module):
    """nanoGPT's shape of model: embeddings, a causal block, a head over the vocabulary."""

    def __init__(self, vocab=50, block=32, dim=16):
        super().__init__()
        self.block = block
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(block, dim)
        self.layer = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        length = idx.shape[1]
        x = self.tokens(idx) + self.positions(torch.arange(length))
        mask = nn.Transformer.generate_square_subsequent_mask(length)
        return self.head(self.layer(x, src_mask=mask, is_causal=True))


def _generate(model, idx, steps=16):
    for _ in range(steps):
        logits = model(idx[:, -model.block:])
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


def test_nanogpt_style_generate_compiles_at_most_twice():
    torch.manual_seed(0)
    model = NanoLM().eval()
    idx = torch.randint(0, 50, (1, 4))
    counter = CompileCounter()
    with torch.no_grad():
        expected = _generate(model, idx)
        tokens = _generate(graphwright.compile(model, backend=counter), idx)
    assert torch.equal(tokens, expected)
    assert counter.frame_count <= 2


@graphwright.allow_in_graph
def _scaled_by(x, n):
    return x * n


@graphwright.nonstrict_trace
def _shifted_and_length(x, n):
    return x + n, x.size(0)


@graphwright.leaf_function
def _leaf_scaled_and_total(x, n):
    return x * n, x.sum() + n


@_leaf_scaled_and_total.register_fake
def _(x, n):
    return torch.empty_like(x), x.sum()


@pytest.mark.parametrize("fn", [lambda x: _scaled_by(x, x.shape[0]),
                                lambda x: (lambda y, m: y * m)(*_shifted_and_length(x, x.shape[0])),
                                lambda x: _leaf_scaled_and_total(x, x.shape[0])],
                         ids=["allow_in_graph", "nonstrict_trace", "leaf_function"])
def test_symbolic_sizes_go_through_marked_functions_without_specialising(fn):
    counter = CompileCounter()
    compiled = graphwright.compile(fn, backend=counter, dynamic=True, fullgraph=True)
    for size in (3, 5, 7):
        x = torch.randn(size)
        torch.testing.assert_close(compiled(x), fn(x))
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_leaf_function_takes_a_symbolic_size_with_gradients(backend):
    def fn(x):
        scaled, total = _leaf_scaled_and_total(x, x.shape[0])
        return scaled.sum() * total

    counter = CompileCounterWithBackend(backend)
    compiled = graphwright.compile(fn, backend=counter, dynamic=True, fullgraph=True)
    for size in (3, 5, 7):
        x = torch.randn(size, 2, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        compiled(x).backward()
        fn(x_eager).backward()
        torch.testing.assert_close(x.grad, x_eager.grad)
    assert counter.frame_count == 1


def test_compiling_generate_itself_captures_graphs_and_matches_eager():
    """`generate` is wrapped by transformers' decorators and torch's `no_grad()`: the wrappers
    run as they are, the library functions they reach are compiled (as a frame hook would)."""
    model = _tiny_llama()
    ids = torch.randint(1, 100, (1, 5))
    expected = model.generate(ids, max_new_tokens=8, do_sample=False)
    counter = CompileCounter()
    tokens = graphwright.compile(model.generate, backend=counter)(ids, max_new_tokens=8, do_sample=False)
    assert torch.equal(tokens, expected)
    assert counter.frame_count >= 5  # the forward, the logits processing; PyTorch: 12


def _rows_of_nonzero_checked(x):
    found = x.nonzero()
    torch._check(found.shape[0] % 4 == 0)
    return torch.ones(found.shape[0])


def _cond_over_a_check_in_both_branches(x):
    return torch.cond(x.shape[0] % 4 == 0, lambda: _rows_of_nonzero_checked(x),
                      lambda: _rows_of_nonzero_checked(x))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_data_dependent_check_inside_cond_branches_is_asserted_at_run_time(backend, monkeypatch):
    monkeypatch.setattr(graphwright.config, "capture_dynamic_output_shape_ops", True)
    compiled = graphwright.compile(_cond_over_a_check_in_both_branches, backend=backend, dynamic=True)
    torch.testing.assert_close(compiled(torch.ones(4, 4)), torch.ones(16))
    with pytest.raises(RuntimeError, match=r"Runtime assertion failed for expression Eq\(Mod\(u\d+, 4\), 0\) "
                                           r"\(`_check` at .*test_dynamic_shapes.py:\d+\)"):
        compiled(torch.ones(5, 5))  # 25 rows


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("start", [-2, 0, 1])
def test_narrow_at_a_start_read_from_a_tensor(backend, start):
    # the output's size depends on the start's sign (a Piecewise size): the graph computes it
    def f(x, start):
        return torch.narrow(x, 1, start, 2) * 2

    x = torch.randn(3, 5)
    expected = f(x, torch.tensor(start))
    actual = graphwright.compile(f, fullgraph=True, backend=backend)(x, torch.tensor(start))
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected)
