"""Corpus programs about jagged nested tensors (`layout=torch.jagged`): one graph whose ragged
size is a symbol bound to the offsets, so a batch of other lengths runs it again; AOT autograd
functionalizes them through their inner tensors."""
from __future__ import annotations

import torch

from .harness import module_program, program_decorator

PROGRAMS = []


program = program_decorator(PROGRAMS)


def jagged(*lengths: int) -> torch.Tensor:
    return torch.nested.nested_tensor([torch.randn(length, 4) for length in lengths], layout=torch.jagged)


@program("jagged_input_pointwise_keeps_its_offsets_and_other_lengths_do_not_recompile",
         lambda: (jagged(3, 5),), changed=lambda: (jagged(2, 6),), frames_changed=1, backend="aot_eager")
def _(x):
    return (x.sin() * 2 + x).values()


@program("jagged_input_reduced_over_its_ragged_dimension_and_padded", lambda: (jagged(3, 5),),
         changed=lambda: (jagged(6, 2),), frames_changed=1, backend="aot_eager")
def _(x):
    return x.sum(dim=1), x.mean(dim=1), x.to_padded_tensor(0.0)


class _JaggedProjection(torch.nn.Module):
    """A Linear over a jagged batch, its loss over the values: the training step's backward
    goes through jagged tensors (their gradients are jagged, built by the subclass)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 6)

    def forward(self, x):
        return self.proj(x).relu().values().pow(2).sum()


PROGRAMS.append(module_program(
    "jagged_batch_through_a_linear_trained_the_backward_compiled_by_aot", _JaggedProjection,
    lambda: (jagged(3, 5),), changed=lambda: (jagged(2, 6),), frames_changed=1, grad=True, backend="aot_eager"))


def jagged_input_grad(*lengths: int) -> torch.Tensor:
    return torch.nested.nested_tensor([torch.randn(length, 4) for length in lengths], layout=torch.jagged,
                                      requires_grad=True)


@program("jagged_input_that_requires_grad_gets_a_jagged_gradient_under_aot",
         lambda: (jagged_input_grad(3, 5),), grad=True, backend="aot_eager")
def _(x):
    return (x.cos() * x).values()


@program("jagged_tensor_made_from_dense_tensors_in_the_region_under_aot",
         lambda: (torch.randn(3, 4), torch.randn(5, 4)), backend="aot_eager")
def _(a, b):
    return (torch.nested.nested_tensor([a, b], layout=torch.jagged).sin() + 1).values()


@program("jagged_attention_reads_the_longest_sequence_from_the_offsets_a_break_as_in_torch_compile",
         lambda: (jagged(3, 5), jagged(3, 5), jagged(3, 5)), fullgraph=False, frames=1)
def _(q, k, v):
    q, k, v = (t.unflatten(-1, (2, 2)).transpose(1, 2) for t in (q, k, v))
    return torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).values()


@program("jagged_input_batch_of_another_size_under_dynamic_true_does_not_recompile",
         lambda: (jagged(3, 5),), changed=lambda: (jagged(2, 6, 3, 4, 2),), frames_changed=1, backend="aot_eager",
         options={"dynamic": True})
def _(x):
    return (x.cos() + 1).values()


@program("jagged_intermediate_max_seqlen_is_a_symbolic_size_that_makes_another",
         lambda: (torch.randn(10, 5), torch.tensor([0, 2, 4, 7, 10]), 5),
         changed=lambda: (torch.randn(10, 5), torch.tensor([0, 2, 4, 7, 10]), 7), frames_changed=1,
         options={"dynamic": True})
def _(values, offsets, max_seqlen):
    made = torch.nested.nested_tensor_from_jagged(values, offsets, max_seqlen=max_seqlen)
    again = torch.nested.nested_tensor_from_jagged(values * 2, made.offsets(), max_seqlen=made._maybe_max_seqlen)
    return again.values(), again._maybe_max_seqlen
