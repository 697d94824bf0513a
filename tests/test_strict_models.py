"""Realistic models through the strict tracer: a small GPT trained for a few steps, eager vs compiled."""
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

import graphwright
from graphwright.testing import CompileCounter


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd=32, n_head=4, block_size=16):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(0.1)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))
    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(32), CausalSelfAttention(), nn.LayerNorm(32)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(32, 128), c_proj=nn.Linear(128, 32), act=nn.GELU(approximate="tanh")))
    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        return x + m.c_proj(m.act(m.c_fc(self.ln_2(x))))
class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(50, 32), nn.Embedding(16, 32)
        self.h = nn.ModuleList([Block() for _ in range(3)])
        self.lm_head = nn.Linear(32, 50, bias=False)
        self.wte.weight = self.lm_head.weight
    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(x)
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def test_gpt_training_steps_match_eager_and_new_lengths_reuse_one_symbolic_graph():
    graphwright.reset()
    torch.manual_seed(0)
    eager = GPT()
    model = copy.deepcopy(eager)
    counter = CompileCounter()
    compiled = graphwright.compile(model, backend=counter, fullgraph=True)
    opt_eager = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    opt_compiled = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(4):
        idx, targets = torch.randint(0, 50, (2, 8 + step)), torch.randint(0, 50, (2, 8 + step))
        torch.manual_seed(step)
        loss_eager = eager(idx, targets)[1]
        torch.manual_seed(step)
        loss_compiled = compiled(idx, targets)[1]
        torch.testing.assert_close(loss_compiled, loss_eager)
        for loss, opt in ((loss_eager, opt_eager), (loss_compiled, opt_compiled)):
            loss.backward()
            opt.step()
            opt.zero_grad()
    for compiled_param, eager_param in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(compiled_param, eager_param)
    assert counter.frame_count == 2  # the second length makes it symbolic; later lengths reuse it
