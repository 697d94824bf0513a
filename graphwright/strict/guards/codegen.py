"""Generating one cache entry: guards, graph call and residual Python, as one function.

The entry has the compiled function's own signature (plus the function
object first), so arguments bind exactly as they would in the original call:

    def ___entry(___gw_fn, x, y):
        try:
            ___v1 = x.weight
            if not (type(x) is ___c0 and ...): return ___MISS
        except Exception:
            return ___MISS
        ___out = ___graph(x, ___v1)
        ___c3['counter'] = 2          # side effects, replayed
        return (___out[0], x)

This is the hot path of every compiled call: the guard section is straight
line code, cheapest checks first, and allocates nothing of its own on a hit.
Values are rebuilt from sources read before any replay, so replays cannot
change what the return value refers to.
"""
from __future__ import annotations

import inspect
import types
from typing import Any, Callable

import torch

from ..interpreter import graph_breaks as gb
from ..interpreter.symbolic_sizes import holds_symbol
from ..objects.classes import builtin_base, is_instance_value, real_object
from ..objects.values import (
    CellValue,
    ConstantValue,
    DictValue,
    FunctionValue,
    IteratorValue,
    ModuleValue,
    ObjectValue,
    SequenceValue,
    TensorValue,
    Value,
)
from ..residual.side_effects import SideEffects
from .guards import Guard, ordered
from .sources import LocalSource, Source


class _Miss:
    """Returned by an entry whose guards fail."""

    def __repr__(self) -> str:
        return "MISS"


MISS = _Miss()
_LITERAL_TYPES = (int, str, bool, type(None))


def _new_instance(cls: type, base: type, items: tuple | None) -> Any:
    """An empty instance of `cls`, made by its builtin base (no `__new__` of the user's runs)."""
    return tuple.__new__(cls, items) if base is tuple else base.__new__(cls)


def _fill(instance: Any, base: type, contents: dict | list | None, state: dict) -> Any:
    """Give an instance made by `_new_instance` its items and attributes, as the builtin base
    and `object.__setattr__` store them (no overridden `__setitem__` or `__setattr__` runs)."""
    if isinstance(contents, dict):
        for key, value in contents.items():
            base.__setitem__(instance, key, value)
    elif contents is not None:
        list.extend(instance, contents)
    for name, value in state.items():
        object.__setattr__(instance, name, value)
    return instance


def _refill(container: Any, new: Any, base: type) -> None:
    """Replace the items of an instance of a dict or list subclass through its builtin base."""
    if base is list:
        list.__setitem__(container, slice(None), new)
        return
    base.clear(container)
    for key, value in new.items():
        base.__setitem__(container, key, value)


def _make_function(code: types.CodeType, f_globals: dict, defaults: tuple, kwdefaults: dict | None,
                   closure: tuple) -> types.FunctionType:
    function = types.FunctionType(code, f_globals, code.co_name, defaults or None, closure or None)
    function.__kwdefaults__ = kwdefaults
    return function


def _replace_contents(container: Any, new: Any) -> None:
    container.clear()
    container.update(new)


