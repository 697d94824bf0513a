"""Corpus: PyTorch's control-flow and function-transform operators inside a compiled region.

`torch.cond` with tensor, symbolic and Python predicates (both branches captured, nested,
reading parameters); `torch.func` transforms (vmap with in_dims/out_dims and nesting,
grad, grad_and_value, vjp, jacrev, per-sample gradients); `functional_call` (a module called
with given parameters, ensembling under vmap); activation checkpointing; user
`torch.autograd.Function`s (setup_context, ctx attributes, once_differentiable, custom
gradients that are not the true ones). Each with gradients, in one graph.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call
from torch.utils.checkpoint import checkpoint

from .harness import Program, module_program, program_decorator, rand

PROGRAMS: list[Program] = []
program = program_decorator(PROGRAMS)


# torch.cond

@program("cond_with_a_tensor_predicate_and_gradients_through_both_branches",
         lambda: (rand(3, requires_grad=True), rand(3, requires_grad=True)),
         changed=lambda: (-rand(3).abs().requires_grad_(), rand(3, requires_grad=True)), frames_changed=1,
         grad=True)
def _(x, w):
    return torch.cond(x.sum() > 0, lambda t: (t * w).sin(), lambda t: t.cos() - w, (x,))


@program("cond_on_a_symbolic_size_keeps_both_branches", lambda: rand(3, 2, requires_grad=True),
         changed=lambda: rand(6, 2, requires_grad=True), frames_changed=1, grad=True,
         options={"dynamic": True})
def _(x):
    return torch.cond(x.shape[0] > 4, lambda t: t.sum(0, keepdim=True) * t, lambda t: t * 2, (x,))


@program("cond_with_a_python_predicate_takes_one_branch", lambda: (rand(3, requires_grad=True), True),
         changed=lambda: (rand(3, requires_grad=True), False), frames_changed=2, grad=True)
def _(x, flag):
    return torch.cond(flag, lambda t: t.exp(), lambda t: t.tanh(), (x,))


@program("nested_cond_returning_tuples", lambda: (rand(4, requires_grad=True), rand(4)),
         changed=lambda: (-rand(4).abs().requires_grad_(), rand(4)), frames_changed=1, grad=True)
def _(x, y):
    def inner_true(a, b):
        return a * b, a + b

    def inner_false(a, b):
        return a - b, a.sin()

    def outer_true(a, b):
        return torch.cond(b.mean() > 0, inner_true, inner_false, (a, b))

    def outer_false(a, b):
        return b.cos(), a * 3

    return torch.cond(x.sum() > 0, outer_true, outer_false, (x, y))


@program("cond_branch_returning_its_operand_without_grad_gives_a_new_tensor", lambda: rand(3),
         changed=lambda: -rand(3).abs(), frames_changed=1)
def _(x):
    with torch.no_grad():
        return torch.cond(x.sum() > 0, lambda t: t, lambda t: t * 2, (x,)) + 1


class CountingGate(nn.Module):
    """A cond whose branches change their operand and a buffer in place, then read both."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(3))

    def forward(self, x):
        def bump(t):
            t.add_(1)
            self.calls.add_(1)
            return t * self.calls

        def scale(t):
            t.mul_(2)
            return t - self.calls

        with torch.no_grad():
            x = x.clone()
            out = torch.cond(x.sum() > 0, bump, scale, (x,))
            return x + self.calls + out


PROGRAMS.append(module_program(
    "cond_branches_changing_tensors_in_place_without_grad", CountingGate, lambda: rand(3).abs(),
    changed=lambda: -rand(3).abs(), frames_changed=1, observe=lambda module: module.calls.clone()))


@program("cond_branch_changing_a_copy_of_its_operand_in_place", lambda: rand(4),
         changed=lambda: -rand(4).abs(), frames_changed=1)
def _(x):
    def copied(t):
        y = t.clone()
        y.add_(1)
        return y * 2

    return torch.cond(x.sum() > 0, copied, lambda t: t - 1, (x,)) + x


class GatedLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.wide = nn.Linear(4, 4)
        self.narrow = nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.mean() > 0, lambda t: self.wide(t).relu(), lambda t: self.narrow(t).tanh(), (x,))


PROGRAMS.append(module_program(
    "cond_branches_reading_module_parameters", GatedLayer, lambda: rand(2, 4, requires_grad=True),
    changed=lambda: -rand(2, 4).abs().requires_grad_() - 1, frames_changed=1, grad=True))


class MappedLayer(nn.Module):
    """A layer applied to each row through `functorch.experimental.control_flow.map`."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x, scale):
        from functorch.experimental.control_flow import map as map_rows

        def body(pair, s):
            row, other = pair
            hidden = self.linear(row)
            return {"mixed": hidden.sin() * s, "both": (hidden * other, row + hidden)}

        return map_rows(body, [x, x.flip(0)], scale)


PROGRAMS.append(module_program(
    "map_over_rows_of_two_tensors_returning_a_tree", MappedLayer, lambda: (rand(3, 4), rand(4)),
    changed=lambda: (rand(5, 4), rand(4)), frames_changed=2, grad=True))


# torch.func transforms

@program("vmap_with_in_dims_and_out_dims", lambda: (rand(3, 5, requires_grad=True), rand(3, requires_grad=True)),
         grad=True)
def _(batch, weight):
    return torch.vmap(lambda column, w: (column * w).cumsum(0), in_dims=(1, None), out_dims=1)(batch, weight)


@program("nested_vmap_over_two_batch_dimensions", lambda: (rand(2, 3, 4, requires_grad=True), rand(4, 4)),
         grad=True)
def _(x, m):
    return torch.vmap(torch.vmap(lambda row: (m @ row).softmax(0)))(x)


@program("vmap_over_a_dict_input_with_a_tuple_output", lambda: (rand(5, 3, requires_grad=True), rand(5, 3)),
         grad=True)
def _(a, b):
    def per_example(inputs):
        return inputs["a"] * inputs["b"], inputs["a"].sum()

    product, total = torch.vmap(per_example)({"a": a, "b": b})
    return product, total


@program("grad_of_a_loss_with_respect_to_weights", lambda: (rand(4, 3), rand(3, 2, requires_grad=True)),
         grad=True)
def _(x, w):
    return torch.func.grad(lambda weight: ((x @ weight).tanh() ** 2).sum())(w)


@program("grad_and_value_with_aux", lambda: (rand(4, 3), rand(3, requires_grad=True)), grad=True)
def _(x, w):
    def loss(weight):
        scores = x @ weight
        return scores.square().mean(), scores.detach()

    grads, (value, scores) = torch.func.grad_and_value(loss, has_aux=True)(w)
    return grads, value, scores


@program("per_sample_gradients_with_vmap_of_grad", lambda: (rand(6, 3), rand(6), rand(3, requires_grad=True)),
         grad=True)
def _(x, y, w):
    def loss(weight, xi, yi):
        return ((xi @ weight) - yi) ** 2

    return torch.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(w, x, y)


@program("vjp_with_a_cotangent", lambda: (rand(3, requires_grad=True), rand(3, requires_grad=True)), grad=True)
def _(x, w):
    out, vjp_fn = torch.func.vjp(lambda a, b: (a * b).sin(), x, w)
    grad_x, grad_w = vjp_fn(torch.ones_like(out) * 2)
    return out, grad_x, grad_w


@program("jacobian_with_jacrev", lambda: (rand(4, 3), rand(3, requires_grad=True)), grad=True)
def _(x, w):
    return torch.func.jacrev(lambda weight: (x @ weight).sin())(w)


_MLP = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


@program("functional_call_with_given_parameters",
         lambda: (rand(2, 3, requires_grad=True),
                  {name: rand(*p.shape, requires_grad=True) for name, p in _MLP.named_parameters()}),
         grad=True)
def _(x, params):
    return functional_call(_MLP, params, (x,))


@program("functional_call_ensemble_under_vmap",
         lambda: (rand(2, 3), rand(5, 4, 3, requires_grad=True), rand(5, 4, requires_grad=True)), grad=True)
def _(x, weights, biases):
    def member(weight, bias):
        return functional_call(_MLP, {"0.weight": weight, "0.bias": bias}, (x,))

    return torch.vmap(member)(weights, biases)


# activation checkpointing

class CheckpointedBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4)) for _ in range(2))

    def forward(self, x, scale):
        for block in self.blocks:
            x = x + checkpoint(self.run, block, x, use_reentrant=False, scale=scale)
        return x

    @staticmethod
    def run(block, x, scale):
        return block(x).tanh() * scale


PROGRAMS.append(module_program(
    "checkpointed_blocks_with_keyword_arguments", CheckpointedBlocks,
    lambda: (rand(3, 4, requires_grad=True), 0.5), grad=True))


class CheckpointedDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return checkpoint(lambda t: self.drop(self.lin(t)).relu(), x, use_reentrant=True)


PROGRAMS.append(module_program(
    "checkpointed_dropout_sees_one_mask_in_forward_and_backward", CheckpointedDropout,
    lambda: rand(8, 4, requires_grad=True), grad=True,
    reference={"why": "PyTorch's checkpoint node runs with preserve_rng_state=False",
               "xfail": "without Inductor's RNG functionalization the recomputed dropout mask differs "
                        "from the forward's, so gradients differ from eager"}))


# user autograd.Functions

class CubeWithSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x, exponent):
        return x ** exponent

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, exponent = inputs
        ctx.save_for_backward(x)
        ctx.exponent = exponent

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.exponent * x ** (ctx.exponent - 1), None


class ClippedGradient(torch.autograd.Function):
    """Identity forward; the backward clips the gradient (not the true gradient)."""

    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        ctx.scale = x.abs().mean()
        return x.clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        return grad.clamp(-ctx.bound, ctx.bound) * ctx.scale, None


@program("autograd_function_with_setup_context", lambda: rand(4, requires_grad=True), grad=True)
def _(x):
    return CubeWithSetupContext.apply(x.sin(), 3)


@program("autograd_function_with_a_tensor_on_ctx_and_a_clipped_gradient",
         lambda: (rand(5, requires_grad=True) * 4), grad=True)
def _(x):
    return ClippedGradient.apply(x * 3, 0.1).sum() * x


class MulByConstant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor, weight):
        ctx.factor = factor
        ctx.save_for_backward(weight)
        return x * factor * weight

    @staticmethod
    def backward(ctx, grad):
        (weight,) = ctx.saved_tensors
        grad_x = grad * ctx.factor * weight if ctx.needs_input_grad[0] else None
        grad_w = (grad * ctx.factor).sum(0) if ctx.needs_input_grad[2] else None
        return grad_x, None, grad_w


@program("autograd_function_needs_input_grad_decides_the_gradients",
         lambda: (rand(2, 3, requires_grad=True), rand(3)), grad=True)
def _(x, weight):
    return MulByConstant.apply(x, 2.5, weight).exp()


def _row_energy(row):
    return (row ** 3).sum() - row.prod()


_BATCHED_ENERGY = torch.vmap(_row_energy)
_ENERGY_HESSIAN = torch.func.hessian(_row_energy)


@program("functions_transformed_outside_the_region", lambda: rand(4, 3, requires_grad=True), grad=True)
def _(x):
    return _BATCHED_ENERGY(x), _ENERGY_HESSIAN(x[0])


@program("cond_operator_called_directly_takes_a_branch_at_run_time",
         lambda: (torch.tensor(True), rand(3)), changed=lambda: (torch.tensor(False), rand(3)), frames_changed=1)
def _(pred, x):
    return torch.ops.higher_order.cond(pred, lambda y: y.sin() * 2, lambda y: y.cos() - 1, (x,))
