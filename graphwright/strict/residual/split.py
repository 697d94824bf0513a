"""Where a function splits at a graph break, and the Python that continues it.

After a graph break under `fullgraph=False`, `plan_split` decides, as
TorchDynamo does on CPython 3.11:

- `resume`: the break is at an instruction that can run on its own in Python
  (a call, a comparison, a subscript, an attribute or item store, a jump on a
  value's truth), outside any loop and inside no block but `with` blocks of
  grad mode or autocast. The entry runs the graph captured up to that
  instruction, the instruction itself in plain Python (a callee the tracer had
  inlined is called through its own compiled wrapper), then a resume function
  for the rest: one per jump target.
- `rest`: any other break: the graph up to the last point where the stack was
  empty outside any block (a checkpoint), then the rest of the function in
  plain Python.
- `skip`: a break in a loop, or no checkpoint: the whole function runs in plain
  Python (the functions it calls are still compiled).

`Continuation` writes the entry's tail for `resume` and `rest` plans, from the
frame a re-trace stopped in.
"""
from __future__ import annotations

import contextlib
import dis
import types
from dataclasses import dataclass
from typing import Any

import torch

from ..interpreter.frame import Frame, decoded
from ..marked.markers import error_on_graph_break
from ..interpreter import graph_breaks as gb
from ..interpreter.graph_breaks import GraphBreak
from ..objects.values import NULL, ContextValue, MethodValue, Value
from .call_routing import CallRouter, routes_itself
from .liveness import live_locals
from .rebuild import ResidualWriter
from .resume import (
    NULL_SLOT,
    VALUE_SLOT,
    ReenteredContext,
    ResumeLayout,
    local_name,
    make_resume_function,
    original_position,
    resume_code,
)

_JUMPS_ON_TRUTH = {"POP_JUMP_FORWARD_IF_TRUE": True, "POP_JUMP_BACKWARD_IF_TRUE": True,
                   "POP_JUMP_FORWARD_IF_FALSE": False, "POP_JUMP_BACKWARD_IF_FALSE": False}
_JUMPS_KEEPING = {"JUMP_IF_TRUE_OR_POP": True, "JUMP_IF_FALSE_OR_POP": False}
RESUMABLE = frozenset({"CALL", "CALL_FUNCTION_EX", "COMPARE_OP", "BINARY_SUBSCR", "STORE_ATTR",
                       "STORE_SUBSCR", *_JUMPS_ON_TRUTH, *_JUMPS_KEEPING})
_COMPARISONS = ("<", "<=", "==", "!=", ">", ">=")


@dataclass(frozen=True)
class SplitPlan:
    kind: str  # "resume", "rest" or "skip"
    step: int = -1  # the step of the compiled function's frame to stop before
    reason: str = ""  # for "skip": why the function runs in plain Python


def plan_split(brk: GraphBreak) -> SplitPlan:
    """How to split the compiled function at `brk`, from the trace that hit it."""
    if brk.unsplittable:
        return SplitPlan("skip", reason=brk.unsplittable)
    if brk.kind is gb.OBSERVED_EXCEPTION:
        return SplitPlan("skip", reason="the function runs in plain Python, which raises the exception only if "
                                        "eager Python does (the functions it calls are compiled)")
    if not brk.frames:
        return SplitPlan("skip", reason="the break happened before the function's first instruction")
    frame, inst = brk.frames[-1]
    if inst.opname in RESUMABLE and open_with_blocks(frame.code, inst.offset) is not None:
        if has_backedge(frame, inst):
            return SplitPlan("skip", reason="graph break in a loop: the function runs in plain Python, "
                                            "the functions it calls are compiled")
        return SplitPlan("resume", frame.steps - 1)
    return checkpoint_plan(frame)


def checkpoint_plan(frame: Frame) -> SplitPlan:
    if frame.checkpoint is None:
        return SplitPlan("skip", reason="no point before the break to resume from: the function runs "
                                        "in plain Python, the functions it calls are compiled")
    return SplitPlan("rest", frame.checkpoint[0])


