"""Corpus programs for constructs met in models from libraries the real-model suite added
last (x-transformers, vector-quantize-pytorch, torchdiffeq, torchmetrics...;
tests/real_models/test_new_libraries.py), each reduced to the general Python behaviour the
tracer must model: a buffer registered in the region and read back through the module, ..."""
from __future__ import annotations

import torch
from torch import nn

from .harness import module_program, program_decorator, rand
from .markers import graph_break

PROGRAMS = []
program = program_decorator(PROGRAMS)


class _CachedBias(nn.Module):
    """x-transformers' ALiBi bias: computed on the first call, kept with `register_buffer`
    (replacing the `None` registered in `__init__`) and returned as `self.bias`."""

    def __init__(self):
        super().__init__()
        self.register_buffer("bias", None, persistent=False)

    def forward(self, x):
        if self.bias is not None and self.bias.shape[-1] >= x.shape[-1]:
            return x + self.bias[..., :x.shape[-1]]
        self.register_buffer("bias", torch.arange(x.shape[-1]) * 0.5, persistent=False)
        return x + self.bias


PROGRAMS.append(module_program(
    "buffer_read_then_registered_anew_in_the_region_reads_as_registered", _CachedBias, lambda: rand(2, 4),
    frames=[1, 2]))


class _ScaledSquare(torch.autograd.Function):
    """An autograd.Function whose methods are classmethods (entmax's): `cls` is bound, `ctx`
    comes first among the arguments autograd passes."""

    @classmethod
    def _scale(cls, alpha):
        return alpha * 2

    @classmethod
    def forward(cls, ctx, x, alpha=1.5):
        ctx.alpha = alpha
        ctx.save_for_backward(x)
        return x * x * cls._scale(alpha)

    @classmethod
    def backward(cls, ctx, grad):
        x, = ctx.saved_tensors
        return grad * 2 * x * cls._scale(ctx.alpha), None


@program("autograd_function_with_classmethod_forward_and_backward", lambda: rand(3, requires_grad=True), grad=True,
         reference={"xfail": "failed to bind arguments when attempting to inline forward (5 given, 4 expected)",
                    "why": "PyTorch 2.13 passes `cls` again to a classmethod forward when it traces it"})
def _(x):
    return _ScaledSquare.apply(x, 0.5)


@program("tensor_device_and_layout_predicates", lambda: rand(3))
def _(x):
    # torchmetrics' bincount takes another path on MPS and XLA devices
    flags = (x.is_mps, x.is_xpu, x.is_xla, x.is_ipu, x.is_mtia, x.is_maia, x.is_vulkan, x.is_mkldnn,
             x.is_sparse_csr)
    return (x * 2 if any(flags) else x + 1), flags


def _update(state, *tensors, scale=1.0):
    graph_break()
    return [t * scale for t in tensors]


def _step(x, *args, **kwargs):
    # torchmetrics' Metric.forward: `self._forward_cache = self._forward_reduce_state_update(*args, **kwargs)`
    y = x.sin()
    out = _update(None, *args, **kwargs)
    return y + out[0].cos()


@program("break_inside_a_star_star_call_resumes_after_it", lambda: (rand(3), rand(3)), fullgraph=False, frames=6)
def _(x, y):
    return _step(x, y, scale=2.0) + _step(x, *[y])
