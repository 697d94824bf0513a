"""Compiled regions in the profiler: under `torch.profiler.profile()` every call of a compiled
entry is a range naming it (`Graphwright-Compiled Region: 0/1 f (file.py:12)`, as torch.compile's
`Torch-Compiled Region: 0/1`), a compile is a range (`Graphwright Compile: ...`) holding one
range per phase (`graphwright.trace`, `graphwright.guards`, `graphwright.aot`, ...), and the
operations a graph runs are inside its region."""
from __future__ import annotations

import collections
import json
import os
import re

import pytest
import torch

import graphwright


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def _names(prof) -> collections.Counter:
    return collections.Counter(event.name for event in prof.events())


def _where(fn) -> str:
    code = fn.__code__
    return f"{code.co_qualname} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _ids(names, prefix: str) -> list[str]:
    return sorted(name[len(prefix):].split(" ")[0] for name in names if name.startswith(prefix))


REGION = "Graphwright-Compiled Region: "
COMPILE = "Graphwright Compile: "


def test_every_call_is_a_region_naming_its_entry_and_the_first_compiles_in_phases():
    def f(x):
        return torch.sin(x) * 2

    compiled = graphwright.compile(f, backend="aot_eager")
    x = torch.randn(8)
    with torch.profiler.profile() as prof:
        results = [compiled(x) for _ in range(3)]
    names = _names(prof)
    assert names[f"{REGION}{_ids(names, REGION)[0]} {_where(f)}"] == 3
    assert names[f"{COMPILE}{_ids(names, COMPILE)[0]} {_where(f)}"] == 1
    assert _ids(names, REGION) == _ids(names, COMPILE)  # one entry, the one compiled
    for phase in ("graphwright.trace", "graphwright.guards", "graphwright.residual", "graphwright.aot",
                  "graphwright.backend"):
        assert names[phase] >= 1, phase
    for result in results:
        torch.testing.assert_close(result, f(x))


def test_a_cache_hit_has_its_region_and_no_compile_range():
    def f(x):
        return x.cos() + 1

    compiled = graphwright.compile(f, backend="eager")
    x = torch.randn(4)
    compiled(x)
    with torch.profiler.profile() as prof:
        result = compiled(x)
    names = _names(prof)
    assert [name for name in names if name.startswith("Graphwright") or name.startswith("graphwright.")] == \
        [f"{REGION}{_ids(names, REGION)[0]} {_where(f)}"]
    torch.testing.assert_close(result, f(x))


def test_a_graphs_operations_run_inside_its_region():
    def f(x):
        return torch.tanh(x @ x.T)

    compiled = graphwright.compile(f, backend="eager")
    x = torch.randn(5, 5)
    compiled(x)
    with torch.profiler.profile() as prof:
        compiled(x)
    (region,) = [event for event in prof.events() if event.name.startswith(REGION)]
    inside = set()
    pending = list(region.cpu_children)
    while pending:
        event = pending.pop()
        inside.add(event.name)
        pending.extend(event.cpu_children)
    assert {"aten::mm", "aten::tanh"} <= inside


def test_breaks_and_recompiles_give_regions_of_their_own():
    def f(x):
        y = x * 2
        graphwright.graph_break()
        return y + 1

    compiled = graphwright.compile(f, backend="eager")
    with torch.profiler.profile() as prof:
        compiled(torch.randn(3))
        compiled(torch.randn(3))
        compiled(torch.randn(2, 2))  # recompiles f and its resume function
    names = _names(prof)
    regions = {name: count for name, count in names.items() if name.startswith(REGION)}
    assert len(regions) == 4 and sorted(regions.values()) == [1, 1, 2, 2]
    frames = {name[len(REGION):].split("/")[0] for name in regions}
    assert len(frames) == 2  # f and the resume function after the break
    resume = [name for name in regions if "graphwright_resume_in_f_at_" in name]
    assert len(resume) == 2 and all(name.endswith(f"({os.path.basename(__file__)}:{f.__code__.co_firstlineno})")
                                    for name in resume)
    assert sum(name.startswith(COMPILE) for name in names) == 4


def test_a_compiled_modules_training_step_shows_in_a_chrome_trace(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.ReLU(), torch.nn.Linear(6, 1))
    reference = [p.detach().clone() for p in model.parameters()]
    compiled = graphwright.compile(model, backend="aot_eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 6)
    with torch.profiler.profile() as prof:
        for _ in range(2):
            optimizer.zero_grad()
            compiled(x).sum().backward()
            optimizer.step()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    regions = [event for event in events if event.get("name", "").startswith(REGION)]
    assert len(regions) == 2 and all("Sequential.forward" in event["name"] for event in regions)
    assert all(event["dur"] > 0 for event in regions)
    # the same training step without compiling
    eager = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.ReLU(), torch.nn.Linear(6, 1))
    with torch.no_grad():
        for p, value in zip(eager.parameters(), reference):
            p.copy_(value)
    eager_optimizer = torch.optim.SGD(eager.parameters(), lr=0.1)
    for _ in range(2):
        eager_optimizer.zero_grad()
        eager(x).sum().backward()
        eager_optimizer.step()
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p, q)


def test_names_follow_torch_compiles_compiled_regions():
    def f(x):
        return x.exp()

    x = torch.randn(3)
    torch._dynamo.reset()
    torch_compiled = torch.compile(f, backend="eager")
    torch_compiled(x)
    compiled = graphwright.compile(f, backend="eager")
    compiled(x)
    with torch.profiler.profile() as prof:
        torch_compiled(x)
        compiled(x)
    names = _names(prof)
    (theirs,) = [name for name in names if name.startswith("Torch-Compiled Region: ")]
    (ours,) = [name for name in names if name.startswith(REGION)]
    # the same compile id notation, then the function and where it is
    assert re.fullmatch(r"Torch-Compiled Region: \d+/\d+", theirs)
    assert re.fullmatch(rf"Graphwright-Compiled Region: \d+/\d+ {re.escape(_where(f))}", ours)
    torch._dynamo.reset()
