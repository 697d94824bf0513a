"""The TracingContext PyTorch's compilers read the trace's fake mode from.

torch.compile calls its backends inside a `torch._guards.TracingContext` holding the fake
mode of the trace; PyTorch's own compilers look there for the symbolic sizes (Inductor's
`compile_fx`, and its FX graph cache, which is bypassed without a shape environment). So
graphwright compiles under one too: with Inductor as its code generator, and around a
user's backend callable.
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch._guards


def compiling_with(fake_mode: Any) -> Any:
    """A context holding `fake_mode` as the current TracingContext's (nothing for None)."""
    if fake_mode is None:
        return contextlib.nullcontext()
    return torch._guards.tracing(torch._guards.TracingContext(fake_mode))
