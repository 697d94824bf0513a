"""User classes the strict tracer cannot model break the graph naming the construct.

The shapes it does model are corpus programs (tests/programs/cases_classes.py);
these are the ones it refuses, each with the graph-break id, the class or
attribute at fault, and the user's line.
"""
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
    def viewed(x):
        return x * memoryview(b"\x02")[0]

    assert "`the builtin class memoryview`" in _unsupported(viewed, torch.ones(2))


class Settings:
    def __init__(self):
        self.depth = 2


def test_non_string_key_stored_in_an_objects_dict_names_the_key():
    def tag(x, settings):
        settings.__dict__[1] = "one"
        return x * settings.depth

    text = _unsupported(tag, torch.ones(2), Settings())
    assert "GB012" in text and "a `__dict__` key that is not a string (1)" in text
    assert 'settings.__dict__[1] = "one"' in text


def test_store_through_a_modules_dict_names_the_module():
    def rescale(x, module):
        module.__dict__["scale"] = 2.0
        return module(x)

    text = _unsupported(rescale, torch.ones(2), torch.nn.Identity())
    assert "GB012" in text and "writing an item of a module's `__dict__`" in text and "Identity" in text


def test_unmodelled_dict_key_names_the_operation_and_type():
    def table(x):
        return {x.add: x}

    text = _unsupported(table, torch.ones(2))
    assert "GB020" in text and "using as a dict key" in text and "method" in text


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
