"""`graphwright.debug.report` and `python -m graphwright report`: one HTML page per run.

`record` listens to the compiler while a report is on, `drawing` lays out and
draws graphs as SVG, `page` renders the self-contained page.
"""
from __future__ import annotations

import os
from typing import Any

from .page import render
from .record import Recording

__all__ = ["report"]


class report:
    """Record every compile from now on; the HTML page of what was compiled.

    Use it as a context manager (the page is written to `path`, when given, on exit), or
    call `stop()` yourself:

    >>> with graphwright.debug.report("run.html") as rep:
    ...     model(x)
    >>> rep.graph_count, rep.break_count
    """

    def __init__(self, path: str | os.PathLike | None = None, title: str = "graphwright report") -> None:
        self.path = None if path is None else os.fspath(path)
        self.title = title
        self.recording = Recording().start()

    def __enter__(self) -> "report":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        if self.path is not None:
            self.write(self.path)

    def stop(self) -> None:
        """Stop recording (what was recorded stays)."""
        self.recording.stop()

    @property
    def graph_count(self) -> int:
        return sum(len(function.graphs) for function in self.recording.functions.values())

    @property
    def break_count(self) -> int:
        return sum(len(function.breaks) for function in self.recording.functions.values())

    def html(self) -> str:
        """The page, as text."""
        return render(self.recording, self.title)

    def write(self, path: str | os.PathLike) -> str:
        """Write the page to `path`; its absolute path."""
        path = os.path.abspath(os.fspath(path))
        with open(path, "w", encoding="utf-8") as file:
            file.write(self.html())
        return path
