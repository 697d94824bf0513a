"""Memory: compiling and dropping functions and modules in a loop frees them.

Each test compiles, calls and drops something many times and measures what stays behind
with `tracemalloc` (bytes still allocated after the loop) and `gc` (objects still tracked),
after a warm-up that fills the caches a process fills once (fake-tensor dispatch caches, the
kept caches of `config.dropped_cache_limit`). The dropped modules and classes must be dead:
no cache entry, guard or registry holds them.
"""
from __future__ import annotations

import gc
import tracemalloc
import weakref
from typing import Any, Callable

import pytest
import torch
from torch import nn

import graphwright
from graphwright.strict import cache
from graphwright.testing import CompileCounter

# 1,000 cycles in the slow suite, 200 in the quick one (a cycle builds, wraps and runs a module)
CYCLES = [pytest.param(200, id="200"), pytest.param(1000, id="1000", marks=pytest.mark.slow)]
BYTES_PER_CYCLE = 64  # what an allocator's and the interpreter's own caches may still move
OBJECTS_PER_CYCLE = 0.05


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.lin(x)).relu() * 2


class Splitting(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        x = self.a(x)
        graphwright.graph_break()
        return self.b(x).relu()


def plain(x, y):
    return (x * y).sin() + 1


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


# Allocations that are not ours: PyTorch's own module-generation table (`torch._dynamo`'s
# mutation guard tags every nn.Module made once torch._dynamo is imported, and its dict resizes
# as other tests' modules come and go) and the snapshots this file takes.
NOT_OURS = [tracemalloc.Filter(False, "*/torch/_dynamo/*"), tracemalloc.Filter(False, tracemalloc.__file__)]


def traced_bytes() -> int:
    return sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces(NOT_OURS).statistics("filename"))


