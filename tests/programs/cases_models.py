"""Corpus programs shaped like real models: a small GPT, a ResNet stage,
a LoRA adapter, a VAE, a mixture of experts, activation checkpointing, a
custom autograd.Function, weight norm, losses, an evaluation loop,
gradient clipping, parameter containers, an EMA teacher update, a whole
training step, fifty small layers, a dataclass model output, a LLaMA block
with complex rotary embeddings, gradient hooks, a gradient penalty and an
explicit random generator."""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from .harness import Args, Program, function_program, module_program, rand

PROGRAMS = []




@dataclasses.dataclass(frozen=True)
class GPTConfig:
    vocab: int = 32
    context: int = 8
    dim: int = 16
    heads: int = 2
    layers: int = 2
    bias: bool = True


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=cfg.bias)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=cfg.bias)
        self.register_buffer("mask", torch.tril(torch.ones(cfg.context, cfg.context)).bool())

    def forward(self, x):
        b, t, c = x.size()
        heads = self.cfg.heads
        q, k, v = self.qkv(x).split(self.cfg.dim, dim=2)
        q = q.view(b, t, heads, c // heads).transpose(1, 2)
        k = k.view(b, t, heads, c // heads).transpose(1, 2)
        v = v.view(b, t, heads, c // heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class GPTBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.dim)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.dim)
        self.mlp = nn.ModuleDict(dict(fc=nn.Linear(cfg.dim, 4 * cfg.dim),
                                      proj=nn.Linear(4 * cfg.dim, cfg.dim)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp.proj(F.gelu(self.mlp.fc(self.ln_2(x)), approximate="tanh"))


class TinyGPT(nn.Module):
    def __init__(self, cfg=GPTConfig()):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.dim)
        self.wpe = nn.Embedding(cfg.context, cfg.dim)
        self.blocks = nn.ModuleList([GPTBlock(cfg) for _ in range(cfg.layers)])
        self.ln_f = nn.LayerNorm(cfg.dim)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab, bias=False)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.cfg.context, f"sequence of {t} is longer than {self.cfg.context}"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def _tokens(t):
    return lambda: (torch.randint(0, 32, (2, t)), torch.randint(0, 32, (2, t)))


PROGRAMS.append(module_program(
    "tiny_gpt_with_loss", TinyGPT, _tokens(6), grad=True,
    changed=lambda: (torch.randint(0, 32, (2, 6)), None), frames_changed=2))


class BasicBlock(nn.Module):
    def __init__(self, fan_in, fan_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(fan_in, fan_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(fan_out)
        self.conv2 = nn.Conv2d(fan_out, fan_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(fan_out)
        self.downsample = None
        if stride != 1 or fan_in != fan_out:
            self.downsample = nn.Sequential(nn.Conv2d(fan_in, fan_out, 1, stride, bias=False),
                                            nn.BatchNorm2d(fan_out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


def _resnet_stage():
    return nn.Sequential(BasicBlock(3, 8, 2), BasicBlock(8, 8, 1))


PROGRAMS.append(module_program(
    "resnet_stage_with_downsample", _resnet_stage, lambda: rand(2, 3, 8, 8, requires_grad=True),
    grad=True))


class LoRALinear(nn.Module):
    def __init__(self, fan_in=6, fan_out=6, rank=2, alpha=4.0):
        super().__init__()
        self.base = nn.Linear(fan_in, fan_out)
        self.base.requires_grad_(False)
        self.down = nn.Parameter(torch.randn(rank, fan_in) * 0.1)
        self.up = nn.Parameter(torch.randn(fan_out, rank) * 0.1)
        self.scaling = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.down.T @ self.up.T) * self.scaling


PROGRAMS.append(module_program(
    "lora_adapter_over_a_frozen_linear", LoRALinear, lambda: rand(3, 6), grad=True))


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 2 * 3)
        self.decoder = nn.Sequential(nn.Linear(3, 8), nn.Sigmoid())

    def forward(self, x):
        mu, logvar = self.encoder(x).chunk(2, dim=-1)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        recon = self.decoder(z)
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return recon, F.binary_cross_entropy(recon, x.sigmoid(), reduction="sum") + kl


PROGRAMS.append(module_program(
    "vae_with_reparameterisation", VAE, lambda: rand(4, 8), grad=True))


class DenseMixtureOfExperts(nn.Module):
    def __init__(self, dim=6, experts=4, top=2):
        super().__init__()
        self.top = top
        self.gate = nn.Linear(dim, experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(experts))

    def forward(self, x):
        weights, chosen = self.gate(x).topk(self.top, dim=-1)
        weights = weights.softmax(-1)
        outputs = torch.stack([expert(x) for expert in self.experts], dim=1)
        picked = outputs.gather(1, chosen.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        return (picked * weights.unsqueeze(-1)).sum(1)


PROGRAMS.append(module_program(
    "dense_mixture_of_experts_with_topk_routing", DenseMixtureOfExperts,
    lambda: rand(5, 6, requires_grad=True), grad=True))


class Checkpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False) + x


PROGRAMS.append(module_program(
    "activation_checkpointing", Checkpointed, lambda: rand(3, 4, requires_grad=True), grad=True))


class StraightThroughRound(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, grad):
        return grad


class Quantized(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(StraightThroughRound.apply(x * 4) / 4)


PROGRAMS.append(module_program(
    "custom_autograd_function_straight_through", Quantized,
    lambda: rand(3, 4, requires_grad=True), grad=True))


def _weight_normed():
    return nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))


PROGRAMS.append(module_program(
    "weight_norm_parametrization", _weight_normed, lambda: rand(2, 4, requires_grad=True),
    grad=True))


class Losses(nn.Module):
    def __init__(self):
        super().__init__()
        self.ce = nn.CrossEntropyLoss(label_smoothing=0.1)
        self.bce = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0, 1.0, 0.5]))

    def forward(self, logits, labels, multi):
        return (self.ce(logits, labels) + self.bce(logits, multi)
                + F.kl_div(logits.log_softmax(-1), multi.softmax(-1), reduction="batchmean")
                + F.smooth_l1_loss(logits, multi))


PROGRAMS.append(module_program(
    "classification_losses", Losses,
    lambda: (rand(4, 3, requires_grad=True), torch.randint(0, 3, (4,)), torch.rand(4, 3)),
    grad=True))


def evaluate(model, batches):
    model.eval()
    correct = 0
    total = 0
    with torch.no_grad():
        for x, y in batches:
            correct = correct + (model(x).argmax(-1) == y).sum()
            total += y.numel()
    model.train()
    return correct.float() / total, model.training


def _classifier():
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 3))


