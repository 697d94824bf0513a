"""`graphwright.counters["time"]`: seconds spent compiling, per phase, each counted once."""
from __future__ import annotations

import time

import pytest
import torch

import graphwright
from graphwright._core.counters import PHASES, compile_times, phase


@pytest.fixture(autouse=True)
def fresh_caches():
    graphwright.reset()
    yield
    graphwright.reset()


def f(x):
    y = x.sin() * 2
    print("break")
    return y.cos()


def test_a_compile_counts_time_in_each_strict_phase():
    graphwright.compile(f, backend="eager")(torch.randn(3))
    times = graphwright.counters["time"]
    assert {"trace", "guards", "residual", "backend"} <= set(times)
    assert all(seconds > 0 for seconds in times.values())


def test_aot_time_is_counted_on_the_first_call_and_the_backward():
    graphwright.compile(f, backend="aot_eager")(torch.randn(3, requires_grad=True)).sum().backward()
    assert graphwright.counters["time"]["aot"] > 0


def test_phases_are_exclusive_a_slow_backend_counts_as_backend_only():
    def slow_backend(gm, example_inputs):
        time.sleep(0.2)
        return gm.forward

    start = time.perf_counter()
    graphwright.compile(f, backend=slow_backend)(torch.randn(3))  # two graphs: 0.4 s in the backend
    wall = time.perf_counter() - start
    times = compile_times()
    assert times["backend"] >= 0.4
    assert times["residual"] < 0.4 * wall  # the backend's seconds are not counted again
    assert sum(times.values()) <= wall


def test_nested_phases_add_up_to_the_outer_wall_time():
    graphwright.reset()
    start = time.perf_counter()
    with phase("residual"):
        time.sleep(0.05)
        with phase("backend"):
            time.sleep(0.1)
    wall = time.perf_counter() - start
    times = compile_times()
    assert times["backend"] >= 0.1 and 0.05 <= times["residual"] < 0.1
    assert abs(sum(times.values()) - wall) < 0.01


def test_each_entry_counts_its_own_compile_time_aot_and_backward_included():
    def g(x):
        return x.sin().sum()

    compiled = graphwright.compile(g, backend="aot_eager")
    compiled(torch.randn(3, requires_grad=True)).backward()
    compiled(torch.randn(4, requires_grad=True)).backward()
    first, second = reversed(compiled._entries)
    assert first.compile_scope.entry == 0 and second.compile_scope.entry == 1
    for entry in (first, second):
        assert {"trace", "guards", "residual", "backend", "aot"} <= set(entry.compile_scope.times)
    total = sum(first.compile_scope.times.values()) + sum(second.compile_scope.times.values())
    assert abs(total - sum(compile_times().values())) < 1e-6


def test_compile_times_lists_phases_in_order_and_reset_clears_them():
    graphwright.compile(f, backend="eager")(torch.randn(3))
    assert list(compile_times()) == [name for name in PHASES if name in compile_times()]
    graphwright.reset()
    assert compile_times() == {}


def test_explain_prints_the_compile_time_per_phase():
    output = graphwright.explain(f)(torch.randn(3))
    assert {"trace", "guards", "residual", "backend"} <= set(output.compile_times)
    line = next(line for line in str(output).splitlines() if line.startswith("Compile Time:"))
    assert "trace" in line and "backend" in line


def test_the_explain_command_prints_the_compile_time_of_the_whole_run():
    from graphwright.strict import events
    from graphwright.strict.explain import ScriptReport

    with events.listening(ScriptReport()) as report:
        graphwright.compile(f, backend="eager")(torch.randn(3))
    text = str(report)
    assert "=== all functions ===" in text
    assert text.splitlines()[-1].startswith("Compile Time:") and "trace" in text.splitlines()[-1]
