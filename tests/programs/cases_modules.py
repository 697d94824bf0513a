"""Corpus programs for realistic modules: an MLP, a CNN with BatchNorm, a
transformer block, an RNN cell unrolled in a loop, training steps with an
optimizer, containers (ModuleList/ModuleDict/Sequential), module attributes,
and many instances of one class sharing one graph."""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from .harness import Args, Program, module_program, rand

PROGRAMS = []




class MLP(nn.Module):
    def __init__(self, sizes=(8, 16, 16, 4)):
        super().__init__()
        layers = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
        self.net = nn.Sequential(*layers[:-1])

    def forward(self, x):
        return self.net(x)


PROGRAMS.append(module_program(
    "mlp_forward_and_gradients", MLP, lambda: rand(5, 8, requires_grad=True), grad=True,
    changed=lambda: rand(3, 8, requires_grad=True), frames_changed=2))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


def _call_in_mode(world, compiled, args):
    compiled.train(args.kwargs["train"])
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "cnn_with_batchnorm_updates_running_stats", SmallCNN,
    lambda: Args(rand(2, 3, 12, 12, requires_grad=True), train=True), grad=True,
    changed=lambda: Args(rand(2, 3, 12, 12, requires_grad=True), train=False), frames_changed=2,
    call=_call_in_mode))


class TransformerBlock(nn.Module):
    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


PROGRAMS.append(module_program(
    "transformer_block", TransformerBlock, lambda: rand(2, 6, 16, requires_grad=True), grad=True,
    changed=lambda: rand(2, 9, 16, requires_grad=True), frames_changed=2))


def _encoder_layer():
    return nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)


PROGRAMS.append(module_program(
    "torch_transformer_encoder_layer", _encoder_layer, lambda: rand(2, 5, 16, requires_grad=True),
    grad=True))


class UnrolledRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, seq):
        h = seq.new_zeros(seq.shape[1], 8)
        outputs = []
        for t in range(seq.shape[0]):
            h = self.cell(seq[t], h)
            outputs.append(self.out(h))
        return torch.stack(outputs), h


PROGRAMS.append(module_program(
    "rnn_cell_unrolled_over_time", UnrolledRNN, lambda: rand(5, 3, 4, requires_grad=True),
    grad=True, changed=lambda: rand(7, 3, 4, requires_grad=True), frames_changed=2))


class HandWrittenLSTM(nn.Module):
    def __init__(self, size=6):
        super().__init__()
        self.size = size
        self.gates = nn.Linear(2 * size, 4 * size)

    def forward(self, xs):
        h = c = torch.zeros(xs[0].shape[0], self.size)
        for x in xs:
            i, f, g, o = self.gates(torch.cat([x, h], dim=1)).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


PROGRAMS.append(module_program(
    "hand_written_lstm_over_a_list_of_steps", HandWrittenLSTM,
    lambda: ([rand(2, 6, requires_grad=True) for _ in range(4)],), grad=True))


def _training_world(optimizer):
    def make():
        model = MLP((6, 12, 3))
        return model, optimizer(model.parameters())
    return make


def _train_step(world, compiled, args):
    _, optimizer = world
    x, y = args.args
    optimizer.zero_grad()
    loss = F.mse_loss(compiled(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


def _parameters(world):
    return {name: p.detach().clone() for name, p in world[0].named_parameters()}


for _name, _optimizer in [
    ("sgd_momentum", lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9)),
    ("adam", lambda params: torch.optim.Adam(params, lr=0.01)),
]:
    PROGRAMS.append(Program(
        name=f"training_step_with_{_name}_three_steps", make=_training_world(_optimizer),
        inputs=lambda: (rand(8, 6), rand(8, 3)), repeats=3, target=lambda world: world[0],
        call=_train_step, observe=_parameters))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.norms = nn.ModuleDict({"pre": nn.LayerNorm(4), "post": nn.LayerNorm(4)})
        self.tail = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))

    def forward(self, x):
        x = self.norms["pre"](x)
        for i, layer in enumerate(self.layers):
            x = x + layer(x) * (i + 1)
        x = self.layers[-1](x) + len(self.layers)
        for name, norm in self.norms.items():
            if name == "post":
                x = norm(x)
        x = self.tail[0](x)
        return self.tail[1:](x), [m.out_features for m in self.layers]


PROGRAMS.append(module_program(
    "module_list_module_dict_and_sequential", Stack, lambda: rand(3, 4, requires_grad=True),
    grad=True))


