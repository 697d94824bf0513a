"""Tensor-parallel programs, parallelised as PyTorch's tensor-parallel recipes do.

Used by the distributed DTensor tests (`tests/dtensor_workers.py`) and the
capture benchmark (`bench/workloads_dtensor.py`). Each `Program` builds a
model on a device mesh (seeded, so that every rank and every run builds the
same one), gives each training step's inputs on a rank, and says what the
step's loss is. `compiled` says what is compiled: the model, or the whole
loss function (the model called inside it).

- `mlp`: two linear layers, `ColwiseParallel` then `RowwiseParallel`;
- `sequence_parallel`: a LayerNorm under `SequenceParallel` before a
  column- then row-wise projection, activations sharded on the sequence;
- `transformer_block`: the attention and feed-forward of a transformer block
  with sequence-parallel norms, as PyTorch's tensor-parallel tutorial plans
  them (`bench/tensor_parallel.py`);
- `dtensor_ops`: DTensor's API inside the region (`redistribute`,
  `to_local`, `DTensor.from_local` with a `Partial` placement, `full_tensor`);
- `loss_parallel`: logits sharded on the class dimension, the cross-entropy
  computed by `loss_parallel()` without gathering them;
- `fsdp`: the MLP sharded by FSDP2 (`fully_shard`, its first layer a unit
  of its own), each rank training on its own data;
- `two_d`: FSDP2 over the tensor-parallel transformer block on a 2x2 mesh.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)

from bench.tensor_parallel import parallel_block

DIM = 16
HEADS = 4
BATCH = 2
SEQ = 8
CLASSES = 12


@dataclasses.dataclass(frozen=True)
class Program:
    build: Callable[[DeviceMesh], nn.Module]
    """The parallelised model, the same on every call."""
    batch: Callable[[DeviceMesh, int], tuple]
    """The inputs of training step `step` on this rank (after the model)."""
    loss: Callable[..., torch.Tensor]
    """`loss(model, *batch)`: the step's loss."""
    compiled: str = "model"
    """"model": the model is compiled; "loss": the loss function is."""
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    """Entered around the loss and its backward (`loss_parallel`)."""
    mesh_shape: tuple[int, ...] = (2,)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(DIM, 4 * DIM)
        self.w2 = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return self.w2(F.relu(self.w1(x)))


class NormProjection(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class DTensorOps(nn.Module):
    """DTensor's API in the forward: a weight sharded by rows, gathered, sharded by columns; a
    partial sum made of local values and reduced; rows of every rank gathered."""

    def __init__(self, mesh: DeviceMesh) -> None:
        super().__init__()
        self.mesh = mesh
        self.weight = nn.Parameter(distribute_tensor(torch.randn(DIM, DIM) / DIM, mesh, [Shard(0)]))

    def forward(self, x):
        whole = self.weight.redistribute(self.mesh, [Replicate()])
        local = x @ whole.to_local()
        partial = DTensor.from_local(local, self.mesh, [Partial()])
        summed = partial.redistribute(self.mesh, [Replicate()]).to_local()
        rows = DTensor.from_local(summed.tanh(), self.mesh, [Shard(0)]).full_tensor()
        columns = self.weight.redistribute(self.mesh, [Shard(1)]).to_local()
        return (rows.sum(0) @ columns @ columns.t()).tanh()


def _seeded(build: Callable[[], nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return build()


def _replicated(shape: tuple[int, ...], step: int, salt: int = 0) -> torch.Tensor:
    """The same tensor on every rank of a step."""
    generator = torch.Generator().manual_seed(1000 + 10 * step + salt)
    return torch.randn(shape, generator=generator)


def _sequence_shard(mesh: DeviceMesh, step: int, dp_rank: int = 0) -> torch.Tensor:
    """This rank's part (on the sequence dimension) of a batch the same on every tensor-parallel rank."""
    whole = _replicated((BATCH, SEQ, DIM), step, salt=dp_rank)
    return whole.chunk(mesh.size(), dim=1)[mesh.get_local_rank()]


def _squares(model, x):
    return model(x).pow(2).mean()


def _build_mlp(mesh):
    return parallelize_module(_seeded(MLP), mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})


def _build_sequence_parallel(mesh):
    return parallelize_module(_seeded(NormProjection), mesh, {
        "norm": SequenceParallel(),
        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(output_layouts=Shard(1)),
    })


def _build_block(mesh):
    return _seeded(lambda: parallel_block(mesh, DIM, HEADS))


def _build_dtensor_ops(mesh):
    torch.manual_seed(0)
    return DTensorOps(mesh)


def _build_logits(mesh):
    """Logits sharded on the classes (a DTensor), as `loss_parallel` takes them."""
    model = _seeded(lambda: nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.ReLU(), nn.Linear(4 * DIM, CLASSES)))
    return parallelize_module(model, mesh, {"2": ColwiseParallel(use_local_output=False)})


def _cross_entropy(model, x, target):
    return F.cross_entropy(model(x), target)


def _build_fsdp(mesh):
    from torch.distributed.fsdp import fully_shard

    model = _seeded(MLP)
    fully_shard(model.w1, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def _build_two_d(mesh):
    from torch.distributed.fsdp import fully_shard

    return fully_shard(_seeded(lambda: parallel_block(mesh["tp"], DIM, HEADS)), mesh=mesh["dp"])


PROGRAMS: dict[str, Program] = {
    "mlp": Program(_build_mlp, lambda mesh, step: (_replicated((BATCH, DIM), step),), _squares),
    "sequence_parallel": Program(_build_sequence_parallel, lambda mesh, step: (_sequence_shard(mesh, step),),
                                 _squares),
    "transformer_block": Program(_build_block, lambda mesh, step: (_sequence_shard(mesh, step),), _squares),
    "dtensor_ops": Program(_build_dtensor_ops, lambda mesh, step: (_replicated((BATCH, DIM), step),), _squares,
                           compiled="loss"),
    "loss_parallel": Program(
        _build_logits,
        lambda mesh, step: (_replicated((BATCH, DIM), step), torch.arange(BATCH) * 5 % CLASSES + step),
        _cross_entropy, compiled="loss", context=loss_parallel),
    "fsdp": Program(_build_fsdp, lambda mesh, step: (_replicated((BATCH, DIM), step, salt=mesh.get_local_rank()),),
                    _squares),
    "two_d": Program(_build_two_d, lambda mesh, step: (_sequence_shard(mesh["tp"], step, mesh["dp"].get_local_rank()),),
                     _squares, mesh_shape=(2, 2)),
}
