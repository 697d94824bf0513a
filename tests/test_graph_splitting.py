"""Graph breaks under fullgraph=False split the function: graphs, resume functions, explain.

The differential corpus (tests/programs/cases_graph_breaks.py) checks results and graph
counts program by program; these tests check the machinery a user can see: the seeds'
example, resume functions as real code objects, `explain` and its command, counters, and
that a failure while splitting falls back to eager with a warning.
"""
import dis
import pathlib
import subprocess
import sys
import warnings

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing

import graphwright
from graphwright.strict.cache import _CACHES
from graphwright.testing import CompileCounter, CompileCounterWithBackend


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    torch._dynamo.reset()
    yield
    graphwright.reset()
    torch._dynamo.reset()


def _seed_program(graph_break):
    def get_magic_num():
        graph_break()
        return torch.tensor([42])

    def func(x):
        n = get_magic_num()
        return x + n

    return func


def test_seed_example_without_fullgraph_splits_as_pytorch_does():
    x = torch.rand(10)
    ours, theirs = CompileCounter(), torch._dynamo.testing.CompileCounter()
    result = graphwright.compile(_seed_program(graphwright.graph_break), backend=ours)(x)
    expected = torch.compile(_seed_program(torch._dynamo.graph_break), backend=theirs)(x)
    torch.testing.assert_close(result, expected)
    assert ours.frame_count == theirs.frame_count == 2
    assert graphwright.counters["stats"]["unique_graphs"] == 2


def test_a_second_call_compiles_nothing():
    counter = CompileCounter()
    compiled = graphwright.compile(_seed_program(graphwright.graph_break), backend=counter)
    compiled(torch.rand(10))
    compiled(torch.rand(10))
    assert counter.frame_count == 2


def test_resume_functions_are_code_objects_continuing_the_users_code():
    def f(x):
        y = x.sin()
        graphwright.graph_break()
        return y.cos() + 1

    graphwright.compile(f, backend="eager")(torch.randn(3))
    resumed = [key[0] for key in _CACHES if key[0].co_name.startswith("graphwright_resume_in_f")]
    assert len(resumed) == 1
    code = resumed[0]
    assert code.co_filename == f.__code__.co_filename
    # graph_break()'s result on the stack, then the live locals: x is dead after the break
    assert code.co_varnames[:code.co_argcount] == ("___stack0", "y")
    opnames = [inst.opname for inst in dis.get_instructions(code)]
    assert opnames[:4] == ["RESUME", "LOAD_FAST", "JUMP_FORWARD", "LOAD_FAST"]  # prologue, then f's code


def test_two_breaks_give_three_graphs_and_counters_count_each_break():
    def f(x):
        x = x + 1
        graphwright.graph_break()
        x = x * 2
        print("between")
        return x - 3

    counter = CompileCounter()
    x = torch.randn(3)
    with warnings.catch_warnings():
        result = graphwright.compile(f, backend=counter)(x)
    torch.testing.assert_close(result, (x + 1) * 2 - 3)
    assert counter.frame_count == 3
    assert graphwright.counters["graph_break"] == {"Call to `graphwright.graph_break()`": 1, "Call to `print`": 1}


def test_grad_mode_is_restored_around_the_break_and_inside_the_resume_function():
    seen = []

    @graphwright.disable
    def record():
        seen.append(torch.is_grad_enabled())

    def f(x):
        with torch.no_grad():
            y = x * 2
            record()
            z = y + 1
        return z, x * 3

    x = torch.randn(3, requires_grad=True)
    z, w = graphwright.compile(f, backend="eager")(x)
    assert seen == [False]
    assert not z.requires_grad and w.requires_grad
    assert torch.is_grad_enabled()


def test_explain_reports_graphs_breaks_and_advice():
    def helper(t):
        graphwright.graph_break()
        return t * 2

    def f(x):
        return helper(x.sin()) + 1

    output = graphwright.explain(f)(torch.randn(3))
    assert output.graph_count == 3
    assert output.graph_break_count == 2  # in f (at the call) and in helper itself
    first = output.break_reasons[0]
    assert first.graph_break_id == "GB001"
    assert [frame.name for frame in first.user_stack] == ["f", "helper"]
    assert "`test_explain_reports_graphs_breaks_and_advice.<locals>.helper`" in first.advice
    assert "graphwright.nonstrict_trace" in first.advice
    assert "Advice:" in str(output) and "Graph Count: 3" in str(output)