PROGRAMS.append(Program(
    name="evaluation_loop_over_batches_switches_modes", make=_classifier,
    target=lambda world: evaluate,
    inputs=lambda: [(rand(4, 5), torch.randint(0, 3, (4,))) for _ in range(3)],
    call=lambda world, compiled, args: compiled(world, args.args[0])))


def _gradients_of_a_step():
    torch.manual_seed(5)
    model = nn.Linear(4, 3)
    model(torch.randn(6, 4)).pow(2).sum().backward()
    return model


def clip_gradients(model, max_norm):
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    factor = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(factor)
    return total


PROGRAMS.append(Program(
    name="hand_written_gradient_clipping_mutates_grads", make=_gradients_of_a_step,
    target=lambda world: clip_gradients, inputs=lambda: (0.5,),
    call=lambda world, compiled, args: compiled(world, *args.args),
    observe=lambda world: [p.grad.clone() for p in world.parameters()], repeats=1))


PROGRAMS.append(function_program(
    "torch_clip_grad_norm_utility", torch.nn.utils.clip_grad_norm_,
    lambda: ([p for p in _gradients_of_a_step().parameters()], 0.5), fullgraph=False))


class ParameterContainers(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = nn.ParameterList([nn.Parameter(torch.randn(3)) for _ in range(3)])
        self.biases = nn.ParameterDict({"pre": nn.Parameter(torch.zeros(3)),
                                        "post": nn.Parameter(torch.ones(3))})
        self.register_buffer("offset", None)

    def forward(self, x):
        x = x + self.biases["pre"]
        for scale in self.scales:
            x = x * scale
        if self.offset is not None:
            x = x + self.offset
        return x + self.biases["post"], len(self.scales), sorted(self.biases.keys())


PROGRAMS.append(module_program(
    "parameter_list_parameter_dict_and_none_buffer", ParameterContainers,
    lambda: rand(2, 3, requires_grad=True), grad=True))


def _teacher_and_student():
    return nn.Linear(3, 3), nn.Linear(3, 3)


@torch.no_grad()
def ema_update(teacher, student, decay):
    for p_t, p_s in zip(teacher.parameters(), student.parameters()):
        p_t.mul_(decay).add_(p_s, alpha=1 - decay)


def _ema_step(world, compiled, args):
    teacher, student = world
    compiled(teacher, student, *args.args)
    return teacher(torch.ones(1, 3))


PROGRAMS.append(Program(
    name="ema_update_of_teacher_parameters_under_no_grad", make=_teacher_and_student,
    target=lambda world: ema_update, inputs=lambda: (0.9,), call=_ema_step, repeats=3,
    observe=lambda world: world[0].state_dict()))


def _whole_training_step_world():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


def _compiled_whole_step(world, compiled, args):
    return compiled(*world, *args.args)


def training_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


PROGRAMS.append(Program(
    name="whole_training_step_compiled_breaks_at_backward", make=_whole_training_step_world,
    target=lambda world: training_step, inputs=lambda: (rand(6, 4), rand(6, 1)),
    call=_compiled_whole_step, repeats=3, fullgraph=False, frames=3,
    observe=lambda world: world[0].state_dict()))


def _adam_training_step_world():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    return model, torch.optim.Adam(model.parameters(), lr=0.05, amsgrad=True)


PROGRAMS.append(Program(
    name="whole_training_step_with_adam_makes_its_state_once", make=_adam_training_step_world,
    target=lambda world: training_step, inputs=lambda: (rand(6, 4), rand(6, 1)),
    call=_compiled_whole_step, repeats=3, fullgraph=False, frames=3,
    observe=lambda world: (world[0].state_dict(), world[1].state_dict())))


class FiftyLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(50))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) if i % 2 else torch.tanh(layer(x))
        return x


