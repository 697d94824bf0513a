"""Bad input: every construct the tracer cannot capture, one program per graph-break kind.

Under `fullgraph=True` each raises a typed `GraphwrightError` (its `gb_id` the kind's) whose
innermost user frame is the program's line, tagged `# bad:<marker>` below. Under
`fullgraph=False` each gives eager's result, or eager's own exception. A failing `import`
raises the user's ImportError either way; an internal error never escapes as a raw
traceback. `test_every_kind_is_provoked_here_or_says_why_not` keeps the table complete.
"""
from __future__ import annotations

import array
import contextlib
import copy
import types
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
import torch
from torch import nn

import graphwright
from graphwright.strict.interpreter import graph_breaks as gb
from tests.programs.harness import assert_same


@dataclass
class BadInput:
    gb_id: str
    fn: Callable
    marker: str  # the `# bad:<marker>` line the error names
    inputs: Callable[[], tuple] = lambda: (torch.ones(3),)


PROGRAMS: list[BadInput] = []


def bad(gb_id: str, marker: str, inputs: Callable[[], tuple] | None = None) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        PROGRAMS.append(BadInput(gb_id, fn, marker, *([inputs] if inputs else [])))
        return fn
    return register


def line_of(marker: str) -> int:
    with open(__file__) as source:
        for number, text in enumerate(source, start=1):
            if text.rstrip().endswith(f"# bad:{marker}"):
                return number
    raise LookupError(marker)


@bad("GB001", "graph-break")
def explicit_graph_break(x):
    graphwright.graph_break()  # bad:graph-break
    return x + 1


@bad("GB002", "branch")
def data_dependent_branch(x):
    if x.sum() > 0:  # bad:branch
        return x * 2
    return x - 2


@bad("GB003", "numpy")
def tensor_to_numpy(x):
    return x * float(x.sum().numpy())  # bad:numpy


@bad("GB005", "c-function")
def unknown_c_function(x):
    return x + zlib.crc32(b"graphwright")  # bad:c-function


async def _coroutine(x):
    return x


@bad("GB007", "coroutine")
def coroutine_call(x):
    pending = _coroutine(x)  # bad:coroutine
    pending.close()
    return x + 1


@bad("GB008", "print")
def print_call(x):
    print("shape", tuple(x.shape))  # bad:print
    return x + 1


@graphwright.disable
def _disabled(x):
    return x * 2


@bad("GB009", "disabled")
def disabled_call(x):
    return _disabled(x) + 1  # bad:disabled


@bad("GB010", "mismatched")
def operator_rejects_its_inputs(x):
    return torch.mm(x, torch.ones(2, 2))  # bad:mismatched


@bad("GB011", "raise")
def raises_an_error(x):
    raise ValueError(f"no tensor of {x.shape[0]} values, please")  # bad:raise


@bad("GB012", "version")
def reads_the_version_counter(x):
    return x * x._version  # bad:version


@bad("GB013", "backward")
def calls_backward(x):
    y = (x * 2).sum()
    return torch.autograd.grad(y, [x])  # bad:backward


@bad("GB014", "default-dtype")
def sets_the_default_dtype(x):
    torch.set_default_dtype(torch.float32)  # bad:default-dtype
    return x + 1


@bad("GB015", "deepcopy-memo")
def deep_copies_with_a_memo_of_its_own(x):
    return copy.deepcopy(x * 2, {}) + 1  # bad:deepcopy-memo


def _yields_while_handling(x):
    try:
        raise KeyError("k")
    except KeyError:
        yield x * 2
        yield x * 3


@bad("GB017", "handling")
def returns_a_generator_suspended_while_handling_an_exception(x):
    numbers = _yields_while_handling(x)
    next(numbers)
    return numbers  # bad:handling


class _WithBackwardHook(nn.Module):
    def forward(self, x):
        return x * 3


_HOOKED = _WithBackwardHook()
_HOOKED.register_full_backward_hook(lambda module, grad_in, grad_out: None)


@bad("GB018", "hooked")
def calls_a_module_with_a_backward_hook(x):
    return _HOOKED(x) + 1  # bad:hooked


@bad("GB025", "lazy", inputs=lambda: (torch.ones(2, 3), nn.LazyLinear(2)))
def calls_a_lazy_module_not_initialized_yet(x, lazy):
    return lazy(x) + 1  # bad:lazy


@bad("GB019", "context")
def enters_inference_mode(x):
    with torch.inference_mode():  # bad:context
        x = x + 1
    return x


_NUMBERS = array.array("i", [1, 2])


@bad("GB020", "repeat")
def repeats_a_c_container(x):
    return x + (_NUMBERS * 2)[3]  # bad:repeat