def has_backedge(frame: Frame, inst: dis.Instruction) -> bool:
    """Whether a jump after `inst` (up to the first return) goes back before it: `inst` may be
    in a loop. TorchDynamo's heuristic, kept so that graph counts agree: a loop's own closing
    jump does not count, so a `while` condition splits, each turn in a resume function."""
    for later in frame.instructions[frame.offset_index[inst.offset] + 1:]:
        if later.opname == "RETURN_VALUE":
            return False
        if (later.opcode in dis.hasjrel or later.opcode in dis.hasjabs) and later.argval < inst.offset:
            return True
    return False


def open_with_blocks(code: types.CodeType, offset: int) -> list[Any] | None:
    """The exception-table entries of the `with` blocks around `offset`, innermost first;
    None when a `try` block or an exception handler encloses it. From a `with` block's
    handler the chain goes on through the cleanup entry that covers that handler."""
    instructions, index_of, table, _ = decoded(code)
    blocks, after_with = [], False
    while True:
        entry = next((row for row in table if row.start <= offset < row.end), None)
        if entry is None:
            return blocks
        handler = [inst.opname for inst in instructions[index_of[entry.target]:index_of[entry.target] + 3]]
        if handler[:2] == ["PUSH_EXC_INFO", "WITH_EXCEPT_START"]:
            blocks.append(entry)
            after_with = True
        elif after_with and handler == ["COPY", "POP_EXCEPT", "RERAISE"]:
            after_with = False  # the cleanup around that `with` block's own handler
        else:
            return None  # a try block, or the body of an except clause
        offset = entry.target


class CannotResume(Exception):
    """The stopped frame cannot be handed to a resume function (an unknown context manager
    is open, or a live value cannot be rebuilt)."""


