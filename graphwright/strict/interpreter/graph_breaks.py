"""The registry of graph-break kinds: stable ids, titles, explanations, hints.

Every reason the strict tracer can stop capturing is listed here exactly once,
with an id that never changes meaning (`GB001`...). The tracer raises
`GraphBreak` naming a kind; the API layer turns it into `graphwright.Unsupported`
(fullgraph) or an eager fallback counted under the kind's title.
`docs/graph-breaks.md` is generated from this table (`make docs`).
"""
from __future__ import annotations

import linecache
import traceback
import types
from dataclasses import dataclass

from ..._core.errors import Unsupported, unsupported_raising
from ..._core.user_stack import is_graphwright_file


@dataclass(frozen=True)
class GraphBreakKind:
    gb_id: str
    title: str
    explanation: str
    hints: tuple[str, ...]


class GraphBreak(Exception):
    """Raised inside the tracer when capture cannot continue; carries the user stack."""

    def __init__(self, kind: GraphBreakKind, explanation: str, debug_context: str,
                 user_stack: list[traceback.FrameSummary]) -> None:
        super().__init__(kind.title)
        self.kind = kind
        self.explanation = explanation
        self.debug_context = debug_context
        self.user_stack = user_stack
        self.frames: list = []  # (Frame, instruction) it propagated through, innermost first
        self.split_note = ""  # set when the function could not be split here: what runs instead
        # the program's own exception (OBSERVED_EXCEPTION), or what an operator raised on fakes
        self.user_error: BaseException | None = None
        # An operator rejected the types of its traced arguments (a TypeError on fake tensors).
        # What it was given may come from code that asks `torch.compiler.is_compiling()` (the
        # optimizers' `_get_value` gives a tensor, not a float), which eager code never sees:
        # the function then runs as eager Python, its callees uncompiled too.
        self.rejected_arguments = False
        # A jagged tensor met without a ShapeEnv for its ragged size: traced again with one.
        self.needs_sizes = False
        # the `error_on_graph_break` switch where the break happened: an error, as under fullgraph
        self.error_on_graph_break = False
        # Why no split at this break is sound (the function then runs as Python, its callees
        # compiled); empty when one may be
        self.unsplittable = ""

    def to_unsupported(self) -> Unsupported:
        context = (f"{self.debug_context}\n\n For more details about this graph break, "
                   f"see {self.kind.gb_id} in docs/graph-breaks.md")
        error_type = Unsupported if self.user_error is None else unsupported_raising(type(self.user_error))
        return error_type(self.kind.title, gb_id=self.kind.gb_id, explanation=self.explanation,
                          hints=self.kind.hints, debug_context=context, user_stack=self.user_stack)


def frame_summaries(positions: list[tuple[types.CodeType, int]]) -> list[traceback.FrameSummary]:
    """The frames at `positions` ((code, line)), as a traceback shows them."""
    return [traceback.FrameSummary(code.co_filename, line, code.co_name,
                                   line=linecache.getline(code.co_filename, line).strip())
            for code, line in positions]


def shown_stack(positions: list[tuple[types.CodeType, int]]) -> list[traceback.FrameSummary]:
    """The frames at `positions` (outermost first) that a message shows: all but
    graphwright's own (all of them when only those are)."""
    frames = frame_summaries(positions)
    return [summary for summary in frames if not is_graphwright_file(summary.filename)] or frames


class UserException(Exception):
    """An exception the traced program raised (`value` is its symbolic value).

    The program's own `try`/`except` handlers may catch it; escaping the compiled function
    it becomes an OBSERVED_EXCEPTION graph break. `positions` is where it was raised (see
    `shown_stack`), made into a stack only if it escapes: most are caught. `in_traceback`:
    the frame it is in already has its traceback entry (it re-raised the exception)."""

    def __init__(self, value, debug_context: str, positions: list[tuple[types.CodeType, int]]) -> None:
        super().__init__(debug_context)
        self.value = value
        self.debug_context = debug_context
        self.positions = positions
        self.in_traceback = False

    @property
    def user_stack(self) -> list[traceback.FrameSummary]:
        return shown_stack(self.positions)

    def to_graph_break(self, description: str, real: BaseException | None) -> GraphBreak:
        """The break for this exception escaping the compiled function; `description` is
        `Type: message`, `real` a real exception like it (None when there is none)."""
        brk = GraphBreak(OBSERVED_EXCEPTION, OBSERVED_EXCEPTION.explanation.format(error=description),
                         f"raised {description}", self.user_stack)
        brk.user_error = real
        return brk


