"""`error_on_graph_break(value)`, graphwright's and torch's: under `fullgraph=False` a break is
an error where the switch is on at the breaking instruction, and splits the function where it
is off; under `fullgraph=True` every break is an error. Each program runs under graphwright
(with its own switch and with torch's) and under torch.compile: the same outcome (raised or
not), eager's values, the same graph count."""
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


# (switch, graph_break) pairs: graphwright's, and torch's (which graphwright honours)
SWITCHES = {
    "graphwright": (graphwright.error_on_graph_break, graphwright.graph_break),
    "torch": (torch._dynamo.error_on_graph_break, torch._dynamo.graph_break),
}


def _programs(switch, graph_break):
    def allowed_block(x):
        x = x + 1
        with switch(False):
            graph_break()
        return x * 2

    def forbidden_block(x):
        x = x + 1
        with switch(True):
            x = x * 3
            graph_break()
        return x * 2

    def break_before_forbidden_block(x):
        x = x + 1
        graph_break()
        with switch(True):
            x = x * 3
        return x * 2

    def break_after_forbidden_block(x):
        x = x + 1
        with switch(True):
            x = x * 3
        graph_break()
        return x * 2

    @switch(False)
    def allowed_helper(x):
        graph_break()
        return x + 1

    def calls_allowed_helper(x):
        return allowed_helper(x * 2) * 3

    @switch(True)
    def forbidden_helper(x):
        graph_break()
        return x + 1

    def calls_forbidden_helper(x):
        return forbidden_helper(x * 2) * 3

    def allowed_then_outside(x):
        with switch(False):
            x = x * 3
            graph_break()
            x = x + 1
        graph_break()
        return x * 2

    return dict(allowed_block=allowed_block, forbidden_block=forbidden_block,
                break_before_forbidden_block=break_before_forbidden_block,
                break_after_forbidden_block=break_after_forbidden_block,
                calls_allowed_helper=calls_allowed_helper, calls_forbidden_helper=calls_forbidden_helper,
                allowed_then_outside=allowed_then_outside)


# program -> for (fullgraph, the switch around the call): graphs, or "raises"
CASES = {
    "allowed_block": {(False, None): 2, (False, True): 2, (True, None): "raises"},
    "forbidden_block": {(False, None): "raises"},
    "break_before_forbidden_block": {(False, None): 2, (False, True): "raises"},
    "break_after_forbidden_block": {(False, None): 2, (False, True): "raises"},
    "calls_allowed_helper": {(False, None): 3, (True, None): "raises"},
    "calls_forbidden_helper": {(False, None): "raises"},
    "allowed_then_outside": {(False, None): 3, (False, True): "raises"},
}


def _outcome(compile_fn, counter, fn, fullgraph, around):
    compiled = compile_fn(fn, backend=counter, fullgraph=fullgraph)
    x = torch.ones(3)
    try:
        if around is None:
            got = compiled(x)
        else:
            with around:
                got = compiled(x)
    except (graphwright.Unsupported, torch._dynamo.exc.Unsupported):
        return "raises"
    torch.testing.assert_close(got, fn(x))
    return counter.frame_count


@pytest.mark.parametrize("which", list(SWITCHES))
@pytest.mark.parametrize("name,fullgraph,outer", [(name, fullgraph, outer) for name, cases in CASES.items()
                                                  for fullgraph, outer in cases])
def test_switch_decides_whether_a_break_raises_as_in_torch_compile(which, name, fullgraph, outer):
    switch, graph_break = SWITCHES[which]
    fn = _programs(switch, graph_break)[name]
    ours = _outcome(graphwright.compile, CompileCounter(), fn, fullgraph,
                    None if outer is None else switch(outer))
    theirs = _outcome(torch.compile, torch._dynamo.testing.CompileCounter(),
                      _programs(torch._dynamo.error_on_graph_break, torch._dynamo.graph_break)[name], fullgraph,
                      None if outer is None else torch._dynamo.error_on_graph_break(outer))
    assert ours == theirs == CASES[name][(fullgraph, outer)]


def test_error_names_the_users_line_and_the_break():
    def forbidden(x):
        with graphwright.error_on_graph_break(True):
            graphwright.graph_break()  # the line named
        return x

    with pytest.raises(graphwright.Unsupported) as raised:
        graphwright.compile(forbidden, backend="eager")(torch.ones(2))
    text = str(raised.value)
    assert "Call to `graphwright.graph_break()`" in text
    assert "test_error_on_graph_break.py" in text and "graphwright.graph_break()  # the line named" in text


def test_switch_around_an_eager_call_is_restored_after_an_error():
    def breaks(x):
        graphwright.graph_break()
        return x + 1

    compiled = graphwright.compile(breaks, backend="eager")
    with pytest.raises(graphwright.Unsupported):
        with graphwright.error_on_graph_break(True):
            compiled(torch.ones(2))
    graphwright.reset()
    torch.testing.assert_close(compiled(torch.ones(2)), torch.ones(2) + 1)  # allowed again


def test_decorator_keeps_the_functions_name_and_runs_it():
    @graphwright.error_on_graph_break(False)
    def helper(x):
        """Doc."""
        return x * 2

    assert helper.__name__ == "helper" and helper.__doc__ == "Doc."
    torch.testing.assert_close(helper(torch.ones(2)), torch.ones(2) * 2)


def test_a_break_inside_an_allowed_block_resumes_inside_it():
    """The resume function after the break starts inside the block: it compiles with breaks
    still allowed there, and forbidden again after it."""
    def steps(x):
        with graphwright.error_on_graph_break(True):
            x = x + 1
            with graphwright.error_on_graph_break(False):
                graphwright.graph_break()
                x = x * 2
                graphwright.graph_break()
            x = x - 1
        return x

    counter = CompileCounter()
    torch.testing.assert_close(graphwright.compile(steps, backend=counter)(torch.ones(2)), steps(torch.ones(2)))
    assert counter.frame_count == 3


def test_switch_takes_a_bool_in_eager_code_and_in_a_region():
    with pytest.raises(TypeError, match="True or False"):
        graphwright.error_on_graph_break("yes")

    def region(x):
        with graphwright.error_on_graph_break("yes"):
            return x + 1

    with pytest.raises(TypeError, match="True or False"):
        graphwright.compile(region, backend="eager")(torch.ones(2))