class Configured(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.scale = 2.0
        self.use_residual = True
        self.activation = torch.relu

    @property
    def effective_scale(self):
        return self.scale * 2

    def forward(self, x):
        y = self.activation(self.lin(x)) * self.effective_scale
        if self.use_residual:
            y = y + x
        return y


def _flip_residual(world, compiled, args):
    compiled.use_residual = args.kwargs["residual"]
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "module_python_attributes_and_property", Configured,
    lambda: Args(rand(2, 3), residual=True), call=_flip_residual,
    changed=lambda: Args(rand(2, 3), residual=False), frames_changed=2))


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("running", torch.zeros(3))
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        self.steps += 1
        self.running.mul_(0.9).add_(x.detach().mean(0), alpha=0.1)
        return self.lin(x) + self.running


PROGRAMS.append(module_program(
    "module_buffers_updated_in_place", Counter, lambda: rand(4, 3), repeats=3))


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.pos = nn.Parameter(torch.randn(10, 8) * 0.02)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 20, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        return self.head(self.norm(x))


PROGRAMS.append(module_program(
    "embedding_with_tied_head", Embedder, lambda: torch.randint(0, 20, (2, 6)), grad=True))


class Residual(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, *extra, mask=None):
        y = self.inner(x)
        for e in extra:
            y = y + e
        if mask is not None:
            y = y * mask
        return x + y


def _residual():
    return Residual(nn.Sequential(nn.Linear(4, 4), nn.SiLU()))


PROGRAMS.append(module_program(
    "module_forward_with_star_args_and_keyword", _residual,
    lambda: Args(rand(2, 4), rand(2, 4), rand(2, 4), mask=torch.ones(2, 4)),
    changed=lambda: Args(rand(2, 4), mask=None), frames_changed=2))


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        for _ in range(3):
            x = torch.relu(self.block(x))
        return x


PROGRAMS.append(module_program(
    "one_submodule_called_several_times", Shared, lambda: rand(2, 4, requires_grad=True),
    grad=True))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(x + self.lin(x).relu())


def _many_layers():
    # More instances than config.cache_size_limit: sharing must not be per instance.
    return [Layer() for _ in range(20)]


def _through_every_layer(world, compiled, args):
    x = args.args[0]
    for layer in compiled:
        x = layer(x)
    return x


PROGRAMS.append(Program(
    name="many_instances_of_one_module_class_share_one_graph", make=_many_layers,
    inputs=lambda: rand(3, 4, requires_grad=True), call=_through_every_layer, grad=True))


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Derived(Base):
    def forward(self, x):
        return super().forward(x).tanh() + super().forward(-x)


PROGRAMS.append(module_program(
    "subclass_forward_calls_super", Derived, lambda: rand(2, 4, requires_grad=True), grad=True))


class Regularized(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x, target):
        logits = self.body(x)
        penalty = sum(p.pow(2).sum() for p in self.parameters())
        linear_count = sum(1 for m in self.modules() if isinstance(m, nn.Linear))
        names = [name for name, _ in self.named_parameters()]
        return F.cross_entropy(logits, target) + 1e-3 * penalty, linear_count, names


PROGRAMS.append(module_program(
    "loss_with_parameter_penalty_and_module_iteration", Regularized,
    lambda: (rand(5, 4), torch.randint(0, 3, (5,))), grad=True))


def _attention():
    return nn.MultiheadAttention(16, 4, batch_first=True)


PROGRAMS.append(module_program(
    "multihead_attention_module", _attention,
    lambda: Args(rand(2, 5, 16, requires_grad=True), rand(2, 5, 16), rand(2, 5, 16),
                 need_weights=True), grad=True))


class ConvFamily(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1d = nn.Conv1d(2, 4, 3, padding=1)
        self.group_norm = nn.GroupNorm(2, 4)
        self.up = nn.ConvTranspose1d(4, 2, 2, stride=2)

    def forward(self, x):
        y = self.group_norm(self.conv1d(x)).relu()
        y = F.interpolate(y, scale_factor=2, mode="linear", align_corners=False)
        return self.up(y)


PROGRAMS.append(module_program(
    "conv1d_group_norm_interpolate_transposed_conv", ConvFamily,
    lambda: rand(2, 2, 8, requires_grad=True), grad=True))


class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 3)
        self.second = nn.Linear(3, 3)
        self.activations = []
        self.first.register_forward_hook(self._capture)

    def _capture(self, module, inputs, output):
        self.activations.append(output.detach())

    def forward(self, x):
        return self.second(self.first(x).relu())


PROGRAMS.append(module_program(
    "forward_hook_records_activations", Hooked, lambda: rand(2, 3), repeats=2, frames=[1, 2],
    observe=lambda world: list(world.activations)))


class TrainDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x)) + torch.randn_like(x) * 0.1


PROGRAMS.append(module_program(
    "random_ops_follow_the_seeded_generator", TrainDropout, lambda: rand(4, 6)))


class Finfo(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3))

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps
        rms = x.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()
        return x * rms * self.weight


PROGRAMS.append(module_program(
    "rms_norm_with_finfo_eps", Finfo, lambda: rand(2, 3, requires_grad=True), grad=True,
    changed=lambda: rand(2, 3, requires_grad=True).double(), frames_changed=2))


class Variant(nn.Module):
    def __init__(self, scale=1.0, activation=torch.relu, tail=None, train=True, frozen=False):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = scale
        self.activation = activation
        self.tail = tail if tail is not None else nn.Identity()
        self.train(train)
        self.lin.requires_grad_(not frozen)

    def forward(self, x):
        y = self.activation(self.lin(x)) * self.scale
        if self.training:
            y = y + 1
        return self.tail(y)


def _variants(*kwargs_list):
    return lambda: [Variant(**kwargs) for kwargs in kwargs_list]


def _through_each_variant(world, compiled, args):
    return [layer(args.args[0]) for layer in compiled]


for _name, _make, _frames in [
    ("python_constant", _variants(dict(scale=1.0), dict(scale=2.0)), 2),
    ("function_attribute", _variants(dict(activation=torch.relu), dict(activation=torch.tanh)), 2),
    ("submodule_class", _variants(dict(), dict(tail=nn.Tanh())), 2),
    ("training_flag", _variants(dict(train=True), dict(train=False)), 2),
    ("frozen_parameters", _variants(dict(frozen=False), dict(frozen=True)), 2),
    ("nothing_but_weights", _variants(dict(), dict(), dict()), 1),
]:
    PROGRAMS.append(Program(
        name=f"instances_of_one_class_differing_in_{_name}", make=_make,
        inputs=lambda: rand(2, 4, requires_grad=True), call=_through_each_variant, grad=True,
        frames=_frames))


def _each_input(world, compiled, args):
    return [compiled(t) for t in args.args]


# (name, module, first input, two later inputs, frames after them: dynamic=None, dynamic=True).
# A Python loop over a size specialises it, whatever `dynamic` says.
for _name, _make, _first, _later, _automatic, _dynamic in [
    ("mlp_batch_sizes", MLP, lambda: Args(rand(4, 8)), lambda: Args(rand(6, 8), rand(9, 8)), 2, 1),
    ("transformer_sequence_lengths", TransformerBlock, lambda: Args(rand(2, 4, 16)),
     lambda: Args(rand(2, 6, 16), rand(2, 7, 16)), 2, 1),
    ("rnn_loop_lengths", UnrolledRNN, lambda: Args(rand(3, 2, 4)),
     lambda: Args(rand(4, 2, 4), rand(5, 2, 4)), 3, 3),
]:
    PROGRAMS.append(module_program(
        f"automatic_dynamic_{_name}", _make, _first, call=_each_input, changed=_later,
        frames_changed=_automatic))
    PROGRAMS.append(module_program(
        f"dynamic_true_{_name}", _make, _first, call=_each_input, changed=_later,
        frames_changed=_dynamic, options=dict(dynamic=True)))


class TopHooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.seen = []
        self.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
        self.register_forward_hook(self._record)

    def _record(self, module, args, output):
        self.seen.append(output.detach().sum())
        return output + 1

    def forward(self, x):
        return self.lin(x)


PROGRAMS.append(module_program(
    "hooks_on_the_compiled_module_itself", TopHooked, lambda: rand(2, 3), repeats=2,
    frames=[1, 2], observe=lambda world: list(world.seen),
    reference=dict(frames=[3, 4],
                   why="PyTorch compiles each hook of the compiled module as a frame of its own; "
                       "the issue has the whole nn.Module call land in the graph")))


