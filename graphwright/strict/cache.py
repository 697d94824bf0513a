"""The compiled-function cache: entries per code object, newest first, and the call path.

`CompiledFunction.__call__` is the hot path of every compiled call: try each
entry (its guards are its first lines) and return the first hit. A call that
misses every entry compiles a new one, recording why in
`counters["recompiles"]`, until `config.cache_size_limit` entries exist; after
that, misses run eagerly with one warning. Functions sharing a code object
(and backend and fullgraph setting) share entries: many instances of one
module class reuse one graph when their guards pass. The wrappers hold their
cache; the table that shares it holds it weakly, so dropping every wrapper of
a function (or a backend made for it) frees its entries and graphs, but for
the `config.dropped_cache_limit` caches made most recently, kept so that
compiling the same function again (in a loop, a fresh module each time)
reuses its graphs.

Under `torch.profiler.profile()` every call runs its entry's twin that puts the
body (after the guards) in a profiler range named after the entry, and a
compile is a range too (`region_name`); without a profiler the hot path pays
one attribute read for that.
"""
from __future__ import annotations

import collections
import contextlib
import inspect
import itertools
import os
import threading
import types
import warnings
import weakref
from typing import Any, Callable, Iterator

import torch
import torch.autograd.profiler as _profiler
from torch._C._profiler import _RecordFunctionFast
from torch.utils._python_dispatch import _get_dispatch_stack_at, _pop_mode, _push_mode, any_torch_dispatch_mode_on_stack

from .._core import config, dump, structured_trace
from .._core.counters import counters, phase
from .._core.errors import GraphwrightError
from .._core.user_stack import user_frames_of_stack
from . import events
from .entries import (
    CompileSettings,
    build_entry,
    cache_limit_warning,
    changed_sizes,
    failure_reason,
)
from .guards.codegen import MISS, in_region
from .guards.guards import compiling_call
from .interpreter.graph_builder import prepare_fake_tensors


class CodeCache:
    """The entries of one compiled function (newest first). Its first compile gives it a frame
    id, and each compile the next compile number: the compile id `frame/compile` that the
    compile trace and the profiler's ranges name it by, as torch.compile's `[0/1]`."""

    __slots__ = ("entries", "exhausted", "dynamic_dims", "frame_id", "compiles", "__weakref__")

    def __init__(self) -> None:
        self.entries: list[Callable] = []
        self.exhausted = False
        self.dynamic_dims: dict[Any, frozenset[int]] = {}  # learnt under dynamic=None
        self.frame_id: int | None = None
        self.compiles = 0
        _LIVE_CACHES.add(self)

    def next_compile_id(self) -> torch._guards.CompileId:
        if self.frame_id is None:
            self.frame_id = next(_FRAME_IDS)
        self.compiles += 1
        return structured_trace.compile_id(self.frame_id, self.compiles - 1)


_FRAME_IDS = itertools.count()  # never reset: ids stay unique in a process's trace


# (code, backend, fullgraph, dynamic) -> the cache of the wrappers alive with those settings
_CACHES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LIVE_CACHES: weakref.WeakSet = weakref.WeakSet()  # those of wrappers made before a reset too
_RECENT: collections.OrderedDict = collections.OrderedDict()  # the most recent, kept when dropped


def reset_caches() -> None:
    """Forget every entry; wrappers made before keep working and compile afresh (after every
    reset: each wrapper keeps the cache it was made with)."""
    for cache in list(_LIVE_CACHES):
        cache.entries.clear()
        cache.exhausted = False
        cache.dynamic_dims.clear()
    _CACHES.clear()
    _RECENT.clear()


def binds(fn: types.FunctionType, args: tuple, kwargs: dict) -> bool:
    """Whether a call of `fn` with these arguments gets as far as running its code."""
    try:
        inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError:
        return False
    return True


