"""`graphwright.debug.dump`: every cache entry's generated code as files to read, load and re-run."""
from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
import traceback
import warnings

import pytest
import torch

import graphwright
from graphwright.debug import load_graph


@pytest.fixture(autouse=True)
def fresh_caches():
    graphwright.reset()
    yield
    graphwright.reset()


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x).relu()
        print("between graphs")  # a graph break: the rest runs in a resume function
        return y.sin() * 2


BREAK_LINE = inspect.getsourcelines(Block.forward)[1] + 2


def entry_folder(root, function: str, n: int = 0) -> str:
    """Where the dump puts entry `n` of the function of qualified name `function`."""
    return os.path.join(root, function.replace(".<locals>", ""), f"entry_{n}")


def test_dump_writes_a_folder_per_entry_with_guards_graph_and_entry_source(tmp_path):
    def f(x):
        return x.cos() + 1

    compiled = graphwright.compile(f, backend="eager")
    with graphwright.debug.dump(tmp_path) as folder:
        compiled(torch.randn(3))
        compiled(torch.randn(3, 2))  # a recompile: a second entry
    assert folder == str(tmp_path)
    for n in (0, 1):
        files = set(os.listdir(entry_folder(tmp_path, f.__qualname__, n)))
        assert {"entry.py", "guards.txt", "graph", "graph.txt"} <= files
    first = entry_folder(tmp_path, f.__qualname__)
    assert "tensor x: Tensor, torch.float32, cpu, size=[3], contiguous" in open(os.path.join(first, "guards.txt")).read()
    source = open(os.path.join(first, "entry.py")).read()
    assert "def ___entry(___gw_fn, x):" in source and "return ___MISS" in source
    assert "# bytecode:" in source and "RETURN_VALUE" in source  # the entry's own bytecode, after it
    assert "cos" in open(os.path.join(first, "graph.txt")).read()


def test_the_entry_runs_from_its_dumped_file(tmp_path):
    def f(x):
        return x.cos() + 1

    compiled = graphwright.compile(f, backend="eager")
    with graphwright.debug.dump(tmp_path):
        compiled(torch.randn(3))
    entry = compiled._entries[0]
    path = os.path.join(entry_folder(tmp_path, f.__qualname__), "entry.py")
    assert entry.__code__.co_filename == path  # tracebacks and debuggers show these lines
    lines = open(path).read().splitlines()
    assert lines[entry.__code__.co_firstlineno - 1].startswith("def ___entry(")


def test_an_error_in_the_residual_code_shows_the_dumped_line(tmp_path):
    def f(x):
        y = x * 2
        warnings.warn("careful")  # replayed by the entry after the graph
        return y

    compiled = graphwright.compile(f, backend="eager")
    with graphwright.debug.dump(tmp_path), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(torch.randn(2))
    path = os.path.join(entry_folder(tmp_path, f.__qualname__), "entry.py")
    with warnings.catch_warnings(), pytest.raises(UserWarning) as error:
        warnings.simplefilter("error")
        compiled(torch.randn(2))
    (frame,) = [frame for frame in traceback.extract_tb(error.value.__traceback__) if frame.filename == path]
    assert frame.line.startswith("___c") and "'careful'" in frame.line


def test_dumped_graphs_load_and_rerun_to_the_same_result(tmp_path):
    torch.manual_seed(0)
    block = Block()
    x = torch.randn(2, 4)
    compiled = graphwright.compile(block, backend="eager")
    with graphwright.debug.dump(tmp_path):
        out = compiled(x)
    graph = load_graph(os.path.join(entry_folder(tmp_path, "Block.forward"), "graph"))
    (captured,) = graph(x, block.linear.weight, block.linear.bias)
    assert torch.equal(captured, block.linear(x).relu())
    resumed = load_graph(os.path.join(entry_folder(tmp_path, f"graphwright_resume_in_forward_at_{BREAK_LINE}"), "graph"))
    assert torch.equal(resumed(captured)[0], out)


@graphwright.nonstrict_trace
def tripled(x):
    return x * 3


