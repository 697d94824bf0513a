"""nonstrict_trace: the seeds' examples, registration mechanics, and the required errors."""
import gc

import pytest
import torch

import graphwright
from graphwright._core import rules
from graphwright.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def get_magic_num_unmarked():
    graphwright.graph_break()
    return torch.tensor([42])


@graphwright.nonstrict_trace
def get_magic_num():
    # Emulates any graph break: a C function, an unsupported language feature.
    graphwright.graph_break()
    return torch.tensor([42])


def _graph_targets(counter: CompileCounter) -> list:
    return [node.target for gm in counter.graphs for node in gm.graph.nodes if node.op == "call_function"]


def test_without_nonstrict_trace_fullgraph_raises_the_user_graph_break():
    @graphwright.compile(fullgraph=True, backend="eager")
    def func(x):
        n = get_magic_num_unmarked()
        return x + n

    with pytest.raises(graphwright.Unsupported, match="Call to `graphwright.graph_break\\(\\)`"):
        func(torch.rand(10))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_decorator_form_gives_one_graph_and_the_eager_result(backend):
    counter = graphwright.testing.CompileCounterWithBackend(backend)

    @graphwright.compile(fullgraph=True, backend=counter)
    def func(x):
        n = get_magic_num()
        return x + n

    x = torch.rand(10)
    torch.testing.assert_close(func(x), x + torch.tensor([42]))
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_wrapper_called_inside_the_region_gives_one_graph_and_the_eager_result(backend):
    counter = graphwright.testing.CompileCounterWithBackend(backend)

    @graphwright.compile(fullgraph=True, backend=counter)
    def func(x):
        n = graphwright.nonstrict_trace(get_magic_num_unmarked)()
        return x + n

    x = torch.rand(10)
    torch.testing.assert_close(func(x), x + torch.tensor([42]))
    torch.testing.assert_close(func(x), x + torch.tensor([42]))
    assert counter.frame_count == 1


def test_body_calling_an_untraceable_c_function_is_one_graph():
    @graphwright.nonstrict_trace
    def via_numpy_shape(x):
        import numpy  # noqa: F401  (a C-implemented library call in the body)

        scale = float(len(x.shape))
        return x * scale

    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def func(x):
        return via_numpy_shape(x).sin()

    x = torch.randn(3, 4)
    torch.testing.assert_close(func(x), (x * 2.0).sin())
    assert counter.frame_count == 1


def test_the_graph_has_one_opaque_node_for_the_call():
    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def func(x):
        return get_magic_num() + x

    func(torch.rand(3))
    calls = [t for t in _graph_targets(counter) if getattr(t, "fn", None) is get_magic_num]
    assert len(calls) == 1
    assert "nonstrict_get_magic_num" in counter.graphs[0].code


def test_each_application_returns_a_new_wrapper_registered_by_id_in_both_registries():
    def trace_me(x):
        return x + 1

    first = graphwright.nonstrict_trace(trace_me)
    second = graphwright.nonstrict_trace(trace_me)
    assert first is not second and first is not trace_me
    assert first.__wrapped__ is trace_me and first.__name__ == "trace_me"
    for wrapper in (first, second):
        assert wrapper in rules.allowed_callables and wrapper in rules.nonstrict_trace_callables
    assert trace_me not in rules.nonstrict_trace_callables


def test_registration_is_dropped_when_the_wrapper_is_garbage_collected():
    def trace_me(x):
        return x + 1

    wrapper = graphwright.nonstrict_trace(trace_me)
    wrapper_id = id(wrapper)
    assert wrapper_id in rules.nonstrict_trace_callables.names
    del wrapper
    gc.collect()
    assert wrapper_id not in rules.nonstrict_trace_callables.names
    assert wrapper_id not in rules.allowed_callables.names


def test_no_action_at_a_distance_the_original_still_graph_breaks():
    def trace_me(x):
        graphwright.graph_break()
        return x + 1

    @graphwright.compile(backend="eager")
    def func(x):
        graphwright.nonstrict_trace(trace_me)  # the wrapper is ignored
        return trace_me(x) * 2

    x = torch.randn(3)
    torch.testing.assert_close(func(x), (x + 1) * 2)
    # counted in the caller (its graph ends at the call) and in trace_me itself, as PyTorch does
    assert sum(graphwright.counters["graph_break"].values()) == 2


def test_nonstrict_trace_and_leaf_function_on_one_function_is_an_error():
    def trace_me(x):
        return x

    leaf = graphwright.leaf_function(trace_me)
    with pytest.raises(graphwright.GraphwrightError, match="cannot be both marked as @leaf_function and @nonstrict_trace"):
        graphwright.nonstrict_trace(leaf)
    traced = graphwright.nonstrict_trace(trace_me)
    with pytest.raises(graphwright.GraphwrightError, match="Please use only one decorator"):
        graphwright.leaf_function(traced)


