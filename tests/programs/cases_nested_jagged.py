"""Corpus programs about jagged nested tensors (`layout=torch.jagged`): one graph whose ragged
size is a symbol bound to the offsets, so a batch of other lengths runs it again; AOT autograd
functionalizes them through their inner tensors."""
from __future__ import annotations

import torch

from .harness import program_decorator

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
