"""The torch function state (`torch._C.DisableTorchFunctionSubclass()`, `DisableTorchFunction()`):
the state a call starts with is what the trace starts from and a guard (another state
recompiles), and the state's queries in the region answer what eager answers at that point."""
import pytest
import torch
import torch._dynamo
import torch._dynamo.testing

import graphwright
from graphwright.testing import CompileCounterWithBackend

from subclass_models import LoggedTensor

STATES = [None, torch._C.DisableTorchFunctionSubclass, torch._C.DisableTorchFunction]


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    torch._dynamo.reset()
    yield
    graphwright.reset()
    torch._dynamo.reset()


def _called_in(state, fn, *args):
    if state is None:
        return fn(*args)
    with state():
        return fn(*args)


def _add_and_ask(x):
    return torch.add(x, 1.0), torch._C._is_torch_function_enabled(), torch._C._is_torch_function_all_disabled()


def test_each_state_at_the_call_recompiles_as_torch_compile_does():
    counter = CompileCounterWithBackend("eager")
    compiled = graphwright.compile(_add_and_ask, backend=counter, fullgraph=True)
    reference_counter = torch._dynamo.testing.CompileCounter()
    reference = torch.compile(_add_and_ask, backend=reference_counter, fullgraph=True)
    x = torch.ones(2)
    for state in [*STATES, *STATES]:
        expected = _called_in(state, _add_and_ask, x)
        for result in (_called_in(state, compiled, x), _called_in(state, reference, x)):
            assert result[1:] == expected[1:]
            torch.testing.assert_close(result[0], expected[0])
    assert counter.frame_count == reference_counter.frame_count == 3


def test_the_recompile_reason_names_the_state():
    compiled = graphwright.compile(_add_and_ask, backend="eager", fullgraph=True)
    x = torch.ones(2)
    _called_in(torch._C.DisableTorchFunctionSubclass, compiled, x)
    compiled(x)
    assert list(graphwright.counters["recompiles"]) == [
        "torch function state changed: expected subclasses' __torch_function__ off "
        "(DisableTorchFunctionSubclass), actual __torch_function__ on"]


def _scaled_in_and_out_of_a_block(x):
    y = x * 2
    with torch._C.DisableTorchFunctionSubclass():
        z = y + 1
        inside = torch._C._is_torch_function_enabled()
    return z.sin(), y, inside, torch._C._is_torch_function_enabled()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("state", STATES, ids=["on", "subclasses_off", "all_off"])
def test_a_subclass_input_runs_its_hook_only_where_the_state_lets_it(backend, state):
    """Called inside `DisableTorchFunctionSubclass()`, the hook runs nowhere and the results are
    plain; otherwise it runs on `x * 2` only, as in eager."""
    compiled = graphwright.compile(_scaled_in_and_out_of_a_block, backend=backend)
    x = torch.randn(3).as_subclass(LoggedTensor)
    for fn in (_scaled_in_and_out_of_a_block, compiled):
        LoggedTensor.calls.clear()
        result = _called_in(state, fn, x)
        if fn is _scaled_in_and_out_of_a_block:
            expected, expected_calls = result, list(LoggedTensor.calls)
    assert LoggedTensor.calls == expected_calls
    assert [type(value) for value in result] == [type(value) for value in expected]
    assert result[2:] == expected[2:]
    torch.testing.assert_close(result[0], expected[0])
    torch.testing.assert_close(result[1], expected[1])


def _asks_in_nested_blocks(x):
    with torch._C.DisableTorchFunction():
        all_off = torch._C._is_torch_function_all_disabled()
        with torch._C.DisableTorchFunctionSubclass():
            still_all_off = torch._C._is_torch_function_all_disabled()
        after_inner = torch._C._is_torch_function_all_disabled(), torch._C._is_torch_function_enabled()
    with torch._C.DisableTorchFunctionSubclass():
        subclasses_off = torch._C._is_torch_function_enabled(), torch._C._is_torch_function_all_disabled()
        with torch._C.DisableTorchFunction():
            inner_all_off = torch._C._is_torch_function_all_disabled()
        back = torch._C._is_torch_function_enabled(), torch._C._is_torch_function_all_disabled()
    return (all_off, still_all_off, after_inner, subclasses_off, inner_all_off, back,
            torch._C._is_torch_function_enabled(), torch.add(x, 1.0))


@pytest.mark.parametrize("state", STATES, ids=["on", "subclasses_off", "all_off"])
def test_queries_in_nested_blocks_answer_as_in_eager(state):
    compiled = graphwright.compile(_asks_in_nested_blocks, backend="eager", fullgraph=True)
    x = torch.ones(2)
    expected = _called_in(state, _asks_in_nested_blocks, x)
    result = _called_in(state, compiled, x)
    assert result[:-1] == expected[:-1]
    torch.testing.assert_close(result[-1], expected[-1])