class EntryWriter:
    def __init__(self, code: types.CodeType, on_break: Callable[..., Exception]) -> None:
        self.code = code
        # builtins under names no parameter of the user's function can shadow
        self.namespace: dict[str, Any] = {"___type": type, "___len": len, "___tuple": tuple,
                                          "___hasattr": hasattr,
                                          "___dispatch_keys": torch._C._dispatch_keys, "___delattr": delattr, "___iter": iter,
                                          "___Exception": Exception,
                                          "___MISS": MISS, "___new_instance": _new_instance,
                                          "___fill": _fill, "___refill": _refill,
                                          "___setattr": object.__setattr__,
                                          "___object_delattr": object.__delattr__,
                                          "___replace_contents": _replace_contents,
                                          "___make_function": _make_function}
        self.lines: list[str] = []
        self.outputs: list[Value] = []
        self.rebuilt_tensor = False
        self._on_break = on_break
        self._refs: dict[int, str] = {}
        self._vars: dict[Source, str] = {}
        self._output_index: dict[int, int] = {}
        self._instances: dict[int, str] = {}

    def ref(self, obj: Any) -> str:
        name = self._refs.get(id(obj))
        if name is None:
            name = f"___c{len(self._refs)}"
            self._refs[id(obj)] = name
            self.namespace[name] = obj
        return name

    def expr(self, source: Source) -> str:
        if isinstance(source, LocalSource):
            return source.local
        var = self._vars.get(source)
        if var is None:
            text = source.gen(self)
            var = f"___v{len(self._vars)}"
            self._vars[source] = var
            self.lines.append(f"{var} = {text}")
        return var

    # -- guards -------------------------------------------------------------------------
    def guard_lines(self, guards: list[Guard]) -> list[str]:
        self.lines = []
        for guard in ordered(guards):
            value = "" if guard.kind in ("grad_mode", "global_state", "sizes") else self.expr(guard.source)
            self.lines.append(f"if not ({guard.condition(value, self)}): return ___MISS")
        return self.lines

    # -- rebuilding values after the graph ---------------------------------------------
    def rebuild(self, value: Value) -> str:
        if isinstance(value, TensorValue):
            self.rebuilt_tensor = True
            if value.source is not None:
                return self.expr(value.source)
            index = self._output_index.get(id(value))
            if index is None:
                index = self._output_index[id(value)] = len(self.outputs)
                self.outputs.append(value)
            return f"___out[{index}]"
        if isinstance(value, ConstantValue) and holds_symbol(value.value):
            return self._rebuild_symbolic(value)
        if isinstance(value, ConstantValue):
            return self.literal(value.value)
        if value.source is not None and isinstance(value, (SequenceValue, DictValue, ModuleValue, ObjectValue)):
            return self.expr(value.source)
        if is_instance_value(value) and real_object(value) is None or \
                isinstance(value, DictValue) and value.cls is not None:
            return self._rebuild_instance(value)
        if isinstance(value, SequenceValue):
            items = "".join(self.rebuild(item) + ", " for item in value.items)
            if value.cls is not None:
                cls = self.ref(value.cls)
                return f"{cls}({items})" if hasattr(value.cls, "_fields") else f"{cls}(({items}))"
            return f"[{items}]" if value.kind is list else f"({items})"
        if isinstance(value, DictValue):
            if value.kind is not dict:
                return f"{self.ref(value.kind)}(({''.join(self.literal(k) + ', ' for k in value.items)}))"
            pairs = ", ".join(f"{self.literal(key)}: {self.rebuild(item)}" for key, item in value.items.items())
            return "{" + pairs + "}"
        if isinstance(value, ModuleValue):
            return self.ref(value.module)
        if isinstance(value, ObjectValue):
            return self.ref(value.obj)
        if isinstance(value, FunctionValue):
            return self._rebuild_function(value)
        if isinstance(value, IteratorValue):
            return "___iter([" + "".join(self.rebuild(item) + ", " for item in value.items[value.position:]) + "])"
        raise self._on_break(gb.UNRECONSTRUCTIBLE_VALUE, f"rebuild {value!r}",
                             type=value.python_type().__name__)

    def _rebuild_instance(self, value: Value) -> str:
        """An instance made in the region, rebuilt once (a second use refers to the first):
        made empty by its builtin base, then given its items and its attributes."""
        known = self._instances.get(id(value))
        if known is not None:
            return known
        name = self._instances[id(value)] = f"___o{len(self._instances)}"
        cls = value.python_type()
        base = builtin_base(cls)
        classes = f"{self.ref(cls)}, {self.ref(base)}"
        if base is tuple:
            made = f"({name} := ___new_instance({classes}, ({''.join(self.rebuild(i) + ', ' for i in value.items)})))"
            contents = "None"
        else:
            made = f"({name} := ___new_instance({classes}, None))"
            if isinstance(value, DictValue):
                contents = "{" + ", ".join(f"{self.literal(key)}: {self.rebuild(item)}"
                                           for key, item in value.items.items()) + "}"
            elif isinstance(value, SequenceValue):
                contents = "[" + "".join(self.rebuild(item) + ", " for item in value.items) + "]"
            else:
                contents = "None"
        state = ", ".join(f"{attribute!r}: {self.rebuild(item)}" for attribute, item in value.overlay.items()
                          if item is not None)
        return f"___fill({made}, {self.ref(base)}, {contents}, {{{state}}})"

    def _rebuild_symbolic(self, value: ConstantValue) -> str:
        """A symbolic size is a graph output; a Size or tuple holding some is rebuilt around them."""
        if isinstance(value.value, (tuple, list)):
            items = "".join(self.rebuild(ConstantValue(item)) + ", " for item in value.value)
            if isinstance(value.value, torch.Size):
                return f"{self.ref(torch.Size)}(({items}))"
            return f"[{items}]" if isinstance(value.value, list) else f"({items})"
        self.rebuilt_tensor = True
        self.outputs.append(value)
        return f"___out[{len(self.outputs) - 1}]"

    def _rebuild_function(self, value: FunctionValue) -> str:
        if value.fn is None:
            defaults = "(" + "".join(self.rebuild(d) + ", " for d in value.defaults) + ")"
            kwdefaults = self.rebuild(DictValue(value.kwdefaults)) if value.kwdefaults else "None"
            closure = "(" + "".join(self._rebuild_cell(cell) + ", " for cell in value.closure) + ")"
            plain = (f"___make_function({self.ref(value.code)}, {self.ref(value.globals)}, "
                     f"{defaults}, {kwdefaults}, {closure})")
        else:
            plain = self.expr(value.source) if value.source is not None else self.ref(value.fn)
        if value.bound_self is None:
            return plain
        return f"{self.ref(types.MethodType)}({plain}, {self.rebuild(value.bound_self)})"

    def _rebuild_cell(self, cell: CellValue) -> str:
        if cell.real is not None and cell.source is not None:
            return self.expr(cell.source)
        if cell.real is not None:
            return self.ref(cell.real)
        if cell.contents is None:
            return f"{self.ref(types.CellType)}()"
        return f"{self.ref(types.CellType)}({self.rebuild(cell.contents)})"

    def literal(self, python_value: Any) -> str:
        if type(python_value) in _LITERAL_TYPES:
            return repr(python_value)
        if type(python_value) is float and python_value == python_value and abs(python_value) != float("inf"):
            return repr(python_value)
        return self.ref(python_value)

    def replay_lines(self, effects: SideEffects) -> list[str]:
        lines = []
        for container in effects.mutated.values():
            target = self.expr(container.source)
            new = self.rebuild(_detached(container))
            if container.cls is not None:  # a subclass: through its builtin base
                lines.append(f"___refill({target}, {new}, {self.ref(builtin_base(container.cls))})")
            elif isinstance(container, SequenceValue):
                lines.append(f"{target}[:] = {new}")
            else:
                lines.append(f"___replace_contents({target}, {new})")
        for owner, name, value in effects.attribute_stores.values():
            target = self.expr(owner.source)
            raw = is_instance_value(owner)  # the class's own __setattr__ already ran in the trace
            if value is None:
                lines.append(f"{'___object_delattr' if raw else '___delattr'}({target}, {name!r})")
            elif raw:
                lines.append(f"___setattr({target}, {name!r}, {self.rebuild(value)})")
            else:
                lines.append(f"{target}.{name} = {self.rebuild(value)}")
        for f_globals, name, value in effects.global_stores.values():
            lines.append(f"{self.ref(f_globals)}[{name!r}] = {self.rebuild(value)}")
        for cell in effects.cell_stores.values():
            if cell.source is None:
                raise self._on_break(gb.UNRECONSTRUCTIBLE_VALUE, "cell store", type="closure cell")
            lines.append(f"{self.expr(cell.source)}.cell_contents = {self.rebuild(cell.contents)}")
        for function, args, kwargs in effects.replayed_calls:
            arguments = [self.rebuild(arg) for arg in args]
            arguments += [f"{key}={self.rebuild(arg)}" for key, arg in kwargs.items()]
            lines.append(f"{self.ref(function)}({', '.join(arguments)})")
        return lines


