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

import dis
import inspect
import io
import re
import reprlib
import types
from typing import Any, Callable

import torch
from torch._C._profiler import _RecordFunctionFast

from ..._core import dump
from ..._core.subclass_protocol import overrides_torch_function
from ..._core.counters import phase
from .guards import STATE_KINDS, Guard, ordered
from .sources import LocalSource, Source


class _NoDefault:
    """What an entry's parameter holds when the call left it to its default."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


class _Miss:
    """Returned by an entry whose guards fail."""

    def __repr__(self) -> str:
        return "MISS"


MISS = _Miss()
NO_DEFAULT = _NoDefault()


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
                                          "___Exception": Exception, "___MISS": MISS,
                                          "___NODEFAULT": NO_DEFAULT}
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
        """The guard section; the reads it needs are emitted in line, then `reads` starts afresh.
        Reading a tensor subclass's metadata must not run its `__torch_function__` (eager does not
        read it): such guards run with it off, after the check of the torch function state the
        call starts with."""
        with phase("guards"):
            state = [f"if not ({guard.condition('', self)}): return ___MISS"
                     for guard in guards if guard.kind == "torch_function"]
            lines = self.reads = []
            for guard in ordered(guards):
                if guard.kind == "torch_function":
                    continue
                value = "" if guard.kind in STATE_KINDS else self.expr(guard.source)
                lines.append(f"if not ({guard.condition(value, self)}): return ___MISS")
            self.reads = []
            if any(guard.kind == "tensor" and overrides_torch_function(guard.expected.cls) for guard in guards):
                lines = [f"with {self.ref(torch._C.DisableTorchFunctionSubclass)}():", *("    " + line for line in lines)]
            return [*state, *lines]


def parameter_name(name: str) -> str:
    """A parameter's name in generated source: a comprehension's `.0` becomes `___dot0`."""
    return name if name.isidentifier() else "___dot" + name.lstrip(".")


def signature_text(code: types.CodeType, optional: frozenset[str] = frozenset()) -> tuple[str, str]:
    """(parameter list, call arguments) mirroring `code`'s signature; the `optional` parameters
    default to `___NODEFAULT` (the entry fills them from the function's defaults, as they are
    at the call)."""
    names = [parameter_name(name) for name in code.co_varnames]
    positional = list(names[:code.co_argcount])
    keyword_only = list(names[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
    index = code.co_argcount + code.co_kwonlyargcount

    def declared(name: str) -> str:
        return f"{name}=___NODEFAULT" if name in optional else name

    params = [declared(name) for name in positional]
    if code.co_posonlyargcount:
        params.insert(code.co_posonlyargcount, "/")
    call = list(positional)
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + names[index])
        call.append("*" + names[index])
        index += 1
    elif keyword_only:
        params.append("*")
    params += [declared(name) for name in keyword_only]
    call += [f"{name}={name}" for name in keyword_only]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + names[index])
        call.append("**" + names[index])
    return ", ".join(["___gw_fn", *params]), ", ".join(call)


def defaulted_parameters(code: types.CodeType, fn: Any) -> dict[str, str]:
    """Each parameter that `fn` gives a default, and the expression that reads that default from
    `___gw_fn` itself at the call, as Python does: `fn.__defaults__ = ...`, or another function
    of the same code, is then seen by the guards."""
    argcount = code.co_argcount
    defaults = getattr(fn, "__defaults__", None) or ()
    filled = {parameter_name(name): f"___gw_fn.__defaults__[{index - argcount}]"
              for index, name in enumerate(code.co_varnames[:argcount]) if index >= argcount - len(defaults)}
    kwdefaults = getattr(fn, "__kwdefaults__", None) or {}
    for name in code.co_varnames[argcount:argcount + code.co_kwonlyargcount]:
        if name in kwdefaults:
            filled[parameter_name(name)] = f"___gw_fn.__kwdefaults__[{name!r}]"
    return filled


def assemble(writer: EntryWriter, fn: Any, guard_lines: list[str], body: list[str], name: str) -> Callable:
    """Compile the entry function's source. Its first lines fill the parameters left to their
    defaults; a default that is gone makes the entry miss."""
    filled = defaulted_parameters(writer.code, fn)
    params, _ = signature_text(writer.code, frozenset(filled))
    defaults = [f"if {name} is ___NODEFAULT: {name} = {default}" for name, default in filled.items()]
    guard_block = "\n".join("        " + line for line in [*defaults, *guard_lines]) or "        pass"
    body_block = "\n".join("    " + line for line in body)
    source = f"def ___entry({params}):\n    try:\n{guard_block}\n{_GUARDS_END}{body_block}\n"
    text, filename = source, f"<graphwright entry for {name}>"
    if dump.active():  # compiled from the dumped file: tracebacks and debuggers show its lines
        text = _file_header(writer, name) + source
        filename = dump.write("entry.py", text)
    exec(compile(text, filename, "exec"), writer.namespace)
    entry = writer.namespace["___entry"]
    if not filename.startswith("<"):  # the dumped file ends with the entry's bytecode, as comments
        listing = io.StringIO()
        dis.dis(entry, file=listing)
        dump.append(filename, "\n# bytecode:\n" + "".join(f"#   {line}\n" for line in listing.getvalue().splitlines()))
    entry.source = source
    entry.in_region = None
    return entry


_GUARDS_END = "    except ___Exception:\n        return ___MISS\n"


def in_region(entry: Callable, name: str) -> Callable:
    """`entry`'s twin for calls under the profiler: the same guards, then the body inside a
    profiler range `name` (made on the first such call, kept on the entry as `in_region`)."""
    twin = entry.in_region
    if twin is None:
        head, end, body = entry.source.partition(_GUARDS_END)
        # the body's lines are statements (string constants are written with repr: no line
        # breaks inside a literal), so indenting each line nests the body in the range
        nested = "".join(f"    {line}\n" for line in body.splitlines())
        source = head.replace("def ___entry(", "def ___entry_in_region(", 1) + end + \
            f"    with ___RecordFunctionFast({name!r}):\n{nested}"
        namespace = entry.__globals__
        namespace["___RecordFunctionFast"] = _RecordFunctionFast
        exec(compile(source, f"{entry.__code__.co_filename} (in a profiler range)", "exec"), namespace)
        twin = entry.in_region = namespace["___entry_in_region"]
    return twin


def _file_header(writer: EntryWriter, name: str) -> str:
    """What a dumped entry file says before its code: how to read it, and what its names hold."""
    scope = dump.current()
    lines = [f"# graphwright cache entry {scope.entry} of `{name}` ({scope.location}).",
             "# The guards come first: any that fails returns ___MISS, and the cache tries its next entry",
             "# (or compiles a new one). Then the body: sources read once (___vN), the graph call, values",
             "# rebuilt (___rN), side effects replayed, and the rest of the function (a resume function).",
             "# The objects it refers to:"]
    for key, value in writer.namespace.items():
        if re.fullmatch(r"___c\d+", key):
            text = " ".join(_short_repr(value).split())
            lines.append(f"#   {key} = {text if len(text) <= 100 else text[:97] + '...'}")
    return "\n".join(lines) + "\n"


def _short_repr(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"<tensor of size {list(value.shape)}, {value.dtype}>"
    if isinstance(value, torch.nn.Module):
        return f"<{type(value).__qualname__} module at {id(value):#x}>"
    if isinstance(value, dict) and "__builtins__" in value and "__name__" in value:
        return f"<globals of module {value['__name__']}>"
    name, module = getattr(value, "__qualname__", None), getattr(value, "__module__", None)
    if isinstance(name, str) and isinstance(module, str):
        return f"<{'class' if isinstance(value, type) else type(value).__name__} {module}.{name}>"
    return _REPR.repr(value)


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 90
