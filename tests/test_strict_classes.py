"""User classes the strict tracer cannot model break the graph naming the construct.

The shapes it does model are corpus programs (tests/programs/cases_classes.py);
these are the ones it refuses, each with the graph-break id, the class or
attribute at fault, and the user's line.
"""
import collections

import pytest
import torch

import graphwright


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def _unsupported(fn, *args) -> str:
    with pytest.raises(graphwright.Unsupported) as caught:
        graphwright.compile(fn, backend="eager", fullgraph=True)(*args)
    return str(caught.value)


class Meters(float):
    pass


def test_subclass_of_an_unmodelled_builtin_names_the_class_and_its_base():
    def scaled(x):
        return x * Meters(2.0)  # the line

    text = _unsupported(scaled, torch.ones(2))
    assert "GB022" in text
    assert "`Meters (a subclass of the builtin float)`" in text
    assert "return x * Meters(2.0)  # the line" in text


def test_builtin_class_without_a_model_names_the_class():
    def queue(x):
        return collections.deque([x]).pop()

    assert "`the builtin class deque`" in _unsupported(queue, torch.ones(2))


class Settings:
    def __init__(self):
        self.depth = 2


def test_reading_dict_after_a_store_on_an_argument_names_dict():
    def rewire(x, settings):
        settings.depth = 3
        return x * len(settings.__dict__)

    text = _unsupported(rewire, torch.ones(2), Settings())
    assert "GB012" in text and "__dict__ (after attributes were set in the region)" in text


class Key:
    pass


def test_user_object_as_a_dict_key_names_the_operation_and_class():
    def table(x):
        return {Key(): x}

    text = _unsupported(table, torch.ones(2))
    assert "GB020" in text and "using as a dict key" in text and "Key" in text


def test_objects_that_escape_keep_their_identity():
    class Node:
        def __init__(self, value):
            self.value = value
            self.me = self

    def build(x):
        node = Node(x)
        return node, node, [node]

    compiled = graphwright.compile(build, backend="eager", fullgraph=True)
    first, second, listed = compiled(torch.ones(2))
    assert first is second is listed[0] is first.me
    assert type(first) is Node


class Holder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 1

    def forward(self, x):
        self.k = 3
        return x * self.__dict__["k"]


def test_module_dict_read_after_a_store_breaks_instead_of_reading_the_old_value():
    text = _unsupported(Holder(), torch.ones(1))
    assert "GB012" in text and "__dict__ (after attributes were set in the region)" in text
