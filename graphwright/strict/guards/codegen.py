"""Generating one cache entry: guards first, then a body, as one Python function.

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
This module owns the frame of that function (names, references to objects,
re-reading sources, the guard lines, assembly); what the body does after the
guards is written by `residual.rebuild`.
"""
from __future__ import annotations

import inspect
import types
from typing import Any, Callable

import torch

from .guards import Guard, ordered
from .sources import LocalSource, Source


class _Miss:
    """Returned by an entry whose guards fail."""

    def __repr__(self) -> str:
        return "MISS"


MISS = _Miss()


class EntryWriter:
    """Names and references shared by the guard lines and the body of one entry.

    Sources are read once each, into `___vN` variables, in the order first needed; the
    lines that read them (`reads`) run before the graph, so that nothing the body does
    can change what a source refers to."""

    def __init__(self, code: types.CodeType) -> None:
        self.code = code
        # builtins under names no parameter of the user's function can shadow
        self.namespace: dict[str, Any] = {"___type": type, "___len": len, "___tuple": tuple,
                                          "___hasattr": hasattr,
                                          "___dispatch_keys": torch._C._dispatch_keys,
                                          "___Exception": Exception, "___MISS": MISS}
        self.reads: list[str] = []
        self._refs: dict[int, str] = {}
        self._vars: dict[Source, str] = {}

    def ref(self, obj: Any) -> str:
        name = self._refs.get(id(obj))
        if name is None:
            name = f"___c{len(self._refs)}"
            self._refs[id(obj)] = name
            self.namespace[name] = obj
        return name

    def expr(self, source: Source) -> str:
        if isinstance(source, LocalSource):
            return parameter_name(source.local)
        var = self._vars.get(source)
        if var is None:
            text = source.gen(self)
            var = f"___v{len(self._vars)}"
            self._vars[source] = var
            self.reads.append(f"{var} = {text}")
        return var

    def guard_lines(self, guards: list[Guard]) -> list[str]:
        """The guard section; the reads it needs are emitted in line, then `reads` starts afresh."""
        lines = self.reads = []
        for guard in ordered(guards):
            value = "" if guard.kind in ("grad_mode", "global_state", "sizes") else self.expr(guard.source)
            lines.append(f"if not ({guard.condition(value, self)}): return ___MISS")
        self.reads = []
        return lines


def parameter_name(name: str) -> str:
    """A parameter's name in generated source: a comprehension's `.0` becomes `___dot0`."""
    return name if name.isidentifier() else "___dot" + name.lstrip(".")


def signature_text(code: types.CodeType) -> tuple[str, str]:
    """(parameter list, call arguments) mirroring `code`'s signature, without defaults."""
    names = [parameter_name(name) for name in code.co_varnames]
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