class WithMethods(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()

    def score(self, x, temperature=2.0):
        return (self.forward(x) / temperature).softmax(-1)


for _name, _target in [
    ("bound_forward_method", lambda world: world.forward),
    ("bound_helper_method", lambda world: world.score),
    ("partial_of_a_method", lambda world: functools.partial(world.score, temperature=0.5)),
    ("lambda_around_the_module", lambda world: (lambda x: world(x) * 2)),
]:
    PROGRAMS.append(module_program(
        f"compile_target_is_a_{_name}", WithMethods, lambda: rand(2, 3, requires_grad=True),
        target=_target, grad=True))


PROGRAMS.append(module_program(
    "same_argument_passed_by_keyword_instead_of_position", MLP, lambda: Args(rand(2, 8)),
    changed=lambda: Args(x=rand(2, 8)), frames_changed=1))


class FullyHooked(nn.Module):
    """Forward pre-hook, forward hook, full backward hook and backward pre-hook on the module
    that is compiled: the backward hooks need autograd's wrapping of the call, so the call
    runs as nn.Module runs it, each hook and the forward compiled on its own."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.grads = []
        self.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
        self.register_forward_hook(lambda module, args, output: output + 1)
        self.register_full_backward_pre_hook(self._scale_output_grad)
        self.register_full_backward_hook(self._record_input_grad)

    def _scale_output_grad(self, module, grad_output):
        return (grad_output[0] * 3,)

    def _record_input_grad(self, module, grad_input, grad_output):
        self.grads.append(grad_input[0].detach().clone())
        return (grad_input[0] * 0.5,)

    def forward(self, x):
        return self.lin(x).relu()


PROGRAMS.append(module_program(
    "forward_and_full_backward_hooks_on_the_compiled_module", FullyHooked,
    lambda: rand(2, 3, requires_grad=True), grad=True, frames=[3, 3],
    observe=lambda world: list(world.grads)))


class HookedChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3)
        self.outer = nn.Linear(3, 2)
        self.inner.register_full_backward_hook(lambda module, grad_input, grad_output: (grad_input[0] * 2,))
        self.inner.register_forward_hook(lambda module, args, output: output.tanh())

    def forward(self, x):
        return self.outer(self.inner(x * 2) + 1).sum(-1)


PROGRAMS.append(module_program(
    "full_backward_hook_on_a_submodule_splits_the_forward", HookedChild,
    # the caller's graph before the call, the child's forward, its forward hook, the rest
    lambda: rand(2, 3, requires_grad=True), grad=True, frames=[4, 4], fullgraph=False))


class LazyUser(torch.nn.modules.lazy.LazyModuleMixin, nn.Module):
    """A user's lazy module: its parameter's shape comes from the first input."""

    def __init__(self):
        super().__init__()
        self.weight = nn.UninitializedParameter()

    def initialize_parameters(self, x):
        if self.has_uninitialized_params():
            with torch.no_grad():
                self.weight.materialize((x.shape[-1],))
                nn.init.uniform_(self.weight)

    def forward(self, x):
        return x * self.weight + 1


for _name, _make, _inputs in [
    ("lazy_linear", lambda: nn.LazyLinear(3), lambda: rand(2, 5, requires_grad=True)),
    ("lazy_conv2d", lambda: nn.LazyConv2d(2, 3), lambda: rand(1, 3, 6, 6, requires_grad=True)),
    ("user_lazy_module", LazyUser, lambda: rand(2, 4, requires_grad=True)),
]:
    PROGRAMS.append(module_program(
        f"{_name}_initialized_on_the_first_call", _make, _inputs, grad=True, frames=[1, 1]))

PROGRAMS.append(module_program(
    "lazy_submodules_initialized_on_the_first_call",
    lambda: nn.Sequential(nn.LazyLinear(5), nn.ReLU(), nn.LazyLinear(2)), lambda: rand(2, 4, requires_grad=True),
    grad=True, frames=[0, 1],
    reference=dict(frames=[1, 1],
                   why="PyTorch initializes lazy submodules while tracing, on fake inputs (their "
                       "random draws move before the forward's own); graphwright runs that first "
                       "call as eager does")))


class StepCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        return self.lin(x) * 2


class CachesOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.last = None

    def forward(self, x):
        y = self.lin(x)
        self.last = y.detach()
        return y + 1


class FirstCallFlag(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.first = True

    def forward(self, x):
        if self.first:
            self.first = False
            return self.lin(x)
        return self.lin(x) * 3


for _name, _make, _frames, _observe in [
    # an int attribute of a module stays a constant (PyTorch's allow_unspec_int_on_nn_module)
    ("counter_recompiles_on_each_call", StepCounter, [1, 2, 3], lambda world: world.steps),
    ("cached_tensor_attribute", CachesOutput, [1, 1, 1], lambda world: world.last),
    ("python_flag_flipped_on_the_first_call", FirstCallFlag, [1, 2, 2], lambda world: world.first),
]:
    PROGRAMS.append(module_program(
        f"module_mutating_itself_{_name}", _make, lambda: rand(2, 3), repeats=3, frames=_frames,
        observe=_observe))
