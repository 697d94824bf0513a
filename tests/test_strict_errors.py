"""Graph breaks: the registry, the error text under fullgraph, eager fallback and counters."""
import pathlib
import warnings

import numpy as np
import pytest
import torch

import graphwright
from graphwright.strict.interpreter import graph_breaks

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "graph-breaks.md"


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def test_docs_list_every_graph_break_kind_as_generated_from_the_registry():
    assert DOCS.read_text() == graph_breaks.render_markdown(), \
        "regenerate with: make docs"


def test_graph_break_ids_are_unique_and_every_kind_has_a_hint():
    kinds = graph_breaks.graph_break_kinds()
    assert len({kind.gb_id for kind in kinds}) == len(kinds)
    assert len({kind.title for kind in kinds}) == len(kinds)
    assert all(kind.hints for kind in kinds)


def get_magic_num():
    graphwright.graph_break()
    return torch.tensor([42])


def func(x):
    n = get_magic_num()
    return x + n


def test_graph_break_under_fullgraph_has_the_documented_layout():
    compiled = graphwright.compile(func, fullgraph=True, backend="eager")
    with pytest.raises(graphwright.Unsupported) as caught:
        compiled(torch.rand(10))
    text = str(caught.value)
    lines = text.splitlines()
    assert lines[0] == "Call to `graphwright.graph_break()`"
    assert lines[1] == "  Explanation: User-inserted graph break. Message: None"
    assert lines[2] == "  Hint: Remove the `graphwright.graph_break()` call."
    assert "  Developer debug context: Called `graphwright.graph_break()` with args `[]`, kwargs `{}`" in lines
    assert "GB001" in text
    stack = text.split("from user code:\n")[1]
    assert f'File "{__file__}", line {func.__code__.co_firstlineno + 1}, in func' in stack
    assert "n = get_magic_num()" in stack
    assert "in get_magic_num" in stack and "graphwright.graph_break()" in stack
    assert caught.value.gb_id == "GB001"


def breaks_on_item(x):
    return x * x.sum().item()


def breaks_on_numpy_random(x):
    return x + torch.from_numpy(np.random.rand(3))


def breaks_on_branch(x):
    if x.sum() > 0:
        return x
    return -x


def breaks_on_c_function(x):
    import time
    return x * time.time()


def breaks_on_print(x):
    print("hello")
    return x


async def _add_one(x):
    return x + 1


def breaks_on_coroutine(x):
    pending = _add_one(x)
    pending.close()
    return x


def breaks_on_backward(x):
    x.sum().backward()
    return x


def breaks_on_nonzero(x):
    return x.nonzero()


def breaks_on_formatting_a_tensor(x):
    return "%s" % x


class _Count(int):
    def __init_subclass__(cls, **kwargs):  # no stand-in base for an int: the class is not built
        super().__init_subclass__(**kwargs)


def breaks_on_class_statement(x):
    class Local(_Count):
        pass
    return x


def breaks_on_deleting_a_global(x):
    global _SCRATCH
    _SCRATCH = 1
    del _SCRATCH
    return x


@pytest.mark.parametrize("fn, gb_id", [
    # .item() and nonzero are captured under fullgraph (unbacked symbols), as in PyTorch 2.13
    (breaks_on_numpy_random, "GB060"), (breaks_on_branch, "GB002"), (breaks_on_c_function, "GB005"),
    (breaks_on_print, "GB008"), (breaks_on_coroutine, "GB007"), (breaks_on_backward, "GB013"),
    (breaks_on_class_statement, "GB030"),
    (breaks_on_deleting_a_global, "GB006"),
    (breaks_on_formatting_a_tensor, "GB003"),
], ids=lambda value: getattr(value, "__name__", value))
def test_each_break_reason_names_its_id_title_and_the_users_line(fn, gb_id):
    kind = graph_breaks.REGISTRY[gb_id]
    compiled = graphwright.compile(fn, fullgraph=True, backend="eager")
    with pytest.raises(graphwright.Unsupported) as caught:
        compiled(torch.ones(3, requires_grad=gb_id == "GB013"))
    error = caught.value
    assert error.gb_id == gb_id and error.title == kind.title
    assert error.hints == list(kind.hints)
    assert error.user_stack[0].name == fn.__name__
    assert error.user_stack[0].filename == __file__
    assert error.user_location.startswith(__file__)


@pytest.mark.parametrize("fn", [breaks_on_item, breaks_on_branch, breaks_on_print, breaks_on_c_function,
                                breaks_on_nonzero])
def test_without_fullgraph_a_break_runs_eagerly_and_is_counted(fn, capsys):
    compiled = graphwright.compile(fn, backend="eager")
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x), fn(x))
    compiled(x)
    title = next(iter(graphwright.counters["graph_break"]))
    assert graphwright.counters["graph_break"][title] == 1  # the eager decision is cached


def test_disabled_function_is_a_graph_break():
    @graphwright.disable
    def helper(x):
        return x + 1

    compiled = graphwright.compile(lambda x: helper(x) * 2, fullgraph=True, backend="eager")
    with pytest.raises(graphwright.Unsupported, match="graphwright.disable"):
        compiled(torch.ones(2))
    torch.testing.assert_close(graphwright.compile(lambda x: helper(x) * 2)(torch.ones(2)),
                               torch.full((2,), 4.0))


def test_internal_tracer_error_becomes_a_warning_and_eager_execution(monkeypatch):
    from graphwright.strict.objects import operations

    def broken(*args, **kwargs):
        raise RuntimeError("tracer bug")

    monkeypatch.setattr(operations, "binary", broken)
    fn = lambda x: x + 1  # noqa: E731
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = graphwright.compile(fn, backend="eager")(torch.zeros(2))
    torch.testing.assert_close(result, torch.ones(2))
    assert any("tracer bug" in str(w.message) for w in caught)
    graphwright.reset()
    with pytest.raises(graphwright.Unsupported, match="Internal error") as caught_error:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.zeros(2))
    assert caught_error.value.user_stack[-1].lineno == fn.__code__.co_firstlineno


def test_an_operator_rejecting_its_arguments_under_fullgraph_raises_eagers_exception_type_too():
    # what eager raises (a TypeError here) is what `except TypeError:` around the call expects
    def f(x):
        return torch.histogramdd(x, [3, 3], out=(torch.empty(3, 3), [4, 4]))

    x = torch.randn(5, 2)
    with pytest.raises(TypeError):
        f(x)
    with pytest.raises(graphwright.Unsupported) as caught:
        graphwright.compile(f, fullgraph=True, backend="eager")(x)
    assert isinstance(caught.value, TypeError)
    assert caught.value.gb_id == "GB010"
    assert isinstance(caught.value.__cause__, TypeError)


def test_an_observed_builtin_exception_under_fullgraph_is_that_exception_type_too():
    def f(x):
        if x.dim() != 3:
            raise ValueError("needs a batch")
        return x

    with pytest.raises(graphwright.Unsupported) as caught:
        graphwright.compile(f, fullgraph=True, backend="eager")(torch.randn(2))
    assert isinstance(caught.value, ValueError) and caught.value.gb_id == "GB011"


def test_a_user_defined_exception_under_fullgraph_stays_unsupported_alone():
    # its handlers may read attributes only the user's own __init__ sets
    class Refusal(ValueError):
        def __init__(self, code):
            super().__init__(f"code {code}")
            self.code = code

    def f(x):
        raise Refusal(3)

    with pytest.raises(graphwright.Unsupported) as caught:
        graphwright.compile(f, fullgraph=True, backend="eager")(torch.randn(2))
    assert not isinstance(caught.value, ValueError)
