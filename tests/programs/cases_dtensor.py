"""Corpus programs about DTensor in one process: DTensor inputs and parameters desugared into
their local tensors, DTensor's API in the region (`redistribute`, `to_local`,
`DTensor.from_local`, `full_tensor`), placements and meshes as guarded constants.

The mesh spans a world of two ranks made by PyTorch's fake process group
(rank 0 of it: collectives run, each the same way eagerly and compiled); the
programs trained across real processes are in `tests/test_distributed_dtensor.py`.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.testing._internal.distributed.fake_pg import FakeStore

from .harness import module_program, program_decorator, rand

PROGRAMS = []


program = program_decorator(PROGRAMS)


MESHES = {}
"""The mesh of two ranks, made once by the first program's inputs; the programs read it as a
global (a compiled graph holds it, guarded by identity)."""


def make_mesh():
    if "2" not in MESHES:
        if not dist.is_initialized():
            dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
        MESHES["2"] = init_device_mesh("cpu", (2,))
    return MESHES["2"]


def sharded(*shape: int, placement=Shard(0), requires_grad: bool = False) -> DTensor:
    return DTensor.from_local(torch.randn(*shape), make_mesh(), [placement]).requires_grad_(requires_grad)


def local(*shape: int, requires_grad: bool = False) -> torch.Tensor:
    make_mesh()
    return rand(*shape, requires_grad=requires_grad)


@program("dtensor_input_desugared_into_its_local_tensor_with_gradients",
         lambda: (sharded(4, 3, requires_grad=True), rand(3, requires_grad=True)), backend="aot_eager", grad=True)
def _(x, w):
    return (x.sin().redistribute(placements=[Replicate()]).to_local() * w).sum(0)


@program("dtensor_made_in_the_region_from_a_local_tensor_and_returned", lambda: local(4, 3),
         backend="aot_eager", reference={
             "why": "torch.compile 2.13 rebuilds a DTensor it returns with the shape in its spec a tuple",
             "xfail": "output[0].context[1][0]: type <class 'tuple'> != <class 'torch.Size'>"})
def _(t):
    d = DTensor.from_local(t.cos(), MESHES["2"], [Shard(0)])
    return d * 2, d.full_tensor()


@program("partial_dtensor_reduced_in_the_region", lambda: local(3, requires_grad=True), backend="aot_eager",
         grad=True)
def _(t):
    partial = DTensor.from_local(t * 3, MESHES["2"], [Partial()])
    return partial.redistribute(MESHES["2"], [Replicate()]).to_local() + 1


@program("dtensor_placements_read_in_the_region_recompile_for_others", lambda: sharded(4, 2),
         changed=lambda: sharded(4, 2, placement=Replicate()), frames_changed=2, backend="aot_eager")
def _(x):
    if x.placements[0].is_shard():
        return x.full_tensor() * 2
    return x.to_local() - 1


def _column_then_row() -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    return parallelize_module(model, make_mesh(), {"0": ColwiseParallel(), "2": RowwiseParallel()})


class _ColumnThenRow(torch.nn.Module):
    """The layers, their output computed on (an AsyncCollectiveTensor, which eager returns for a
    collective not waited for yet, comes back from a compiled graph as a plain tensor)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = _column_then_row()

    def forward(self, x):
        return self.layers(x).tanh()


PROGRAMS.append(module_program("tensor_parallel_linear_layers_train_through_aot", _ColumnThenRow,
                               lambda: rand(2, 4), backend="aot_eager", grad=True))
