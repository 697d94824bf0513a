"""Inductor's FX graph cache across processes: a restarted program loads graphwright's forward,
backward and inference graphs from `TORCHINDUCTOR_CACHE_DIR` instead of compiling them again,
and a changed program, dtype or Inductor config misses (issue 18).

Each compile runs in a fresh Python process (`_PROGRAM`), which checks outputs and gradients
against eager and prints PyTorch's Inductor counters (and graphwright's, which must agree); the
tests compare those counters between the first process (empty cache) and the restart (filled
cache).
"""
import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parent.parent

_PROGRAM = r"""
import json, sys
import torch
import graphwright
from torch._dynamo.utils import counters

setting = json.loads(sys.argv[1])
dtype = getattr(torch, setting["dtype"])
activation = getattr(torch.nn, setting["activation"])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), activation(), torch.nn.Linear(16, 4)).to(dtype)
compiled = graphwright.compile(model, fullgraph=True, backend="inductor", dynamic=setting["dynamic"],
                               options=setting["options"] or None)
tolerance = dict(rtol=1e-4, atol=1e-5)
for batch in setting["batches"]:
    x = torch.randn(batch, 8, dtype=dtype)
    out = compiled(x)
    out.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = model(x)
    expected.sum().backward()
    torch.testing.assert_close(out, expected, **tolerance)
    for grad, parameter in zip(grads, model.parameters()):
        torch.testing.assert_close(grad, parameter.grad, **tolerance)
    model.zero_grad()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), **tolerance)
keys = ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")
print(json.dumps({side: {key: found["inductor"][key] for key in keys}
                  for side, found in (("pytorch", counters), ("graphwright", graphwright.counters))}))
"""

BASE = {"activation": "ReLU", "dtype": "float32", "options": {}, "dynamic": False, "batches": [5]}


def _run(cache_dir: pathlib.Path, **changes) -> dict:
    """Compile and call the MLP in a fresh process with this cache folder: Inductor's FX graph
    cache counters (`torch._dynamo.utils.counters["inductor"]`)."""
    setting = {**BASE, **changes}
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _PROGRAM, json.dumps(setting)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["graphwright"] == found["pytorch"]  # graphwright.counters tell what Inductor did
    return found["pytorch"]


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory) -> pathlib.Path:
    """A cache folder filled by one run of the base program (which compiles three graphs)."""
    folder = tmp_path_factory.mktemp("inductor_cache")
    first = _run(folder)
    assert first == {"fxgraph_cache_hit": 0, "fxgraph_cache_miss": 3, "fxgraph_cache_bypass": 0}
    return folder


@pytest.fixture
def cache(filled_cache, tmp_path) -> pathlib.Path:
    """A copy of the filled cache that this test alone writes to."""
    return pathlib.Path(shutil.copytree(filled_cache, tmp_path / "cache"))


def test_a_restart_loads_the_forward_backward_and_inference_graphs(cache):
    assert _run(cache) == {"fxgraph_cache_hit": 3, "fxgraph_cache_miss": 0, "fxgraph_cache_bypass": 0}


def test_a_restart_with_dynamic_sizes_loads_the_graphs_compiled_once_for_every_size(tmp_path):
    first = _run(tmp_path, dynamic=True, batches=[5, 7])
    assert first == {"fxgraph_cache_hit": 0, "fxgraph_cache_miss": 3, "fxgraph_cache_bypass": 0}
    assert _run(tmp_path, dynamic=True, batches=[7, 5]) == \
        {"fxgraph_cache_hit": 3, "fxgraph_cache_miss": 0, "fxgraph_cache_bypass": 0}


@pytest.mark.parametrize("change", [
    pytest.param({"activation": "GELU"}, id="changed_op"),
    pytest.param({"dtype": "float64"}, id="changed_dtype"),
    pytest.param({"options": {"epilogue_fusion": False}}, id="changed_inductor_config"),
])
def test_a_changed_program_misses_and_compiles_again(cache, change):
    # Every graph of the program changes (the activation's backward too): nothing may be reused.
    assert _run(cache, **change) == {"fxgraph_cache_hit": 0, "fxgraph_cache_miss": 3, "fxgraph_cache_bypass": 0}


def test_compiling_again_after_reset_in_the_same_process_hits(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    code = r"""
import torch, graphwright
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
x = torch.randn(5, 8)
expected = model(x)
found = []
for _ in range(2):
    graphwright.reset()
    out = graphwright.compile(model, fullgraph=True, backend="inductor")(x)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    found.append(dict(graphwright.counters["inductor"]))
print(found)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    first, second = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert first == {"fxgraph_cache_miss": 2}
    assert second == {"fxgraph_cache_hit": 2}


def test_the_explain_command_prints_what_inductors_cache_did(tmp_path, monkeypatch):
    import torch

    import graphwright
    from graphwright.strict import events
    from graphwright.strict.explain import ScriptReport

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    graphwright.reset()
    with events.listening(ScriptReport()) as report:
        graphwright.compile(lambda x: (x * 3).sin(), backend="inductor")(torch.randn(4))
    text = str(report)
    graphwright.reset()
    assert text.splitlines()[-1] == "Inductor Caches: fxgraph_cache_miss 1"
