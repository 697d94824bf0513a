"""Corpus programs about ahead-of-time autograd, run through the `aot_eager` backend behind the
counter: outputs that alias an input (dtype and complex views, the target of an `out=`
argument that is not contiguous) come back as eager made them."""
from __future__ import annotations

import torch

from .harness import program_decorator, rand

PROGRAMS = []


program = program_decorator(PROGRAMS)


@program("aot_dtype_views_of_an_input_keep_their_dtype", lambda: rand(4, 6), backend="aot_eager",
         changed=lambda: rand(6, 6), frames_changed=2)
def _(x):
    return x.view(torch.int32), torch.view_as_complex(x.view(x.size(0), -1, 2)), x.view(torch.bfloat16)[:, ::2], x * 2


@program("aot_out_into_a_transposed_target_returns_the_target_view", lambda: (rand(3, 4), torch.zeros(4, 3)),
         backend="aot_eager")
def _(x, y):
    return torch.abs(x, out=y.T)


@program("aot_view_as_real_of_an_input_carries_its_gradient",
         lambda: torch.randn(4, 3, dtype=torch.complex64, requires_grad=True), backend="aot_eager", grad=True)
def _(z):
    return torch.view_as_real(z), torch.view_as_real(z.conj().resolve_conj()).transpose(0, 1)
