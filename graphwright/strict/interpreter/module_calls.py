"""`module(*args)` inside the region: nn.Module's `__call__`, with its hooks, inlined.

The forward pre-hooks (the global ones registered with
`register_module_forward_pre_hook` first, then the module's own, with or
without keyword arguments), `forward`, and the forward hooks are inlined in the
order nn.Module runs them, a hook's result replacing the inputs or the output.
What needs autograd to wrap the call itself (full backward hooks and backward
pre-hooks, the deprecated non-full backward hooks), forward hooks that must run
on an exception (`always_call=True`), and a lazy module that has not inferred
its parameters yet are a graph break at the call: the residual code runs it
with `residual.callees`, its hooks and forward compiled separately. Hooks are
read by position and guarded on how many a table holds and how each is called,
so adding or removing a hook after a compile recompiles. This module does not
decide what a call of the forward itself means (that is `calls.call_value`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..._core import config, source_lines
from ..guards.guards import GLOBAL_HOOK_TABLES, global_module_hooks
from ..guards.sources import AttrSource, ExprWriter, FunctionSource, GlobalSource, ItemSource, Source
from ..marked import markers
from ..objects import operations
from ..objects.values import DictValue, ModuleValue, SequenceValue, Value
from ..residual.module_wrappers import is_module_wrapper
from . import calls
from . import graph_breaks as gb

if TYPE_CHECKING:
    from .tracer import Tracer

_GLOBAL = torch.nn.modules.module  # where nn.Module keeps the hooks registered for every module
_CALLED_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
_HOOK_TABLES = (*_CALLED_HOOK_TABLES, "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs")


def module_call(tracer: "Tracer", module: ModuleValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """nn.Module's `__call__`: forward pre-hooks, forward, forward hooks, as nn.Module runs them,
    with the hooks the module has at this point of the region (those registered in it too). The
    nodes made meanwhile are under this module call (their `nn_module_stack`)."""
    outer = tracer.module_stack
    path = module.source.name() if module.source is not None else type(module.module).__name__
    tracer.module_stack = {**outer, source_lines.module_key(path): (path, type(module.module))}
    try:
        return _module_call(tracer, module, args, kwargs)
    finally:
        tracer.module_stack = outer


def _module_call(tracer: "Tracer", module: ModuleValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    from ..objects import attributes

    real = module.module
    name = type(real).__qualname__
    if markers.is_disabled(real):
        raise tracer.graph_break(gb.DISABLED_FUNCTION, f"call to disabled module {name}", name=name)
    if is_module_wrapper(real):
        raise tracer.graph_break(gb.MODULE_WRAPPER, f"call of {name}", name=name)
    if isinstance(real, torch.nn.RNNBase) and not config.allow_rnn:
        raise tracer.graph_break(gb.RECURRENT_MODULE, f"call to recurrent module {name}", name=name)
    global_pre_hooks, global_hooks = _global_hooks(tracer, name)
    hooks = _ModuleHooks(tracer, module)
    if hasattr(real, "_initialize_hook"):  # nn.modules.lazy's mark of a module still to infer its parameters
        hooks.items("_forward_pre_hooks")  # its removal recompiles
        raise tracer.graph_break(gb.LAZY_MODULE, f"call to uninitialized lazy module {name}", name=name)
    if not any(hooks.has(table) for table in _CALLED_HOOK_TABLES):
        if hooks.untouched:
            tracer.add_guard(module.source, "no_hooks")
        if not (global_pre_hooks or global_hooks):
            return _call_forward(tracer, module, args, kwargs, attributes)
    else:
        hooks.guard()
    for table, what in (("_backward_hooks", "backward hooks"), ("_backward_pre_hooks", "backward pre-hooks")):
        if hooks.has(table):
            raise tracer.graph_break(gb.MODULE_HOOKS, f"{what} on {name}", name=name, hooks=what)
    pre_hooks, forward_hooks = hooks.items("_forward_pre_hooks"), hooks.items("_forward_hooks")
    if any(hook_id in real._forward_hooks_always_called for hook_id, _ in forward_hooks):
        what = "forward hooks registered with `always_call=True`"
        raise tracer.graph_break(gb.MODULE_HOOKS, f"{what} on {name}", name=name, hooks=what)
    for hook_id, hook in [*global_pre_hooks, *pre_hooks]:
        if hooks.marked("_forward_pre_hooks_with_kwargs", hook_id):
            result = calls.call_value(tracer, hook, [module, SequenceValue(args, tuple), DictValue(kwargs)], {})
            if not operations.is_none(result):
                new_args, new_kwargs = operations.iterate(tracer, result)
                args, kwargs = operations.iterate(tracer, new_args), operations.dict_items(tracer, new_kwargs)
        else:
            result = calls.call_value(tracer, hook, [module, SequenceValue(args, tuple)], {})
            if not operations.is_none(result):
                args = operations.iterate(tracer, result) if isinstance(result, SequenceValue) \
                    and result.kind is tuple else [result]
    output = _call_forward(tracer, module, args, kwargs, attributes)
    for hook_id, hook in [*global_hooks, *forward_hooks]:
        hook_args = [module, SequenceValue(args, tuple)]
        if hooks.marked("_forward_hooks_with_kwargs", hook_id) or hook_id in _GLOBAL._global_forward_hooks_with_kwargs:
            hook_args.append(DictValue(kwargs))
        result = calls.call_value(tracer, hook, [*hook_args, output], {})
        if not operations.is_none(result):
            output = result
    return output


def _call_forward(tracer: "Tracer", module: ModuleValue, args: list[Value], kwargs: dict[str, Value],
                  attributes: Any) -> Value:
    return calls.call_value(tracer, attributes.load_attr(tracer, module, "forward"), args, kwargs)


def _global_hooks(tracer: "Tracer", name: str) -> tuple[list[tuple[Any, Value]], list[tuple[Any, Value]]]:
    """The forward pre-hooks and forward hooks registered for every module, read by source
    (guarded as `_table_items` says); a graph break where autograd must wrap the call (global backward
    hooks), where a hook must run on an exception, or where the region changed the tables."""
    if any(_changed_in_region(tracer, getattr(_GLOBAL, table)) for table in GLOBAL_HOOK_TABLES):
        raise tracer.graph_break(gb.MODULE_HOOKS, f"global hooks changed before calling {name}", name=name,
                                 hooks="module hooks registered for every module inside the region")
    if not global_module_hooks():
        tracer.add_guard(FunctionSource(), "global_hooks")
        return [], []
    tables = {table: _table_items(tracer, getattr(_GLOBAL, table), GlobalSource(id(_GLOBAL.__dict__), table,
                                                                                  _GLOBAL.__dict__))
              for table in GLOBAL_HOOK_TABLES}
    if tables["_global_backward_hooks"] or tables["_global_backward_pre_hooks"]:
        what = "backward hooks registered for every module"
        raise tracer.graph_break(gb.MODULE_HOOKS, f"{what}, called on {name}", name=name, hooks=what)
    if any(hook_id in _GLOBAL._global_forward_hooks_always_called for hook_id, _ in tables["_global_forward_hooks"]):
        what = "forward hooks registered for every module with `always_call=True`"
        raise tracer.graph_break(gb.MODULE_HOOKS, f"{what}, called on {name}", name=name, hooks=what)
    return tables["_global_forward_pre_hooks"], tables["_global_forward_hooks"]


class _ModuleHooks:
    """A module's hook tables as the call sees them. While the region has changed none of them
    (`untouched`), they are read from the module by position (`_table_items`); once it has (a hook
    registered or removed in the region), from the values the region changed, so that a hook
    registered earlier in the same call runs."""

    def __init__(self, tracer: "Tracer", module: ModuleValue) -> None:
        self.tracer = tracer
        self.module = module
        self.untouched = not any(table in module.overlay or _changed_in_region(tracer, module.module.__dict__[table])
                                 for table in _HOOK_TABLES)

    def has(self, table: str) -> bool:
        if self.untouched:
            return bool(self.module.module.__dict__[table])
        return bool(self._table(table).items)

    def guard(self) -> None:
        """Guard every table the call reads (the module has hooks): a hook of any kind added or
        removed later recompiles."""
        if self.untouched:
            for table in _CALLED_HOOK_TABLES:
                self.items(table)

    def items(self, table: str) -> list[tuple[Any, Value]]:
        if self.untouched:
            source = None if self.module.source is None else AttrSource(self.module.source, table)
            return _table_items(self.tracer, getattr(self.module.module, table), source, self.module.module)
        return list(self._table(table).items.items())

    def marked(self, table: str, hook_id: Any) -> bool:
        """Whether `hook_id` is in `table` (the hooks called with keyword arguments)."""
        if self.untouched:
            return hook_id in self.module.module.__dict__[table]
        return self._table(table).lookup(hook_id) is not None

    def _table(self, table: str) -> DictValue:
        from ..objects import attributes

        value = attributes.load_attr(self.tracer, self.module, table)
        if not isinstance(value, DictValue):
            name = type(self.module.module).__name__
            raise self.tracer.graph_break(gb.MODULE_HOOKS, f"{table} replaced by {value!r}", name=name,
                                          hooks=f"a `{table}` that is not a dict")
        return value


def _changed_in_region(tracer: "Tracer", real: Any) -> bool:
    """Whether the region changed this pre-existing container in place."""
    known = tracer.memo_by_id.get(id(real))
    return known is not None and known[0] is real and getattr(known[1], "mutated", False)


def _table_items(tracer: "Tracer", real: dict, source: Source | None, owner: Any = None) -> list[tuple[Any, Value]]:
    """The hooks of one table of `owner` (a module, or None for those registered for every
    module), read by position: the guard checks how many there are and how each is called, and
    each hook's own guards check what it is, so that modules whose hooks are alike (the same
    code on each layer) share their graphs while adding or removing a hook recompiles."""
    if source is None:
        return [(hook_id, tracer.wrap(hook, None)) for hook_id, hook in real.items()]
    tracer.add_guard(_HookLayoutSource(source, owner is None), "const", hook_layout(real, owner))
    hooks = _HookListSource(source)
    return [(hook_id, tracer.wrap(hook, ItemSource(hooks, index)))
            for index, (hook_id, hook) in enumerate(real.items())]


def hook_layout(table: dict, owner: Any) -> tuple:
    """For each hook of `table`, in order, the tables of its owner (None: every module's) that
    hold its id: whether it takes keyword arguments, whether it runs when forward raises."""
    flags = (_GLOBAL._global_forward_hooks_with_kwargs, _GLOBAL._global_forward_hooks_always_called) \
        if owner is None else (owner._forward_pre_hooks_with_kwargs, owner._forward_hooks_with_kwargs,
                               owner._forward_hooks_always_called)
    return tuple(tuple(hook_id in flag for flag in flags) for hook_id in table)


@dataclass(frozen=True)
class _HookListSource(Source):
    """The hooks of a table as a list, in the order they run."""

    table: Source

    def gen(self, writer: ExprWriter) -> str:
        return f"{writer.ref(list)}({writer.expr(self.table)}.values())"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        return list(self.table.read(fn, local_values).values())

    def name(self) -> str:
        return f"the hooks of {self.table.name()}"


@dataclass(frozen=True)
class _HookLayoutSource(Source):
    """`hook_layout` of a table: an AttrSource of its module, or a global table."""

    table: Source
    is_global: bool

    def _owner(self) -> Source | None:
        return None if self.is_global else self.table.base

    def gen(self, writer: ExprWriter) -> str:
        owner = self._owner()
        return f"{writer.ref(hook_layout)}({writer.expr(self.table)}, {'None' if owner is None else writer.expr(owner)})"

    def read(self, fn: Any, local_values: dict[str, Any]) -> Any:
        owner = self._owner()
        return hook_layout(self.table.read(fn, local_values), None if owner is None else owner.read(fn, local_values))

    def name(self) -> str:
        return f"the layout of {self.table.name()}"