class CompiledFunction:
    """`fn` compiled: the same signature, running captured graphs where guards allow."""

    _graphwright_compiled = True  # lets the tracer inline `fn` when this is called inside a trace

    def __init__(self, fn: types.FunctionType, settings: CompileSettings, kept: bool = True) -> None:
        """`kept`: the cache outlives this wrapper for a while (see the module docstring); the
        wrappers of resume functions and callees live as long as the entry that made them."""
        prepare_fake_tensors()
        self._fn = fn
        self._graphwright_original = fn
        self._settings = settings
        # the backend itself in the key: an id could be reused
        key = (fn.__code__, settings.backend, settings.fullgraph, settings.dynamic)
        self._cache = _CACHES.get(key)
        if self._cache is None:
            self._cache = _CACHES[key] = CodeCache()
        if kept:
            _keep(key, self._cache)
        self._entries = self._cache.entries
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _profiler._is_profiler_enabled:  # without a profiler, one attribute read per call
            return self.call_as(self._fn, *args, **kwargs)
        # `_first_hit` spelled out: one Python frame less on every compiled call
        fn = self._fn
        try:
            for entry in self._entries:
                result = entry(fn, *args, **kwargs)
                if result is not MISS:
                    return result
        except TypeError as error:
            if error.__traceback__.tb_next is not None:
                raise  # raised by the entry's body, not by binding the arguments to it
        return self._miss(args, kwargs)

    def call_as(self, fn: types.FunctionType, *args: Any, **kwargs: Any) -> Any:
        """Call through this cache as function `fn` (the same code, its own closure cells)."""
        entries = self._entries
        if _profiler._is_profiler_enabled:
            entries = _in_regions(entries)
        result = _first_hit(entries, fn, args, kwargs)
        return self._miss(args, kwargs, fn) if result is MISS else result

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    def _miss(self, args: tuple, kwargs: dict, fn: types.FunctionType | None = None) -> Any:
        """Compile an entry for a call every entry missed, once however many threads miss
        together: under the compile lock, an entry is built only if the entries are those the
        call has just tried; otherwise (another thread added one) the call tries them again."""
        fn, cache = fn or self._fn, self._cache
        while True:
            tried = list(cache.entries)
            result = _first_hit(_runnable(tried), fn, args, kwargs)
            if result is not MISS:
                return result
            with _COMPILE_LOCK:
                if cache.entries == tried:
                    entry = self._compile_entry(fn, args, kwargs)
                    break
        if entry is None:
            return fn(*args, **kwargs)
        result = _runnable([entry])[0](fn, *args, **kwargs)
        return fn(*args, **kwargs) if result is MISS else result

    def _compile_entry(self, fn: types.FunctionType, args: tuple, kwargs: dict) -> Callable | None:
        """A new entry for the call, put first in the cache; None where the call runs eagerly."""
        cache, settings = self._cache, self._settings
        _drop_stale_entries(cache)
        if cache.exhausted or not binds(fn, args, kwargs):
            return None  # arguments that do not bind: Python's own TypeError
        reasons = []
        if any_torch_dispatch_mode_on_stack():
            # a user's dispatch mode would see the tracer's fake tensors: as in PyTorch, the call
            # runs eagerly, and a function compiled in the mode's handler (where the mode is
            # off) compiles
            return None
        if cache.entries:
            reason = failure_reason(cache.entries[0], fn, args, kwargs)
            if len(cache.entries) >= config.cache_size_limit:
                if settings.fullgraph:
                    raise GraphwrightError(
                        f"Hit config.cache_size_limit ({config.cache_size_limit}) with fullgraph=True",
                        explanation=f"Compiling '{fn.__qualname__}' again would exceed the limit; "
                                    f"last recompile reason: {reason}",
                        hints=["Check why the inputs change between calls (the reason above).",
                               "Raise `graphwright.config.cache_size_limit`."],
                        user_stack=user_frames_of_stack())
                cache.exhausted = True
                warnings.warn(cache_limit_warning(fn, reason), stacklevel=4)
                return None
            counters["recompiles"][reason] += 1
            if events.recompile_wanted():
                reasons = [reason] + [failure_reason(entry, fn, args, kwargs) for entry in cache.entries[1:]]
            if settings.dynamic is None:
                for source, dims in changed_sizes(cache.entries[0], fn, args, kwargs).items():
                    cache.dynamic_dims[source] = cache.dynamic_dims.get(source, dims) | dims
        compile_id = cache.next_compile_id()
        with dump.compiling(fn.__code__, len(cache.entries), compile_id) as scope, \
                _profiler_range(f"Graphwright Compile: {region_name(fn, compile_id)}"), \
                events.compiling(fn, scope, reasons, list(cache.entries)) as compile_record:
            # Compiling reads the inputs' metadata, which must not run a tensor subclass's
            # `__torch_function__` (the tracer runs those itself, for the program's own operations).
            with phase("residual"), _user_modes_off(), compiling_call(), torch._C.DisableTorchFunctionSubclass():
                entry = build_entry(fn, args, kwargs, settings, cache.dynamic_dims, self._compile_residual_call)
                entry.compile_scope = scope
                entry.region_name = f"Graphwright-Compiled Region: {region_name(fn, compile_id)}"
                events.entry_built(fn, entry, entry.__globals__)
            compile_record.entry = entry
        cache.entries.insert(0, entry)
        return entry

    def _compile_residual_call(self, fn: types.FunctionType) -> "CompiledFunction":
        """A resume function or a callee the residual code calls, compiled with these settings."""
        return CompiledFunction(fn, self._settings.for_residual_calls(), kept=False)


