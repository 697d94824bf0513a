"""The command line: run a script with every compiled function recording.

`python -m graphwright explain script.py [args...]` prints at exit, per function, its graphs
and graph breaks with the user's line, what runs instead where it could not be split, and
advice.

`python -m graphwright report script.py [--html out.html] [args...]` writes at exit one
self-contained HTML page (`graphwright.debug.report`): graphs drawn, guards, recompiles,
breaks and compile time per phase. `--html` may also come before the script; the page goes to
`<script>.graphwright.html` in the current folder when it is not given.
"""
from __future__ import annotations

import atexit
import os
import runpy
import sys

from .report import report as html_report
from .strict import events
from .strict.explain import ScriptReport

_USAGE = ("usage: python -m graphwright explain script.py [args...]\n"
          "       python -m graphwright report script.py [--html out.html] [args...]")


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command == "explain" and rest:
        return _explain(rest)
    if command == "report":
        parsed = _report_arguments(rest)
        if parsed is not None:
            return _report(*parsed)
    print(_USAGE, file=sys.stderr)
    return 2


def _explain(script_argv: list[str]) -> int:
    report = ScriptReport()
    with events.listening(report):
        atexit.register(lambda: print(f"\n{report}"))
        return _run(script_argv)


def _report_arguments(rest: list[str]) -> tuple[list[str], str] | None:
    """(the script and its arguments, the page's path), from `rest`; None when malformed."""
    path = None
    if rest[:1] == ["--html"]:
        if len(rest) < 2:
            return None
        path, rest = rest[1], rest[2:]
    if not rest:
        return None
    script, arguments = rest[0], rest[1:]
    if path is None and arguments[:1] == ["--html"]:
        if len(arguments) < 2:
            return None
        path, arguments = arguments[1], arguments[2:]
    if path is None:
        path = os.path.splitext(os.path.basename(script))[0] + ".graphwright.html"
    return [script, *arguments], path


def _report(script_argv: list[str], path: str) -> int:
    report = html_report(title=f"graphwright report: {script_argv[0]}")

    def write() -> None:
        report.stop()
        print(f"graphwright report: {report.write(path)}", file=sys.stderr)

    atexit.register(write)
    return _run(script_argv)


def _run(script_argv: list[str]) -> int:
    sys.argv = list(script_argv)
    runpy.run_path(script_argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
