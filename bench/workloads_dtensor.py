"""Capture of a tensor-parallel transformer block: graphwright.compile vs torch.compile.

- `strict/tp-block/capture` (cold, fresh process, imports and the process
  group excluded): the first compiled call of the block of
  `bench/tensor_parallel.py` (dim 256, 4 heads, its input 8 x 64 sharded on
  the sequence), parallelised over a mesh of two ranks, minus an eager call:
  the time spent capturing, both sides with `backend="eager"` and
  `fullgraph=True`. Target (issue 24): at most 0.5x PyTorch's.
- `aot/tp-block/first` (cold): the same first call with `aot_eager`, under
  `no_grad` off (a training signature: capture, the joint trace through
  DTensor's dispatch and its functional collectives, the partition).

The two ranks are PyTorch's fake process group in this one process (rank 0;
collectives return without communicating), so that a sample is one process.
"""
from __future__ import annotations

import torch

from .harness import workload
from .timing import timed

_DIM, _HEADS, _BATCH, _SEQ = 256, 4, 8, 64


def _block_and_input():
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from .tensor_parallel import parallel_block

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    torch.manual_seed(0)
    return parallel_block(mesh, _DIM, _HEADS), torch.randn(_BATCH, _SEQ // 2, _DIM)


def _compile(side: str, model: torch.nn.Module, backend: str) -> torch.nn.Module:
    if side == "graphwright":
        import graphwright

        return graphwright.compile(model, backend=backend, fullgraph=True)
    return torch.compile(model, backend=backend, fullgraph=True)


@workload("strict/tp-block/capture", cold=True)
def capture(side: str):
    """first compiled call of the tensor-parallel block minus an eager call (capture time)"""
    model, x = _block_and_input()
    with torch.no_grad():
        model(x)  # warm the eager kernels so the first compiled call pays only for capture
        eager_time = min(timed(lambda: model(x)) for _ in range(3))
        compiled = _compile(side, model, "eager")

    def sample() -> float:
        with torch.no_grad():
            return timed(lambda: compiled(x)) - eager_time

    return sample


@workload("aot/tp-block/first", cold=True)
def first_training_call(side: str):
    """first compiled call of the tensor-parallel block with aot_eager, for training"""
    model, x = _block_and_input()
    model(x)
    eager_time = min(timed(lambda: model(x)) for _ in range(3))
    compiled = _compile(side, model, "aot_eager")
    return lambda: timed(lambda: compiled(x)) - eager_time
