"""`python -m graphwright explain script.py [args...]`: run a script with every compiled
function recording, and print at exit, per function, its graphs and graph breaks with the
user's line, what runs instead where it could not be split, and advice."""
from __future__ import annotations

import atexit
import runpy
import sys

from .strict import events
from .strict.explain import ScriptReport

_USAGE = "usage: python -m graphwright explain script.py [args...]"


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "explain":
        print(_USAGE, file=sys.stderr)
        return 2
    report = ScriptReport()
    context = events.listening(report)
    context.__enter__()
    atexit.register(lambda: print(f"\n{report}"))
    sys.argv = argv[1:]
    runpy.run_path(argv[1], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
