"""The models the benchmark workloads run, shared by every workload file."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """`depth` Linear+ReLU layers of width `dim`."""

    def __init__(self, dim: int = 256, depth: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.relu(layer(x))
        return x


class TransformerBlock(nn.Module):
    """Pre-norm self-attention plus feed-forward, written out op by op."""

    def __init__(self, dim: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, 4 * dim)
        self.ff2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / (dim // self.heads) ** 0.5
        attn = scores.softmax(dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, dim))
        return x + self.ff2(F.gelu(self.ff1(self.norm2(x))))


class ManySmallLayers(nn.Module):
    """A Python-heavy loop over `count` tiny layers."""

    def __init__(self, count: int = 50, dim: int = 16) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(count))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x) if i % 2 == 0 else torch.tanh(layer(x))
        return x


def mlp_and_input(batch: int = 32, dim: int = 256) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return MLP(dim), torch.randn(batch, dim)


def transformer_and_input(batch: int = 8, seq: int = 64, dim: int = 256) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return TransformerBlock(dim, heads=4), torch.randn(batch, seq, dim)


def many_layers_and_input(batch: int = 8) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return ManySmallLayers(), torch.randn(batch, 16)
