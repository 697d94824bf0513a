"""What a call to a marked callable means to the strict tracer.

`call_marked` is asked about every call before the tracer inlines or records
it. It answers None for ordinary callables; otherwise it returns the call's
value or raises its graph break:

- `nonstrict_trace`-ed: one opaque node, traced into by AOT (`nonstrict_calls`);
- `allow_in_graph`-ed: one node calling the function on tensors, numbers and frozen
  dataclasses of them (made in the graph from their fields);
- `leaf_function`s: one node opaque at every level (`leaf_calls`);
- `disallow_in_graph`-ed: a graph break;
- `assume_constant_result` (torch's marking): called now, its result a constant;
- the decorators themselves, applied inside the region to a function defined
  outside it: marked now, the wrapper is the value;
- `torch.compiler.is_compiling()` and its spellings: True while tracing;
- `mark_dynamic` and torch's other markings that promise something about the
  compilation under way (`forbid_in_region`): an error, as in PyTorch;
- `graphwright.mark_static` made inside the region: it sets an attribute that later
  compilations read, so it is replayed on the real tensor after the graph, as the
  eager call does.
"""
from __future__ import annotations

import dataclasses
import inspect
import types
from typing import TYPE_CHECKING, Any

from ..._core import rules
from ..._core.errors import ForbiddenCallError
from ..interpreter import graph_breaks as gb
from ..objects import operations
from ..interpreter.graph_builder import is_graph_dataclass
from ..objects.values import (
    ConstantValue,
    FunctionValue,
    ObjectValue,
    SequenceValue,
    TensorValue,
    Value,
)
from ..objects.wrap import function_value
from . import leaf_calls, markers, nonstrict_calls
from . import marking_breaks as mb
from .pytree_values import PRIMITIVE_LEAF_TYPES, SYMBOLIC_LEAF_TYPES

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


def call_marked(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    if rules.is_compiling_function(target):
        return tracer.answer_is_compiling()
    if rules.is_forbidden(target):
        raise ForbiddenCallError(f"Attempt to trace forbidden callable {target}",
                                 explanation=f"`{getattr(target, '__qualname__', target)}` sets what the next "
                                             "compilation reads, so it must be called before compiling.",
                                 hints=["Call it on the inputs before calling the compiled function."],
                                 user_stack=tracer.user_stack())
    if target is markers.mark_static:
        tracer.side_effects.replay_call(target, args, kwargs)
        return ConstantValue(None)
    decorator = rules.decorator_name(target)
    if decorator is not None:
        return _apply_decorator(tracer, target, decorator, args, kwargs)
    marking = rules.marking_of(target)
    if marking is None:
        return None
    name = nonstrict_calls.function_name(target)
    if marking == rules.NONSTRICT:
        return nonstrict_calls.call_nonstrict(tracer, target, args, kwargs)
    if marking == rules.LEAF:
        return leaf_calls.call_leaf(tracer, target, args, kwargs)
    if marking == rules.DISALLOW:
        raise tracer.graph_break(mb.DISALLOWED_CALL, f"call to disallowed {name}", name=name)
    if marking == rules.CONSTANT_RESULT:
        return _constant_result(tracer, target, args, kwargs)
    return _call_allowed(tracer, target, name, args, kwargs)


def _apply_decorator(tracer: "Tracer", decorator_fn: Any, decorator: str, args: list[Value],
                     kwargs: dict[str, Value]) -> Value:
    try:  # `nonstrict_trace(fn)` or `nonstrict_trace(traceable_fn=fn)`
        (marked,) = inspect.signature(decorator_fn).bind(*args, **kwargs).arguments.values()
    except (TypeError, ValueError):
        raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"{decorator} with {len(args)} arguments",
                                 name=decorator) from None
    if isinstance(marked, FunctionValue):
        if marked.fn is None:
            if decorator == rules.NONSTRICT:
                raise tracer.graph_break(mb.NONSTRICT_DEFINED_INSIDE, f"nonstrict_trace({marked.name})",
                                         name=marked.name)
            raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"{decorator} of a local function",
                                     name=f"{decorator} on a function defined in the region")
        wrapper = decorator_fn(marked.fn)
        value = function_value(wrapper, None)
        return value if marked.bound_self is None else value.bind(marked.bound_self)
    if isinstance(marked, ConstantValue) and callable(marked.value):
        wrapper = decorator_fn(marked.value)
        return function_value(wrapper, None) if type(wrapper) is types.FunctionType else ConstantValue(wrapper)
    raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"{decorator} of {marked!r}", name=decorator)


def _allowed_argument(value: Value) -> bool:
    if isinstance(value, TensorValue):
        return True
    if isinstance(value, ConstantValue):
        return isinstance(value.value, (*PRIMITIVE_LEAF_TYPES, *SYMBOLIC_LEAF_TYPES))
    if isinstance(value, SequenceValue) and value.cls is None:
        return all(_allowed_argument(item) for item in value.items)
    if is_graph_dataclass(value):
        return all(_allowed_argument(item) for item in value.overlay.values())
    return False


def _as_made_in_graph(tracer: "Tracer", value: Value) -> Value:
    """A frozen dataclass read from outside, as a copy made from its fields (read, and guarded,
    one by one), which the graph makes again (as it does one made in the region); any other
    value as it is."""
    cls = value.python_type()
    if not (isinstance(value, ObjectValue) and value.obj is not None and dataclasses.is_dataclass(cls)
            and cls.__dataclass_params__.frozen):
        return value
    from ..objects import attributes

    copy = ObjectValue(None, cls)
    copy.overlay = {field.name: _as_made_in_graph(tracer, attributes.load_attr(tracer, value, field.name))
                    for field in dataclasses.fields(cls)}
    return copy


def _call_allowed(tracer: "Tracer", fn: Any, name: str, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """One node calling `fn`: the graph shows the call, AOT autograd traces into it. A frozen
    dataclass argument is made in the graph from its fields, as torch.compile makes it."""
    args = [_as_made_in_graph(tracer, arg) for arg in args]
    kwargs = {key: _as_made_in_graph(tracer, arg) for key, arg in kwargs.items()}
    for path, value in [*((f"args[{i}]", v) for i, v in enumerate(args)),
                        *((f"kwargs[{k!r}]", v) for k, v in kwargs.items())]:
        if not _allowed_argument(value):
            raise tracer.graph_break(mb.ALLOW_IN_GRAPH_INVALID_INPUT, f"{path} of {name}", path=path,
                                     name=name, type=value.python_type().__qualname__)
    # recorded whatever it returns: the user put it in the graph, effects and all
    result = tracer.graph.call("call_function", fn, args, kwargs, effectful=True)
    if not _allowed_argument(result):
        raise tracer.graph_break(mb.ALLOW_IN_GRAPH_INVALID_OUTPUT, f"output of {name}", name=name,
                                 type=_described_type(result))
    return result


def _described_type(value: Value) -> str:
    if isinstance(value, ConstantValue):
        return type(value.value).__qualname__
    return value.python_type().__qualname__


def _constant_result(tracer: "Tracer", fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    python_args = [operations.python_value(tracer, arg) for arg in args]
    python_kwargs = {key: operations.python_value(tracer, arg) for key, arg in kwargs.items()}
    return operations.constant(fn(*python_args, **python_kwargs))