def test_explain_advises_leaf_function_for_a_callee_that_prints():
    def report(t):
        print("value", t.sum())
        return t

    def f(x):
        return report(x + 1)

    output = graphwright.explain(f)(torch.randn(3))
    assert "graphwright.leaf_function" in output.break_reasons[0].advice


def test_a_break_in_a_loop_says_the_function_runs_in_python_and_its_callees_are_compiled():
    def step(t):
        graphwright.graph_break()
        return t + 1

    def f(x):
        for _ in range(3):
            x = step(x) * 2
        return x

    output = graphwright.explain(f)(torch.randn(3))
    assert "loop" in output.break_reasons[0].note
    assert output.graph_count == 1  # step after its break; f itself runs in Python


def test_explain_command_reports_every_compiled_function(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "import torch, graphwright\n"
        "def get_magic_num():\n"
        "    graphwright.graph_break()\n"
        "    return torch.tensor([42])\n"
        "@graphwright.compile(backend='eager')\n"
        "def func(x):\n"
        "    return x + get_magic_num()\n"
        "print('result', func(torch.zeros(2)).tolist())\n")
    result = subprocess.run([sys.executable, "-m", "graphwright", "explain", str(script)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "result [42.0, 42.0]" in result.stdout
    assert f"=== func ({script}:5) ===" in result.stdout
    assert f"=== get_magic_num ({script}:2) ===" in result.stdout
    assert f"at {script}:3" in result.stdout and "graphwright.nonstrict_trace" in result.stdout


def test_explain_command_without_a_script_prints_usage():
    result = subprocess.run([sys.executable, "-m", "graphwright"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2 and "usage" in result.stderr


def test_a_failure_while_splitting_falls_back_to_eager_with_a_warning(monkeypatch):
    from graphwright.strict.residual import split

    def broken(self):
        raise RuntimeError("injected")

    monkeypatch.setattr(split.Continuation, "resume_tail", broken)

    def f(x):
        y = x * 2
        graphwright.graph_break()
        return y + 1

    x = torch.randn(3)
    with pytest.warns(UserWarning, match="could not split"):
        result = graphwright.compile(f, backend="eager")(x)
    torch.testing.assert_close(result, x * 2 + 1)


def _long_loop_with_a_break():
    """A loop whose body is long enough that CPython jumps back to an EXTENDED_ARG prefix."""
    body = "".join(f"        x = x * 1.001 + {index}\n" for index in range(150))
    source = ("def f(x, step):\n"
              "    for _ in range(2):\n"
              "        x = step(x)\n" + body +
              "    return x\n")
    namespace: dict = {}
    exec(compile(source, "<long loop>", "exec"), namespace)
    return namespace["f"]


def test_a_long_function_whose_jumps_land_on_extended_args_runs_routed():
    f = _long_loop_with_a_break()
    assert any(inst.opname == "EXTENDED_ARG" and inst.is_jump_target for inst in dis.get_instructions(f))

    def step(t):
        graphwright.graph_break()
        return t + 1

    counter = CompileCounter()
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = graphwright.compile(f, backend=counter)(x, step)
    torch.testing.assert_close(result, f(x, step))
    assert counter.frame_count == 1  # `step` after its break, compiled by the router


def test_a_failure_routing_calls_runs_the_function_as_it_is_with_a_warning(monkeypatch):
    from graphwright.strict.residual import call_routing

    def broken(code, router):
        raise RuntimeError("injected")

    monkeypatch.setattr(call_routing, "_rewrite_calls", broken)

    def f(x):
        for _ in range(2):
            graphwright.graph_break()
            x = x + 1
        return x

    x = torch.randn(3)
    with pytest.warns(UserWarning, match="could not route the calls made by"):
        result = graphwright.compile(f, backend="eager")(x)
    torch.testing.assert_close(result, x + 2)


def test_a_training_step_with_an_optimizer_splits_and_trains_as_eager():
    """zero_grad (disabled for compilers in torch.optim), backward, clip_grad_norm_, Adam's
    step: each break splits, the optimizer's functions are compiled when called."""
    def make():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

        def step(x, y):
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            return loss
        return model, step

    (model, step), (compiled_model, compiled_step), (_, reference_step) = make(), make(), make()
    ours, theirs = CompileCounter(), torch._dynamo.testing.CompileCounter()
    compiled_step = graphwright.compile(compiled_step, backend=ours)
    torch._dynamo.reset()
    reference_step = torch.compile(reference_step, backend=theirs)
    for _ in range(3):
        x, y = torch.randn(2, 4), torch.randn(2)
        torch.testing.assert_close(compiled_step(x, y), step(x, y))
        reference_step(x, y)
    for expected, got in zip(model.state_dict().values(), compiled_model.state_dict().values()):
        torch.testing.assert_close(got, expected)
    assert ours.frame_count == theirs.frame_count


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_recurrent_module_is_traced_and_refused_without_allow_rnn(backend, monkeypatch):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 3, num_layers=2, batch_first=True)

    def f(x):
        return lstm(x)[0].sum()

    x = torch.randn(2, 5, 4, requires_grad=True)
    counter = CompileCounterWithBackend(backend)
    result = graphwright.compile(f, backend=counter, fullgraph=True)(x)
    result.backward()
    got = [x.grad.clone()] + [p.grad.clone() for p in lstm.parameters()]
    x.grad = None
    lstm.zero_grad()
    f(x).backward()
    for value, expected in zip(got, [x.grad] + [p.grad for p in lstm.parameters()]):
        torch.testing.assert_close(value, expected)
    assert counter.frame_count == 1

    monkeypatch.setattr(graphwright.config, "allow_rnn", False)
    with pytest.raises(graphwright.Unsupported, match="Recurrent module") as caught:
        graphwright.compile(f, backend="eager", fullgraph=True)(x.detach())
    assert "GB042" in str(caught.value) and "test_graph_splitting.py" in str(caught.value)


def test_breaks_under_fullgraph_still_raise():
    with pytest.raises(graphwright.Unsupported, match="graph_break"):
        graphwright.compile(_seed_program(graphwright.graph_break), fullgraph=True, backend="eager")(
            torch.rand(3))



_EXPLAINED = ["two_breaks_give_three_graphs", "print_splits_and_prints_in_order",
              "item_breaks_and_the_number_feeds_the_rest",
              "data_dependent_if_takes_the_true_side", "break_in_a_callee_two_deep",
              "break_inside_no_grad", "break_inside_autocast", "break_in_a_loop_still_compiles_the_callees",
              "break_inside_try_finally", "side_effects_on_an_input_list_before_and_after_a_break"]


@pytest.mark.parametrize("name", _EXPLAINED)
def test_explain_agrees_with_pytorch(name, monkeypatch):
    """The same graphs as torch._dynamo.explain, and every break PyTorch reports (it reports
    those that ended a graph) among ours, at the same user line. PyTorch reports a break it
    could not resume from ("step_unsupported") at the line its graph stopped before; ours
    names the breaking line itself."""
    from tests.programs import cases_graph_breaks, markers

    program = next(p for p in cases_graph_breaks.PROGRAMS if p.name == name)
    fn = program.make()
    torch.manual_seed(0)
    args = program.inputs()
    args = args if isinstance(args, tuple) else (args,)
    ours = graphwright.explain(fn)(*args)
    monkeypatch.setattr(markers, "graph_break", torch._dynamo.graph_break)
    monkeypatch.setattr(cases_graph_breaks, "graph_break", torch._dynamo.graph_break)
    monkeypatch.setattr(cases_graph_breaks, "disable", torch._dynamo.disable)
    theirs = torch._dynamo.explain(fn.__wrapped__ if hasattr(fn, "__wrapped__") else fn)(*args)
    assert ours.graph_count == theirs.graph_count
    our_lines = {frame.lineno for reason in ours.break_reasons for frame in reason.user_stack}
    for reason in theirs.break_reasons:
        if reason.reason != "step_unsupported":
            assert reason.user_stack[-1].lineno in our_lines, reason.reason


def test_a_break_after_a_loop_too_long_for_one_byte_jumps_resumes_after_it():
    # Which locals the resume function needs is a dataflow over the whole code, through the
    # loop's back edge to the EXTENDED_ARG prefix of its FOR_ITER.
    body = "\n".join(f"        x = x * 0.5 + {i}.0" for i in range(90))
    namespace = {"graphwright": graphwright}
    exec(f"def loop_then_break(x):\n    for i in range(2):\n{body}\n    graphwright.graph_break()\n    return x.sin()",
         namespace)
    loop_then_break = namespace["loop_then_break"]
    x = torch.randn(3)
    counter = CompileCounter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to eager
        torch.testing.assert_close(graphwright.compile(loop_then_break, backend=counter)(x), loop_then_break(x))
    assert counter.frame_count == 2


def _breaks_then_doubles(t, s):
    graphwright.graph_break()
    return t * 2 + s


def _star_call_with_a_cell(x):
    v0 = x.sin()
    first_row = lambda t: v0[0]  # noqa: E731 -- `v0` becomes a cell of this function
    row = first_row(x)
    return _breaks_then_doubles(*(x, row))


def test_a_break_inside_a_star_call_from_a_function_with_cells_runs_the_rest_in_python():
    # The rest of the function (from the CALL_FUNCTION_EX on) runs as plain Python made
    # around the function's cells.
    x = torch.randn(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to eager
        result = graphwright.compile(_star_call_with_a_cell, backend="eager")(x)
    torch.testing.assert_close(result, _star_call_with_a_cell(x))


def _printed(value):
    print("between the graphs")
    return value


def test_a_resume_function_keeps_locals_whose_names_are_no_identifiers():
    # pytest rewrites the `assert` below (this file is a test module) into locals named
    # `@py_assert1`...: `x.shape` is one when `_printed` breaks the graph, so the resume
    # function after that call receives it as a parameter
    def checked(x):
        y = x.abs()
        assert x.shape == _printed(y).shape
        return y + 1

    counter = CompileCounter()
    compiled = graphwright.compile(checked, backend=counter)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), checked(x))
    assert counter.frame_count == 2
    assert any(not name.isidentifier() for name in checked.__code__.co_varnames)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_hook_on_an_intermediate_already_used_sees_every_use_so_the_function_is_not_split(backend):
    def fn(x):
        y = x * 2
        z = y + 1  # a use before the hook: the hook must still see its gradient
        y.register_hook(lambda grad: grad * 2)
        return (z + y * 3).sum()

    x_eager, x_compiled = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    fn(x_eager).backward()
    counter = CompileCounterWithBackend(backend)
    graphwright.compile(fn, backend=counter)(x_compiled).backward()
    torch.testing.assert_close(x_compiled.grad, x_eager.grad)  # 16: (1 + 3) * 2 * 2
    assert counter.frame_count == 0


def test_a_hook_on_an_intermediate_not_used_yet_is_captured_in_the_graph():
    def fn(x):
        y = x.sin()
        y.register_hook(lambda grad: grad + 1)
        return (y * y).sum()

    x_eager = torch.randn(3, requires_grad=True)
    x_compiled = x_eager.detach().clone().requires_grad_()
    fn(x_eager).backward()
    counter = CompileCounterWithBackend("aot_eager")
    graphwright.compile(fn, backend=counter, fullgraph=True)(x_compiled).backward()
    torch.testing.assert_close(x_compiled.grad, x_eager.grad)
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_tensor_with_a_captured_hook_may_change_in_place_afterwards(backend):
    def fn(x):
        y = x * 2
        y.register_hook(lambda grad: grad * 3)
        y.mul_(2)
        return (y * y).sum()

    x_eager = torch.randn(3, requires_grad=True)
    x_compiled = x_eager.detach().clone().requires_grad_()
    fn(x_eager).backward()
    counter = CompileCounterWithBackend(backend)
    graphwright.compile(fn, backend=counter, fullgraph=True)(x_compiled).backward()
    torch.testing.assert_close(x_compiled.grad, x_eager.grad)
    assert counter.frame_count == 1
