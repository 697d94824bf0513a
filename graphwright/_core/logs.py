"""Log channels: what the compiler tells about its work, through Python's `logging`.

Each channel is a logger named `graphwright.<channel>`; the compiler emits its
records at DEBUG level, and only after asking `enabled(channel)`, so that a
channel that is off costs one level check on the compile path and nothing on
the call path.

| channel        | what it logs                                                            |
| -------------- | ----------------------------------------------------------------------- |
| `graph_code`   | each captured graph's code, with shapes                                 |
| `guards`       | each cache entry's guards, in words                                     |
| `recompiles`   | each recompile, with the guard that failed in every existing entry      |
| `graph_breaks` | each graph break, with the user's line and what runs instead            |
| `bytecode`     | each entry's residual code, resume functions as source and bytecode     |
| `aot_graphs`   | the aten forward, backward and inference graphs of AOT autograd         |
| `output_code`  | where Inductor wrote the kernel file of each graph                      |
| `caches`       | each AOT cache lookup: hit, miss, or bypass and why                     |

Every channel is off by default, whatever the root logger's level: each
channel logger has its own level (INFO, above the records). Turn channels on
with the environment (`GRAPHWRIGHT_LOGS=graph_code,recompiles`, `+all` for
every one), from Python (`graphwright.set_logs(guards=True)`), or with plain
`logging` (`logging.getLogger("graphwright.guards").setLevel(logging.DEBUG)`
and a handler). `set_logs` and the environment also attach one handler writing
to stderr to the `graphwright` logger.
"""
from __future__ import annotations

import logging
import os
import sys

from .errors import GraphwrightError

CHANNELS = ("graph_code", "guards", "recompiles", "graph_breaks", "bytecode", "aot_graphs", "output_code", "caches")
ENV_VAR = "GRAPHWRIGHT_LOGS"
_OFF = logging.INFO  # a channel's level when off: above the DEBUG records it emits

ROOT = logging.getLogger("graphwright")
LOGGERS = {channel: logging.getLogger(f"graphwright.{channel}") for channel in CHANNELS}
for _logger in LOGGERS.values():
    _logger.setLevel(_OFF)

_handler: logging.Handler | None = None


def enabled(channel: str) -> bool:
    """Whether `channel` logs now: ask before building an expensive message."""
    return LOGGERS[channel].isEnabledFor(logging.DEBUG)


def log(channel: str, message: str) -> None:
    """Emit `message` on `channel` (a no-op when the channel is off)."""
    LOGGERS[channel].debug("%s", message)


def set_logs(*, all: int | None = None, graph_code: bool = False, guards: bool = False,
             recompiles: bool = False, graph_breaks: bool = False, bytecode: bool = False,
             aot_graphs: bool = False, output_code: bool = False, caches: bool = False) -> None:
    """Choose the channels that log, like `torch._logging.set_logs`: each call replaces the
    previous settings; `all=logging.DEBUG` turns every channel on. With any channel on, records go
    to stderr through a handler on the `graphwright` logger; `set_logs()` turns everything off.

    >>> graphwright.set_logs(graph_code=True, recompiles=True)
    >>> graphwright.set_logs()  # everything off again
    """
    chosen = {"graph_code": graph_code, "guards": guards, "recompiles": recompiles,
              "graph_breaks": graph_breaks, "bytecode": bytecode, "aot_graphs": aot_graphs,
              "output_code": output_code, "caches": caches}
    every = all is not None and all <= logging.DEBUG
    for channel, logger in LOGGERS.items():
        logger.setLevel(logging.DEBUG if every or chosen[channel] else _OFF)
    _use_stderr_handler(every or any(chosen.values()))


def set_logs_from_text(text: str) -> None:
    """Apply a `GRAPHWRIGHT_LOGS` value: comma-separated channel names, `+all` or `all` for every
    channel (a leading `+` is accepted on any name); unknown names are an error listing the valid
    ones."""
    names = [name.strip().lstrip("+") for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CHANNELS and name != "all"]
    if unknown:
        raise GraphwrightError(
            f"Unknown log channel{'s' if len(unknown) > 1 else ''} in {ENV_VAR}: {', '.join(unknown)}",
            explanation=f"Valid channels: {', '.join(CHANNELS)}, and +all for every one.",
            hints=[f"Example: {ENV_VAR}=graph_code,recompiles"])
    if "all" in names:
        set_logs(all=logging.DEBUG)
    else:
        set_logs(**{name: True for name in names})


def _use_stderr_handler(on: bool) -> None:
    global _handler
    if on and _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        ROOT.addHandler(_handler)
        ROOT.propagate = False  # a root handler would print every record a second time
    elif not on and _handler is not None:
        ROOT.removeHandler(_handler)
        ROOT.propagate = True
        _handler = None


if os.environ.get(ENV_VAR):
    set_logs_from_text(os.environ[ENV_VAR])
