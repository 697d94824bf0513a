"""Exceptions the traced program raises: what escapes the compiled function (an eager run
without fullgraph, a typed error naming the program's own exception with it), and what the
program sees of the exceptions it catches (chaining, tracebacks). The corpus
(tests/programs/cases_exceptions.py) checks programs that run to the end."""
import sys

import pytest
import torch

import graphwright
from graphwright._core.user_stack import is_graphwright_file


class ScaleError(ValueError):
    def __init__(self, factor):
        super().__init__(f"bad factor {factor}")
        self.factor = factor


def _scale(x, factor):
    if factor > 2:
        raise ScaleError(factor)
    return x * factor


def test_an_exception_eager_raises_too_reaches_the_caller_unchanged():
    def fn(x):
        return _scale(x, 3)

    with pytest.raises(ScaleError) as eager:
        fn(torch.ones(2))
    with pytest.raises(ScaleError) as compiled:
        graphwright.compile(fn, backend="eager")(torch.ones(2))
    assert str(compiled.value) == str(eager.value) and compiled.value.factor == 3
    # `fn` runs in Python; `_scale`, which it calls, is compiled in turn and runs in Python too
    assert graphwright.counters["graph_break"]["Observed exception"] == 2


def test_under_fullgraph_an_escaping_exception_is_unsupported_caused_by_the_programs_own():
    def fn(x):
        return _scale(x, 3) + 1

    with pytest.raises(graphwright.Unsupported, match="Observed exception") as raised:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))
    error = raised.value
    assert isinstance(error, RuntimeError)  # as PyTorch's Unsupported is
    assert "ScaleError: bad factor 3" in error.explanation
    assert type(error.__cause__) is ScaleError and error.__cause__.args == ("bad factor 3",)
    assert error.user_stack[-1].line == "raise ScaleError(factor)"
    assert error.user_stack[-2].line == "return _scale(x, 3) + 1"


def test_an_exception_only_compiled_code_raises_makes_the_function_run_eagerly():
    def fn(x):
        scales = None if torch.compiler.is_compiling() else [2.0]
        return x * scales[0]

    assert torch.equal(graphwright.compile(fn, backend="eager")(torch.ones(2)), torch.full((2,), 2.0))
    reasons = graphwright.explain(fn)(torch.ones(2)).break_reasons
    assert [reason.reason.split(":")[0] for reason in reasons] == ["Observed exception"]
    assert "TypeError" in reasons[0].reason


def test_traceback_entries_follow_the_frames_the_exception_passed_through():
    def inner():
        raise KeyError("k")

    def middle():
        inner()

    def fn(x):
        try:
            middle()
        except KeyError as error:
            entries, tb = [], error.__traceback__
            while tb is not None:
                entries.append(tb.tb_lineno)
                tb = tb.tb_next
            return x + 1, entries

    _, expected = fn(torch.ones(2))
    _, entries = graphwright.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))
    assert entries == expected and len(entries) == 3


def test_implicit_context_chain_is_cut_where_it_would_make_a_cycle():
    def fn(x):
        try:
            try:
                raise TypeError("first")
            except TypeError as first:
                try:
                    raise ValueError("second")
                except ValueError:
                    raise first
        except TypeError as error:
            context = error.__context__
            return x, type(context).__name__, context.__context__ is None

    assert graphwright.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))[1:] == ("ValueError", True)


def test_an_exception_raised_inside_a_library_names_the_librarys_line_too():
    def fn(x):
        return x * torch.nn.init.calculate_gain("no such nonlinearity")

    with pytest.raises(graphwright.Unsupported, match="Observed exception") as raised:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))
    stack = raised.value.user_stack
    assert stack[0].name == "fn" and stack[-1].filename == torch.nn.init.__file__
    assert "raise ValueError" in stack[-1].line
    assert not any(is_graphwright_file(frame.filename) for frame in stack)


def test_exception_returned_from_the_region_is_a_new_real_exception_each_call():
    def fn(x):
        try:
            raise KeyError("inner")
        except KeyError as inner:
            made = ScaleError(5)
            made.__cause__ = inner
        return x + 1, made

    compiled = graphwright.compile(fn, backend="eager", fullgraph=True)
    (_, first), (_, second) = compiled(torch.ones(2)), compiled(torch.ones(2))
    assert first is not second and type(first) is ScaleError and first.factor == 5
    assert str(first) == "bad factor 5" and type(first.__cause__) is KeyError and first.__suppress_context__


def test_sys_exc_info_in_a_callee_sees_the_callers_handled_exception():
    def current():
        return sys.exc_info()[1]

    def fn(x):
        try:
            raise ValueError("handled")
        except ValueError:
            seen = current()
        return x, str(seen), current()

    assert graphwright.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))[1:] == ("handled", None)


def test_a_check_on_data_inside_a_try_block_runs_where_its_failure_can_be_caught(monkeypatch):
    monkeypatch.setattr(graphwright.config, "capture_scalar_outputs", True)

    def fn(x):
        count = x.sum().item()
        try:
            torch._check(count > 3)
            return x * 2
        except RuntimeError:
            return x - 1

    compiled = graphwright.compile(fn, backend="eager")
    for size in (5, 2):  # the check holds, then fails: eager's handler runs
        assert torch.equal(compiled(torch.ones(size)), fn(torch.ones(size)))
