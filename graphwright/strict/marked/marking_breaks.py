"""Graph-break kinds of calls to marked callables (nonstrict_trace, allow_in_graph,
leaf_function, disallow_in_graph), registered in the graph-break registry.

Their ids start at GB100 so that they never collide with the tracer's own kinds;
they are listed in docs/graph-breaks.md with the others.
"""
from __future__ import annotations

from ..interpreter.graph_breaks import define_kind

_REGISTER_HINT = ("Register `{type}` with torch.utils._pytree: `register_pytree_node`, "
                  "`register_dataclass`, or `register_constant` (for a value used as a constant).")

NONSTRICT_DEFINED_INSIDE = define_kind(
    "GB100", "Limitation of `nonstrict_trace`",
    "Applying `nonstrict_trace` to function <{name}>; however, `nonstrict_trace` currently "
    "requires the function to be defined outside `graphwright.compile` region.",
    "Define the function at module level (or anywhere outside the compiled function) and "
    "apply `nonstrict_trace` there or inside the region.")
NONSTRICT_INVALID_INPUT = define_kind(
    "GB101", "Invalid input type for nonstrict_trace-ed function",
    "Input `{path}` of `{name}` is a `{type}`, which is not a tensor, a number, a string, None, "
    "a list, tuple or dict, an `nn.Module`, nor a class registered with torch.utils._pytree.",
    _REGISTER_HINT.replace("{type}", "the class"),
    "Or pass the object's tensors and numbers to the function instead.")
NONSTRICT_INVALID_OUTPUT = define_kind(
    "GB102", "Unsupported output type for nonstrict_trace-ed function",
    "`{name}` returned a `{type}` at `{path}`, which is not a tensor, a number, a string, None, "
    "a list, tuple or dict, nor a class registered with torch.utils._pytree.",
    _REGISTER_HINT.replace("{type}", "the class"),
    "Or return the object's tensors and numbers instead.")
NONSTRICT_TRACE_FAILED = define_kind(
    "GB103", "Error while tracing a nonstrict_trace-ed function",
    "Running `{name}` on fake tensors raised {error}",
    "Check that the function runs eagerly on these inputs and only uses their metadata "
    "(shapes, dtypes) in Python control flow.",
    "If it needs tensor values in Python, use `leaf_function` instead.")
ALLOW_IN_GRAPH_INVALID_INPUT = define_kind(
    "GB104", "Invalid input type for allow_in_graph-ed function",
    "Input `{path}` of `{name}` is a `{type}`; allow_in_graph takes tensors, numbers, None and "
    "lists/tuples of those.",
    "Mark the function with `graphwright.nonstrict_trace`, which takes modules and "
    "registered classes.",
    "Or pass the object's tensors and numbers to the function instead.")
DISALLOWED_CALL = define_kind(
    "GB105", "Call to a function marked `disallow_in_graph`",
    "`{name}` is marked with `disallow_in_graph`, so calling it ends the graph.",
    "Remove the `disallow_in_graph` marking if the call should be captured.")
LEAF_MISSING_FAKE = define_kind(
    "GB106", "leaf_function without a fake implementation",
    "`{name}` is a `leaf_function` and requires a fake implementation: the tracer never looks "
    "inside it, so only a fake can tell the shapes of its outputs.",
    "Register one with `@<the function>.register_fake` on a function with the same signature that "
    "returns outputs of the right shapes, e.g. with `x.new_empty(...)`.")
LEAF_INVALID_IO = define_kind(
    "GB107", "Invalid input or output for leaf_function",
    "`{name}`: {what} is a `{type}`; leaf functions take and return tensors, numbers, strings, "
    "None, lists, tuples, dicts and registered pytree classes.",
    _REGISTER_HINT.replace("{type}", "the class"))
LEAF_SUBCLASS_INPUT = define_kind(
    "GB112", "Tensor subclass passed to leaf_function",
    "`{name}`: {what} is a `{type}`, a tensor subclass with a `__torch_dispatch__` of its own; "
    "as an operator in the graph the leaf function would run once per tensor the subclass holds "
    "(each with its own branches and side effects), where eagerly it runs once on the subclass.",
    "Call the leaf function on plain tensors (the subclass's inner tensors), or outside the "
    "compiled region.")
ALLOW_IN_GRAPH_INVALID_OUTPUT = define_kind(
    "GB108", "Invalid output type for allow_in_graph-ed function",
    "`{name}` returned a `{type}`; allow_in_graph functions return tensors, numbers, None and "
    "lists/tuples of those.",
    "Mark the function with `graphwright.nonstrict_trace`, which returns dicts and registered "
    "classes too.",
    "Or return a tuple of tensors instead.")
LEAF_FAKE_FAILED = define_kind(
    "GB109", "Error in the fake implementation of a leaf_function",
    "Running the fake implementation of `{name}` on fake tensors raised {error}",
    "The fake must only use its arguments' metadata (shapes, dtypes) and build outputs with "
    "e.g. `x.new_empty(...)`.")
NONSTRICT_OPAQUE_CREATED = define_kind(
    "GB110", "Opaque object created in the compiled region",
    "An opaque object was created in the middle of the program: input `{path}` of `{name}` is a "
    "`{type}`, an opaque reference type, made inside the compiled region. A nonstrict_trace call "
    "takes such objects only when they exist before the region runs.",
    "Create the object outside the compiled function and pass it in.")
NONSTRICT_OBJECT_IN_CONTEXT = define_kind(
    "GB111", "Invalid use of pytree_flatten with nonstrict_trace-ed function",
    "Input `{path}` of `{name}` is a `{type}` that its parent's pytree flatten function puts in "
    "the node's context; a context must be a constant, and this object is neither a pytree nor "
    "a constant.",
    "Return the object among the children in the flatten function, and register its class with "
    "torch.utils._pytree.",
    "Or register its class with `register_constant` if it is a constant.")
