"""Restart: from `import torch` to the first training step, in a fresh process whose compiler
caches a first run filled (issue 18).

`restart/transformer2` (warm: each sample is one fresh child process, timed by the child
itself): two `TransformerBlock`s, `fullgraph=True`, `backend="inductor"`, forward, backward and
an SGD step. Each side has its own `TORCHINDUCTOR_CACHE_DIR`, filled by one untimed run of the
same child when the workload is set up; the child's time includes importing torch and the
compiler. Target: at most 0.5x PyTorch's.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

from .harness import workload

_CHILD = r"""
import time
start = time.perf_counter()
import sys
import torch
torch.set_num_threads(1)
from bench.models import TransformerBlock
side = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Sequential(TransformerBlock(), TransformerBlock())
x = torch.randn(8, 64, 256)
if side == "graphwright":
    import graphwright
    compiled = graphwright.compile(model, fullgraph=True, backend="inductor")
else:
    compiled = torch.compile(model, fullgraph=True, backend="inductor")
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
compiled(x).sum().backward()
optimizer.step()
print(time.perf_counter() - start)
"""

_ROOT = pathlib.Path(__file__).resolve().parent.parent


def _child(side: str, cache_dir: str) -> float:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir,
           "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _CHILD, side], env=env, cwd=_ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"restart child [{side}] failed:\n{done.stderr[-4000:]}")
    return float(done.stdout.strip().splitlines()[-1])


@workload("restart/transformer2")
def restart_transformer(side: str):
    """import to first training step of two transformer blocks, caches filled by a first run"""
    cache_dir = tempfile.mkdtemp(prefix=f"restart_{side}_")
    _child(side, cache_dir)
    return lambda: _child(side, cache_dir)
