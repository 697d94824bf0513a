"""User classes the strict tracer cannot model break the graph naming the construct.

The shapes it does model are corpus programs (tests/programs/cases_classes.py,
cases_class_statements.py); these are the ones it refuses, each with the graph-break id,
the class or attribute at fault, and the user's line, and the properties of classes made
in the region that a corpus comparison cannot see (a new class on every call, no guard on
it, identities kept).
"""
import pytest
import torch

import graphwright
from graphwright.strict.objects.class_creation import made_class


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def _unsupported(fn, *args) -> str:
    with pytest.raises(graphwright.Unsupported) as caught:
        graphwright.compile(fn, backend="eager", fullgraph=True)(*args)
    return str(caught.value)


class Meters(bytearray):
    pass


def test_subclass_of_an_unmodelled_builtin_names_the_class_and_its_base():
    def scaled(x):
        return x * Meters(b"\x02")[0]  # the line

    text = _unsupported(scaled, torch.ones(2))
    assert "GB022" in text
    assert "`Meters (a subclass of the builtin bytearray)`" in text
    assert 'return x * Meters(b"\\x02")[0]  # the line' in text


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


def test_store_through_a_modules_dict_skips_its_setattr():
    def shadow(x, module):
        module.__dict__["scale"] = 2.0
        module.__dict__["weight"] = module.weight * 3  # shadows the parameter, which stays filed
        return module.weight.sum() * module.scale + x

    eager_module, compiled_module = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    compiled_module.load_state_dict(eager_module.state_dict())
    expected = shadow(torch.ones(2), eager_module)
    actual = graphwright.compile(shadow, backend="eager", fullgraph=True)(torch.ones(2), compiled_module)
    assert torch.allclose(actual, expected)
    for module in (eager_module, compiled_module):
        assert "weight" in module._parameters and module.scale == 2.0
    assert torch.allclose(compiled_module.__dict__["weight"], eager_module.__dict__["weight"])


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


# -- classes made in the region -------------------------------------------------------------


def _make_point(x):
    class Point:
        def __init__(self, t):
            self.t = t

        def shifted(self):
            return Point(self.t + 1)

        def norm(self):
            return self.t.abs().sum()

    point = Point(x * 2)
    return Point, point, point.norm


def test_class_made_in_the_region_is_new_on_each_call_without_recompiling():
    counter = graphwright.testing.CompileCounter()
    compiled = graphwright.compile(_make_point, backend=counter, fullgraph=True)
    first, _, _ = compiled(torch.ones(2))
    second, point, norm = compiled(torch.ones(2))
    assert first is not second and counter.frame_count == 1
    assert type(point) is second and norm.__self__ is point and torch.equal(norm(), torch.tensor(4.0))
    assert type(point.shifted()) is second  # its methods refer to the class made with them
    assert second.__qualname__ == "_make_point.<locals>.Point" and made_class(second) is None


def _roots(source):
    while source is not None:
        yield source
        source = getattr(source, "base", None)


def test_guards_never_ask_for_a_class_made_in_the_region():
    compiled = graphwright.compile(_make_point, backend="eager", fullgraph=True)
    compiled(torch.ones(2))
    (entry,) = compiled._entries
    assert entry.guards
    for guard in entry.guards:
        assert made_class(guard.expected) is None
        assert not any(made_class(getattr(source, "value", None)) for source in _roots(guard.source))


def test_zero_argument_super_in_a_class_that_left_the_region_finds_the_class_made_anew():
    def make(x):
        class Base:
            def scale(self):
                return 2

        class Child(Base):
            def scale(self):
                return super().scale() * 3

        return Child, Child().scale() * x

    compiled = graphwright.compile(make, backend="eager", fullgraph=True)
    child, value = compiled(torch.ones(2))
    assert child().scale() == 6 and torch.equal(value, torch.full((2,), 6.0))
    assert child.__mro__[1].__name__ == "Base" and child.__mro__[1] is not compiled(torch.ones(2))[0].__mro__[1]


_FILED: dict = {}


class _Filing:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _FILED[cls.__qualname__] = cls


def test_init_subclass_of_a_base_from_outside_files_the_class_made_anew():
    def make(x):
        class Local(_Filing):
            pass

        return Local, x + 1

    _FILED.clear()
    compiled = graphwright.compile(make, backend="eager", fullgraph=True)
    local, _ = compiled(torch.ones(2))
    assert _FILED == {"test_init_subclass_of_a_base_from_outside_files_the_class_made_anew.<locals>.make"
                      ".<locals>.Local": local}
    assert made_class(local) is None  # the class the program holds is the one made by the call


def test_class_the_tracer_cannot_build_names_the_class_and_the_reason():
    class Count(int):
        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)

    def make(x):
        class Local(Count):  # the line
            pass

        return x

    text = _unsupported(make, torch.ones(2))
    assert "GB030" in text and "The class `Local`" in text and "__init_subclass__" in text
    assert "class Local(Count):  # the line" in text
    assert torch.equal(graphwright.compile(make, backend="eager")(torch.ones(2)), torch.ones(2))


def test_every_masked_op_of_the_op_database_compiles_under_fullgraph():
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [op for op in op_db if op.name.startswith("masked.")]
    assert len(ops) >= 19
    for op in ops:
        sample = next(iter(op.sample_inputs("cpu", torch.float32)))
        graphwright.reset()
        compiled = graphwright.compile(lambda t, *a, **k: op(t, *a, **k), backend="eager", fullgraph=True)
        expected = op(sample.input, *sample.args, **sample.kwargs)
        actual = compiled(sample.input, *sample.args, **sample.kwargs)
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=op.name)
