"""A transformer block planned for tensor parallelism as PyTorch's tensor-parallel tutorial plans it.

Shared by the capture benchmark (`workloads_dtensor.py`) and the distributed
tests (`tests/dtensor_programs.py`). The block's attention and feed-forward
are split column- then row-wise across the mesh, its LayerNorms run
sequence-parallel (`SequenceParallel`, activations sharded on the sequence
dimension between the parts), and q, k and v stay DTensors
(`use_local_output=False`) so that the attention's `view` takes the heads of
this rank. Attention is written out: DTensor has no sharding rule for the
CPU's fused attention kernel.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        batch, seq, _ = x.shape
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        # -1 heads: all of them, or the heads of this rank when q, k and v are sharded
        q, k, v = (t.view(batch, seq, -1, self.head_dim).transpose(1, 2) for t in (q, k, v))
        weights = (q @ k.transpose(-2, -1) * self.head_dim ** -0.5).softmax(dim=-1)
        out = weights @ v
        return self.wo(out.transpose(1, 2).contiguous().view(batch, seq, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, 4 * dim, bias=False)
        self.w2 = nn.Linear(4 * dim, dim, bias=False)
        self.w3 = nn.Linear(dim, 4 * dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(dim)
        self.attention = Attention(dim, heads)
        self.ffn_norm = nn.LayerNorm(dim)
        self.feed_forward = FeedForward(dim)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


def block_plan() -> dict:
    """The tutorial's plan for one block: its input and output are sharded on the sequence."""
    return {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.wq": ColwiseParallel(use_local_output=False),
        "attention.wk": ColwiseParallel(use_local_output=False),
        "attention.wv": ColwiseParallel(use_local_output=False),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward.w3": ColwiseParallel(),
    }


def parallel_block(mesh: DeviceMesh, dim: int, heads: int) -> nn.Module:
    """A `TransformerBlock` (built from the current seed) parallelised over the 1-D `mesh`."""
    return parallelize_module(TransformerBlock(dim, heads), mesh, block_plan())
