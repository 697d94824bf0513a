"""Inductor's FX graph cache across processes: a restarted program loads graphwright's forward,
backward and inference graphs from `TORCHINDUCTOR_CACHE_DIR` instead of compiling them again,
and a changed program, dtype or Inductor config misses (issue 18).

Each compile runs in a fresh Python process (`_PROGRAM`), which checks outputs and gradients
against eager and prints PyTorch's Inductor counters; the tests compare those counters between
the first process (empty cache) and the restart (filled cache).
"""
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
print(json.dumps({key: counters["inductor"][key] for key in ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")}))
"""

BASE = {"activation": "ReLU", "dtype": "float32", "options": {}, "dynamic": False, "batches": [5]}


def _run(cache_dir: pathlib.Path, **changes) -> dict:
    """Compile and call the MLP in a fresh process with this cache folder: Inductor's FX graph cache counters."""
    setting = {**BASE, **changes}
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _PROGRAM, json.dumps(setting)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


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
