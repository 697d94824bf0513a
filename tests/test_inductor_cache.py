"""Compile caches across processes (issue 18): Inductor's FX graph cache loads graphwright's
forward, backward and inference graphs from `TORCHINDUCTOR_CACHE_DIR` instead of compiling them
again, and graphwright's AOT cache skips ahead-of-time autograd (its entries live beside
Inductor's caches, or in `GRAPHWRIGHT_CACHE_DIR`); a changed program, dtype or Inductor config
misses both, damaged cache files are reported and compiled again, and the switches turn the
caches off.

Each compile runs in a fresh Python process (`_PROGRAM`), which checks outputs and gradients
against eager and prints PyTorch's Inductor counters (and graphwright's, which must agree) and
graphwright's AOT cache counters; the tests compare those between the first process (empty
cache) and the restart (filled cache).
"""
import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys
import typing

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
found = {side: {key: found["inductor"][key] for key in keys}
         for side, found in (("pytorch", counters), ("graphwright", graphwright.counters))}
found["aot"] = dict(graphwright.counters["aot_cache"])
print(json.dumps(found))
"""

BASE = {"activation": "ReLU", "dtype": "float32", "options": {}, "dynamic": False, "batches": [5]}


class Run(typing.NamedTuple):
    inductor: dict  # Inductor's FX graph cache counters (`torch._dynamo.utils.counters["inductor"]`)
    aot: dict  # graphwright's AOT cache counters (`graphwright.counters["aot_cache"]`)
    stderr: str


def _run(cache_dir: pathlib.Path, environment: dict | None = None, **changes) -> Run:
    """Compile and call the MLP in a fresh process with this cache folder."""
    setting = {**BASE, **changes}
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **(environment or {})}
    for name in ("GRAPHWRIGHT_CACHE_DIR", "GRAPHWRIGHT_AOT_CACHE", "GRAPHWRIGHT_FORCE_DISABLE_CACHES"):
        if name not in (environment or {}):
            env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", _PROGRAM, json.dumps(setting)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["graphwright"] == found["pytorch"]  # graphwright.counters tell what Inductor did
    return Run(found["pytorch"], found["aot"], done.stderr)


def _inductor(hit=0, miss=0, bypass=0) -> dict:
    return {"fxgraph_cache_hit": hit, "fxgraph_cache_miss": miss, "fxgraph_cache_bypass": bypass}


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory) -> pathlib.Path:
    """A cache folder filled by one run of the base program: three graphs for Inductor, two call
    signatures (training, no_grad inference) for the AOT cache."""
    folder = tmp_path_factory.mktemp("inductor_cache")
    first = _run(folder)
    assert first.inductor == _inductor(miss=3)
    assert first.aot == {"aot_cache_miss": 2}
    return folder


@pytest.fixture
def cache(filled_cache, tmp_path) -> pathlib.Path:
    """A copy of the filled cache that this test alone writes to."""
    return pathlib.Path(shutil.copytree(filled_cache, tmp_path / "cache"))


def test_a_restart_loads_the_forward_backward_and_inference_graphs_and_skips_aot(cache):
    again = _run(cache)
    assert again.inductor == _inductor(hit=3)
    assert again.aot == {"aot_cache_hit": 2}


def test_a_restart_with_dynamic_sizes_loads_the_graphs_compiled_once_for_every_size(tmp_path):
    first = _run(tmp_path, dynamic=True, batches=[5, 7])
    assert (first.inductor, first.aot) == (_inductor(miss=3), {"aot_cache_miss": 2})
    again = _run(tmp_path, dynamic=True, batches=[7, 5])
    assert (again.inductor, again.aot) == (_inductor(hit=3), {"aot_cache_hit": 2})


@pytest.mark.parametrize("change", [
    pytest.param({"activation": "GELU"}, id="changed_op"),
    pytest.param({"dtype": "float64"}, id="changed_dtype"),
    pytest.param({"options": {"epilogue_fusion": False}}, id="changed_inductor_config"),
])
def test_a_changed_program_misses_and_compiles_again(cache, change):
    # Every graph of the program changes (the activation's backward too): nothing may be reused.
    changed = _run(cache, **change)
    assert (changed.inductor, changed.aot) == (_inductor(miss=3), {"aot_cache_miss": 2})


def _damage(files: list[pathlib.Path]) -> None:
    assert files
    for path in files:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_a_truncated_aot_cache_entry_is_reported_and_compiled_again(cache):
    _damage([path for path in (cache / "graphwright" / "aot").iterdir() if not path.name.startswith(".")])
    damaged = _run(cache)
    assert "is unreadable" in damaged.stderr and "compiling the graph again" in damaged.stderr
    assert (damaged.inductor, damaged.aot) == (_inductor(hit=3), {"aot_cache_miss": 2})
    repaired = _run(cache)  # the compile wrote the entries again
    assert (repaired.inductor, repaired.aot) == (_inductor(hit=3), {"aot_cache_hit": 2})


def test_truncated_inductor_cache_entries_are_compiled_again(cache):
    _damage([path for path in (cache / "fxgraph").rglob("*") if path.is_file()])
    damaged = _run(cache)  # the program compared outputs and gradients with eager
    assert "unable to load compiled graph" in damaged.stderr  # Inductor's own warning
    # each signature's lookup through the AOT cache found Inductor's forward damaged, then the
    # compile looked each graph up again
    assert (damaged.inductor, damaged.aot) == (_inductor(miss=5), {"aot_cache_miss": 2})
    repaired = _run(cache)
    assert (repaired.inductor, repaired.aot) == (_inductor(hit=3), {"aot_cache_hit": 2})


def test_the_aot_cache_lives_in_graphwright_cache_dir_and_can_be_turned_off(tmp_path):
    own = tmp_path / "own"
    first = _run(tmp_path / "inductor", {"GRAPHWRIGHT_CACHE_DIR": str(own)})
    assert first.aot == {"aot_cache_miss": 2}
    assert len(list((own / "aot").iterdir())) == 2
    assert not (tmp_path / "inductor" / "graphwright").exists()
    assert _run(tmp_path / "inductor", {"GRAPHWRIGHT_CACHE_DIR": str(own)}).aot == {"aot_cache_hit": 2}
    off = _run(tmp_path / "inductor", {"GRAPHWRIGHT_CACHE_DIR": str(own), "GRAPHWRIGHT_AOT_CACHE": "0"})
    assert (off.inductor, off.aot) == (_inductor(hit=3), {})


def test_force_disable_caches_turns_off_graphwrights_and_inductors_caches(cache):
    off = _run(cache, {"GRAPHWRIGHT_FORCE_DISABLE_CACHES": "1"})
    assert (off.inductor, off.aot) == (_inductor(), {})


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
    found.append({**graphwright.counters["inductor"], **graphwright.counters["aot_cache"]})
print(found)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    first, second = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert first == {"fxgraph_cache_miss": 2, "aot_cache_miss": 1}
    assert second == {"fxgraph_cache_hit": 2, "aot_cache_hit": 1}


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
    assert text.splitlines()[-2:] == ["AOT Cache: aot_cache_miss 1", "Inductor Caches: fxgraph_cache_miss 1"]