@bad("GB021", "iterate")
def iterates_a_c_container(x):
    for number in _NUMBERS:  # bad:iterate
        x = x + number
    return x


@bad("GB022", "stateful")
def builds_a_layer_with_parameters(x):
    return nn.Linear(3, 3)(x)  # bad:stateful


@bad("GB023", "nested", lambda: (torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),))
def takes_a_strided_nested_tensor(x):
    return x * 2  # bad:nested


class _Count(int):
    """A subclass of int with an `__init_subclass__`: CPython gives a class deriving from it no
    stand-in base, so the tracer cannot make one without running the hook again."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)


@bad("GB030", "class")
def defines_a_class_the_tracer_cannot_build(x):
    class Local(_Count):  # bad:class
        scale = 2
    return x * Local.scale


@bad("GB060", "numpy-interp", lambda: (np.array([0.0, 2.5, 7.0]),))
def numpy_function_without_a_tensor_counterpart(a):
    return np.interp(a, [0.0, 10.0], [1.0, 2.0]) * 2  # bad:numpy-interp


@bad("GB040", "side-effect")
def cond_branch_changes_a_list(x):
    seen = []

    def true_branch(t):
        seen.append(1)  # bad:side-effect
        return t + 1

    return torch.cond(x.sum() > 0, true_branch, lambda t: t - 1, (x,))


@bad("GB041", "cond")
def cond_with_branches_of_two_shapes(x):
    return torch.cond(x.sum() > 0, lambda t: t.sum(), lambda t: t, (x,))  # bad:cond


_LSTM = nn.LSTM(3, 2, batch_first=True)


@bad("GB042", "lstm", lambda: (torch.ones(1, 2, 3),))
def calls_an_lstm(x):
    output, _ = _LSTM(x)  # bad:lstm
    return output * 2


@bad("GB100", "defined-inside")
def nonstrict_trace_of_a_function_defined_inside(x):
    def local(t):
        return t * 2
    return graphwright.nonstrict_trace(local)(x)  # bad:defined-inside


class _Opaque:
    pass


_OPAQUE = _Opaque()


@graphwright.nonstrict_trace
def _takes_anything(x, thing):
    return x + 1


@bad("GB101", "nonstrict-input")
def nonstrict_call_with_an_unregistered_object(x):
    return _takes_anything(x, _OPAQUE)  # bad:nonstrict-input


@graphwright.nonstrict_trace
def _returns_an_object(x):
    return _OPAQUE


@bad("GB102", "nonstrict-output")
def nonstrict_call_returning_an_unregistered_object(x):
    return _returns_an_object(x)  # bad:nonstrict-output


@graphwright.nonstrict_trace
def _branches_on_data(x):
    return x * 2 if x.sum() > 0 else x


@bad("GB103", "nonstrict-trace")
def nonstrict_call_that_branches_on_data(x):
    return _branches_on_data(x)  # bad:nonstrict-trace


@graphwright.allow_in_graph
def _allowed(x, thing):
    return x + 1


@bad("GB104", "allowed-input")
def allow_in_graph_call_with_an_object(x):
    return _allowed(x, _OPAQUE)  # bad:allowed-input


@graphwright.allow_in_graph
def _disallowed(x):
    return x + 1


graphwright.disallow_in_graph(_disallowed)


@bad("GB105", "disallowed")
def disallowed_call(x):
    return _disallowed(x) * 2  # bad:disallowed


@graphwright.leaf_function
def _leaf_without_fake(x):
    return (x + 1,)


@bad("GB106", "leaf-no-fake")
def leaf_function_without_a_fake(x):
    return _leaf_without_fake(x)[0]  # bad:leaf-no-fake


@graphwright.leaf_function
def _leaf_of_anything(x, thing):
    return (x + 1,)


@_leaf_of_anything.register_fake
def _(x, thing):
    return (x.new_empty(x.shape),)


@bad("GB107", "leaf-input")
def leaf_function_with_an_object_input(x):
    return _leaf_of_anything(x, _OPAQUE)[0]  # bad:leaf-input


_SCHEDULED = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
_SCHEDULER = torch.optim.lr_scheduler.StepLR(_SCHEDULED, step_size=1)


@bad("GB024", "never-traced")
def scheduler_stepped_in_the_region(x):
    _SCHEDULER.step()  # bad:never-traced
    return x + 1


def _two_tensor_input():
    from torch.testing._internal.two_tensor import TwoTensor

    return (TwoTensor(torch.ones(2, 3), torch.zeros(2, 3)),)


@bad("GB112", "leaf-subclass", inputs=_two_tensor_input)
def leaf_function_with_a_tensor_subclass_input(x):
    return _leaf_of_anything(x, None)[0]  # bad:leaf-subclass


@graphwright.allow_in_graph
def _allowed_returning_a_dict(x):
    return {"y": x + 1}


@bad("GB108", "allowed-output")
def allow_in_graph_call_returning_a_dict(x):
    return _allowed_returning_a_dict(x)["y"]  # bad:allowed-output


@graphwright.leaf_function
def _leaf_with_a_broken_fake(x):
    return (x + 1,)


@_leaf_with_a_broken_fake.register_fake
def _(x):
    raise RuntimeError("this fake is broken")


@bad("GB109", "leaf-fake")
def leaf_function_whose_fake_raises(x):
    return _leaf_with_a_broken_fake(x)[0]  # bad:leaf-fake


NOT_PROVOKED = {
    "GB004": "capture_dynamic_output_shape_ops is on under fullgraph=True: `nonzero` is captured "
             "(test_a_dynamic_shape_operator_breaks_only_without_fullgraph covers fullgraph=False)",
    "GB006": "every CPython 3.11 opcode a function body can hold has a handler",
    "GB016": "an internal error: provoked by breaking the tracer on purpose "
             "(test_an_internal_error_is_typed_under_fullgraph_and_eager_without)",
    "GB110": "covered by tests/test_nonstrict_trace_dynamo_compat.py (an opaque reference type made "
             "in the region)",
    "GB111": "covered by tests/test_decorators_nonstrict_trace.py (an object in a pytree context)",
    "GB050": "needs a process group: covered by tests/test_distributed_ddp.py (a DDP module called "
             "inside a compiled function, in two worker processes)",
}


def _run(fn: Callable, args: tuple) -> Any:
    try:
        return fn(*args)
    except Exception as error:
        return error


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(graphwright.config, "allow_rnn", False)  # GB042 is the break without it
    graphwright.reset()
    yield
    graphwright.reset()


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.gb_id for p in PROGRAMS])
def test_under_fullgraph_a_typed_error_names_the_kind_and_the_users_line(program):
    compiled = graphwright.compile(program.fn, backend="eager", fullgraph=True)
    with pytest.raises(graphwright.GraphwrightError) as caught:
        compiled(*program.inputs())
    error = caught.value
    assert getattr(error, "gb_id", None) == program.gb_id, str(error)
    # the program's line is on the user stack; the innermost frame may be deeper (the line of
    # a marked function, a branch, a fake, that failed)
    frames = [f"{frame.filename}:{frame.lineno}" for frame in error.user_stack]
    assert f"{__file__}:{line_of(program.marker)}" in frames, str(error)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.gb_id for p in PROGRAMS])
def test_without_fullgraph_the_result_is_eagers(program):
    compiled = graphwright.compile(program.fn, backend="eager")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="graphwright could not")  # no internal error
        for _ in range(2):
            torch.manual_seed(0)
            expected = _run(program.fn, program.inputs())
            torch.manual_seed(0)
            actual = _run(compiled, program.inputs())
            assert_same_outcome(expected, actual)


def assert_same_outcome(expected: Any, actual: Any) -> None:
    if isinstance(expected, graphwright.GraphwrightError):  # the same error; its stack may be deeper
        assert type(actual) is type(expected) and str(actual).splitlines()[0] == str(expected).splitlines()[0]
    elif isinstance(expected, Exception):
        assert type(actual) is type(expected) and str(actual) == str(expected), actual
    elif isinstance(expected, torch.Tensor) and expected.is_nested:
        assert_same(list(expected.unbind()), list(actual.unbind()))
    elif isinstance(expected, types.GeneratorType):
        assert_same(list(expected), list(actual))
    else:
        assert_same(expected, actual)


def test_every_kind_is_provoked_here_or_says_why_not():
    provoked = {program.gb_id for program in PROGRAMS}
    registered = {kind.gb_id for kind in gb.graph_break_kinds()}
    assert registered - provoked == set(NOT_PROVOKED), registered - provoked - set(NOT_PROVOKED)


def test_a_dynamic_shape_operator_breaks_only_without_fullgraph():
    def fn(x):
        return torch.nonzero(x) * 2

    x = torch.tensor([0.0, 1.0, 2.0])
    assert_same(fn(x), graphwright.compile(fn, backend="eager")(x))
    assert graphwright.counters["graph_break"][gb.DYNAMIC_SHAPE_OPERATOR.title] == 1
    assert_same(fn(x), graphwright.compile(fn, backend="eager", fullgraph=True)(x))


def _imports_a_missing_module(x):
    import graphwright_no_such_module  # noqa: F401  # bad:import
    return x + 1


def _imports_a_missing_name(x):
    from os import graphwright_no_such_name  # noqa: F401
    return x + 1


@pytest.mark.parametrize("fullgraph", [True, False])
def test_a_failing_import_raises_the_users_import_error(fullgraph):
    compiled = graphwright.compile(_imports_a_missing_module, backend="eager", fullgraph=fullgraph)
    with pytest.raises(ModuleNotFoundError, match="graphwright_no_such_module"):
        compiled(torch.ones(3))
    with pytest.raises(ImportError, match="cannot import name 'graphwright_no_such_name' from 'os'"):
        graphwright.compile(_imports_a_missing_name, backend="eager", fullgraph=fullgraph)(torch.ones(3))


def test_under_fullgraph_the_import_error_notes_the_users_line():
    compiled = graphwright.compile(_imports_a_missing_module, backend="eager", fullgraph=True)
    with pytest.raises(ImportError) as caught:
        compiled(torch.ones(3))
    assert f"{__file__}:{line_of('import')}" in "".join(caught.value.__notes__)


def test_an_import_inside_try_falls_back_as_the_program_says():
    def fn(x):
        try:
            import graphwright_no_such_module  # noqa: F401
            scale = 2
        except ImportError:
            scale = 3
        return x * scale

    assert_same(fn(torch.ones(3)), graphwright.compile(fn, backend="eager", fullgraph=True)(torch.ones(3)))


def test_an_internal_error_is_typed_under_fullgraph_and_eager_without(monkeypatch):
    from graphwright.strict.objects import builtin_calls

    def broken(tracer, args, kwargs):
        raise RuntimeError("a bug in a handler")

    monkeypatch.setitem(builtin_calls._HANDLERS, len, broken)

    def fn(x):
        return x * len([1, 2])  # bad:internal

    with pytest.raises(graphwright.Unsupported) as caught:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.ones(3))
    assert caught.value.gb_id == gb.INTERNAL_ERROR.gb_id
    assert caught.value.user_location == f"{__file__}:{line_of('internal')}"
    with pytest.warns(UserWarning, match="graphwright could not compile"):
        assert_same(fn(torch.ones(3)), graphwright.compile(fn, backend="eager")(torch.ones(3)))


def test_wrong_arguments_raise_pythons_type_error_naming_the_users_function():
    def fn(x, k=2):
        return x * k

    compiled = graphwright.compile(fn, backend="eager", fullgraph=True)
    compiled(torch.ones(3))  # an entry exists: the errors must not come from it
    for args, kwargs in [((), {}), ((torch.ones(3), 1, 2), {}), ((torch.ones(3),), {"j": 1})]:
        with pytest.raises(TypeError) as expected:
            fn(*args, **kwargs)
        with pytest.raises(TypeError) as actual:
            compiled(*args, **kwargs)
        assert str(actual.value) == str(expected.value)


def test_a_bug_while_splitting_at_a_break_runs_the_function_eagerly_with_a_warning(monkeypatch):
    from graphwright.strict import entries

    def broken(brk):
        raise AttributeError("a bug in the splitter")

    monkeypatch.setattr(entries, "plan_split", broken)
    compiled = graphwright.compile(explicit_graph_break, backend="eager")
    with pytest.warns(UserWarning, match="(?s)could not split explicit_graph_break.*a bug in the splitter"):
        assert_same(explicit_graph_break(torch.ones(3)), compiled(torch.ones(3)))
    assert_same(explicit_graph_break(torch.ones(3)), compiled(torch.ones(3)))


def _inside_inference_mode(x):
    with torch.inference_mode():
        y = x + 1
    return y, x * 2


def _torch_function_disabled(x):
    y = x * 3
    with torch._C.DisableTorchFunction():
        x = x + 1
    return x * 2 + y


@pytest.mark.parametrize("fn", [_inside_inference_mode, _torch_function_disabled])
@pytest.mark.parametrize("fullgraph", [True, False])
def test_a_c_context_manager_of_torch_leaves_no_state_behind(fn, fullgraph):
    """Building `torch._C._InferenceMode(True)` turns inference mode on until the object dies:
    tracing must never build one for real (it left inference mode on for the whole process)."""
    compiled = graphwright.compile(fn, backend="eager", fullgraph=fullgraph)
    with contextlib.suppress(graphwright.Unsupported):
        outputs = compiled(torch.ones(3))
        expected = fn(torch.ones(3))
        assert_same(expected, outputs)
        assert [t.is_inference() for t in outputs] == [t.is_inference() for t in expected] \
            if isinstance(outputs, tuple) else outputs.is_inference() == expected.is_inference()
    assert not torch.is_inference_mode_enabled()
    assert torch._C._is_torch_function_enabled()
