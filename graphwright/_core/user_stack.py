"""Finding the user's code in a Python stack.

Errors must name the user's file and line, never graphwright's or torch's
internals. This module owns the rule for telling the two apart.
"""
from __future__ import annotations

import os
import sys
import traceback
import warnings
from types import FrameType, TracebackType

import torch

_GRAPHWRIGHT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INTERNAL_DIRS = tuple(
    directory + os.sep
    for directory in (
        _GRAPHWRIGHT_DIR,
        os.path.dirname(os.path.abspath(torch.__file__)),
        os.path.dirname(os.path.abspath(os.__file__)),  # the standard library
        sys.prefix,  # installed packages: pytest, pluggy, ...
        sys.base_prefix,
    )
)


def is_user_file(filename: str) -> bool:
    """True for files that belong to the user's program.

    graphwright, torch, the standard library and installed packages are
    internal, and so is generated code (`<string>`: dataclass methods, fx
    code); everything else (scripts, notebooks, the user's package) is not.
    """
    if filename.startswith("<") and filename != "<stdin>":
        return False
    return not os.path.abspath(filename).startswith(_INTERNAL_DIRS)


def is_graphwright_file(filename: str) -> bool:
    """True for graphwright's own files, the only frames a traced program's stack never shows."""
    return os.path.abspath(filename).startswith(_INTERNAL_DIRS[0])


def user_frames_of_stack(frame: FrameType | None = None) -> list[traceback.FrameSummary]:
    """The user's frames of the live stack, outermost first.

    >>> user_frames_of_stack()[-1].lineno  # the line that called us
    """
    frame = frame if frame is not None else sys._getframe(1)
    summaries = traceback.StackSummary.extract(traceback.walk_stack(frame))
    return [fs for fs in reversed(summaries) if is_user_file(fs.filename)]


def user_frames_of_traceback(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    """The user's frames of an exception's traceback, outermost first."""
    summaries = traceback.StackSummary.extract(traceback.walk_tb(tb))
    return [fs for fs in summaries if is_user_file(fs.filename)]


def format_user_stack(frames: list[traceback.FrameSummary]) -> str:
    """Render frames the way Python tracebacks do: file, line, function, source."""
    lines = []
    for fs in frames:
        lines.append(f'  File "{fs.filename}", line {fs.lineno}, in {fs.name}')
        if fs.line:
            lines.append(f"    {fs.line.strip()}")
    return "\n".join(lines)


def warn_at_user_line(message: str, user_stack: list, stacklevel: int = 3) -> None:
    """A UserWarning attributed to the last frame of `user_stack` (the user's line), else to the
    caller `stacklevel` frames up."""
    if user_stack:
        frame = user_stack[-1]
        warnings.warn_explicit(message, UserWarning, frame.filename, frame.lineno)
    else:
        warnings.warn(message, UserWarning, stacklevel=stacklevel)
