"""Guards and the cache: what recompiles, what does not, and why, in the user's terms."""
import warnings

import pytest
import torch
from torch import nn

import graphwright
from graphwright.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def scaled(x, factor):
    return x * factor


def compiled_with_counter(fn, **options):
    counter = CompileCounter()
    return graphwright.compile(fn, backend=counter, fullgraph=True, **options), counter


def test_calling_again_with_equal_inputs_never_recompiles():
    compiled, counter = compiled_with_counter(scaled)
    for _ in range(5):
        compiled(torch.randn(3, 4), 2)
    assert counter.frame_count == 1


@pytest.mark.parametrize("change", [
    lambda: (torch.randn(3, 5), 2),
    lambda: (torch.randn(3, 4).double(), 2),
    lambda: (torch.randn(3, 4, requires_grad=True), 2),
    lambda: (torch.randn(4, 3).t(), 2),
    lambda: (torch.randn(3, 4), 3),
    lambda: (torch.randn(3, 4), 2.0),
], ids=["size", "dtype", "requires_grad", "stride", "constant_value", "constant_type"])
def test_changing_a_guarded_property_recompiles_and_stays_correct(change):
    compiled, counter = compiled_with_counter(scaled)
    compiled(torch.randn(3, 4), 2)
    x, factor = change()
    torch.testing.assert_close(compiled(x, factor), x * factor)
    assert counter.frame_count == 2


def test_recompile_reason_names_the_argument_and_the_dimension():
    compiled, _ = compiled_with_counter(scaled)
    compiled(torch.randn(4, 640), 2)
    compiled(torch.randn(4, 8), 2)
    assert list(graphwright.counters["recompiles"]) == [
        "tensor 'x' size mismatch at index 1: expected 640, actual 8"]


def test_grad_mode_is_guarded():
    compiled, counter = compiled_with_counter(lambda x: x * 2)
    x = torch.randn(2, requires_grad=True)
    assert compiled(x).requires_grad
    with torch.no_grad():
        assert not compiled(x).requires_grad
    assert counter.frame_count == 2


def test_globals_read_are_guarded():
    global OFFSET
    OFFSET = 1.0
    compiled, counter = compiled_with_counter(lambda x: x + OFFSET)
    x = torch.zeros(2)
    assert compiled(x).tolist() == [1.0, 1.0]
    OFFSET = 5.0
    assert compiled(x).tolist() == [5.0, 5.0]
    assert counter.frame_count == 2


def test_cache_size_limit_then_eager_with_one_warning():
    counter = CompileCounter()
    compiled = graphwright.compile(scaled, backend=counter, dynamic=False)
    old = graphwright.config.cache_size_limit
    graphwright.config.cache_size_limit = 2
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for size in range(1, 6):
                x = torch.randn(size)
                torch.testing.assert_close(compiled(x, 2), x * 2)
        messages = [str(w.message) for w in caught if "cache_size_limit" in str(w.message)]
    finally:
        graphwright.config.cache_size_limit = old
    assert counter.frame_count == 2
    assert len(messages) == 1
    assert "size mismatch" in messages[0]


class Layer(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.lin(x)) + x


def test_instances_of_one_module_class_share_one_graph():
    counter = CompileCounter()
    layers = [Layer() for _ in range(20)]
    compiled = [graphwright.compile(layer, backend=counter, fullgraph=True) for layer in layers]
    x = torch.randn(2, 8)
    for layer, fast in zip(layers, compiled):
        torch.testing.assert_close(fast(x), layer(x))
    assert counter.frame_count == 1


def test_a_module_of_another_structure_gets_its_own_graph():
    counter = CompileCounter()
    small, wide = Layer(8), Layer(16)
    graphwright.compile(small, backend=counter)(torch.randn(2, 8))
    out = graphwright.compile(wide, backend=counter)(torch.randn(2, 16))
    assert out.shape == (2, 16)
    assert counter.frame_count == 2


def test_module_training_flag_is_guarded():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.9))
    compiled = graphwright.compile(net, backend="eager", fullgraph=True)
    x = torch.randn(3, 4)
    net.eval()
    torch.testing.assert_close(compiled(x), net(x))
    net.train()
    assert (compiled(x) == 0).float().mean() > 0.5


