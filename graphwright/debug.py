"""`graphwright.debug`: see what the compiler generated, as files.

`dump(folder)` (or the environment variable `GRAPHWRIGHT_DUMP_DIR`) writes,
for every cache entry compiled while it is on, a folder
`<folder>/<function>/entry_<n>/` holding:

| file | what it is |
| --- | --- |
| `entry.py` | the entry function: its guards, then the graph call and the residual code. The entry runs *from this file*: tracebacks show its lines and a debugger steps through it |
| `guards.txt` | the entry's guards, in words |
| `graph/`, `graph.txt` | the captured graph: a folder Python imports (`load_graph`), and its code with shapes |
| `graphwright_resume_in_<f>_at_<line>.py` | a resume function (or a call-routed copy of `f`) as Python-like source, with its bytecode |
| `aot_forward/`, `aot_backward/`, `aot_inference/` (+ `.txt`) | AOT autograd's aten graphs, loadable the same way |
| `inductor_forward.py`, ... | a copy of the module Inductor generated for each aten graph |

Resume functions are functions of their own: their entries have folders
named after them. `load_graph(path)` loads a dumped graph as an
`nn.Module` to run on the inputs the entry passes it (see the graph call in
`entry.py`).

`report(path)` records every compile while it is on and writes one
self-contained HTML page: per compiled function its graphs drawn, guards,
recompiles, graph breaks and compile time per phase (also
`python -m graphwright report script.py`).
"""
from __future__ import annotations

import importlib.util
import os

import torch

from ._core.dump import dump
from .report import report

__all__ = ["dump", "load_graph", "report"]


def load_graph(folder: str | os.PathLike) -> torch.nn.Module:
    """The graph dumped in `folder` (e.g. `.../entry_0/graph`), as a module to call.

    >>> gm = graphwright.debug.load_graph("/tmp/gw/f/entry_0/graph")
    >>> gm(x)  # the graph's outputs, as a tuple
    """
    path = os.path.join(os.fspath(folder), "module.py")
    spec = importlib.util.spec_from_file_location(f"graphwright_dumped_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GraphModule()
