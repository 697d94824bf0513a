"""Compiled code called from compiled code, and compiling while other machinery is active.

The corpus (tests/programs/cases_nested.py) checks a training step calling a compiled
model, compiled helpers and methods of compiled modules program by program; these
tests check what does not fit a program: the module's compiler that Lightning uses
(`dynamo_ctx`), `explain` on a compiled method, and compiled functions called under a
user's `TorchDispatchMode`. Graph counts are compared with torch.compile's.
"""
import subprocess
import sys
import textwrap

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from torch.utils._python_dispatch import TorchDispatchMode

import graphwright
from graphwright.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    torch._dynamo.reset()
    yield
    graphwright.reset()
    torch._dynamo.reset()


class LightningStyle(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.linear(x).relu()

    def training_step(self, x):
        return self(x).sum() * 2


def _lightning_frames(compile_fn, counter):
    torch.manual_seed(0)
    model = LightningStyle()
    compiled = compile_fn(model, backend=counter)
    model.forward = compiled.dynamo_ctx(model.forward)
    model.training_step = compiled.dynamo_ctx(model.training_step)
    x = torch.ones(2, 3)
    results = [model.training_step(x), model.training_step(x), model(x)]
    return results, counter.frame_count


def test_dynamo_ctx_compiles_methods_with_the_modules_settings_as_pytorch_does():
    ours, frames = _lightning_frames(graphwright.compile, CompileCounter())
    theirs, their_frames = _lightning_frames(torch.compile, torch._dynamo.testing.CompileCounter())
    torch.manual_seed(0)
    eager = LightningStyle()
    x = torch.ones(2, 3)
    for result, expected in zip(ours, [eager.training_step(x), eager.training_step(x), eager(x)]):
        torch.testing.assert_close(result, expected)
    assert frames == their_frames == 2  # the step (its forward traced into), then forward alone


def test_explain_of_a_compiled_method_explains_its_original():
    model = LightningStyle()
    step = graphwright.compile(model.training_step, backend="eager")
    out = graphwright.explain(step)(torch.ones(2, 3))
    assert out.graph_count == 1 and out.graph_break_count == 0


class CountingMode(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append((func, any(isinstance(arg, torch._subclasses.FakeTensor) for arg in args)))
        return func(*args, **(kwargs or {}))


class IgnoringCompileMode(CountingMode):
    @classmethod
    def ignore_compile_internals(cls):
        return True


def _sin_cos(x):
    return x.sin().cos()


def test_a_call_under_a_users_dispatch_mode_runs_eagerly():
    counter = CompileCounter()
    compiled = graphwright.compile(_sin_cos, backend=counter)
    x = torch.randn(4)
    with CountingMode() as mode:
        result = compiled(x)
    torch.testing.assert_close(result, _sin_cos(x))
    assert counter.frame_count == 0
    assert [func for func, _ in mode.seen] == [torch.ops.aten.sin.default, torch.ops.aten.cos.default]
    compiled(x)  # without the mode, it compiles
    assert counter.frame_count == 1


def test_a_mode_ignoring_compile_internals_sees_the_compiled_code_run_not_the_tracer():
    counter = CompileCounter()
    compiled = graphwright.compile(_sin_cos, backend=counter)
    x = torch.randn(4)
    with IgnoringCompileMode() as mode:
        result = compiled(x)
    torch.testing.assert_close(result, _sin_cos(x))
    assert counter.frame_count == 1
    assert mode.seen == [(torch.ops.aten.sin.default, False), (torch.ops.aten.cos.default, False)]


def test_a_function_compiled_in_a_mode_handler_compiles_there():
    counters = {name: CompileCounter() for name in ("outer", "handler")}

    class CompilingMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return graphwright.compile(torch.add, backend=counters["handler"], fullgraph=True)(*args)

    x = torch.ones(5)
    with CompilingMode():
        result = graphwright.compile(lambda a, b: torch.add(a, b), backend=counters["outer"])(x, x)
    torch.testing.assert_close(result, x + x)
    assert counters["outer"].frame_count == 0
    assert counters["handler"].frame_count == 1


@pytest.mark.slow  # a fresh process: graphwright's first compile is the one made under the mode
def test_the_first_compile_made_under_a_users_dispatch_mode_leaves_the_mode_alone():
    script = textwrap.dedent("""
        import torch, graphwright
        from torch.utils._python_dispatch import TorchDispatchMode

        class BinaryOnly(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return torch.ops.aten.mul.Tensor(args[0], args[1])

        x = torch.full((3,), 2.0)
        with BinaryOnly():
            print(graphwright.compile(torch.add, backend="eager", fullgraph=True)(x, x).tolist())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[4.0,", "4.0,", "4.0]"]