REGISTRY: dict[str, GraphBreakKind] = {}


def define_kind(gb_id: str, title: str, explanation: str, *hints: str) -> GraphBreakKind:
    """Register a graph-break kind under its stable id (each id once)."""
    if gb_id in REGISTRY:
        raise ValueError(f"graph-break id {gb_id} is defined twice")
    kind = GraphBreakKind(gb_id, title, explanation, hints)
    REGISTRY[gb_id] = kind
    return kind


USER_GRAPH_BREAK = define_kind(
    "GB001", "Call to `graphwright.graph_break()`",
    "User-inserted graph break. Message: {msg}",
    "Remove the `graphwright.graph_break()` call.")
DATA_DEPENDENT_BRANCH = define_kind(
    "GB002", "Data-dependent branching",
    "Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`): the branch taken "
    "depends on a tensor's values, which are unknown while tracing.",
    "Use `torch.where` or `torch.cond` to express the branch on tensors.",
    "Move the check out of the compiled region, or compute it from shapes or Python values.")
TENSOR_TO_PYTHON = define_kind(
    "GB003", "Converting a tensor to a Python value",
    "`{what}` needs the tensor's data as a Python value, which is unknown while tracing.",
    "Keep the value as a tensor (e.g. use `t` instead of `t.item()`).",
    "Move the conversion out of the compiled region.")
DYNAMIC_SHAPE_OPERATOR = define_kind(
    "GB004", "Operator with data-dependent output shape",
    "`{op}` returns a tensor whose shape depends on the input's values.",
    "Use an operator with a fixed output shape (e.g. a mask with `torch.where`).",
    "Move the operator out of the compiled region.")
UNSUPPORTED_CALLABLE = define_kind(
    "GB005", "Attempted to call a function the tracer cannot trace",
    "`{name}` is implemented in C or in a library the tracer does not model, "
    "so its effect on the program cannot be captured.",
    "Replace the call with torch operations or plain Python the tracer can follow.",
    "If the function is pure tensor code, mark it with `graphwright.nonstrict_trace`.",
    "Move the call out of the compiled region.")
UNSUPPORTED_OPCODE = define_kind(
    "GB006", "Unsupported bytecode instruction",
    "The instruction `{opname}` is not modelled by the strict tracer.",
    "Rewrite this part of the function with simpler Python constructs.",
    "Move this code out of the compiled region.")
GENERATOR = define_kind(
    "GB007", "Unsupported generator or coroutine",
    "`{name}`: the tracer runs generators made in the region as Python does, but not coroutines, "
    "async functions, a compiled function that is itself a generator, or a generator whose "
    "cleanup would run when Python collects it.",
    "Return a list instead of yielding values, or exhaust the generator inside the region.",
    "Move the generator out of the compiled region.")
PRINT_CALL = define_kind(
    "GB008", "Call to `print`",
    "`print` writes to stdout, a side effect outside the graph.",
    "Set `graphwright.config.reorderable_print = True` to replay prints after the graph.",
    "Use `logging`, which is replayed after the graph by default.")
DISABLED_FUNCTION = define_kind(
    "GB009", "Call to a function marked `graphwright.disable`",
    "`{name}` is marked to never be compiled, so the tracer does not look inside it.",
    "Remove the `disable` marking if the function should be captured.")
FAKE_TENSOR_ERROR = define_kind(
    "GB010", "Operator failed on fake tensors",
    "`{op}` raised while running on fake tensors: {error}",
    "Check that the call also works eagerly with the same inputs.",
    "If the operator has no fake implementation, register one with `torch.library`.")
OBSERVED_EXCEPTION = define_kind(
    "GB011", "Observed exception",
    "The traced code raised `{error}` and no handler in the compiled function catches it. "
    "Without fullgraph=True the function runs in Python instead, where the exception is raised only "
    "if eager Python raises it too (code that asks `torch.compiler.is_compiling()` may take another path "
    "there).",
    "Check whether the function raises this exception when it runs eagerly, with the same inputs.",
    "Catch the exception inside the compiled function, or move the code that raises it out of it.")
