"""Side effects: compiled calls leave the world as eager calls do, on every call."""
import logging
import warnings

import pytest
import torch
from torch import nn

import graphwright
from graphwright.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def run_both(fn, make_state, *args):
    """(eager result, eager state, compiled result, compiled state) from identical fresh states."""
    eager_state, compiled_state = make_state(), make_state()
    eager = fn(eager_state, *args)
    compiled = graphwright.compile(fn, backend="eager", fullgraph=True)(compiled_state, *args)
    return eager, eager_state, compiled, compiled_state


def test_appending_to_an_input_list_is_replayed():
    def fn(seen, x):
        seen.append(x * 2)
        seen.append("done")
        return x + 1

    eager, eager_seen, compiled, compiled_seen = run_both(fn, lambda: [1], torch.ones(2))
    torch.testing.assert_close(compiled, eager)
    assert compiled_seen[0] == 1 and compiled_seen[2] == "done"
    torch.testing.assert_close(compiled_seen[1], eager_seen[1])


def test_dict_entries_written_and_deleted_are_replayed():
    def fn(state, x):
        state["count"] += 1
        del state["old"]
        state["last"] = x.sum()
        return x

    eager, eager_state, compiled, compiled_state = run_both(
        fn, lambda: {"count": 0, "old": 1}, torch.ones(2))
    assert list(compiled_state) == list(eager_state) == ["count", "last"]
    assert compiled_state["count"] == 1
    torch.testing.assert_close(compiled_state["last"], eager_state["last"])


def test_tracing_does_not_mutate_user_objects_before_the_call_runs():
    seen = []

    def fn(x):
        seen.append(len(seen))
        return x

    compiled = graphwright.compile(fn, backend="eager")
    compiled(torch.ones(1))
    assert seen == [0]
    compiled(torch.ones(1))  # list length changed: recompiles, still appends once
    assert seen == [0, 1]


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.register_buffer("total", torch.zeros(2))

    def forward(self, x):
        self.calls = self.calls + 1
        self.last_input = x
        self.total.add_(x)
        return x * self.calls


def test_module_attribute_stores_and_buffer_mutation_match_eager_on_every_call():
    eager, compiled_module = Counter(), Counter()
    compiled = graphwright.compile(compiled_module, backend="eager")
    for _ in range(3):
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x), eager(x))
        assert compiled_module.last_input is x
    assert compiled_module.calls == eager.calls == 3
    torch.testing.assert_close(compiled_module.total, eager.total)


STEP = 0


def test_global_writes_are_replayed():
    def fn(x):
        global STEP
        STEP = STEP + 1
        return x * STEP

    compiled = graphwright.compile(fn, backend="eager", fullgraph=True)
    assert compiled(torch.ones(1)).item() == 1.0
    assert compiled(torch.ones(1)).item() == 2.0
    assert STEP == 2


def test_nonlocal_writes_to_a_closure_cell_are_replayed():
    def make():
        hits = 0

        def fn(x):
            nonlocal hits
            hits += 1
            return x + hits

        return fn, lambda: hits

    fn, hits = make()
    compiled = graphwright.compile(fn, backend="eager", fullgraph=True)
    assert compiled(torch.zeros(1)).item() == 1.0
    assert hits() == 1


def test_returning_a_new_object_with_attributes_rebuilds_it():
    class Box:
        def __init__(self, value):
            self.value = value

    def fn(x):
        return Box(x + 1)

    box = graphwright.compile(fn, backend="eager", fullgraph=True)(torch.zeros(1))
    assert type(box) is Box
    torch.testing.assert_close(box.value, torch.ones(1))


logger = logging.getLogger("graphwright.tests.side_effects")


def test_logging_and_warnings_are_replayed_in_order_under_fullgraph(caplog):
    def fn(x):
        logger.warning("first %d", 1)
        warnings.warn("careful")
        y = x * 2
        logger.warning("second %s", "two")
        return y

    counter = CompileCounter()
    compiled = graphwright.compile(fn, backend=counter, fullgraph=True)
    for _ in range(2):
        caplog.clear()
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
            warnings.simplefilter("always")
            compiled(torch.ones(2))
        assert [r.getMessage() for r in caplog.records] == ["first 1", "second two"]
        assert [str(w.message) for w in caught] == ["careful"]
    assert counter.frame_count == 1


def test_print_is_replayed_only_when_reorderable_print_is_on(capsys):
    def fn(x):
        print("value", 3)
        return x + 1

    graphwright.config.reorderable_print = True
    try:
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.zeros(1))
    finally:
        graphwright.config.reorderable_print = False
    assert capsys.readouterr().out == "value 3\n"
    graphwright.reset()
    with pytest.raises(graphwright.Unsupported, match="print"):
        graphwright.compile(fn, backend="eager", fullgraph=True)(torch.zeros(1))


class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 3)
        self.second = nn.Linear(3, 3)
        self.seen = []
        self.first.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
        self.first.register_forward_hook(self._capture)

    def _capture(self, module, inputs, output):
        self.seen.append(output.detach())
        return output + 1

    def forward(self, x):
        return self.second(self.first(x).relu())


def test_forward_hooks_and_pre_hooks_of_submodules_run_inside_the_graph():
    torch.manual_seed(0)
    eager = Hooked()
    torch.manual_seed(0)
    compiled_module = Hooked()
    counter = CompileCounter()
    compiled = graphwright.compile(compiled_module, backend=counter, fullgraph=True)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), eager(x))
    assert len(compiled_module.seen) == 1
    torch.testing.assert_close(compiled_module.seen[0], eager.seen[0])
    handle = compiled_module.first.register_forward_hook(lambda m, i, o: o * 0)
    eager.first.register_forward_hook(lambda m, i, o: o * 0)
    torch.testing.assert_close(compiled(x), eager(x))
    handle.remove()
    assert counter.frame_count == 2


def _remember(item, memory=[]):  # noqa: B006 - the mutable default is the point
    memory.append(item)
    return len(memory)


def test_appending_to_a_mutable_default_argument_is_replayed():
    _remember.__defaults__[0].clear()
    compiled = graphwright.compile(lambda x: x * _remember("call"), backend="eager", fullgraph=True)
    for expected in (1, 2, 3):
        assert compiled(torch.ones(1)).item() == expected
    assert _remember.__defaults__[0] == ["call"] * 3


def test_a_closure_created_inside_is_returned_with_its_captured_tensor():
    def fn(x):
        factor = x.exp()

        def scale(y, offset=1):
            return y * factor + offset

        return scale

    x = torch.randn(3)
    scale = graphwright.compile(fn, backend="eager", fullgraph=True)(x)
    torch.testing.assert_close(scale(torch.ones(3)), fn(x)(torch.ones(3)))


class Registry:
    created = 0


def test_writes_to_class_attributes_are_replayed_and_read_back():
    def fn(x):
        Registry.created = Registry.created + 1
        return x * Registry.created, Registry().created

    Registry.created = 0
    compiled = graphwright.compile(fn, backend="eager", fullgraph=True)
    out, seen = compiled(torch.ones(1))
    assert out.item() == 1.0 and seen == 1 and Registry.created == 1