def test_function_defined_inside_the_region_is_the_required_error():
    @graphwright.compile(fullgraph=True, backend="eager")
    def func(x):
        def trace_me(x):
            return x + 1

        return graphwright.nonstrict_trace(trace_me)(x)

    with pytest.raises(graphwright.Unsupported) as info:
        func(torch.randn(3))
    message = str(info.value)
    assert ("Applying `nonstrict_trace` to function <trace_me>; however, `nonstrict_trace` currently "
            "requires the function to be defined outside `graphwright.compile` region.") in message
    assert "Hint:" in message and "test_nonstrict_trace.py" in message


def test_function_defined_inside_the_region_falls_back_to_eager_without_fullgraph():
    @graphwright.compile(backend="eager")
    def func(x):
        def trace_me(x):
            return x + 1

        return graphwright.nonstrict_trace(trace_me)(x)

    x = torch.randn(3)
    torch.testing.assert_close(func(x), x + 1)


def test_nested_helper_that_graph_breaks_is_traced_through():
    def helper(x):
        graphwright.graph_break()
        return x.cos()

    @graphwright.nonstrict_trace
    def outer(x):
        return helper(x) + helper(x * 2)

    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def func(x):
        return outer(x) * 3

    x = torch.randn(4)
    torch.testing.assert_close(func(x), (x.cos() + (x * 2).cos()) * 3)
    assert counter.frame_count == 1


def test_calls_around_the_nonstrict_call_stay_in_the_same_graph():
    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def func(x):
        y = x.sin()
        z = get_magic_num() * y
        return z.relu()

    x = torch.randn(5)
    torch.testing.assert_close(func(x), (torch.tensor([42]) * x.sin()).relu())
    code = counter.graphs[0].code
    assert counter.frame_count == 1
    assert code.index("sin") < code.index("nonstrict_get_magic_num") < code.index("relu")


def test_error_raised_inside_the_body_points_at_the_users_line_in_the_body():
    @graphwright.nonstrict_trace
    def data_dependent(x):
        if x.sum() > 0:  # needs tensor data: not traceable on fake tensors
            return x
        return -x

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return data_dependent(x) + 1

    with pytest.raises(graphwright.Unsupported) as info:
        fn(torch.randn(3))
    error = info.value
    assert "Error while tracing a nonstrict_trace-ed function" in str(error)
    assert error.user_stack[-1].line == "if x.sum() > 0:  # needs tensor data: not traceable on fake tensors"
    assert error.user_stack[-2].line == "return data_dependent(x) + 1"
    assert "graphwright/" not in "".join(frame.filename for frame in error.user_stack)


def test_exception_in_the_body_falls_back_to_eager_without_fullgraph():
    @graphwright.nonstrict_trace
    def raises(x):
        raise ValueError("bad value in the body")

    @graphwright.compile(backend="eager")
    def fn(x):
        return raises(x) + 1

    with pytest.raises(ValueError, match="bad value in the body"):
        fn(torch.randn(3))


def test_call_sites_are_listed_with_their_specialised_constants():
    from graphwright._core.flat_call import nonstrict_call_sites

    @graphwright.nonstrict_trace
    def scale(x, k, mode="fast"):
        return x * k

    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(x):
        return scale(x, 2) + scale(x, 3, mode="slow")

    fn(torch.randn(2))
    sites = nonstrict_call_sites(counter.graphs[0])
    assert [site.specialised_constants() for site in sites] == [{"args[1]": 2}, {"args[1]": 3, "kwargs['mode']": "slow"}]
    assert "test_nonstrict_trace.py" in sites[0].describe() and "args[1]=2" in sites[0].describe()


def test_no_action_at_a_distance_when_wrapped_outside_the_region():
    def trace_me(x):
        graphwright.graph_break()
        return x + 42

    graphwright.nonstrict_trace(trace_me)  # no effect on traceability of `trace_me`

    @graphwright.compile(backend="eager")
    def fn(x, y):
        return trace_me(x) + y

    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(fn(x, y), x + 42 + y)
    # counted in the caller (its graph ends at the call) and in trace_me itself, as PyTorch does
    assert graphwright.counters["graph_break"]["Call to `graphwright.graph_break()`"] == 2


def test_explain_lists_each_call_site_with_its_specialised_constants():
    @graphwright.nonstrict_trace
    def scale(x, k):
        return x * k

    def fn(x):
        return scale(x, 2) + scale(x, 3)

    text = str(graphwright.explain(fn)(torch.randn(2)))
    assert "Nonstrict Trace Calls:" in text
    assert text.count("nonstrict_trace call of") == 2
    assert "args[1]=2" in text and "args[1]=3" in text and "test_nonstrict_trace.py" in text


def test_marking_something_that_is_not_callable_is_a_clear_error():
    with pytest.raises(graphwright.GraphwrightError, match="`nonstrict_trace` expects a callable"):
        graphwright.nonstrict_trace(42)


def test_output_structure_changing_at_run_time_is_a_clear_error_at_the_users_line():
    switched = []

    @graphwright.nonstrict_trace
    def varying(x):
        return (x, x) if switched else (x,)  # reads outside state: specialised while traced

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return varying(x)[0]

    fn(torch.randn(2))
    switched.append(True)
    with pytest.raises(graphwright.GraphwrightError, match="returned another structure at run time than while it was traced") as info:
        fn(torch.randn(2))
    assert info.value.user_stack[-1].line.startswith("fn(torch.randn(2))")
