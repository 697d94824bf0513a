"""allow_in_graph (one node, tensors/numbers/None and lists/tuples of those) and
disallow_in_graph (a graph break)."""
import pytest
import torch

import graphwright
from graphwright.testing import CompileCounter, CompileCounterWithBackend


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


@graphwright.allow_in_graph
def fused(x, scale, pair):
    graphwright.graph_break()  # never seen by the strict tracer
    return x * scale + pair[0] - pair[1]


class Box:
    def __init__(self, t):
        self.t = t


def test_allow_in_graph_returns_the_function_itself_marked():
    def f(x):
        return x

    assert graphwright.allow_in_graph(f) is f
    assert graphwright._core.rules.marking_of(f) == "allow_in_graph"


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_call_is_one_node_in_the_graph_and_matches_eager(backend):
    counter = CompileCounterWithBackend(backend)

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(x, y):
        return fused(x, 2.0, (y, None if False else y * 0.5)).relu()

    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(fn(x, y), (x * 2.0 + y - y * 0.5).relu())
    assert counter.frame_count == 1
    calls = [node for node in counter.graphs[0].graph.nodes if node.target is fused]
    assert len(calls) == 1


def test_non_tensor_input_is_a_clear_error_naming_nonstrict_trace():
    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return fused(Box(x), 1.0, (x, x))

    with pytest.raises(graphwright.Unsupported) as info:
        fn(torch.randn(2))
    message = str(info.value)
    assert "Invalid input type for allow_in_graph-ed function" in message
    assert "nonstrict_trace" in message and "test_allow_in_graph.py" in message


def test_module_input_is_rejected_by_allow_in_graph():
    linear = torch.nn.Linear(2, 2)

    @graphwright.allow_in_graph
    def run(module, x):
        return module(x)

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return run(linear, x)

    with pytest.raises(graphwright.Unsupported, match="Invalid input type for allow_in_graph-ed function"):
        fn(torch.randn(2))


def test_allow_in_graph_applied_inside_the_region():
    def double(x):
        graphwright.graph_break()
        return x * 2

    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(x):
        return graphwright.allow_in_graph(double)(x) + 1

    x = torch.randn(3)
    torch.testing.assert_close(fn(x), x * 2 + 1)
    assert counter.frame_count == 1


def test_disallow_in_graph_on_an_allowed_function_makes_the_call_a_graph_break():
    def helper(x):
        return x + 1

    graphwright.allow_in_graph(helper)
    graphwright.disallow_in_graph(helper)

    @graphwright.compile(fullgraph=True, backend="eager")
    def strict(x):
        return helper(x) * 2

    with pytest.raises(graphwright.Unsupported, match="disallow_in_graph"):
        strict(torch.randn(2))

    @graphwright.compile(backend="eager")
    def lenient(x):
        return helper(x) * 2

    x = torch.randn(2)
    torch.testing.assert_close(lenient(x), (x + 1) * 2)
    assert graphwright.counters["graph_break"]["Call to a function marked `disallow_in_graph`"] == 1


def test_disallow_in_graph_on_a_plain_user_function_is_an_error_pointing_to_disable():
    def helper(x):
        return x + 1

    with pytest.raises(graphwright.InvalidMarkingError, match="already allowed callable") as info:
        graphwright.disallow_in_graph(helper)
    assert "graphwright.disable" in str(info.value)
    assert graphwright._core.rules.marking_of(helper) is None


def test_disallow_in_graph_on_a_torch_function():
    graphwright.disallow_in_graph(torch.special.expit)
    try:
        @graphwright.compile(fullgraph=True, backend="eager")
        def fn(x):
            return torch.special.expit(x)

        with pytest.raises(graphwright.Unsupported, match="disallow_in_graph"):
            fn(torch.randn(2))
    finally:
        graphwright._core.rules.disallowed_callables.remove(id(torch.special.expit))


def test_allow_in_graph_after_disallow_removes_the_disallow_marking():
    def helper(x):
        return x + 1

    graphwright.allow_in_graph(helper)
    graphwright.disallow_in_graph(helper)
    graphwright.allow_in_graph(helper)

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return helper(x)

    x = torch.randn(2)
    torch.testing.assert_close(fn(x), x + 1)


def test_dict_output_is_a_clear_error_naming_nonstrict_trace():
    @graphwright.allow_in_graph
    def as_dict(x):
        return {"double": x * 2}

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return as_dict(x)["double"]

    with pytest.raises(graphwright.Unsupported) as info:
        fn(torch.randn(2))
    assert "Invalid output type for allow_in_graph-ed function" in str(info.value)
    assert "nonstrict_trace" in str(info.value)


def test_number_and_none_outputs_are_allowed():
    @graphwright.allow_in_graph
    def with_extras(x):
        return x + 1, 3, None

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        out, n, nothing = with_extras(x)
        return out * n if nothing is None else out

    x = torch.randn(2)
    torch.testing.assert_close(fn(x), (x + 1) * 3)


def test_a_call_returning_no_tensor_stays_in_the_graph_and_runs_at_every_call():
    seen = []

    @graphwright.allow_in_graph
    def note_grad_mode():
        seen.append(torch.is_grad_enabled())

    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def step(x):
        note_grad_mode()
        return x + 1

    for _ in range(3):
        step(torch.ones(2))
    assert counter.frame_count == 1
    assert seen == [True] * 4  # once while tracing (as torch.compile), then at every call