def test_a_graph_calling_a_nonstrict_trace_function_loads_and_reruns(tmp_path):
    def f(x):
        return tripled(x.sin()) + 1

    x = torch.randn(3)
    with graphwright.debug.dump(tmp_path):
        out = graphwright.compile(f, backend="eager")(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own, unpickling a TreeSpec
        graph = load_graph(os.path.join(entry_folder(tmp_path, f.__qualname__), "graph"))
    assert torch.equal(graph(x)[0], out)


def test_aot_graphs_are_dumped_loadable_next_to_their_entry(tmp_path):
    torch.manual_seed(0)
    block = Block()
    x = torch.randn(2, 4)
    compiled = graphwright.compile(block, backend="aot_eager")
    with graphwright.debug.dump(tmp_path):
        compiled(x).sum().backward()  # forward on the first call, backward on the first backward
    folder = entry_folder(tmp_path, "Block.forward")
    assert {"aot_forward", "aot_forward.txt", "aot_backward", "aot_backward.txt"} <= set(os.listdir(folder))
    forward = load_graph(os.path.join(folder, "aot_forward"))
    outputs = forward(x, block.linear.weight, block.linear.bias)
    assert torch.allclose(outputs[0], block.linear(x).relu())
    with graphwright.debug.dump(tmp_path), torch.no_grad():
        compiled(x)  # a new entry (grad mode is guarded), with an inference graph
    assert "aot_inference" in os.listdir(entry_folder(tmp_path, "Block.forward", 1))


def test_resume_functions_are_dumped_as_python_like_source_and_bytecode(tmp_path):
    compiled = graphwright.compile(Block(), backend="eager")
    with graphwright.debug.dump(tmp_path):
        compiled(torch.randn(2, 4))
    folder = entry_folder(tmp_path, "Block.forward")
    (name,) = [f for f in os.listdir(folder) if f.startswith("graphwright_resume_in_forward")]
    text = open(os.path.join(folder, name)).read()
    first_line = inspect.getsourcelines(Block.forward)[1]
    assert f"A resume function: `Block.forward` ({__file__}:{first_line})" in text
    assert f"def {name[:-3]}(" in text
    assert "    return y.sin() * 2" in text  # the user's own lines after the break
    assert "# bytecode" in text and "RETURN_VALUE" in text


def doubled(x):
    return x * 2


def test_a_function_run_in_python_is_dumped_as_its_call_routed_copy(tmp_path):
    def f(x):
        for i in range(2):  # a break in a loop: no split, f runs in Python, doubled is compiled
            x = doubled(x)
            print(i)
        return x

    with graphwright.debug.dump(tmp_path):
        graphwright.compile(f, backend="eager")(torch.randn(2))
    text = open(os.path.join(entry_folder(tmp_path, f.__qualname__), "routed_f.py")).read()
    assert "run as plain Python: its own bytecode, every call going through graphwright's" in text
    assert "        x = doubled(x)" in text and "CallRouter" in text
    assert "graph" in os.listdir(entry_folder(tmp_path, "doubled"))


def test_function_form_turns_dumping_on_until_turned_off(tmp_path):
    def f(x):
        return x + 1

    compiled = graphwright.compile(f, backend="eager")
    graphwright.debug.dump(tmp_path)
    try:
        compiled(torch.randn(2))
    finally:
        graphwright.debug.dump(None)
    compiled(torch.randn(5))  # compiled while not dumping: no folder
    assert os.listdir(os.path.dirname(entry_folder(tmp_path, f.__qualname__))) == ["entry_0"]


def test_nothing_is_written_without_a_dump(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def f(x):
        return x + 1

    graphwright.compile(f, backend="eager")(torch.randn(2))
    assert os.listdir(tmp_path) == []


@pytest.mark.slow  # a fresh process imports torch
def test_environment_variable_dumps(tmp_path):
    script = ("import torch, graphwright\n"
              "def f(x):\n    return x.sin()\n"
              "graphwright.compile(f, backend='eager')(torch.randn(2))\n")
    env = {**os.environ, "GRAPHWRIGHT_DUMP_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "entry.py" in os.listdir(os.path.join(tmp_path, "f", "entry_0"))


@pytest.mark.slow  # Inductor compiles
def test_inductor_modules_are_copied_next_to_their_entry_and_rerun(tmp_path):
    def f(x):
        return (x.sin() * 2).sum(1)

    compiled = graphwright.compile(f, backend="inductor")
    x = torch.randn(4, 4, requires_grad=True)
    with graphwright.debug.dump(tmp_path):
        compiled(x).sum().backward()
        with torch.no_grad():
            compiled(x)
    folder = entry_folder(tmp_path, f.__qualname__)
    assert {"inductor_forward.py", "inductor_backward.py"} <= set(os.listdir(folder))
    path = os.path.join(entry_folder(tmp_path, f.__qualname__, 1), "inductor_inference.py")
    spec = importlib.util.spec_from_file_location("dumped_inductor_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (out,) = module.call([x.detach().clone()])
    assert torch.allclose(out, f(x.detach()))
