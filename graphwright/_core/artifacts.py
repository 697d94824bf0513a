"""Publishing what the compiler made: one artifact goes to its log channel, the dump and the trace.

The layers call `wanted(channel)` first, and build the text only when it is
(a graph's readable code is not free), then `publish` it: logged on the
channel when that is on, written as a file of the current entry's dump folder
when dumping, written as a record of the compile trace (`structured_trace`)
when one is written. All are off by default; then `wanted` is all that runs.
"""
from __future__ import annotations

from typing import Any

import torch

from . import dump, logs, structured_trace

Record = tuple[str, dict]  # a compile trace record: its kind and metadata (`structured_trace.emit`)


def wanted(channel: str) -> bool:
    """Whether anything would read an artifact of `channel` now (its log, a dump, the trace)."""
    return logs.enabled(channel) or dump.active() or structured_trace.on


def shown(channel: str) -> bool:
    """Whether an artifact of `channel` is logged or dumped now (what a user reads as it happens)."""
    return logs.enabled(channel) or dump.active()


def publish(channel: str, title: str, text: str, file: str | None = None,
            record: Record | None = None) -> str | None:
    """Log `title` and `text` on `channel`; when dumping, write `text` as `file`; when tracing, write
    it as the payload of `record`. The file's path."""
    path = dump.write(file, text) if file is not None else None
    if logs.enabled(channel):
        logs.log(channel, f"{title}{_where(path)}\n{text}")
    if record is not None and structured_trace.on:
        structured_trace.emit(*record, payload=text, stacklevel=3)
    return path


def publish_graph(channel: str, title: str, gm: torch.fx.GraphModule, name: str,
                  record: str | None = None) -> str | None:
    """Log `gm`'s readable code on `channel`; when dumping, write it loadable as folder `name`;
    when tracing, write it as a record of kind `record` (with the sizes of its values)."""
    path = dump.write_graph(name, gm)
    if logs.enabled(channel):
        logs.log(channel, f"{title}{_where(path)}\n{gm.print_readable(print_output=False)}")
    if record is not None and structured_trace.on:
        structured_trace.emit(record, {"sizes": _sizes(gm)}, payload=gm.print_readable(print_output=False),
                              stacklevel=3)
    return path


def _sizes(gm: torch.fx.GraphModule) -> dict[str, list]:
    """The size of each tensor value of `gm`, symbolic sizes as text."""
    sizes = {}
    for node in gm.graph.nodes:
        value: Any = node.meta.get("val", node.meta.get("example_value"))
        if isinstance(value, torch.Tensor) and not value.is_nested:
            sizes[node.name] = [size if isinstance(size, int) else str(size) for size in value.shape]
    return sizes


def scope_name() -> str:
    """What the compile going on is for, in words (for messages)."""
    scope = dump.current()
    return "" if scope is None else scope.describe()


def _where(path: str | None) -> str:
    return "" if path is None else f" (written to {path})"