class Continuation:
    """Writes the tail of an entry whose trace stopped in `frame` before `inst`.

    `router.compile_function(fn)` compiles a Python function with the settings of the
    function being compiled (resume functions and callees are compiled like it); code run
    in plain Python goes through `router`, so what it calls is compiled too."""

    def __init__(self, writer: ResidualWriter, frame: Frame, inst: dis.Instruction, router: CallRouter,
                 route_callee: bool) -> None:
        self.writer = writer
        self.frame = frame
        self.inst = inst
        self.router = router
        self.compile_function = router.compile_function
        self.route_callee = route_callee
        self.code = original_position(frame.code, inst.offset)[0]  # what resume functions continue
        self.contexts = self._open_contexts()

    # -- the tails --------------------------------------------------------------------
    def resume_tail(self) -> list[str]:
        """Run the instruction, then call the resume function for the path it takes."""
        inst, stack = self.inst, self.frame.stack
        if inst.opname in _JUMPS_ON_TRUTH or inst.opname in _JUMPS_KEEPING:
            condition = self.writer.rebuild(stack[-1])
            taken = inst.argval
            fallthrough = self._next_offset()
            jumps_on = _JUMPS_ON_TRUTH.get(inst.opname, _JUMPS_KEEPING.get(inst.opname))
            keep = inst.opname in _JUMPS_KEEPING
            lines = self._in_contexts([f"___taken = {self.writer.ref(bool)}({condition}) is {jumps_on}"])
            lines.append("if ___taken:")
            lines += ["    " + line for line in self._resume_call(taken, stack if keep else stack[:-1])]
            return lines + self._resume_call(fallthrough, stack[:-1])
        statement, consumed, pushes = self._instruction()
        lines = self._in_contexts([statement])
        after = stack[:len(stack) - consumed] + (["___result"] if pushes else [])
        return lines + self._resume_call(self._next_offset(), after)

    def rest_tail(self) -> list[str]:
        """Run the rest of the function, from the stopped instruction on, in plain Python."""
        layout, arguments, closure = self._layout(self.inst.offset, [])
        code = self.router.routed_code(resume_code(self.code, self._original(self.inst.offset), layout))
        if closure is None:
            function = make_resume_function(code, self.frame.globals, None)
            return [f"return {self.writer.ref(function)}({arguments})"]
        made = f"___make_function({self.writer.ref(code)}, {self.writer.ref(self.frame.globals)}, (), None, {closure})"
        return [f"return {made}({arguments})"]

    # -- the instruction in Python ----------------------------------------------------
    def _instruction(self) -> tuple[str, int, bool]:
        """(a statement running the instruction, stack items it consumes, whether it pushes)."""
        inst, stack, rebuild = self.inst, self.frame.stack, self.writer.rebuild
        name = inst.opname
        if name == "CALL":
            count = inst.arg
            args = stack[len(stack) - count:]
            head, function = stack[-count - 2], stack[-count - 1]
            if head is not NULL:
                function, args = head, [function, *args]
            names = self.frame.kw_names
            split = len(args) - len(names)
            arguments = [rebuild(arg) for arg in args[:split]]
            arguments += [f"{key}={rebuild(arg)}" for key, arg in zip(names, args[split:])]
            return f"___result = {self._callee(function)}({', '.join(arguments)})", count + 2, True
        if name == "CALL_FUNCTION_EX":
            has_kwargs = inst.arg & 1
            kwargs = f", **{rebuild(stack[-1])}" if has_kwargs else ""
            function, args = stack[-2 - has_kwargs], stack[-1 - has_kwargs]  # above 3.11's NULL
            return f"___result = {self._callee(function)}(*{rebuild(args)}{kwargs})", 3 + has_kwargs, True
        if name == "COMPARE_OP":
            return f"___result = {rebuild(stack[-2])} {_COMPARISONS[inst.arg]} {rebuild(stack[-1])}", 2, True
        if name == "BINARY_SUBSCR":
            return f"___result = {rebuild(stack[-2])}[{rebuild(stack[-1])}]", 2, True
        if name == "STORE_ATTR":
            return f"{rebuild(stack[-1])}.{inst.argval} = {rebuild(stack[-2])}", 2, False
        if name == "STORE_SUBSCR":
            return f"{rebuild(stack[-2])}[{rebuild(stack[-1])}] = {rebuild(stack[-3])}", 3, False
        raise CannotResume(f"no continuation for {name}")

    def _callee(self, function: Value) -> str:
        """The callable to call: when the break happened inside it (or `route_callee` says so
        for another reason), routed to its compiled wrapper (a function, method, module,
        partial or callable object)."""
        rebuilt = self.writer.rebuild(function)
        if not self.route_callee and not routes_itself(_callable_of(function)):
            return rebuilt
        return f"{self.writer.ref(self.router.route)}({rebuilt})"

    # -- contexts and resume calls ------------------------------------------------------
    def _open_contexts(self) -> list[tuple[int, ReenteredContext, ContextValue]]:
        """(stack index, how to re-enter, the value) of each `with` block open at the stop."""
        blocks = open_with_blocks(self.frame.code, self.inst.offset)
        if blocks is None:
            raise CannotResume("a try block is open")
        contexts = []
        for entry in reversed(blocks):  # outermost first
            index = entry.depth - 1
            exit_value = self.frame.stack[index] if index < len(self.frame.stack) else None
            if not (isinstance(exit_value, MethodValue) and isinstance(exit_value.receiver, ContextValue)):
                raise CannotResume(f"a `with` block of {exit_value!r} is open")
            contexts.append((index, _reentry(exit_value.receiver), exit_value.receiver))
        return contexts

    def _in_contexts(self, body: list[str]) -> list[str]:
        lines, indent = [], ""
        for _, reentry, _ in self.contexts:
            args = ", ".join(self.writer.literal(arg) for arg in reentry.args)
            lines.append(f"{indent}with {self.writer.ref(reentry.factory)}({args}):")
            indent += "    "
        return lines + [indent + line for line in body]

    def _original(self, offset: int) -> int:
        return original_position(self.frame.code, offset)[1]

    def _next_offset(self) -> int:
        frame = self.frame
        return frame.instructions[frame.offset_index[self.inst.offset] + 1].offset

    def _layout(self, offset: int, stack: list[Any]) -> tuple[ResumeLayout, str, str | None]:
        """The resume layout for `stack` (values, NULLs, `with` exits, expressions) at `offset`;
        the call's argument text; the closure's text, or None when the function has no cells."""
        contexts = {index: reentry for index, reentry, _ in self.contexts}
        slots, arguments = [], []
        for index, item in enumerate(stack):
            if item is NULL:
                slots.append(NULL_SLOT)
            elif index in contexts:
                slots.append(contexts[index])
            else:
                slots.append(VALUE_SLOT)
                arguments.append(item if isinstance(item, str) else self.writer.rebuild(item))
        live_here = live_locals(self.code, self._original(offset))
        renamed = self.frame.code is not self.code  # resume code, which renames some locals
        in_frame = {name: local_name(name) if renamed else name for name in self.code.co_varnames}
        live = tuple(name for name, key in in_frame.items() if key in self.frame.locals and name in live_here)
        arguments += [self.writer.rebuild(self.frame.locals[in_frame[name]]) for name in live]
        names = self.code.co_cellvars + self.code.co_freevars
        closure = None
        if names:
            closure = "(" + "".join(self.writer.rebuild_cell(self.frame.cells[name]) + ", " for name in names) + ")"
        return ResumeLayout(tuple(slots), live), ", ".join(arguments), closure

    def _resume_call(self, offset: int, stack: list[Any]) -> list[str]:
        layout, arguments, closure = self._layout(offset, stack)
        code = resume_code(self.code, self._original(offset), layout)
        placeholder = None if closure is None else tuple(types.CellType() for _ in code.co_freevars)
        compiled = self.compile_function(make_resume_function(code, self.frame.globals, placeholder))
        if closure is None:
            return [f"return {self.writer.ref(compiled)}({arguments})"]
        made = f"___make_function({self.writer.ref(code)}, {self.writer.ref(self.frame.globals)}, (), None, {closure})"
        return [f"return {self.writer.ref(compiled)}.call_as({made}, {arguments})"]