# Held while an entry is compiled (not while entries run): one compile at a time in the
# process, as PyTorch's compile lock. Reentrant: compiling may call compiled code.
_COMPILE_LOCK = threading.RLock()


def region_name(fn: types.FunctionType, compile_id: torch._guards.CompileId) -> str:
    """How the profiler names the compile `compile_id` of `fn`: `0/1 f (train.py:12)`."""
    code = fn.__code__
    return f"{compile_id} {code.co_qualname} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _profiler_range(name: str) -> Any:
    return _RecordFunctionFast(name) if _profiler._is_profiler_enabled else contextlib.nullcontext()


def _runnable(entries: list[Callable]) -> list[Callable]:
    """`entries`, or under the profiler their twins that run in a range naming the entry."""
    return _in_regions(entries) if _profiler._is_profiler_enabled else entries


def _in_regions(entries: list[Callable]) -> list[Callable]:
    return [in_region(entry, entry.region_name) for entry in entries]


def _first_hit(entries: list[Callable], fn: types.FunctionType, args: tuple, kwargs: dict) -> Any:
    """What the first entry whose guards pass returns; MISS when none does."""
    try:
        for entry in entries:
            result = entry(fn, *args, **kwargs)
            if result is not MISS:
                return result
    except TypeError as error:
        if error.__traceback__.tb_next is not None:
            raise  # raised by the entry's body, not by binding the arguments to it
    return MISS


def _drop_stale_entries(cache: CodeCache) -> None:
    """Forget the entries compiled for a class or function that is gone (`Guard.weak`): they
    can never hit again, and must not count towards the cache size limit (a module class made
    by a function compiles once per class, as often as the program makes one)."""
    live = [entry for entry in cache.entries if all(guard.expected is not None for guard in entry.guards
                                                   if guard.weak)]
    if len(live) < len(cache.entries):
        cache.entries[:] = live
        cache.exhausted = False


@contextlib.contextmanager
def _user_modes_off() -> Iterator[None]:
    """Compile with the user's dispatch modes off (those left on the stack ignore compile
    internals: they see the compiled code run, not the tracer's fake tensors). Modes of
    torch's own tracing (a compiled function called inside one) stay."""
    depth = torch._C._len_torch_dispatch_stack()
    if not depth or any(_get_dispatch_stack_at(index).is_infra_mode() for index in range(depth)):
        yield
        return
    modes = [_pop_mode() for _ in range(depth)]
    try:
        yield
    finally:
        for mode in reversed(modes):
            _push_mode(mode)


def _keep(key: tuple, cache: CodeCache) -> None:
    _RECENT[key] = cache
    _RECENT.move_to_end(key)
    while len(_RECENT) > max(config.dropped_cache_limit, 0):
        _RECENT.popitem(last=False)
