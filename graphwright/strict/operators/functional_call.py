"""`torch.func.functional_call(module, parameters_and_buffers, args, kwargs)` inside a region.

The module is called with some of its parameters and buffers replaced by the
given tensors: while its call is traced (as a subgraph, so that nothing
outside changes), reading `owner.name` for a replaced `name` gives the given
value (an overlay on the owner's module value, removed afterwards). Tied
parameters are replaced together (`tie_weights`), as PyTorch does, guarded on
staying tied. The module must read replaced tensors as attributes: one reached
another way (`parameters()`, `_parameters[...]`) would be the original, so
that is a graph break. The graph calls the subgraph (`transforms.call`), so
values and gradients are those of the eager call; gradients flow to the given
tensors, not to the module's own.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..._core import transforms
from ..guards.sources import ModuleDictSource
from ..interpreter import graph_breaks as gb
from ..objects import attributes, operations
from ..objects.values import DictValue, ModuleValue, SequenceValue, TensorValue, Value
from . import subgraphs
from .functorch import record_transform
from .subgraphs import trace_subgraph

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_NAME = "torch.func.functional_call"
_MISSING = object()


def _handler(function: Any, dicts_parameter: str) -> Any:
    def handler(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
        bound = subgraphs.bind_arguments(tracer, function, args, kwargs)
        return call_functional_call(tracer, bound, bound[dicts_parameter])
    return handler


def call_functional_call(tracer: "Tracer", bound: dict[str, Value], dicts: Value) -> Value:
    """The call, its arguments bound by name; `dicts` holds the replacement tensors."""
    from ..interpreter import calls

    module = bound["module"]
    if not isinstance(module, ModuleValue):
        raise _refuse(tracer, f"the module is a {module.python_type().__name__}, not an nn.Module read from outside")
    given = _given_tensors(tracer, dicts)
    tie_weights = operations.truth(tracer, bound["tie_weights"])
    strict = operations.truth(tracer, bound["strict"])
    replaced = _with_tied(tracer, module, given) if tie_weights else given
    names = _state_names(module.module)
    unexpected = sorted(set(replaced) - set(names))
    if unexpected:
        raise _refuse(tracer, f"{', '.join(unexpected)} is not a parameter or buffer of the module")
    missing = [name for name in names if name not in replaced]
    if strict and missing:
        raise tracer.user_error(RuntimeError(
            f"Error(s) in reparametrizing for {type(module.module).__name__}:\n\t"
            f"Missing key(s): {', '.join(repr(name) for name in missing)}."))
    call_args = _call_arguments(bound["args"])
    call_kwargs = {} if operations.is_none(bound["kwargs"]) else dict(operations.dict_items(tracer, bound["kwargs"]))
    owners = {name: _owner(tracer, module, name) for name in replaced}

    def call(inner_args: list[Value], inner_kwargs: dict[str, Value]) -> Value:
        saved = []
        for name, value in replaced.items():
            owner, attr = owners[name]
            saved.append((owner, attr, owner.overlay.get(attr, _MISSING)))
            owner.overlay[attr] = value
        try:
            return calls.call_module(tracer, module, inner_args, inner_kwargs)
        finally:
            for owner, attr, previous in reversed(saved):
                if previous is _MISSING:
                    owner.overlay.pop(attr, None)
                else:
                    owner.overlay[attr] = previous

    body = trace_subgraph(tracer, module, call_args, call_kwargs, purpose="A module called by functional_call",
                          call=call)
    _check_replaced_unread(tracer, module, replaced, owners, body)
    return record_transform(tracer, _NAME, transforms.call, {}, (call_args, call_kwargs), (call_args, call_kwargs),
                            body)


def _given_tensors(tracer: "Tracer", dicts: Value) -> dict[str, Value]:
    """The replacement tensors by name, from one dict or a sequence of dicts."""
    parts = operations.iterate(tracer, dicts) if isinstance(dicts, SequenceValue) else [dicts]
    given: dict[str, Value] = {}
    for part in parts:
        if not isinstance(part, DictValue):
            raise _refuse(tracer, f"parameters and buffers must be given as dicts, not a {part.python_type().__name__}")
        for name, value in operations.dict_items(tracer, part).items():
            if name in given:
                raise tracer.user_error(ValueError(
                    f"{name!r} appeared in multiple dictionaries; behavior of functional call is ambiguous"))
            if not isinstance(value, TensorValue):
                raise _refuse(tracer, f"the value given for {name!r} is a {value.python_type().__name__}, not a tensor")
            given[name] = value
    return given


def _state_names(module: torch.nn.Module) -> list[str]:
    return [name for name, _ in (*module.named_parameters(remove_duplicate=False),
                                 *module.named_buffers(remove_duplicate=False))]


def _with_tied(tracer: "Tracer", module: ModuleValue, given: dict[str, Value]) -> dict[str, Value]:
    """`given` with every name tied to a given one (the same tensor under several names)."""
    real = module.module
    groups: dict[int, list[str]] = {}
    for name, tensor in (*real.named_parameters(remove_duplicate=False), *real.named_buffers(remove_duplicate=False)):
        groups.setdefault(id(tensor), []).append(name)
    replaced = dict(given)
    for names in groups.values():
        if len(names) < 2:
            continue
        sources = [_state_source(tracer, module, name) for name in names]
        for source in sources[1:]:
            tracer.add_guard(source, "alias", sources[0])  # still tied on later calls
        values = {id(given[name]): given[name] for name in names if name in given}
        if len(values) > 1:
            raise tracer.user_error(ValueError(
                f"functional_call got multiple values for keys {sorted(n for n in names if n in given)}, "
                "which are tied. Consider using tie_weights=False"))
        if values:
            (value,) = values.values()
            replaced.update({name: value for name in names})
    return replaced


def _owner(tracer: "Tracer", module: ModuleValue, name: str) -> tuple[ModuleValue, str]:
    """The module value holding `name` (a dotted path) and the attribute name in it."""
    *path, attr = name.split(".")
    owner: Value = module
    for part in path:
        owner = attributes.load_attr(tracer, owner, part)
        if not isinstance(owner, ModuleValue):
            raise _refuse(tracer, f"{name!r} is not held by a submodule")
    return owner, attr


def _state_source(tracer: "Tracer", module: ModuleValue, name: str) -> Any:
    owner, attr = _owner(tracer, module, name)
    table = "_parameters" if attr in owner.module._parameters else "_buffers"
    return None if owner.source is None else ModuleDictSource(owner.source, table, attr)


def _call_arguments(args: Value) -> list[Value]:
    if operations.is_none(args):
        return []
    if isinstance(args, SequenceValue) and args.kind is tuple and args.cls is None:
        return list(args.items)
    return [args]


def _check_replaced_unread(tracer: "Tracer", module: ModuleValue, replaced: dict[str, Value],
                           owners: dict[str, tuple[ModuleValue, str]], body: subgraphs.Subgraph) -> None:
    """No original of a replaced tensor may be read inside (it would stand for the new one)."""
    given_fakes = {id(value.fake) for value in replaced.values()}
    originals = {}
    for name, (owner, attr) in owners.items():
        real = owner.module._parameters.get(attr) if attr in owner.module._parameters else owner.module._buffers[attr]
        known = tracer.memo_by_id.get(id(real))
        if known is not None and isinstance(known[1], TensorValue) and id(known[1].fake) not in given_fakes:
            originals[id(known[1].fake)] = name
    for value in body.lifted:
        name = originals.get(id(value.fake)) if isinstance(value, TensorValue) else None
        if name is not None:
            raise _refuse(tracer, f"the module reads its replaced tensor {name!r} other than as an attribute "
                                  "(its original would be used)")


def _refuse(tracer: "Tracer", reason: str) -> Exception:
    return tracer.graph_break(gb.HIGHER_ORDER_CALL, f"functional_call: {reason}", op=_NAME, reason=reason)


HANDLERS = {torch.func.functional_call: _handler(torch.func.functional_call, "parameter_and_buffer_dicts"),
            torch.nn.utils.stateless.functional_call: _handler(torch.nn.utils.stateless.functional_call,
                                                               "parameters_and_buffers")}
