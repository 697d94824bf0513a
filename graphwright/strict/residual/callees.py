"""Calling a module from residual code with its `forward` compiled.

When a graph break happens inside a submodule's `forward`, the caller's graph
ends at the call and the call runs in Python; the submodule's own work must
still be captured, in its own graphs. `module_call(compiled_forward)` is the
callable the residual code uses instead of `module.__call__`: it runs the
module's forward hooks around the compiled forward as `nn.Module.__call__`
does (each hook called through `route`, so that hooks are compiled too), and a
module with backward hooks (which need autograd's own wrapping) through
`nn.Module.__call__` itself.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from ..guards.guards import global_module_hooks


def module_call(compiled_forward: Callable, route: Callable[[Any], Callable]) -> Callable:
    def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        if not (module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks or global_module_hooks()):
            return compiled_forward(module, *args, **kwargs)
        if module._backward_hooks or module._backward_pre_hooks or global_module_hooks():
            return module(*args, **kwargs)
        for hook_id, hook in module._forward_pre_hooks.items():
            if hook_id in module._forward_pre_hooks_with_kwargs:
                result = route(hook)(module, args, kwargs)
                if result is not None:
                    args, kwargs = result
            else:
                result = route(hook)(module, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = compiled_forward(module, *args, **kwargs)
        for hook_id, hook in module._forward_hooks.items():
            if hook_id in module._forward_hooks_with_kwargs:
                result = route(hook)(module, args, kwargs, output)
            else:
                result = route(hook)(module, args, output)
            if result is not None:
                output = result
        return output

    call.__name__ = call.__qualname__ = f"compiled call of {getattr(compiled_forward, '__qualname__', 'forward')}"
    return call

