"""Publishing what the compiler made: one artifact goes to its log channel and to the dump.

The layers call `wanted(channel)` first, and build the text only when it is
(a graph's readable code is not free), then `publish` it: logged on the
channel when that is on, written as a file of the current entry's dump folder
when dumping. Both are off by default; then `wanted` is all that runs.
"""
from __future__ import annotations

import torch

from . import dump, logs


def wanted(channel: str) -> bool:
    """Whether anything would read an artifact of `channel` now (its log, or a dump)."""
    return logs.enabled(channel) or dump.active()


def publish(channel: str, title: str, text: str, file: str | None = None) -> str | None:
    """Log `title` and `text` on `channel`; when dumping, write `text` as `file`. The file's path."""
    path = dump.write(file, text) if file is not None else None
    if logs.enabled(channel):
        logs.log(channel, f"{title}{_where(path)}\n{text}")
    return path


def publish_graph(channel: str, title: str, gm: torch.fx.GraphModule, name: str) -> str | None:
    """Log `gm`'s readable code on `channel`; when dumping, write it loadable as folder `name`."""
    path = dump.write_graph(name, gm)
    if logs.enabled(channel):
        logs.log(channel, f"{title}{_where(path)}\n{gm.print_readable(print_output=False)}")
    return path


def scope_name() -> str:
    """What the compile going on is for, in words (for messages)."""
    scope = dump.current()
    return "" if scope is None else scope.describe()


def _where(path: str | None) -> str:
    return "" if path is None else f" (written to {path})"
