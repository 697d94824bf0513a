"""The compile trace that `tlparse` reads: structured records of every compile, one file per process.

`GRAPHWRIGHT_TRACE=DIR` (or `graphwright.debug.trace(DIR)`) writes
`DIR/dedicated_log_torch_trace_<random>.log`; under `TORCH_TRACE=DIR` the
records go to the file PyTorch writes there. Either way `tlparse --latest DIR`
(or `tlparse FILE`) renders an index of every compiled frame as it does for
torch.compile: each frame's stack, captured graph, guards, graph breaks,
recompile reasons, AOT graphs, Inductor's code and compile metrics.

One record is one line, `V<MMDD HH:MM:SS.micros> <pid> <file>:<line>] <json>`,
the JSON naming the record's kind (`{"dynamo_output_graph": {...}}`) and the
compile it belongs to (`frame_id`, `frame_compile_id`, `attempt`), followed by
its payload (a graph's code, guards, a break's reason), each line indented by
a tab, whose MD5 the JSON's `has_payload` holds. Every record goes to PyTorch's
trace logger (`torch.__trace`), the one Inductor and the shape environment
write theirs to: one file holds both, in order. Inductor's own records carry
graphwright's compile ids because every compile runs under a PyTorch
`CompileContext` holding its id (`frame`).

A frame is one compiled function's cache (`graphwright.compile`'s wrapper, a
resume function's); `frame_compile_id` counts its compiles, the first one and
each recompile: `[1/2]` is the third entry compiled for the second function
that compiled. This module owns the format and the file; the compiler's layers
say what happened. With no trace on, each of them reads `on` and does nothing
else.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
import traceback
from typing import Any, Iterator

import torch._guards
import torch._logging.structured
from torch._logging._internal import trace_log

ENV_VAR = "GRAPHWRIGHT_TRACE"
TORCH_ENV_VAR = "TORCH_TRACE"
FILE_PREFIX = "dedicated_log_torch_trace_"  # what tlparse and PyTorch's tools look for

on = False  # whether records are written now: read before building one
_handler: "_TraceFile | None" = None


class _TraceFile(logging.Handler):
    """Writes the records of PyTorch's trace logger to a file in `folder`, made on the first one."""

    def __init__(self, folder: str) -> None:
        super().__init__(logging.DEBUG)
        self.folder = os.path.abspath(folder)
        self._stream = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self._stream is None:
                os.makedirs(self.folder, exist_ok=True)
                handle, _ = tempfile.mkstemp(suffix=".log", prefix=FILE_PREFIX, dir=self.folder)
                self._stream = os.fdopen(handle, "w")
            self._stream.write(_line(record) + "\n")
            self._stream.flush()
        except Exception:
            self.handleError(record)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        super().close()


def _line(record: logging.LogRecord) -> str:
    """One record as tlparse reads it: the glog prefix, the JSON metadata, the payload's lines."""
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(record.created))
    micros = int((record.created % 1) * 1_000_000)
    where = _relative(record.pathname)
    text = f"V{stamp}.{micros:06d} {record.process} {where}:{record.lineno}] " \
           f"{json.dumps(record.metadata, default=repr)}"
    if record.payload is not None:
        text += "".join(f"\n\t{line}" for line in record.payload.split("\n"))
    return text


def _relative(path: str) -> str:
    """`path` relative to the entry of `sys.path` it lies under (graphwright/..., torch/...)."""
    for root in sorted((p for p in sys.path if p), key=len, reverse=True):
        if path.startswith(root.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, root)
    return path


def start(folder: str | os.PathLike) -> str:
    """Write the records from now on to a new file in `folder`, made on the first record."""
    global on, _handler
    stop()
    _handler = _TraceFile(os.fspath(folder))
    # First in line: without TORCH_TRACE, PyTorch's own handler removes itself from the list
    # on the first record, which makes logging skip the handler after it for that record.
    trace_log.handlers.insert(0, _handler)
    trace_log.setLevel(logging.DEBUG)
    on = True
    return _handler.folder


def stop() -> None:
    """Stop writing (the file stays); under `TORCH_TRACE`, PyTorch's handler keeps writing its own."""
    global on, _handler
    if _handler is not None:
        trace_log.removeHandler(_handler)
        _handler.close()
        _handler = None
    on = bool(os.environ.get(TORCH_ENV_VAR))


def emit(kind: str, metadata: dict | None = None, payload: Any = None,
         compile_id: torch._guards.CompileId | None = None, stacklevel: int = 2) -> None:
    """Write one record of `kind` for the compile `compile_id` (default: the one going on).
    A payload that is not text is written as JSON. The record names the file and line
    `stacklevel` frames up (the caller's)."""
    record: dict[str, Any] = {kind: metadata if metadata is not None else {}}
    compile_id = compile_id or torch._guards.CompileContext.current_compile_id()
    if compile_id is not None:
        record["frame_id"] = compile_id.frame_id
        record["frame_compile_id"] = compile_id.frame_compile_id
        record["attempt"] = 0
    if payload is not None:
        if not isinstance(payload, str):
            payload = json.dumps(payload, indent=0, default=repr)
        record["has_payload"] = hashlib.md5(payload.encode("utf-8"), usedforsecurity=False).hexdigest()
    trace_log.debug("", extra={"metadata": record, "payload": payload}, stacklevel=stacklevel)


def artifact(name: str, payload: Any, encoding: str = "string",
             compile_id: torch._guards.CompileId | None = None) -> None:
    """A named artifact of the compile (`encoding`: "string" or "json"); tlparse lists it by name."""
    emit("artifact", {"name": name, "encoding": encoding}, payload, compile_id, stacklevel=3)


def chromium_event(name: str, phase: str, compile_id: str | None = None) -> None:
    """A begin ("B") or end ("E") event of `name`, for the Chromium trace tlparse assembles."""
    emit("chromium_event", {}, {"name": name, "ts": time.time_ns() / 1000, "args": {"compile_id": compile_id},
                                "ph": phase, "cat": "graphwright", "tid": 0, "pid": 0}, stacklevel=3)


def stack(frames: list[traceback.FrameSummary]) -> list[dict]:
    """Frames as the trace writes stacks: file names interned in the trace's string table."""
    return [{"line": frame.lineno, "name": frame.name, "loc": frame.line,
             "filename": torch._logging.structured.intern_string(frame.filename)} for frame in frames]


@contextlib.contextmanager
def frame(compile_id: torch._guards.CompileId) -> Iterator[None]:
    """Work for the compile `compile_id`: records written inside carry its ids, Inductor's too."""
    with torch._guards.compile_context(torch._guards.CompileContext(compile_id)):
        yield


def compile_id(frame_id: int, frame_compile_id: int) -> torch._guards.CompileId:
    return torch._guards.CompileId(frame_id=frame_id, frame_compile_id=frame_compile_id)


if os.environ.get(ENV_VAR) and not os.environ.get(TORCH_ENV_VAR):
    start(os.environ[ENV_VAR])
else:
    on = bool(os.environ.get(TORCH_ENV_VAR))
