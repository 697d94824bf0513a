"""Restart: from `import torch` to the first training step, in a fresh process whose compiler
caches a first run filled (issue 18).

Each sample is one fresh child process, timed by the child itself from before `import torch`
to after the first training step of two `TransformerBlock`s (`fullgraph=True`,
`backend="inductor"`, forward, backward and an SGD step):
- `restart/transformer2`: each side has its own `TORCHINDUCTOR_CACHE_DIR` (graphwright's AOT
  cache lives inside it), filled by one untimed run of the same child when the workload is set
  up. Target: at most 0.5x PyTorch's. The `eager` side runs the same step uncompiled: what
  importing torch and one eager step cost, below which no compiler's restart can go.
- `restart/transformer2/first`: a new, empty cache folder for every sample: the first run of a
  program. Target: at most 0.7x PyTorch's.
"""
from __future__ import annotations

import os
import pathlib
import shutil
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
elif side == "pytorch":
    compiled = torch.compile(model, fullgraph=True, backend="inductor")
else:
    compiled = model
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


@workload("restart/transformer2", sides=("graphwright", "pytorch", "eager"))
def restart_transformer(side: str):
    """import to first training step of two transformer blocks, caches filled by a first run"""
    cache_dir = tempfile.mkdtemp(prefix=f"restart_{side}_")
    _child(side, cache_dir)
    return lambda: _child(side, cache_dir)


@workload("restart/transformer2/first")
def first_run_transformer(side: str):
    """import to first training step of two transformer blocks, every compiler cache empty"""
    def sample() -> float:
        folder = tempfile.mkdtemp(prefix=f"first_{side}_")
        try:
            return _child(side, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return sample