def _callable_of(function: Value) -> Any:
    """The Python callable a value stands for, when the tracer knows it (else None)."""
    for attribute in ("fn", "module", "value"):
        real = getattr(function, attribute, None)
        if real is not None:
            return real
    return None


def _reentry(context: ContextValue) -> ReenteredContext:
    if context.kind == "grad":
        return ReenteredContext(torch.set_grad_enabled, (bool(context.args[0]),))
    if context.kind == "profiler":
        return ReenteredContext(contextlib.nullcontext, ())
    if context.kind == "error_on_graph_break":  # the resume function compiles inside it
        return ReenteredContext(error_on_graph_break, context.args)
    if context.kind == "autocast":
        real = context.args[0]
        return ReenteredContext(torch.amp.autocast, (real.device, real.fast_dtype, real._enabled,
                                                     real._cache_enabled))
    raise CannotResume(f"a `with` block of kind {context.kind} is open")


def exit_open_contexts(graph: Any, contexts: list[tuple[int, ReenteredContext, ContextValue]]) -> None:
    """End the graph outside the `with` blocks still open, innermost last entered first out."""
    for _, _, context in reversed(contexts):
        if context.kind == "grad" and bool(context.saved) != bool(context.args[0]):
            graph.record(torch._C._set_grad_enabled, [bool(context.saved)])
        elif context.kind == "autocast":
            graph.record(torch.amp.autocast_mode._exit_autocast, [context.saved])