def _detached(container: Value) -> Value:
    """The container's new contents as a fresh value, so it is rebuilt item by item."""
    if isinstance(container, SequenceValue):
        return SequenceValue(container.items, list)
    return DictValue(container.items, container.kind)


def signature_text(code: types.CodeType) -> tuple[str, str]:
    """(parameter list, call arguments) mirroring `code`'s signature, without defaults."""
    names = code.co_varnames
    positional = list(names[:code.co_argcount])
    keyword_only = list(names[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
    index = code.co_argcount + code.co_kwonlyargcount
    params = list(positional)
    if code.co_posonlyargcount:
        params.insert(code.co_posonlyargcount, "/")
    call = list(positional)
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + names[index])
        call.append("*" + names[index])
        index += 1
    elif keyword_only:
        params.append("*")
    params += keyword_only
    call += [f"{name}={name}" for name in keyword_only]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + names[index])
        call.append("**" + names[index])
    return ", ".join(["___gw_fn", *params]), ", ".join(call)


def assemble(writer: EntryWriter, fn: Any, guard_lines: list[str], body: list[str], name: str) -> Callable:
    """Compile the entry function's source; defaults come from the original function."""
    params, _ = signature_text(writer.code)
    guard_block = "\n".join("        " + line for line in guard_lines) or "        pass"
    body_block = "\n".join("    " + line for line in body)
    source = (f"def ___entry({params}):\n    try:\n{guard_block}\n    except ___Exception:\n"
              f"        return ___MISS\n{body_block}\n")
    exec(compile(source, f"<graphwright entry for {name}>", "exec"), writer.namespace)
    entry = writer.namespace["___entry"]
    entry.__defaults__ = getattr(fn, "__defaults__", None)
    entry.__kwdefaults__ = getattr(fn, "__kwdefaults__", None)
    entry.source = source
    return entry

