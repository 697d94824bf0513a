"""Layer 6: `graphwright.compile`, `reset` and the steering functions, wired together.

Thin by design: `compile` resolves the backend by name (at compile time),
wraps functions in the strict tracer's `CompiledFunction` and modules in an
`OptimizedModule` that shares the original's parameters and state.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

import torch

from ._core.counters import clear_counters
from ._core.errors import GraphwrightError
from .backends import list_backends, lookup_backend
from .backends.ddp_buckets import BucketedBackend
from .backends.registry import configured_backend
from .strict.cache import CompiledFunction, reset_caches
from .strict.entries import CompileSettings
from .strict.residual.call_routing import CallRouter
from .strict.residual.callees import module_call, needs_python_call
from .strict.residual.module_wrappers import is_module_wrapper
from .strict.explain import ExplainOutput, explain_call, explain_wrapper_call
from .strict.guards.guards import global_module_hooks
from .strict.marked.markers import (
    disable,
    disable_mark,
    error_on_graph_break,
    graph_break,
    is_disabled,
    mark_dynamic,
    mark_static,
    maybe_mark_dynamic,
)

__all__ = ["compile", "explain", "reset", "graph_break", "error_on_graph_break", "disable", "mark_dynamic",
           "maybe_mark_dynamic",
           "mark_static",
           "OptimizedModule"]


class OptimizedModule(torch.nn.Module):
    """A compiled module: `_orig_mod` is the original; parameters and state_dict are shared.

    Attributes it does not have itself are the original's (read, written, listed by `dir`), and
    `training` is the original's flag. Hooks registered for every module
    (`register_module_forward_hook`) run once, on the original module, as in eager; hooks
    registered on the compiled module itself run around it."""

    _graphwright_compiled_module = True  # the tracer traces `_orig_mod` when this is called inside a trace

    def __init__(self, mod: torch.nn.Module, compile_fn: Callable[[types.FunctionType], CompiledFunction]) -> None:
        super().__init__()
        self._orig_mod = mod
        if is_module_wrapper(mod):
            # DDP's forward runs as Python (its reducer and gradient hooks belong to eager
            # autograd); the module it wraps is compiled
            call = CallRouter(compile_fn).wrapper_call(type(mod))
            self.__dict__["_compiled_forward"] = call
            self.__dict__["_compiled_call"] = functools.partial(call, mod)
        else:
            self.__dict__["_compiled_forward"] = compile_fn(type(mod).forward)
            # with hooks of its own, the module is called as a whole, so its hooks are traced too
            self.__dict__["_compiled_call"] = compile_fn(_calling(mod, f"{type(mod).__qualname__}.__call__"))
            # with hooks that autograd must wrap around the call, nn.Module's protocol runs as
            # Python around the compiled forward, each hook compiled on its own
            self.__dict__["_hooked_call"] = module_call(self._compiled_forward, CallRouter(compile_fn).route)

    @property
    def training(self) -> bool:  # type: ignore[override]
        original = self.__dict__.get("_modules", {}).get("_orig_mod")
        return True if original is None else original.training

    @training.setter
    def training(self, value: bool) -> None:
        original = self.__dict__.get("_modules", {}).get("_orig_mod")
        if original is not None:  # nn.Module.__init__ sets the default before there is one
            original.training = value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks:
            return super().__call__(*args, **kwargs)
        # nn.Module's call would run the hooks registered for every module on this wrapper too
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        mod = self._orig_mod
        if "_lazy_settled" not in self.__dict__:
            if hasattr(mod, "_initialize_hook"):
                # a lazy module infers its parameters from the first inputs, eagerly as in eager
                # (its pre-hook removes itself); the initialized module is compiled
                mod._infer_parameters(mod, args, kwargs)
            if any(hasattr(module, "_initialize_hook") for module in mod.modules()):
                # lazy submodules infer theirs from the inputs they see: this call runs as in eager
                return mod(*args, **kwargs)
            self.__dict__["_lazy_settled"] = True  # the walk over submodules is not repeated
        forward = type(mod).forward  # read at each call: the class's method may be replaced
        if needs_python_call(mod) and "forward" not in mod.__dict__ and type(forward) is types.FunctionType \
                and not is_module_wrapper(mod):
            return self._hooked_call(mod, *args, **kwargs)
        if is_module_wrapper(mod) or mod._forward_hooks or mod._forward_pre_hooks or mod._backward_hooks \
                or mod._backward_pre_hooks or global_module_hooks() or "forward" in mod.__dict__ \
                or type(forward) is not types.FunctionType:
            return self._compiled_call(*args, **kwargs)
        return self._compiled_forward.call_as(forward, mod, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_orig_mod" or hasattr(type(self), name) or "_orig_mod" not in self._modules:
            return super().__setattr__(name, value)
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if hasattr(type(self), name) or name == "_orig_mod":
            return super().__delattr__(name)
        delattr(self._orig_mod, name)

    def __dir__(self) -> list[str]:
        names = self._orig_mod.__dir__()
        return names + [name for name in super().__dir__() if name not in names]


def _calling(target: Callable, name: str) -> types.FunctionType:
    """A Python function calling `target`, named `name`: compiled functions share a cache per
    code object, so each name (a module class, a partial's function) gets its own."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return target(*args, **kwargs)

    call.__code__ = call.__code__.replace(co_name=name, co_qualname=name)
    call.__name__ = call.__qualname__ = name
    return call


def _compiled_class(cls: type, compile_fn: Callable[[types.FunctionType], CompiledFunction]) -> type:
    """`@graphwright.compile` on a class: calls of its instances are compiled (for an
    `nn.Module`, the whole call: hooks and forward). Returns the class, its `__call__` replaced."""
    original = cls.__call__
    name = f"{cls.__qualname__}.__call__"
    if not issubclass(cls, torch.nn.Module):
        compiled = compile_fn(_calling(original, name))

        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            return compiled(self, *args, **kwargs)

        cls.__call__ = __call__
        return cls

    def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        return module(*args, **kwargs)

    call.__code__ = call.__code__.replace(co_name=name, co_qualname=name)
    compiled_call = compile_fn(call)
    entered: set[int] = set()

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The compiled call calls the module; where that call runs as Python (a graph break at
        # it), it is the original call.
        if id(self) in entered:
            return original(self, *args, **kwargs)
        entered.add(id(self))
        try:
            return compiled_call(self, *args, **kwargs)
        finally:
            entered.discard(id(self))

    cls.__call__ = __call__
    return cls


def _specialises_sizes(compiler: Callable) -> bool:
    """Whether what the backend returns serves only the sizes of its example inputs: every
    registered backend but `eager`, unless it says otherwise; a user's callable is trusted to
    run the graph it is given (as `CompileCounter` does)."""
    if getattr(compiler, "graphwright_dynamic_shapes", False) or compiler is lookup_backend("eager"):
        return False
    inner = getattr(compiler, "backend", None)  # CompileCounterWithBackend
    if inner is not None:
        return _specialises_sizes(inner)
    return any(compiler is lookup_backend(name) for name in list_backends(()))


def _is_users_backend(compiler: Callable) -> bool:
    """Whether the backend is the user's own callable (a counter wrapping one of graphwright's
    backends is graphwright's)."""
    inner = getattr(compiler, "backend", None)  # CompileCounterWithBackend
    if inner is not None:
        return _is_users_backend(inner)
    return not any(compiler is lookup_backend(name) for name in list_backends(()))


def compile(model: Callable | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str | Callable = "inductor", mode: str | None = None,
            options: dict | None = None, disable: bool = False) -> Any:
    """Compile a function or module: capture its tensor work as graphs, guarded and cached.

    `dynamic=False` specialises every size; `True` traces input sizes as symbols from the start;
    `None` specialises first and, when a size changes, recompiles with that dimension symbolic.
    `mode` ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs") or
    `options` (Inductor config names and values) configure the `inductor` backend as in
    `torch.compile`; another backend receives them as keyword arguments.

    >>> @graphwright.compile(fullgraph=True, backend="eager")
    ... def f(x):
    ...     return torch.sin(x) + 1
    >>> f(torch.randn(3))
    """
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if disable:
        return model
    if is_disabled(model):
        mark = disable_mark(model)
        if mark is None or mark.recursive:
            return model
        model = mark.original  # disabled with recursive=False: compiling it directly compiles it
    compiler = lookup_backend(backend)
    specialises, users = _specialises_sizes(compiler), _is_users_backend(compiler)
    compiler = configured_backend(compiler, mode, options, dynamic)
    return _compiled(model, CompileSettings(BucketedBackend(compiler), fullgraph, dynamic, specialises, users))


def _compiled(model: Any, settings: CompileSettings) -> Any:
    """`compile`'s result for `model`, a class, module, method, function or callable object."""
    if isinstance(model, type):
        return _compiled_class(model, lambda fn: CompiledFunction(fn, settings))
    if isinstance(model, torch.nn.Module):
        forward = model.forward
        if "forward" not in model.__dict__ and not (
                isinstance(forward, types.MethodType) and forward.__self__ is model
                and isinstance(forward.__func__, types.FunctionType)):
            raise GraphwrightError(
                f"Cannot compile module {type(model).__name__}",
                explanation="Its `forward` is not a Python method defined on its class.",
                hints=["Define `forward` as a method of the module's class."])
        module = OptimizedModule(model, lambda fn: CompiledFunction(fn, settings))
        # PyTorch's name for what compiles with the module's settings: Lightning compiles its
        # training step with `compiled.dynamo_ctx(module.training_step)`
        module.__dict__["dynamo_ctx"] = functools.partial(_compiled, settings=settings)
        return module
    if isinstance(model, types.MethodType) and isinstance(model.__func__, types.FunctionType):
        return types.MethodType(CompiledFunction(model.__func__, settings), model.__self__)
    if isinstance(model, types.FunctionType):
        return CompiledFunction(model, settings)
    if callable(model):  # a functools.partial, a callable object
        name = getattr(getattr(model, "func", model), "__qualname__", type(model).__qualname__)
        return CompiledFunction(_calling(model, f"{type(model).__name__}({name})"), settings)
    raise GraphwrightError(
        f"Cannot compile an object of type {type(model).__name__}",
        explanation="`graphwright.compile` takes a Python function, method or `nn.Module`.",
        hints=["Wrap the call in a Python function and compile that."])


def explain(fn: Callable) -> Callable[..., ExplainOutput]:
    """What compiling `fn` captures on given inputs: `graphwright.explain(fn)(*args, **kwargs)`.

    >>> out = graphwright.explain(f)(torch.randn(3))
    >>> out.graph_count, out.graph_break_count, out.break_reasons
    """
    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        target = getattr(fn, "_orig_mod", fn)
        if is_module_wrapper(target):
            return explain_wrapper_call(target, args, kwargs)
        if isinstance(target, torch.nn.Module):
            return explain_call(type(target).forward, (target, *args), kwargs)
        if isinstance(target, types.MethodType):
            return explain_call(_original(target.__func__), (target.__self__, *args), kwargs)
        return explain_call(_original(target), args, kwargs)
    return run


def _original(fn: Callable) -> Callable:
    """The function a compiled function compiles; any other callable itself."""
    return getattr(fn, "_graphwright_original", fn)


def reset() -> None:
    """Forget every compiled entry and clear `graphwright.counters`."""
    reset_caches()
    clear_counters()
