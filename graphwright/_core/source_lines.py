"""Where each graph node came from: the user's lines and modules behind it.

A node's `meta["stack_trace"]` is a traceback's text, innermost frame last
(`  File "model.py", line 7, in forward\\n    y = self.l(x)\\n`): torch.fx prints
its last frame above the node (`# File: model.py:7 in forward, code: y = self.l(x)`),
Inductor maps the lines of its generated code to it. `meta["nn_module_stack"]`
maps a key per module to `(path, class)` for each module call the operation
was made under, outermost first; `meta["source_fn_stack"]` is
`[(node name, the function or nn module class that made it)]`. This module
owns those three entries and how they travel:

- the strict tracer gives each node an `Origin` (the frame chain's code
  objects and lines, the module stack: cheap to take), turned into the three
  entries once, when the graph is finished (`annotate`);
- when a captured graph is traced again into aten operations (ahead-of-time
  autograd), `running(node)` makes the node being run the `current()` one; the
  non-strict recorder copies its entries onto every aten node it records
  (`copy_onto`), and a backward operation gets those of the forward operation
  whose gradient it computes (`GradientOrigins`);
- a non-strict trace of Python (a `nonstrict_trace` body, `make_fx(...,
  record_stack_traces=True)`) records the live Python stack below its entry
  (`LiveStack`), after the lines of the call that entered it.

Frames of graphwright and torch are left out of the text (the innermost frame
shown is the line of the user's program or of the library it calls that made
the operation), unless nothing else is left.
"""
from __future__ import annotations

import contextlib
import linecache
import os
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch

from .user_stack import is_graphwright_file

STACK_TRACE = "stack_trace"
NN_MODULE_STACK = "nn_module_stack"
SOURCE_FN_STACK = "source_fn_stack"
COPIED = (STACK_TRACE, NN_MODULE_STACK, SOURCE_FN_STACK)
ORIGIN = "graphwright_origin"  # a strict node's origin until `annotate` formats it

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


class Position(NamedTuple):
    """One interpreted frame at one line, and the position of the frame that called it."""

    caller: "Position | None"
    code: types.CodeType
    lineno: int


class Origin(NamedTuple):
    position: Position | None
    modules: dict  # nn_module_stack, shared by every node made under the same module calls


def _shown(code: types.CodeType) -> bool:
    filename = code.co_filename
    if filename.startswith("<"):  # generated code (a dataclass's __init__) unless linecache has it
        return bool(linecache.getline(filename, code.co_firstlineno))
    return not (filename.startswith(_TORCH_DIR) or is_graphwright_file(filename))


def _frame_text(code: types.CodeType, lineno: int) -> str:
    line = linecache.getline(code.co_filename, lineno).strip()
    text = f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n'
    return text + f"    {line}\n" if line else text


class _Formatter:
    """Stack texts of positions, each chain formatted once (nodes share their callers' chains)."""

    def __init__(self) -> None:
        self._texts: dict[int, str] = {}  # id(position) -> text; the positions outlive the formatter
        self._shown: dict[int, bool] = {}

    def text(self, position: Position | None) -> str:
        if position is None:
            return ""
        known = self._texts.get(id(position))
        if known is None:
            code = position.code
            shown = self._shown.get(id(code))
            if shown is None:
                shown = self._shown[id(code)] = _shown(code)
            known = self.text(position.caller)
            if shown:
                known += _frame_text(code, position.lineno)
            self._texts[id(position)] = known
        return known

    def stack_trace(self, position: Position | None) -> str:
        """The text of the shown frames, else of every frame but graphwright's."""
        text = self.text(position)
        if text or position is None:
            return text
        frames = []
        while position is not None:
            if not is_graphwright_file(position.code.co_filename):
                frames.append(_frame_text(position.code, position.lineno))
            position = position.caller
        return "".join(reversed(frames))


def _source_fn(node: torch.fx.Node, modules: dict) -> Any:
    """What made the node, as torch names it: the class of the innermost module when that is one
    of torch.nn's (a `Linear`'s `linear`), else the node's target."""
    if modules:
        cls = next(reversed(modules.values()))[1]
        if cls.__module__.startswith("torch.nn."):
            return cls
    return node.target


def annotate(graph: torch.fx.Graph) -> None:
    """Turn the origins the strict tracer left on `graph`'s nodes into their stack_trace,
    nn_module_stack and source_fn_stack."""
    formatter = _Formatter()
    origins = []  # kept until the end: the formatter's memo is keyed by the positions' ids
    for node in graph.nodes:
        origin = node.meta.pop(ORIGIN, None)
        if origin is None:
            continue
        origins.append(origin)
        text = formatter.stack_trace(origin.position)
        if text:
            node.meta[STACK_TRACE] = text
        if origin.modules:
            node.meta[NN_MODULE_STACK] = origin.modules
        if node.op in ("call_function", "call_method"):
            node.meta[SOURCE_FN_STACK] = [(node.name, _source_fn(node, origin.modules))]


def module_key(path: str) -> str:
    """The nn_module_stack key of the module at `path` (`self.layers[0]` -> `self_layers_0`)."""
    return "".join(c if c.isalnum() else "_" for c in path).strip("_") or "module"


class _Running(threading.local):
    meta: dict | None = None  # the meta of the node being run while a graph is traced again


_running = _Running()


def current() -> dict | None:
    """The meta of the graph node whose operations this thread is tracing now, if any."""
    return _running.meta


