"""Tensor subclasses AOT autograd does not handle yet are refused, and the graph runs as captured.

A subclass with a `__torch_dispatch__` of its own (TwoTensor here) among a
graph's inputs, parameters, intermediates or outputs: under fullgraph=False
the graph runs as the `eager` backend runs it, with a warning naming the
subclass, and the results are eager's (type included, as `torch.compile`
returns them); under fullgraph=True the refusal is a `BackendError`.
Subclasses AOT autograd handles (nn.Parameter, a subclass without a
`__torch_dispatch__` of its own) still compile.
"""
import re
import warnings

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import graphwright
from graphwright._core.errors import BackendRefusal
from graphwright.backends.registry import lookup_backend
from graphwright.testing import CompileCounterWithBackend

from aot_models import graph_of

BACKENDS = ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]

WEIGHT = TwoTensor(torch.randn(3), torch.randn(3))


def _scaled_by_a_global_subclass(x):
    return WEIGHT * x


def _sine(x):
    return x.sin() + 1


def _made_between_two_graphs(x):
    return TwoTensor(x, x * 2) * 3  # making a TwoTensor breaks the graph: `* 3` has a subclass input


def _subclass_input():
    return TwoTensor(torch.randn(3), torch.randn(3))


# name: (function, its input)
PROGRAMS = {
    "a_global_subclass": (_scaled_by_a_global_subclass, lambda: torch.randn(3)),
    "a_subclass_input": (_sine, _subclass_input),
    "a_subclass_made_between_two_graphs": (_made_between_two_graphs, lambda: torch.randn(3)),
}
IN_ONE_GRAPH = ["a_global_subclass", "a_subclass_input"]


def _assert_same_two_tensor(actual, expected):
    assert type(actual) is type(expected) is TwoTensor
    torch.testing.assert_close(actual.a, expected.a)
    torch.testing.assert_close(actual.b, expected.b)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_graph_holding_a_subclass_runs_as_captured_with_a_warning(name, backend):
    fn, make = PROGRAMS[name]
    torch.manual_seed(0)
    x = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = graphwright.compile(fn, backend=backend)(x)
    _assert_same_two_tensor(actual, fn(x))
    refusals = [str(w.message) for w in caught if "without its backend" in str(w.message)]
    assert len(refusals) == 1 and "`TwoTensor`" in refusals[0]
    assert caught[[str(w.message) for w in caught].index(refusals[0])].filename == __file__


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_result_type_is_the_one_torch_compile_returns(backend):
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = graphwright.compile(_scaled_by_a_global_subclass, backend=backend)(x)
    reference = torch.compile(_scaled_by_a_global_subclass, backend=backend)(x)
    _assert_same_two_tensor(actual, reference)


@pytest.mark.parametrize("name", IN_ONE_GRAPH)
def test_under_fullgraph_the_refusal_names_the_subclass_and_the_users_code(name):
    fn, make = PROGRAMS[name]
    with pytest.raises(graphwright.BackendError, match="tensor subclass `TwoTensor`") as info:
        graphwright.compile(fn, backend="aot_eager", fullgraph=True)(make())
    assert isinstance(info.value, BackendRefusal)
    assert re.search(rf"of {fn.__name__} \(.*test_aot_subclasses.py:\d+\)", str(info.value))
    assert info.value.user_location.startswith(__file__)


def test_a_subclass_input_is_named_by_its_placeholder():
    with pytest.raises(BackendRefusal, match="input `global_weight`"):
        graphwright.compile(_scaled_by_a_global_subclass, backend="aot_eager", fullgraph=True)(torch.randn(3))


def test_a_subclass_parameter_lifted_into_the_graph_is_refused():
    linear = torch.nn.Linear(3, 3)
    linear.weight = torch.nn.Parameter(TwoTensor(torch.randn(3, 3), torch.randn(3, 3)))
    with pytest.raises(BackendRefusal, match="parameter or buffer `weight`"):
        lookup_backend("aot_eager")(graph_of(linear), [torch.randn(3)])


class TaggedTensor(torch.Tensor):
    """A subclass without a `__torch_dispatch__` of its own."""


@pytest.mark.parametrize("make", [lambda: torch.randn(3).as_subclass(TaggedTensor),
                                  lambda: torch.nn.Parameter(torch.randn(3))], ids=["tagged", "parameter"])
def test_subclasses_aot_handles_still_compile(make):
    x = make()
    counter = CompileCounterWithBackend("aot_eager")
    actual = graphwright.compile(lambda x: x * 2 + 1, backend=counter, fullgraph=True)(x)
    expected = x * 2 + 1
    assert type(actual) is type(expected)
    torch.testing.assert_close(actual, expected)
    assert counter.frame_count == 1