def test_guard_code_is_one_straight_line_function():
    compiled, _ = compiled_with_counter(scaled)
    compiled(torch.randn(2), 3)
    source = compiled._entries[0].source
    assert source.startswith("def ___entry(___gw_fn, x, factor):")
    guard_section = source.split("except ___Exception")[0]
    assert "for " not in guard_section and "while " not in guard_section
    assert guard_section.index("is True") < guard_section.index("factor == 3") < guard_section.index("x.dtype")


def test_aliased_inputs_are_guarded():
    compiled, counter = compiled_with_counter(lambda a, b: a.add_(1) + b)
    x = torch.zeros(2)
    torch.testing.assert_close(compiled(x, x), torch.full((2,), 2.0))
    y, z = torch.zeros(2), torch.zeros(2)
    torch.testing.assert_close(compiled(y, z), torch.full((2,), 1.0))
    assert counter.frame_count == 2


class Settings:
    scale = 2.0


def test_class_attributes_read_through_a_global_class_are_guarded():
    compiled, counter = compiled_with_counter(lambda x: x * Settings.scale)
    x = torch.ones(2)
    assert compiled(x).tolist() == [2.0, 2.0]
    Settings.scale = 3.0
    try:
        assert compiled(x).tolist() == [3.0, 3.0]
    finally:
        Settings.scale = 2.0
    assert counter.frame_count == 2


def test_a_new_backend_object_never_reuses_another_backends_entries():
    for _ in range(3):
        compiled, counter = compiled_with_counter(scaled)
        compiled(torch.ones(2), 2)
        assert counter.frame_count == 1


def test_an_attribute_found_missing_is_guarded_to_stay_missing():
    class Options:
        pass

    def fn(x, options):
        return x * getattr(options, "scale", 1.0) + (1.0 if hasattr(options, "shift") else 0.0)

    compiled, counter = compiled_with_counter(fn)
    options = Options()
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x, options), fn(x, options))
    options.scale, options.shift = 3.0, True
    torch.testing.assert_close(compiled(x, options), fn(x, options))
    assert counter.frame_count == 2


def sized(x, y):
    batch = x.shape[0]
    z = x.view(batch, -1) * 2 + y.sum()
    if batch > 1:
        z = z + 1
    return z.reshape(batch * 2, -1)[: batch // 2], batch, x.shape


@pytest.mark.parametrize("dynamic, frames", [(False, 4), (None, 2), (True, 1)])
def test_dynamic_decides_how_many_graphs_serve_changing_sizes(dynamic, frames):
    counter = CompileCounter()
    compiled = graphwright.compile(sized, backend=counter, fullgraph=True, dynamic=dynamic)
    for batch in (4, 6, 8, 10):
        x, y = torch.randn(batch, 4), torch.randn(3)
        out, expected = compiled(x, y), sized(x, y)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1:] == expected[1:] and type(out[1]) is int
    assert counter.frame_count == frames


def test_symbolic_sizes_keep_guards_on_what_the_code_branched_on():
    counter = CompileCounter()
    compiled = graphwright.compile(sized, backend=counter, fullgraph=True, dynamic=True)
    for batch in (4, 6, 1):
        x, y = torch.randn(batch, 4), torch.randn(3)
        torch.testing.assert_close(compiled(x, y)[0], sized(x, y)[0])
    assert counter.frame_count == 2  # batch 1 is specialised, and `batch > 1` flips


def test_a_symbolic_graph_stays_correct_with_a_backend_that_specialises_sizes():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def fn(x):
        return net(x).reshape(x.shape[0] * 2)

    compiled = graphwright.compile(fn, backend="aot_eager", dynamic=True)
    for batch in (3, 5, 3):
        x = torch.randn(batch, 4)
        torch.testing.assert_close(compiled(x), fn(x))


