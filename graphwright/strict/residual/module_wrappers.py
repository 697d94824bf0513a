"""torch's module wrappers that run as Python around a compiled module: `DistributedDataParallel`.

DDP's forward prepares its reducer, syncs buffers and arms the hooks that
all-reduce gradients in eager autograd; none of it is tensor work for a graph.
TorchDynamo does not trace it (torch's own code is skipped): DDP's forward runs
as Python and the frame hook compiles the forward of the module it wraps.
graphwright has no frame hook, so it runs DDP's forward with its calls routed
(`CallRouter` with `inside_wrapper=True`): DDP's own methods on the way to the
wrapped module run routed too, and the module DDP calls (whatever its class,
torch's own included: it is the module the user compiled) is compiled.

This module only says what a wrapper is and which of its methods run routed;
`call_routing` does the routing.
"""
from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import torch


def _wrapper_classes() -> tuple[type, ...]:
    if not torch.distributed.is_available():
        return ()
    from torch.nn.parallel import DistributedDataParallel

    return (DistributedDataParallel,)


_WRAPPERS = _wrapper_classes()


def is_module_wrapper(target: Any) -> bool:
    """Whether `target` is a DDP module, whose forward runs as Python around its compiled module."""
    return isinstance(target, _WRAPPERS)


def wrapper_method(target: Any) -> types.FunctionType | None:
    """For a bound method of a wrapper that its class defines (`ddp._run_ddp_forward`), the
    function to run routed; None for anything else (generators and context managers run as
    they are: they call no module)."""
    if type(target) is not types.MethodType or not is_module_wrapper(target.__self__):
        return None
    function = target.__func__
    if type(function) is not types.FunctionType or function.__code__.co_flags & inspect.CO_GENERATOR:
        return None
    for cls in _WRAPPERS:  # defined in the class's own file: not a decorator's wrapper
        if vars(cls).get(function.__name__) is function \
                and function.__code__.co_filename == sys.modules[cls.__module__].__file__:
            return function
    return None
