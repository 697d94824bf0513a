"""Corpus programs for constructs met in real Hugging Face models (tests/real_models/),
each reduced to the general Python behaviour the tracer must model: an augmented
assignment whose left operand is a number and right operand a tensor, ..."""
from __future__ import annotations

import torch

from .harness import program_decorator, rand

PROGRAMS = []
program = program_decorator(PROGRAMS)


@program("augmented_assignment_of_a_tensor_to_a_number", lambda: rand(3, 4))
def _(x):
    buckets = 0  # T5's relative-position buckets start as the int 0
    buckets += (x > 0).to(torch.long) * 4
    scale = 1.5
    scale *= x
    return buckets, scale