UNSUPPORTED_ATTRIBUTE = define_kind(
    "GB012", "Unsupported attribute or method",
    "The tracer cannot model `{name}` on a value of type `{type}`.",
    "Read the attribute outside the compiled region and pass it in.",
    "Use a plain Python object, list, dict or tensor here.")
AUTOGRAD_CALL = define_kind(
    "GB013", "Call to an autograd API",
    "`{name}` belongs to autograd's backward machinery (running the backward pass or hooking "
    "into it), which a forward graph cannot capture.",
    "Compile only the model's forward (e.g. `graphwright.compile(model)`), and call "
    "`backward()` outside the compiled function.")
GLOBAL_STATE_CALL = define_kind(
    "GB014", "Call to a torch function with global side effects",
    "`{name}` changes global torch state (seeds, defaults, flags) outside the graph.",
    "Call it outside the compiled region.")
UNSUPPORTED_BUILTIN = define_kind(
    "GB015", "Unsupported builtin call",
    "The tracer cannot call `{name}` with arguments of types {types}.",
    "Call it on Python constants, lists, tuples or dicts, or move it out of the compiled region.")
INTERNAL_ERROR = define_kind(
    "GB016", "Internal error in the strict tracer",
    "The tracer failed on this line: {error}",
    "This is a bug in graphwright; please report it with the program that triggers it.",
    "Use `fullgraph=False` to fall back to eager execution for this function.")
UNRECONSTRUCTIBLE_VALUE = define_kind(
    "GB017", "Value cannot leave the compiled region",
    "A `{type}` created inside the compiled region is returned or stored, and the "
    "tracer cannot rebuild it after the graph.",
    "Return tensors, Python constants, lists, tuples or dicts instead.")
MODULE_HOOKS = define_kind(
    "GB018", "Module with hooks",
    "`{name}` has {hooks}: autograd must wrap the call itself, so the call runs in Python (as "
    "`nn.Module.__call__` runs it) with its hooks and `forward` compiled separately.",
    "Register forward hooks or pre-hooks (inlined into the graph) instead, or tensor hooks "
    "(`register_hook`) on the inputs or outputs of the compiled region.")
UNSUPPORTED_CONTEXT_MANAGER = define_kind(
    "GB019", "Unsupported context manager",
    "The tracer cannot enter a `{type}` context manager.",
    "Use `torch.no_grad()`, `torch.enable_grad()`, `torch.set_grad_enabled()` or "
    "`torch.autocast()`, or move the `with` block out of the compiled region.")
UNSUPPORTED_OPERATION = define_kind(
    "GB020", "Unsupported operation on values",
    "The tracer cannot apply `{op}` to values of types {types}.",
    "Use tensors, Python numbers, strings, lists, tuples or dicts here.")
UNSUPPORTED_ITERATION = define_kind(
    "GB021", "Iteration over an unsupported value",
    "The tracer cannot iterate over a `{type}`.",
    "Iterate over a list, tuple, dict, range, or `nn.ModuleList`/`Sequential`/`ModuleDict`.")
UNSUPPORTED_CLASS = define_kind(
    "GB022", "Unsupported class instantiation",
    "The tracer cannot create an instance of `{name}` inside the compiled region.",
    "Create the object outside the compiled region and pass it in.")
UNSUPPORTED_TENSOR = define_kind(
    "GB023", "Unsupported tensor input",
    "`{name}` is a {tensor} tensor, which the tracer cannot represent while tracing: {error}",
    "Convert the tensor before the compiled region (e.g. `.to_dense()`, or a nested tensor "
    "with `layout=torch.jagged`).",
    "Move the code that uses it out of the compiled region.")
NEVER_TRACED_FUNCTION = define_kind(
    "GB024", "Call to a function the tracer never traces",
    "`{name}` belongs to `{module}`, which the tracer skips as torch.compile does: "
    "a learning-rate scheduler keeps step counts and epochs that change on every call, and a trace "
    "of it would recompile on every step. It runs in Python between two graphs; the optimizer step "
    "it wraps is still compiled.",
    "Nothing to do: the graphs around the call are kept.",
    "Step the scheduler outside the compiled function to keep the graphs on either side as one.")
