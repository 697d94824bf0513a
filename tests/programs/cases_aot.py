"""Corpus programs about ahead-of-time autograd, run through the `aot_eager` backend behind the
counter: outputs that alias an input (dtype and complex views, the target of an `out=`
argument that is not contiguous) come back as eager made them; `out=` calls whose effect
functionalization does not model as eager's kernel has it (a non-contiguous or resized `out`,
batch norm's running statistics, an `out` tracing leaves unwritten) give eager's answer; under
`inductor`, an aten graph that one of Inductor's own pattern passes would compute wrongly is
rewritten first."""
from __future__ import annotations

import torch
from torch import nn

import graphwright

from .harness import module_program, program_decorator, rand

PROGRAMS = []


program = program_decorator(PROGRAMS)


@program("aot_dtype_views_of_an_input_keep_their_dtype", lambda: rand(4, 6), backend="aot_eager",
         changed=lambda: rand(6, 6), frames_changed=2)
def _(x):
    return x.view(torch.int32), torch.view_as_complex(x.view(x.size(0), -1, 2)), x.view(torch.bfloat16)[:, ::2], x * 2


@program("aot_out_into_a_transposed_target_returns_the_target_view", lambda: (rand(3, 4), torch.zeros(4, 3)),
         backend="aot_eager", reference={"xfail": "Attempted to call op with non-contiguous `out=` tensor",
                                         "why": "PyTorch 2.13 refuses a non-contiguous out= under fullgraph"})
def _(x, y):
    return torch.abs(x, out=y.T)


@program("aot_view_as_real_of_an_input_carries_its_gradient",
         lambda: torch.randn(4, 3, dtype=torch.complex64, requires_grad=True), backend="aot_eager", grad=True)
def _(z):
    return torch.view_as_real(z), torch.view_as_real(z.conj().resolve_conj()).transpose(0, 1)


def _under_no_grad(world, compiled, args):
    with torch.no_grad():
        return compiled(*args.args)


@program("aot_enable_grad_in_the_region_differentiates_under_a_no_grad_caller", lambda: rand(3, requires_grad=True),
         backend="aot_eager", call=_under_no_grad, grad=True)
def _(x):
    y = x * 2
    with torch.enable_grad():
        z = x.sin() * 3
    return y, z, z.requires_grad


def _deterministic_before_each_call(world, compiled, args):
    torch.use_deterministic_algorithms(True)
    try:
        return compiled(*args.args), torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


@program("aot_deterministic_algorithms_switched_off_in_the_region_stay_off", lambda: rand(4),
         backend="aot_eager", call=_deterministic_before_each_call, repeats=3,
         reference={"why": "torch.compile's AOT autograd drops the switch, which is no aten operator",
                    "xfail": "deterministic algorithms stay on after the call"})
def _(x):
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    return x + 1, before


# AOT autograd traces the captured graph node by node, so that each aten node records the user's
# line of its node (graphwright/_core/source_lines.py): what the graph computes must not change,
# in-place updates of inputs, hooks' effects and a nonstrict_trace body's replay included.

class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.inner.register_forward_hook(lambda module, args, out: out * 0.5)

    def forward(self, x, buffer):
        buffer.add_(1)  # an input updated in place
        steps = (self.inner(x + k) for k in range(2))
        return sum(steps) + buffer.mean(), buffer


@graphwright.nonstrict_trace
def _normalised(x, eps):
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / (centred.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt()


class _WithNonstrictBody(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return _normalised(self.linear(x), 1e-5) * _normalised(x, 1e-3)


PROGRAMS.append(module_program(
    "aot_node_by_node_trace_keeps_hooks_generators_and_input_updates", _Scaled,
    lambda: (rand(3, 4, requires_grad=True), torch.zeros(4)), backend="aot_eager", grad=True))
PROGRAMS.append(module_program(
    "aot_nonstrict_trace_body_replayed_with_its_own_lines", _WithNonstrictBody,
    lambda: rand(3, 4, requires_grad=True), backend="aot_eager", grad=True))


_NONCONTIGUOUS_OUT = {"why": "TorchDynamo refuses out= into a non-contiguous tensor",
                      "xfail": "Attempted to call op with non-contiguous `out=` tensor"}


@program("aot_out_into_a_permuted_target_is_written_as_eagers_kernel_writes_it",
         lambda: (rand(5, 5, 5), torch.zeros(5, 2, 5)), backend="aot_eager", reference=_NONCONTIGUOUS_OUT)
def _(x, buffer):
    # narrow_copy's kernel writes a non-contiguous `out` in memory order: the graph runs as captured
    torch.narrow_copy(x, 1, 2, 2, out=buffer.permute(2, 1, 0))
    return buffer * 2


@program("aot_out_of_a_vector_matrix_product_into_a_strided_target_is_restrided_as_in_eager",
         lambda: (rand(4), rand(4, 3), torch.zeros(7)), backend="aot_eager", reference=_NONCONTIGUOUS_OUT)
def _(v, m, buffer):
    out = torch.matmul(v, m, out=buffer[1::2])
    return out, buffer + 1


@program("aot_batch_norm_out_updates_the_running_statistics",
         lambda: (rand(2, 3, 4), rand(3), rand(3), torch.zeros(3), torch.ones(3)), backend="aot_eager")
def _(x, w, b, running_mean, running_var):
    out = (torch.empty(2, 3, 4), torch.empty(3), torch.empty(3))
    torch.native_batch_norm(x, w, b, running_mean, running_var, True, 0.1, 1e-5, out=out)
    return out[0] * 2, running_mean + 0, running_var + 0


@program("aot_out_left_unwritten_by_tracing_is_written", lambda: (rand(5, 5), torch.zeros((), dtype=torch.int64)),
         backend="aot_eager", reference={"xfail": "Scalars are not equal",
                                         "why": "PyTorch 2.13's aot_eager gives another rank than eager here"})
def _(a, rank):
    torch.linalg.matrix_rank(a, out=rank)
    return rank + 1


@program("aot_out_resized_from_empty", lambda: (rand(3, 4), torch.empty(0)), backend="aot_eager",
         reference={"xfail": "Shape mismatch with out= tensor variant",
                    "why": "PyTorch 2.13 refuses an out= that the call resizes, under fullgraph"})
def _(x, out):
    torch.cos(x, out=out)
    return out.sum(0), out.shape


@program("inductor_add_with_alpha_of_a_matrix_product_keeps_its_scaling",
         lambda: (rand(3, 6, requires_grad=True), rand(3, 3, requires_grad=True), rand(1, 6)), backend="inductor",
         grad=True, reference={"why": "Inductor's addmm fusion of add(x, mm(a, b)) reads no alpha (PyTorch 2.13)",
                               "xfail": "values differ"})
def _(x, a, row):
    # each product has one use, as the fusion wants; a (1, 1) @ (1, m) product is an mm too
    return torch.add(x, a @ x, alpha=0.5), torch.add(a.T @ x, x, alpha=-3), torch.add(row, row[:, :1] @ row, alpha=2.0)