def test_mark_dynamic_makes_a_dimension_symbolic_from_the_first_compile():
    counter = CompileCounter()
    compiled = graphwright.compile(lambda x: x * x.shape[0], backend=counter, fullgraph=True, dynamic=False)
    for batch in (3, 5, 7):
        x = torch.randn(batch, 2)
        graphwright.mark_dynamic(x, 0)
        torch.testing.assert_close(compiled(x), x * batch)
    assert counter.frame_count == 1


def test_mark_static_keeps_a_dimension_specialised_under_dynamic_true():
    counter = CompileCounter()
    compiled = graphwright.compile(lambda x: x.sum(0), backend=counter, fullgraph=True, dynamic=True)
    for batch in (3, 5):
        x = torch.randn(batch, 2)
        graphwright.mark_static(x, 0)
        torch.testing.assert_close(compiled(x), x.sum(0))
    assert counter.frame_count == 2


def test_a_loop_over_a_symbolic_size_specialises_and_guards_it():
    def unrolled(seq):
        return torch.stack([seq[t] * t for t in range(seq.shape[0])])

    counter = CompileCounter()
    compiled = graphwright.compile(unrolled, backend=counter, dynamic=True)
    for length in (3, 4, 3):
        seq = torch.randn(length, 2)
        torch.testing.assert_close(compiled(seq), unrolled(seq))
    assert counter.frame_count == 2


def test_default_dtype_autocast_state_and_inference_tensors_are_guarded():
    def fn(x):
        return x @ x.T, torch.ones(2)

    compiled, counter = compiled_with_counter(fn)
    x = torch.randn(2, 2)
    assert [t.dtype for t in compiled(x)] == [torch.float32, torch.float32]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert [t.dtype for t in compiled(x)] == [t.dtype for t in fn(x)] == [torch.bfloat16, torch.float32]
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert compiled(x)[1].dtype == torch.float64
    finally:
        torch.set_default_dtype(old)
    with torch.inference_mode():
        frozen = torch.randn(2, 2)
    torch.testing.assert_close(compiled(frozen)[0], fn(frozen)[0])
    assert counter.frame_count == 4


def test_an_int_argument_that_changes_becomes_symbolic_under_dynamic_none():
    def fn(x, step):
        if step > 3:
            return x * step
        return x - step

    counter = CompileCounter()
    compiled = graphwright.compile(fn, backend=counter)
    for step in (2, 3, 5, 6, 2, 1):
        torch.testing.assert_close(compiled(torch.ones(2), step), fn(torch.ones(2), step))
    # 2 (specialised), 3 (symbolic, step <= 3), 5 (symbolic, step > 3); 1 is served by the
    # entry for step <= 3 (a changed int may be 0 or 1, unlike a size): torch.compile's 3 too
    assert counter.frame_count == 3