LAZY_MODULE = define_kind(
    "GB025", "Uninitialized lazy module",
    "`{name}` has not inferred the shapes of its parameters yet: its first call runs in Python, "
    "where `initialize_parameters` sees the real inputs as in eager, and the next call compiles "
    "the initialized module.",
    "Run the model once on an example input before compiling it to capture it on the first call.")
SUBGRAPH_SIDE_EFFECT = define_kind(
    "GB040", "Side effect in a function traced as a subgraph",
    "{purpose} is traced once as a subgraph of the graph (both branches of a `torch.cond` are), "
    "so it must not change anything outside itself; here it makes {what}.",
    "Return the values from the function instead of storing them outside it.",
    "Move the side effect out of the function.")
HIGHER_ORDER_CALL = define_kind(
    "GB041", "Unsupported call of a higher-order operator",
    "`{op}` cannot be captured here: {reason}.",
    "Check the call against the operator's documentation (argument kinds and structure).",
    "Move the call out of the compiled region.")
MODULE_WRAPPER = define_kind(
    "GB050", "Call of a `DistributedDataParallel` module",
    "`{name}` runs its forward as Python, as under torch.compile: it prepares DDP's reducer and "
    "the hooks that all-reduce gradients in eager autograd. The module it wraps is compiled in "
    "its own graphs, split at DDP's gradient buckets.",
    "Compile the DDP module itself (`graphwright.compile(ddp_model)`) or the module before "
    "wrapping it, and call it outside the compiled function.")
RECURRENT_MODULE = define_kind(
    "GB042", "Recurrent module (RNN, GRU, LSTM)",
    "`{name}` is an `nn.RNNBase` module and `graphwright.config.allow_rnn` is off (PyTorch's "
    "default), so it runs eagerly between two graphs.",
    "Set `graphwright.config.allow_rnn = True` (graphwright's default) to trace it into the graph.")
NUMPY_UNTRACEABLE = define_kind(
    "GB060", "NumPy operation that cannot run on tensors",
    "`{name}` {reason}, so the tracer cannot record it as tensor operations.",
    "Write this step with torch operations, or compute it outside the compiled region and pass "
    "the result in.",
    "For random numbers, draw them with torch (`torch.rand`, a `torch.Generator`) or pass them in.")
CLASS_STATEMENT = define_kind(
    "GB030", "Class the tracer cannot build",
    "The class `{name}` is made inside the compiled region (a class statement, `type(name, bases, "
    "namespace)`), and the tracer cannot make it: {reason}. It is made in Python between two graphs "
    "(a new class on every call).",
    "Define the class outside the compiled function.")


def graph_break_kinds() -> list[GraphBreakKind]:
    return sorted(REGISTRY.values(), key=lambda kind: kind.gb_id)


def render_markdown() -> str:
    """The text of docs/graph-breaks.md: every graph-break kind, by id."""
    lines = [
        "# Graph breaks",
        "",
        "Every reason the strict tracer can stop capturing a graph, with its stable id.",
        "Under `fullgraph=True` each raises `graphwright.Unsupported` naming the id; under",
        "`fullgraph=False` the function is split there: the graph captured so far runs, the",
        "breaking instruction runs in Python, and a resume function (compiled in turn) continues;",
        "`graphwright.counters[\"graph_break\"]` counts the title. Inside a loop or a `try` block the",
        "function runs in Python instead (its callees are still compiled). This file is generated",
        "from `graphwright/strict/interpreter/graph_breaks.py`.",
        "",
    ]
    for kind in graph_break_kinds():
        lines += [f"## {kind.gb_id}: {kind.title}", "", f"Explanation: {kind.explanation}", ""]
        lines += [f"- Hint: {hint}" for hint in kind.hints]
        lines.append("")
    return "\n".join(lines)


def write_docs() -> None:
    """Regenerate docs/graph-breaks.md (`make docs`); every kind must be registered by then."""
    import pathlib

    docs = pathlib.Path(__file__).resolve().parents[3] / "docs" / "graph-breaks.md"
    docs.write_text(render_markdown())
