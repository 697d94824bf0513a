"""One frame of symbolic interpretation: a code object's locals, cells, stack and position.

`Frame.run` fetches instructions and dispatches each to the handler named
`op_<OPNAME>` of the opcode table for the running Python version
(`instructions_311.py` for CPython 3.11). Exceptions the traced program raises
and catches are modelled through the exception table (`unwind_to_handler`).

Graph breaks leave a frame with the frame and instruction recorded on the
`GraphBreak` (`frames`, innermost first), so the caller can tell where in the
compiled function's own code the break happened. A re-trace can stop the
compiled function's frame just before a given step (`stop_at`), leaving its
stack and locals as they were there: the state a resume function continues from.
"""
from __future__ import annotations

import dis
import linecache
import sys
import traceback
import types
import weakref
from typing import TYPE_CHECKING, Any

from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from ..._core.source_lines import Position
from ..objects import exceptions
from ..objects.values import CellValue, ConstantValue, Value
from . import graph_breaks as gb
from .instructions_311 import Instructions311

if TYPE_CHECKING:
    from .tracer import Tracer

# code -> its decoded form; weak, so that dropping a function frees what it cost
_DECODED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def decoded(code: types.CodeType) -> tuple[list[dis.Instruction], dict[int, int], list, frozenset[int]]:
    """The instructions of `code` (caches skipped), offset -> index, the exception table, and
    the offsets it covers (inside a `try` or `with` block)."""
    entry = _DECODED.get(code)
    if entry is None:
        instructions = list(dis.get_instructions(code))
        table = dis._parse_exception_table(code)
        covered = frozenset(inst.offset for inst in instructions
                            if any(row.start <= inst.offset < row.end for row in table))
        entry = (instructions, {inst.offset: index for index, inst in enumerate(instructions)}, table, covered)
        _DECODED[code] = entry
    return entry


class UnreadArgument:
    """An argument of the compiled function not read yet: wrapped (and guarded) on its first
    read, so that a value only passed through to a resume function is not guarded."""

    __slots__ = ("real", "source")

    def __init__(self, real: Any, source: Any) -> None:
        self.real = real
        self.source = source


class StopTrace(Exception):
    """Raised by a frame at the step a re-trace was asked to stop before."""

    def __init__(self, frame: "Frame", inst: dis.Instruction) -> None:
        super().__init__(inst.opname)
        self.frame = frame
        self.inst = inst


class Frame(Instructions311):
    def __init__(self, tracer: "Tracer", code: types.CodeType, f_globals: dict,
                 local_values: dict[str, Value], closure: tuple[CellValue, ...] = ()) -> None:
        self.tracer = tracer
        self.code = code
        self.globals = f_globals
        self.locals = local_values
        self.cells: dict[str, CellValue] = {}
        self.closure = closure
        self.namespace: Value | None = None  # a class body's: where its names live
        self.stack: list[Value] = []
        self.kw_names: tuple[str, ...] = ()
        self.instructions, self.offset_index, self.exception_table, self.covered = decoded(code)
        self.index = 0
        self.steps = 0
        self.stop_at: int | None = None  # the step to stop before (a re-trace of the compiled function)
        self.is_root = False
        # The last step at which the compiled function could hand over to plain Python:
        # an empty stack, no `try`/`with` block, and a graph of more than one call before it
        # (TorchDynamo's threshold, kept so that graph counts agree).
        self.checkpoint: tuple[int, dis.Instruction] | None = None
        self.lineno = code.co_firstlineno
        self.result: Value | None = None
        self.caller: Position | None = None  # where the frame was (last) run from

    def position(self) -> Position:
        """Where the frame is now, with its callers: a node's origin."""
        return Position(self.caller, self.code, self.lineno)

    def run(self) -> Value:
        frames = self.tracer.frames
        # a generator's frame runs again from wherever the next value is asked for
        self.caller = frames[-1].position() if frames else None
        frames.append(self)
        try:
            while self.result is None:
                inst = self.instructions[self.index]
                if self.is_root:
                    if self.steps == self.stop_at:
                        raise StopTrace(self, inst)
                    if not self.stack and inst.offset not in self.covered and self.tracer.graph.call_count > 1:
                        self.checkpoint = (self.steps, inst)
                self.steps += 1
                self.index += 1
                if inst.positions is not None and inst.positions.lineno is not None:
                    self.lineno = inst.positions.lineno
                handler = getattr(self, "op_" + inst.opname, None)
                if handler is None:
                    raise self.tracer.graph_break(gb.UNSUPPORTED_OPCODE, f"{inst.opname} {inst.argrepr}",
                                                  opname=inst.opname)
                try:
                    handler(inst)
                except gb.UserException as raised:
                    exceptions.add_traceback(raised, self)
                    self.unwind_to_handler(inst.offset, raised)
                except GuardOnDataDependentSymNode as error:  # Python asked a value only data decides
                    raise self.tracer.graph_break(gb.DATA_DEPENDENT_BRANCH, str(error).splitlines()[0]) from None
                if self.tracer.graph.marked_sizes:
                    self.tracer.check_marked_sizes()
            return self.result
        except gb.GraphBreak as brk:
            brk.frames.append((self, inst))
            raise
        except (StopTrace, gb.UserException):
            raise  # a UserException knows where it was raised
        except Exception as error:
            if not hasattr(error, "graphwright_user_stack"):
                error.graphwright_user_stack = self.tracer.user_stack()
            raise
        finally:
            self.tracer.frames.pop()

    def unwind_to_handler(self, offset: int, raised: "gb.UserException") -> None:
        """Continue at the handler the exception table names for `offset`, as CPython does."""
        for entry in self.exception_table:
            if entry.start <= offset < entry.end:
                del self.stack[entry.depth:]
                if entry.lasti:
                    self.push(ConstantValue(offset))
                self.push(raised.value)
                self.jump_to(entry.target)
                return
        raise raised

    def jump_to(self, offset: int) -> None:
        self.index = self.offset_index[offset]

    def local(self, name: str) -> Value | None:
        """The local's value (None when unbound), reading an argument for the first time."""
        value = self.locals.get(name)
        if type(value) is UnreadArgument:
            value = self.locals[name] = self.tracer.wrap(value.real, value.source)
        return value

    def push(self, value: Value) -> None:
        self.stack.append(value)

    def pop(self) -> Value:
        return self.stack.pop()

    def popn(self, count: int) -> list[Value]:
        if count == 0:
            return []
        values = self.stack[-count:]
        del self.stack[-count:]
        return values

    def frame_summary(self) -> traceback.FrameSummary:
        filename = self.code.co_filename
        line = linecache.getline(filename, self.lineno).strip()
        return traceback.FrameSummary(filename, self.lineno, self.code.co_name, line=line)

    def builtins(self) -> dict[str, Any]:
        builtins = self.globals.get("__builtins__", sys.modules["builtins"])
        return builtins if isinstance(builtins, dict) else vars(builtins)
