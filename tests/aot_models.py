"""Small models and a training-step checker shared by the AOT autograd tests.

The graphs handed to a backend are torch-level graphs from
`torch.fx.symbolic_trace` (tests only), so module parameters are owned by
the graph module and lifted by AOT autograd; `strict_style_graph` builds the
other layout, the strict tracer's, where parameters are graph inputs.
"""
from __future__ import annotations

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(torch.relu(self.fc1(x)))))


class ConvNet(nn.Module):
    """Conv, BatchNorm (running stats are mutated buffers) and dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(self.drop(torch.flatten(x, 1)))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads, self.dim = heads, dim
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp1 = nn.Linear(dim, 4 * dim)
        self.mlp2 = nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        batch, seq, head_dim = x.size(0), x.size(1), self.dim // self.heads
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(batch, seq, self.heads, head_dim).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / head_dim**0.5
        attended = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, seq, self.dim)
        x = x + self.drop(self.proj(attended))
        return x + self.drop(self.mlp2(F.gelu(self.mlp1(self.ln2(x)))))


class GRULoop(nn.Module):
    """A GRU cell written out and applied over time steps in a Python loop."""

    def __init__(self, features: int = 8, hidden: int = 12, steps: int = 5) -> None:
        super().__init__()
        self.hidden, self.steps = hidden, steps
        self.input_gates = nn.Linear(features, 3 * hidden)
        self.hidden_gates = nn.Linear(hidden, 3 * hidden)
        self.head = nn.Linear(hidden, 2)

    def forward(self, x):
        h = x.new_zeros(x.size(0), self.hidden)
        for t in range(self.steps):
            xr, xz, xn = self.input_gates(x[:, t]).chunk(3, dim=1)
            hr, hz, hn = self.hidden_gates(h).chunk(3, dim=1)
            r = torch.sigmoid(xr + hr)
            z = torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            h = (1 - z) * n + z * h
        return self.head(h)


MODELS = {
    "mlp": (MLP, lambda: torch.randn(8, 16)),
    "cnn_batchnorm_dropout": (ConvNet, lambda: torch.randn(4, 3, 8, 8)),
    "transformer_block": (lambda: TransformerBlock(dropout=0.1), lambda: torch.randn(2, 6, 32)),
    "gru_loop": (GRULoop, lambda: torch.randn(3, 5, 8)),
}


def check_training_steps(
    model_cls, make_input, backend, *, steps: int = 3, atol=1e-5, rtol=1e-4, compile_module=None
):
    """Train an eager copy and a compiled copy side by side from the same seeds.

    After every step outputs, every parameter's gradient and every buffer
    must match; after the last one, the parameters too. The compiled copy is
    `backend(symbolic_trace(model), [x])`, or `compile_module(model)` when
    given. Returns the compiled callable for further inspection.
    """
    torch.manual_seed(0)
    eager_model = model_cls()
    compiled_model = copy.deepcopy(eager_model)
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9)
    compiled_opt = torch.optim.SGD(compiled_model.parameters(), lr=0.1, momentum=0.9)
    x = make_input()
    if compile_module is not None:
        compiled = compile_module(compiled_model)
    else:
        compiled = backend(torch.fx.symbolic_trace(compiled_model), [x])
    for step in range(steps):
        torch.manual_seed(100 + step)
        expected = eager_model(x)
        torch.manual_seed(100 + step)
        actual = compiled(x)
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
        (expected**2).mean().backward()
        (actual**2).mean().backward()
        for (name, p_eager), p_compiled in zip(eager_model.named_parameters(), compiled_model.parameters()):
            torch.testing.assert_close(p_compiled.grad, p_eager.grad, atol=atol, rtol=rtol, msg=name)
        for b_eager, b_compiled in zip(eager_model.buffers(), compiled_model.buffers()):
            torch.testing.assert_close(b_compiled, b_eager, atol=atol, rtol=rtol)
        eager_opt.step()
        compiled_opt.step()
        eager_opt.zero_grad()
        compiled_opt.zero_grad()
    for p_eager, p_compiled in zip(eager_model.parameters(), compiled_model.parameters()):
        torch.testing.assert_close(p_compiled, p_eager, atol=atol, rtol=rtol)
    return compiled


def graph_of(fn) -> torch.fx.GraphModule:
    """A torch-level graph of a small Python function (tests only)."""
    return torch.fx.symbolic_trace(fn)


def aten_targets(gm: torch.fx.GraphModule) -> set[str]:
    return {
        str(n.target) for n in gm.graph.nodes if n.op == "call_function" and hasattr(n.target, "_schema")
    }


def clone_inputs(inputs):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]

