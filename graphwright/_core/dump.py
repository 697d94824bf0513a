"""Dumps: what the compiler generates, written as files a user can open, run and step through.

`graphwright.debug.dump(folder)` (or `GRAPHWRIGHT_DUMP_DIR`) turns dumping on.
Every cache entry built while it is on gets a folder of its own,
`<folder>/<function>/entry_<n>/`, where the compiler's layers write what they
made for that entry (see `graphwright.debug` for the files). A compile opens a
`CompileScope` for the entry it builds; work done later for the same entry
(AOT autograd compiles on an entry's first call, the backward on the first
backward) re-enters the scope it was made in, so its files land next to the
entry's.

This module owns the scopes, the folders and writing; it never decides what
to write.
"""
from __future__ import annotations

import collections
import contextlib
import os
import re
import types
from typing import Any, Iterator

import torch
import torch._guards

from . import structured_trace
from .graph_files import write_loadable

ENV_VAR = "GRAPHWRIGHT_DUMP_DIR"


class CompileScope:
    """One cache entry being built: which function, which entry, its compile id (the frame and
    compile numbers of the compile trace and the profiler's ranges, `structured_trace`), its
    dump folder (if any), and the seconds spent compiling it per phase (`times`, as
    `counters["time"]`, growing while its graphs compile on later calls)."""

    __slots__ = ("function", "location", "entry", "compile_id", "session", "folder", "times")

    def __init__(self, code: types.CodeType, entry: int, session: "_Session | None",
                 compile_id: torch._guards.CompileId | None = None) -> None:
        self.function = code.co_qualname
        self.location = f"{code.co_filename}:{code.co_firstlineno}"
        self.entry = entry
        self.compile_id = compile_id
        self.session = session  # files of an entry go to the dump it was compiled in
        self.folder = None if session is None else session.entry_folder(code, entry)
        self.times: collections.Counter = collections.Counter()

    def describe(self) -> str:
        return f"{self.function} ({self.location}), entry {self.entry}"


class _Session:
    """One dump folder: function folders by code object, and the entry folders already made."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.function_folders: dict[types.CodeType, str] = {}
        self.used: set[str] = set()

    def entry_folder(self, code: types.CodeType, entry: int) -> str:
        folder = self.function_folders.get(code)
        if folder is None:
            folder = self.function_folders[code] = self.unique(os.path.join(self.root, _file_name(code.co_qualname)))
        path = self.unique(os.path.join(folder, f"entry_{entry}"))
        os.makedirs(path, exist_ok=True)
        return path

    def unique(self, path: str) -> str:
        """`path`, or `stem_2.ext`, `stem_3.ext`... when this session already wrote it (files of an
        earlier session in the same folder are overwritten)."""
        stem, ext = os.path.splitext(path)
        candidate, n = path, 1
        while candidate in self.used:
            n += 1
            candidate = f"{stem}_{n}{ext}"
        self.used.add(candidate)
        return candidate


_session: _Session | None = None
_scopes: list[CompileScope | None] = []


class dump:
    """Write every cache entry compiled from now on under `folder` (None: stop dumping).

    Call it, or use it as a context manager that restores the previous setting on exit:

    >>> with graphwright.debug.dump("/tmp/gw"):
    ...     compiled(x)
    """

    def __init__(self, folder: str | os.PathLike | None) -> None:
        global _session
        self._previous = _session
        _session = None if folder is None else _Session(os.fspath(folder))
        self.folder = None if _session is None else _session.root

    def __enter__(self) -> str | None:
        return self.folder

    def __exit__(self, *exc: Any) -> None:
        global _session
        _session = self._previous


def active() -> bool:
    """Whether files are being written for the entry compiled now."""
    return bool(_scopes) and _scopes[-1] is not None and _scopes[-1].folder is not None


@contextlib.contextmanager
def compiling(code: types.CodeType, entry: int,
              compile_id: torch._guards.CompileId | None = None) -> Iterator[CompileScope]:
    """The scope of building entry number `entry` of the function of `code`."""
    scope = CompileScope(code, entry, _session, compile_id)
    with within(scope):
        yield scope


@contextlib.contextmanager
def within(scope: CompileScope | None) -> Iterator[None]:
    """Re-enter `scope` (from `current()` at the time) for work done later for the same entry;
    while a compile trace is written, its records (PyTorch's too) carry the entry's compile id."""
    _scopes.append(scope)
    try:
        if structured_trace.on and scope is not None and scope.compile_id is not None:
            with structured_trace.frame(scope.compile_id):
                yield
        else:
            yield
    finally:
        _scopes.pop()


def current() -> CompileScope | None:
    return _scopes[-1] if _scopes else None


def write(name: str, text: str) -> str | None:
    """Write `text` as `name` in the current entry's folder (`name_2.py`... when taken); the path,
    or None when not dumping."""
    if not active():
        return None
    path = _scopes[-1].session.unique(os.path.join(_scopes[-1].folder, name))
    with open(path, "w") as file:
        file.write(text)
    return path


def append(path: str, text: str) -> None:
    """Add `text` at the end of a file this dump wrote."""
    with open(path, "a") as file:
        file.write(text)


def write_graph(name: str, gm: torch.fx.GraphModule) -> str | None:
    """`gm` as a folder `name/` that Python can import (`module.py`: class `GraphModule`, and its
    state) plus `name.txt`, the graph with shapes; the folder's path, or None when not dumping."""
    if not active():
        return None
    folder = _scopes[-1].session.unique(os.path.join(_scopes[-1].folder, name))
    readable = gm.print_readable(print_output=False)
    try:
        write_loadable(gm, folder)
    except Exception as error:  # a global that can be neither imported nor pickled
        os.makedirs(folder, exist_ok=True)
        readable = f"# not loadable: {type(error).__name__}: {error}\n{readable}"
    with open(folder + ".txt", "w") as file:
        file.write(readable)
    return folder




def _file_name(qualname: str) -> str:
    """A folder name for a function: its qualified name without `<locals>` and angle brackets."""
    text = qualname.replace(".<locals>", "").replace("<", "").replace(">", "")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "function"


if os.environ.get(ENV_VAR):
    dump(os.environ[ENV_VAR])