def growth(cycle: Callable[[], Any], cycles: int, warm_up: int = 30) -> tuple[float, float, list]:
    """(bytes, gc objects) left behind per cycle, and the weak references that every tenth
    cycle returned (each one's 80 bytes are the test's own)."""
    for _ in range(warm_up):
        cycle()
    gc.collect()
    refs: list = [None] * (cycles // 10)  # allocated before measuring
    tracemalloc.start()
    try:
        before_bytes = traced_bytes()
        before_objects = len(gc.get_objects())
        for index in range(cycles):
            made = cycle()
            if index % 10 == 0:
                refs[index // 10] = made
            del made
        gc.collect()
        gc.collect()  # what a weakref callback released in the first pass
        after_bytes = traced_bytes()
        after_objects = len(gc.get_objects())
    finally:
        tracemalloc.stop()
    return (after_bytes - before_bytes) / cycles, (after_objects - before_objects) / cycles, refs


def assert_no_growth(cycle: Callable[[], Any], cycles: int, bytes_per_cycle: float = BYTES_PER_CYCLE) -> None:
    per_cycle, objects, refs = growth(cycle, cycles)
    objects -= len(refs) / cycles  # the weak references themselves
    assert per_cycle < bytes_per_cycle, f"{per_cycle:.0f} bytes left behind per cycle"
    assert objects < OBJECTS_PER_CYCLE, f"{objects:.2f} objects left behind per cycle"
    alive = [ref for ref in refs if ref is not None and ref() is not None]
    assert not alive, f"{len(alive)} of {len(refs)} dropped objects are still alive"


@pytest.mark.parametrize("cycles", CYCLES)
def test_compiling_and_dropping_a_module_with_parameters_leaves_nothing_behind(cycles):
    def cycle():
        module = Net()
        compiled = graphwright.compile(module, backend="eager", fullgraph=True)
        with torch.no_grad():
            compiled(torch.randn(4, 16))
        return weakref.ref(module)
    assert_no_growth(cycle, cycles)


@pytest.mark.parametrize("cycles", CYCLES)
def test_compiling_and_dropping_a_plain_function_leaves_nothing_behind(cycles):
    def cycle():
        x = torch.randn(4)
        graphwright.compile(plain, backend="eager")(x, x)
        return weakref.ref(x)
    assert_no_growth(cycle, cycles)


@pytest.mark.parametrize("cycles", CYCLES)
def test_training_a_module_under_aot_eager_and_dropping_it_leaves_nothing_behind(cycles):
    """A training call is one `autograd.Function.apply`, and PyTorch keeps a little per apply
    itself, less and less: a plain Function (no graphwright) keeps 10 KB over its first 1,000
    calls, 1 KB over its fifth 1,000. Measured here: ~130 B per call over the first 200,
    ~15 B per call after 1,000; hence a looser bound for the short run."""
    def cycle():
        module = Net()
        compiled = graphwright.compile(module, backend="aot_eager")
        compiled(torch.randn(4, 16, requires_grad=True)).sum().backward()
        return weakref.ref(module)
    assert_no_growth(cycle, cycles, bytes_per_cycle=BYTES_PER_CYCLE if cycles >= 1000 else 4 * BYTES_PER_CYCLE)


def test_a_module_split_at_a_graph_break_and_dropped_leaves_nothing_behind():
    def cycle():
        module = Splitting()
        with torch.no_grad():
            graphwright.compile(module, backend="eager")(torch.randn(2, 16))
        return weakref.ref(module)
    assert_no_growth(cycle, cycles=200)


def test_a_backend_made_for_each_compile_is_freed_with_its_graphs():
    """A new backend per compile (a counter per test) makes a new cache each time: only the
    `dropped_cache_limit` most recent ones stay; the rest go with their wrappers."""
    def cycle():
        counter = CompileCounter()
        module = Net()
        with torch.no_grad():
            graphwright.compile(module, backend=counter, fullgraph=True)(torch.randn(4, 16))
        return weakref.ref(counter)
    refs = [cycle() for _ in range(40)]
    gc.collect()
    alive = [ref for ref in refs if ref() is not None]
    assert len(alive) <= graphwright.config.dropped_cache_limit
    assert len(cache._CACHES) <= graphwright.config.dropped_cache_limit + 1


def test_dropping_every_wrapper_frees_the_cache_beyond_the_kept_ones(monkeypatch):
    monkeypatch.setattr(graphwright.config, "dropped_cache_limit", 0)
    compiled = graphwright.compile(plain, backend="eager")
    compiled(torch.ones(2), torch.ones(2))
    entries = weakref.ref(compiled._cache)
    del compiled
    gc.collect()
    assert entries() is None


def test_a_cache_is_shared_by_live_wrappers_and_kept_for_the_next_compile():
    counter = CompileCounter()
    first = graphwright.compile(Net(), backend=counter, fullgraph=True)
    second = graphwright.compile(Net(), backend=counter, fullgraph=True)
    with torch.no_grad():
        first(torch.randn(4, 16))
        second(torch.randn(4, 16))
        del first, second
        gc.collect()
        graphwright.compile(Net(), backend=counter, fullgraph=True)(torch.randn(4, 16))
    assert counter.frame_count == 1


def test_an_autograd_function_class_made_in_a_loop_is_freed():
    """Called opaquely (it marks an input dirty), `MyFunction.apply` is a graph node whose
    target is made once per class; the class must not be kept by that table."""
    def cycle():
        class Doubling(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, grad):
                return grad * 2

        def fn(x):
            return Doubling.apply(x) + 1

        x = torch.randn(4, requires_grad=True)
        graphwright.compile(fn, backend="eager")(x.clone()).sum().backward()
        return weakref.ref(Doubling)

    refs = [cycle() for _ in range(5)]
    graphwright.reset()
    gc.collect()
    gc.collect()
    assert all(ref() is None for ref in refs)


def test_an_input_is_freed_when_the_caller_drops_it_without_a_collection():
    # what the trace held (fake tensors made from the inputs, the tracer's memo of real objects)
    # sits in no reference cycle: dropping the last reference frees the input at once
    compiled = graphwright.compile(lambda x: x + x, backend=CompileCounter())
    x = torch.rand(4)
    watched = weakref.ref(x)
    compiled(x)
    gc.disable()
    try:
        del x
        assert watched() is None
    finally:
        gc.enable()


def test_a_module_passed_to_a_compiled_function_is_freed_without_a_collection():
    def forward(module, x):
        return module(x)

    compiled = graphwright.compile(forward, backend=lambda gm, example_inputs: (lambda *args: (1,)))
    module, x = nn.Linear(4, 4), torch.rand(2, 4)
    watched, weight = weakref.ref(module), weakref.ref(module.weight)
    compiled(module, x)
    gc.disable()
    try:
        del module, x
        assert watched() is None and weight() is None
    finally:
        gc.enable()


def _module_of_a_class_made_by_a_call(state: nn.Module) -> nn.Module:
    class Holding(nn.Module):  # its methods' closure holds `state`, as a test's local class does
        def __init__(self):
            super().__init__()
            self.held = state

        def forward(self, x):
            return self.held(x) * 2

    return Holding()


def test_a_module_class_made_by_a_call_is_freed_with_what_its_closure_holds():
    """The entry guards the class by type; the class (a `<locals>` one) holds its closure:
    the kept cache must not keep either alive once the program drops them."""
    def compile_and_drop():
        state = nn.Linear(4, 4)
        graphwright.compile(_module_of_a_class_made_by_a_call(state), backend="eager")(torch.randn(2, 4))
        return weakref.ref(state)

    watched = compile_and_drop()
    gc.collect()
    assert watched() is None


def test_entries_of_classes_that_are_gone_leave_the_cache():
    """A class made per iteration compiles once per class; the entries of the classes already
    gone are dropped, so the loop never reaches the cache size limit (and never runs eagerly)."""
    counter = CompileCounter()
    for _ in range(2 * graphwright.config.cache_size_limit):
        module = _module_of_a_class_made_by_a_call(nn.Linear(4, 4))
        graphwright.compile(module, backend=counter)(torch.randn(2, 4))
        del module
        gc.collect()
    assert counter.frame_count == 2 * graphwright.config.cache_size_limit
