"""Calling a module from residual code with its `forward` compiled.

When a graph break happens inside a submodule's `forward`, or at a module call
the tracer does not inline (a module with backward hooks), the caller's graph
ends at the call and the call runs in Python; the module's own work must still
be captured, in its own graphs. `module_call(compiled_forward)` is the callable
the residual code uses instead of `module.__call__`: it follows
`nn.Module.__call__`'s protocol (global and module forward pre-hooks, the
backward-hook wrapping of inputs and outputs, forward hooks, `always_call`
hooks on an exception) around the compiled forward, each hook called through
`route` so that hooks are compiled too, as a frame hook would see their frames.
It does not decide what is compiled: `route` and the compiled forward do.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import torch
from torch.utils.hooks import BackwardHook

from ..guards.guards import global_module_hooks

_GLOBAL = torch.nn.modules.module  # where nn.Module keeps the hooks registered for every module


def module_call(compiled_forward: Callable, route: Callable[[Any], Callable]) -> Callable:
    def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        if not (module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks or global_module_hooks()):
            return compiled_forward(module, *args, **kwargs)
        return _HookedCall(module, route).run(compiled_forward, args, kwargs)

    call.__name__ = call.__qualname__ = f"compiled call of {getattr(compiled_forward, '__qualname__', 'forward')}"
    return call


def needs_python_call(module: torch.nn.Module) -> bool:
    """Whether a call of `module` needs what a graph cannot hold: backward hooks (of the module or
    registered for every module), which autograd wraps around the call, or forward hooks that
    must run when the forward raises (`always_call=True`)."""
    return bool(module._backward_hooks or module._backward_pre_hooks or _GLOBAL._global_backward_hooks
                or _GLOBAL._global_backward_pre_hooks or module._forward_hooks_always_called
                or _GLOBAL._global_forward_hooks_always_called)


class _HookedCall:
    """One call of a module with hooks, in the order `nn.Module.__call__` runs them."""

    def __init__(self, module: torch.nn.Module, route: Callable[[Any], Callable]) -> None:
        self.module = module
        self.route = route
        self.called: set[int] = set()  # the `always_call` forward hooks already run

    def run(self, forward: Callable, args: tuple, kwargs: dict) -> Any:
        module = self.module
        result = None
        try:
            pre_hooks = module._get_backward_pre_hooks() \
                if module._backward_pre_hooks or _GLOBAL._global_backward_pre_hooks else []
            full_hooks, old_hooks = module._get_backward_hooks() \
                if module._backward_hooks or _GLOBAL._global_backward_hooks else ([], [])
            args, kwargs = self._pre_hooks(args, kwargs)
            backward = None
            if full_hooks or pre_hooks:
                # autograd's own wrapping: a node before the inputs and after the outputs that
                # calls the backward hooks with the gradients of exactly this call
                backward = BackwardHook(module, full_hooks, pre_hooks)
                args = backward.setup_input_hook(args)
            result = forward(module, *args, **kwargs)
            result = self._forward_hooks(args, kwargs, result)
            if backward is not None:
                if not isinstance(result, (torch.Tensor, tuple)):
                    warnings.warn("For backward hooks to be called, module output should be a Tensor or a "
                                  f"tuple of Tensors but received {type(result)}", stacklevel=3)
                result = backward.setup_output_hook(result)
            if old_hooks:
                self._register_old_backward_hooks(old_hooks, args, result)
            return result
        except Exception:
            self._always_called_hooks(args, kwargs, result)
            raise

    def _pre_hooks(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        module = self.module
        for hook_id, hook in (*_GLOBAL._global_forward_pre_hooks.items(), *module._forward_pre_hooks.items()):
            if hook_id in module._forward_pre_hooks_with_kwargs:
                replaced = self.route(hook)(module, args, kwargs)
                if replaced is not None:
                    if not (isinstance(replaced, tuple) and len(replaced) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                           f"new_kwargs), but got {replaced}.")
                    args, kwargs = replaced
            else:
                replaced = self.route(hook)(module, args)
                if replaced is not None:
                    args = replaced if isinstance(replaced, tuple) else (replaced,)
        return args, kwargs

    def _forward_hooks(self, args: tuple, kwargs: dict, result: Any) -> Any:
        module = self.module
        for hook_id, hook in (*_GLOBAL._global_forward_hooks.items(), *module._forward_hooks.items()):
            if hook_id in module._forward_hooks_always_called or hook_id in _GLOBAL._global_forward_hooks_always_called:
                self.called.add(hook_id)
            if hook_id in module._forward_hooks_with_kwargs or hook_id in _GLOBAL._global_forward_hooks_with_kwargs:
                replaced = self.route(hook)(module, args, kwargs, result)
            else:
                replaced = self.route(hook)(module, args, result)
            if replaced is not None:
                result = replaced
        return result

    def _register_old_backward_hooks(self, hooks: list, args: tuple, result: Any) -> None:
        """The deprecated `register_backward_hook`: registered on the output's autograd node."""
        tensor = result
        while not isinstance(tensor, torch.Tensor):
            tensor = next(v for v in tensor.values() if isinstance(v, torch.Tensor)) \
                if isinstance(tensor, dict) else tensor[0]
        grad_fn = tensor.grad_fn
        if grad_fn is not None:
            for hook in hooks:
                grad_fn.register_hook(torch.nn.modules.module._WrappedHook(hook, self.module))
            self.module._maybe_warn_non_full_backward_hook(args, result, grad_fn)

    def _always_called_hooks(self, args: tuple, kwargs: dict, result: Any) -> None:
        """After an exception: the forward hooks registered with `always_call=True` not run yet
        (their own exceptions are reported as warnings, the first one is raised)."""
        module = self.module
        for table, always, scope in ((_GLOBAL._global_forward_hooks, _GLOBAL._global_forward_hooks_always_called,
                                      "global module"),
                                     (module._forward_hooks, module._forward_hooks_always_called, "module")):
            for hook_id, hook in table.items():
                if hook_id not in always or hook_id in self.called:
                    continue
                try:
                    if table is module._forward_hooks and hook_id in module._forward_hooks_with_kwargs:
                        replaced = hook(module, args, kwargs, result)
                    else:
                        replaced = hook(module, args, result)
                    if replaced is not None:
                        result = replaced
                except Exception as error:
                    warnings.warn(f"{scope} forward hook with ``always_call=True`` raised an exception that "
                                  f"was silenced as another error was raised in forward: {error}", stacklevel=4)