@contextlib.contextmanager
def running(meta: dict | None) -> Iterator[None]:
    """Make `meta` (a node's) the one that operations recorded meanwhile copy."""
    previous, _running.meta = _running.meta, meta
    try:
        yield
    finally:
        _running.meta = previous


def copy_onto(node: torch.fx.Node, meta: dict) -> None:
    for key in COPIED:
        value = meta.get(key)
        if value is not None:
            node.meta[key] = value


def nested(outer: dict | None, inner: dict) -> dict:
    """The meta of an operation recorded at `inner` (a non-strict body's node) run from a call at
    `outer`: the call's lines then the body's, the call's modules."""
    if outer is None:
        return inner
    meta = dict(outer)
    meta[STACK_TRACE] = (outer.get(STACK_TRACE) or "") + (inner.get(STACK_TRACE) or "")
    if inner.get(SOURCE_FN_STACK) is not None:
        meta[SOURCE_FN_STACK] = inner[SOURCE_FN_STACK]
    return meta


class GradientOrigins:
    """Backward operations take the meta of the forward operation they differentiate: autograd
    numbers each node it creates, and runs a node's backward as `_current_autograd_node()`."""

    def __init__(self) -> None:
        self._by_sequence_nr: dict[int, dict] = {}
        self.started = False  # whether any forward operation was seen (else no lookups)

    def forward_meta(self, meta: dict) -> None:
        """Called as a forward operation is recorded: the autograd node just made (if any) is its."""
        self.started = True
        self._by_sequence_nr.setdefault(torch.autograd._get_sequence_nr() - 1, meta)

    def backward_meta(self) -> dict | None:
        node = torch._C._current_autograd_node()
        if node is None:
            return None
        return self._by_sequence_nr.get(node._sequence_nr())


class LiveStack:
    """The live Python frames between a non-strict trace's entry and an operation, as stack text.
    `entry` is the frame that called into the traced code; frames of graphwright and torch are
    skipped."""

    def __init__(self, entry: types.FrameType) -> None:
        self.entry = entry
        self._texts: dict[tuple[int, int], str] = {}

    def stack_trace(self) -> str:
        frames = []
        frame = sys._getframe(1)
        while frame is not None and frame is not self.entry:
            code = frame.f_code
            if _shown(code):
                key = (id(code), frame.f_lineno)
                text = self._texts.get(key)
                if text is None:
                    text = self._texts[key] = _frame_text(code, frame.f_lineno)
                frames.append(text)
            frame = frame.f_back
        if frame is None:  # the entry is not on the stack: not inside the traced call
            return ""
        return "".join(reversed(frames))


class Rerun(torch.fx.Interpreter):
    """Runs a graph node by node with each node's meta `current` (nested in the meta current
    when it started: a recorded body run from a call) while the operations it runs are traced."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.extra_traceback = False  # errors read as they do from the graph's own code

    def run_node(self, node: torch.fx.Node) -> Any:
        with running(nested(_running.meta, node.meta)):
            return super().run_node(node)

    def fetch_args_kwargs_from_env(self, node: torch.fx.Node) -> tuple[tuple, dict]:
        # the arguments as the graph's generated code passes them: plain lists and dicts (fx
        # holds them as immutable ones, which a callee that checks types or mutates them tells apart)
        return tuple(self._load(arg) for arg in node.args), {key: self._load(arg) for key, arg in node.kwargs.items()}

    def _load(self, arg: Any) -> Any:
        if isinstance(arg, torch.fx.Node):
            return self.env[arg]
        if isinstance(arg, list):
            return [self._load(item) for item in arg]
        if type(arg) is tuple:
            return tuple(self._load(item) for item in arg)
        if isinstance(arg, dict):
            return {key: self._load(item) for key, item in arg.items()}
        if isinstance(arg, slice):
            return slice(self._load(arg.start), self._load(arg.stop), self._load(arg.step))
        return arg


class RerunModule(torch.nn.Module):
    """`gm` as a module run by `Rerun`, whose state `torch.func.functional_call` can swap (the
    names of `gm`'s state are prefixed with `gm.`)."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__()
        self.gm = gm

    def forward(self, *args: Any) -> Any:
        return Rerun(self.gm).run(*args)


def innermost_frame(stack_trace: str | None) -> tuple[str, str, str, str] | None:
    """The innermost frame of a stack_trace text: (file, line, function, code)."""
    lines = (stack_trace or "").rstrip("\n").split("\n")
    for index in range(len(lines) - 1, -1, -1):
        head = lines[index].strip()
        if head.startswith('File "'):
            filename, _, rest = head[len('File "'):].partition('", line ')
            lineno, _, function = rest.partition(", in ")
            code = lines[index + 1].strip() if index + 1 < len(lines) else ""
            return filename, lineno, function, code
    return None


def innermost_line(node: torch.fx.Node) -> str:
    """The innermost frame of a node's stack_trace as `file:line in function: code` ('' if none)."""
    frame = innermost_frame(node.meta.get(STACK_TRACE))
    if frame is None:
        return ""
    filename, lineno, function, code = frame
    return f"{filename}:{lineno} in {function}" + (f": {code}" if code else "")


def comment(stack_trace: str | None) -> str:
    """`# File: model.py:7 in forward, code: y = self.l(x)`, as torch.fx prints it above a node."""
    frame = innermost_frame(stack_trace)
    if frame is None:
        return ""
    filename, lineno, function, code = frame
    return f"# File: {filename}:{lineno} in {function}, code: {code}"