@pytest.mark.parametrize("unspecialized", [False, True])
def test_a_counter_kept_on_a_module_is_specialized_as_in_pytorch_unless_allowed(unspecialized, monkeypatch):
    class Stepper(nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = 0

        def forward(self, x):
            self.steps += 1
            return x * self.steps

    monkeypatch.setattr(graphwright.config, "allow_unspec_int_on_nn_module", unspecialized)
    module = Stepper()
    counter = CompileCounter()
    compiled = graphwright.compile(module, backend=counter, fullgraph=True)
    for expected in range(1, 7):
        assert compiled(torch.ones(1)).item() == expected
    assert module.steps == 6 and type(module.steps) is int
    # PyTorch's default specialises the ints of modules (6 graphs, as torch.compile); allowed,
    # 1 specialised graph then one symbolic graph
    assert counter.frame_count == (2 if unspecialized else 6)


def test_a_conjugate_view_recompiles_and_says_its_dispatch_keys_changed():
    graphwright.reset()
    counter = graphwright.testing.CompileCounter()
    f = graphwright.compile(lambda x: (x * 2).sum(), backend=counter)
    x = torch.randn(3, dtype=torch.cfloat)
    f(x)
    f(x)
    assert counter.frame_count == 1
    torch.testing.assert_close(f(x.conj()), (x.conj() * 2).sum())
    assert counter.frame_count == 2
    (reason,) = graphwright.counters["recompiles"]
    assert reason.startswith("tensor 'x' dispatch keys mismatch") and "Conjugate" in reason


FLAGS = {"scale": 2}


def scaled_by_flags(x):
    return x * FLAGS["scale"] if FLAGS.get("debug") is None else x


def test_a_dict_read_by_key_is_guarded_on_those_keys_and_says_which_one_changed():
    compiled, counter = compiled_with_counter(scaled_by_flags)
    try:
        compiled(torch.randn(3))
        FLAGS["unrelated"] = 1
        compiled(torch.randn(3))
        assert counter.frame_count == 1
        FLAGS["debug"] = True
        compiled(torch.randn(3))
        assert counter.frame_count == 2
        assert any("has the key 'debug' now" in reason for reason in graphwright.counters["recompiles"])
    finally:
        FLAGS.clear()
        FLAGS["scale"] = 2


def test_a_subclass_defined_after_compiling_is_found_on_the_next_call():
    class Backend:
        pass

    class First(Backend):
        pass

    def f(x):
        return x * len(Backend.__subclasses__()), [cls.__name__ for cls in Backend.__subclasses__()]

    counter = CompileCounter()
    compiled = graphwright.compile(f, backend=counter, fullgraph=True)
    x = torch.randn(3)
    assert compiled(x)[1] == ["First"] and compiled(x)[1] == ["First"]
    assert counter.frame_count == 1

    class Second(Backend):
        pass

    result = compiled(x)
    torch.testing.assert_close(result[0], f(x)[0])
    assert result[1] == ["First", "Second"]
    assert counter.frame_count == 2


def _split(x, sections):
    return torch.tensor_split(x, sections)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_operator_reading_a_0_dim_integer_input_specialises_on_its_value_and_guards_it(backend):
    counter = graphwright.testing.CompileCounterWithBackend(backend)
    compiled = graphwright.compile(_split, backend=counter, fullgraph=True)
    x = torch.randn(6, 4)
    for value, frames in [(2, 1), (2, 1), (3, 2), (2, 2), (1, 3)]:
        sections = torch.tensor(value)
        actual, expected = compiled(x, sections), _split(x, sections)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert a.stride() == e.stride() and a.untyped_storage().data_ptr() == e.untyped_storage().data_ptr()
            assert torch.equal(a, e)
        assert counter.frame_count == frames


def test_the_value_guard_names_the_tensor_and_its_values_in_the_recompile_reason():
    compiled = graphwright.compile(_split, backend="eager", fullgraph=True)
    x = torch.randn(6, 4)
    compiled(x, torch.tensor(2))
    compiled(x, torch.tensor(3))
    (reason,) = graphwright.counters["recompiles"]
    assert reason == "'sections.item()' changed: expected 2, actual 3"


def test_a_0_dim_integer_input_the_graph_wrote_is_not_specialised_on_its_value():
    def fn(x, sections):
        sections.add_(1)
        return torch.tensor_split(x, sections)

    x = torch.randn(6, 4)
    compiled = graphwright.compile(fn, backend="eager")
    actual, expected = compiled(x, torch.tensor(1)), fn(x, torch.tensor(1))
    assert [a.shape for a in actual] == [e.shape for e in expected]
    with pytest.raises(graphwright.Unsupported, match="Data-dependent"):
        graphwright.compile(fn, backend="eager", fullgraph=True)(x, torch.tensor(1))


def test_a_0_dim_float_input_is_not_specialised_on_its_value():
    compiled, counter = compiled_with_counter(lambda x, t: x * t)
    x = torch.randn(3)
    for value in (1.0, 2.0, 3.0):
        torch.testing.assert_close(compiled(x, torch.tensor(value)), x * value)
    assert counter.frame_count == 1


def test_an_explicit_item_of_an_integer_input_stays_symbolic():
    def fn(x, n):
        return x * n.item()

    compiled, counter = compiled_with_counter(fn)
    x = torch.randn(3)
    for value in (1, 2, 3):
        torch.testing.assert_close(compiled(x, torch.tensor(value)), fn(x, torch.tensor(value)))
    assert counter.frame_count == 1
