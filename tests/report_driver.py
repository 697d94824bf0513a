"""Runs a script under `graphwright.debug.report` and, independently, counts what it compiled.

    python tests/report_driver.py script.py page.html expected.json

Writes the report page, and, from the compiler's raw events (not the report's own
records), the node count of every graph compiled, in order, and the number of graph breaks
and fullgraph errors: what the page must show.
"""
import json
import runpy
import sys

import graphwright
from graphwright.strict import events


class Counting(events.Listener):
    def __init__(self):
        self.graph_nodes = []
        self.breaks = []

    def graph_compiled(self, fn, gm):
        self.graph_nodes.append(len(gm.graph.nodes))

    def graph_break(self, fn, brk):
        self.breaks.append(brk.kind.gb_id)

    def compile_failed(self, fn, brk):
        self.breaks.append(brk.kind.gb_id)


def main(script, page, expected):
    counting = Counting()
    with events.listening(counting), graphwright.debug.report(page, title=f"report of {script}"):
        sys.argv = [script]
        runpy.run_path(script, run_name="__main__")
    with open(expected, "w") as file:
        json.dump({"graph_nodes": counting.graph_nodes, "breaks": counting.breaks}, file)


if __name__ == "__main__":
    main(*sys.argv[1:4])