PROGRAMS.append(module_program(
    "python_heavy_loop_over_fifty_small_layers", FiftyLayers,
    lambda: rand(2, 4, requires_grad=True), grad=True))


@dataclasses.dataclass
class ClassifierOutput:
    logits: torch.Tensor
    loss: torch.Tensor | None = None
    hidden: tuple = ()


class HFStyle(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(5, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x, labels=None, return_dict=True):
        hidden = torch.relu(self.body(x))
        logits = self.head(hidden)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        if not return_dict:
            return (logits, loss)
        return ClassifierOutput(logits=logits, loss=loss, hidden=(hidden,))


PROGRAMS.append(module_program(
    "dataclass_output_built_inside_forward", HFStyle,
    lambda: Args(rand(4, 5, requires_grad=True), labels=torch.randint(0, 3, (4,))), grad=True,
    changed=lambda: Args(rand(4, 5), return_dict=False), frames_changed=2))


def _rotary(x, base=10000.0):
    batch, length, heads, dim = x.shape
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    freqs = torch.outer(torch.arange(length).float(), inv_freq)
    rotation = torch.polar(torch.ones_like(freqs), freqs)
    pairs = torch.view_as_complex(x.float().reshape(batch, length, heads, -1, 2))
    rotated = torch.view_as_real(pairs * rotation[None, :, None, :]).flatten(3)
    return rotated.type_as(x)


class LlamaBlock(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.norm = nn.RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.w1 = nn.Linear(dim, 2 * dim, bias=False)
        self.w2 = nn.Linear(2 * dim, dim, bias=False)
        self.w3 = nn.Linear(dim, 2 * dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.norm(x)
        q = _rotary(self.wq(h).view(b, t, self.heads, -1))
        k = _rotary(self.wk(h).view(b, t, self.heads, -1))
        v = self.wv(h).view(b, t, self.heads, -1)
        attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2), is_causal=True)
        x = x + attn.transpose(1, 2).reshape(b, t, d)
        return x + self.w2(F.silu(self.w1(x)) * self.w3(x))


PROGRAMS.append(module_program(
    "llama_block_with_complex_rotary_embeddings_and_swiglu", LlamaBlock,
    lambda: rand(2, 5, 8, requires_grad=True), grad=True))


def _max_norm_embedding():
    return nn.Embedding(10, 4, max_norm=1.0)


PROGRAMS.append(module_program(
    "embedding_max_norm_renormalises_its_weight_in_place", _max_norm_embedding,
    lambda: torch.tensor([[1, 2, 3], [3, 4, 1]]), repeats=2))


class TensorHooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        y.register_hook(lambda grad: grad * 0.5)
        return y.tanh()


PROGRAMS.append(module_program(
    "gradient_hook_registered_on_an_intermediate", TensorHooked,
    lambda: rand(2, 3, requires_grad=True), grad=True))


def gradient_penalty(critic, real):
    real = real.requires_grad_(True)
    score = critic(real).sum()
    (grad,) = torch.autograd.grad(score, real, create_graph=True)
    return ((grad.norm(2, dim=1) - 1) ** 2).mean()


PROGRAMS.append(Program(
    name="gradient_penalty_with_autograd_grad",
    make=lambda: nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)),
    target=lambda world: gradient_penalty, inputs=lambda: (rand(5, 3),),
    call=lambda world, compiled, args: compiled(world, *args.args), fullgraph=False, frames=2))


def sample_with_generator(x, generator):
    noise = torch.randn(x.shape, generator=generator)
    keep = torch.bernoulli(torch.full_like(x, 0.5), generator=generator)
    return x * keep + noise


def _seeded_generator():
    return torch.Generator().manual_seed(123)


PROGRAMS.append(Program(
    name="explicit_generator_state_advances", make=_seeded_generator,
    target=lambda world: sample_with_generator, inputs=lambda: (rand(4),), repeats=3,
    call=lambda world, compiled, args: compiled(*args.args, world),
    observe=lambda world: world.get_state(), fullgraph=False, frames=2))


class ScaledClamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, low, high, scale):
        ctx.save_for_backward(x)
        ctx.low, ctx.high, ctx.scale = low, high, scale
        clamped = x.clamp(low, high)
        mask = (x >= low) & (x <= high)
        ctx.mark_non_differentiable(mask)
        return clamped * scale, mask

    @staticmethod
    def backward(ctx, grad, _mask_grad):
        (x,) = ctx.saved_tensors
        inside = (x >= ctx.low) & (x <= ctx.high)
        grad_x = grad * ctx.scale * inside if ctx.needs_input_grad[0] else None
        return grad_x, None, None, None


class CustomOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y, mask = ScaledClamp.apply(self.lin(x), -0.5, 0.5, 3.0)
        return y, mask, y.sum() * mask.float().mean()


PROGRAMS.append(module_program(
    "autograd_function_with_saved_tensors_and_non_differentiable_outputs", CustomOps,
    lambda: rand(3, 4, requires_grad=True), grad=True))
