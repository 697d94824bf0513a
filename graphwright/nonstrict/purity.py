"""`check_nonstrict`: find where a non-strict trace silently differs from the program.

Non-strict tracing is only faithful for pure functions. This module traces a
function once (symbolic sizes, constants allowed) while watching it, and
reports each way the graph may differ from the Python, with the user's line:

- tensors that were not inputs and were baked in as constants (those that
  require grad will never get a gradient);
- non-tensor inputs and Python globals or closure values baked in, and
  conditions on sizes the graph assumes (branches taken on shapes);
- inputs the function mutated while it was traced (the graph won't);
- a differential run of graph and function on fresh inputs of the same
  metadata, whose mismatch is evidence of a hidden constant.

It only observes: the trace itself is `make_fx`'s.
"""
from __future__ import annotations

import copy
import dataclasses
import dis
import functools
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

from .._core.user_stack import is_user_file
from .inputs import argument_names, flatten_inputs
from .make_fx import make_fx
from .trace_record import TRACE_RECORD_KEY

REPORT_KEY = "nonstrict_report"

_BAKED_VALUE_TYPES = (int, float, complex, str, torch.Tensor)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One way the graph may differ from the program.

    `kind` is one of "captured_constant", "specialised_input", "baked_global",
    "size_assumption", "input_mutation", "differential_mismatch".
    """

    kind: str
    message: str
    user_location: str
    hint: str

    def __str__(self) -> str:
        where = f"{self.user_location}: " if self.user_location else ""
        return f"[{self.kind}] {where}{self.message}\n    Hint: {self.hint}"


@dataclasses.dataclass
class NonstrictReport:
    """What `check_nonstrict` found; empty `findings` means the trace is faithful.

    >>> report = graphwright.check_nonstrict(f, x)
    >>> report.clean, [finding.kind for finding in report.findings]
    """

    function_name: str
    findings: list[Finding]
    graph_module: torch.fx.GraphModule

    @property
    def clean(self) -> bool:
        return not self.findings

    def of_kind(self, kind: str) -> list[Finding]:
        return [finding for finding in self.findings if finding.kind == kind]

    def __str__(self) -> str:
        if self.clean:
            return f"check_nonstrict({self.function_name}): no findings; the graph is faithful."
        lines = [f"check_nonstrict({self.function_name}): {len(self.findings)} finding(s)"]
        lines.extend(f"  {finding}" for finding in self.findings)
        return "\n".join(lines)


def check_nonstrict(f: Callable[..., Any], *args: Any, **kwargs: Any) -> NonstrictReport:
    """Trace `f(*args, **kwargs)` non-strictly and report what the graph silently assumes.

    >>> scale = torch.ones(3, requires_grad=True)
    >>> def f(x):
    ...     return x * scale
    >>> print(graphwright.check_nonstrict(f, torch.randn(3)))
    check_nonstrict(f): 1 finding(s)
      [captured_constant] example.py:3: tensor `scale` is not an input ...

    The traced graph module is `report.graph_module`; it carries the report in
    `gm.meta["nonstrict_report"]`.
    """
    name = getattr(f, "__qualname__", type(f).__name__)
    names = [*argument_names(f, len(args)), "kwargs"]
    leaves, paths, _ = flatten_inputs((*args, kwargs), names)
    watcher = _TraceWatcher()

    @functools.wraps(f)
    def watched_call(*call_args: Any, **call_kwargs: Any) -> Any:
        watcher.start(call_args, call_kwargs)
        try:
            return f(*call_args, **call_kwargs)
        finally:
            watcher.stop()

    gm = make_fx(
        _keywords_as_trailing_arguments(watched_call, len(args), list(kwargs)) if kwargs else watched_call,
        tracing_mode="symbolic",
        _allow_non_fake_inputs=True,
    )(*args, *kwargs.values())
    record = gm.meta[TRACE_RECORD_KEY]
    definition = _definition_location(f)
    findings = [
        *_captured_constants(f, gm, record, watcher),
        *_specialised_inputs(leaves, paths, definition),
        *_baked_globals(watcher),
        *_size_assumptions(record.shape_env, watcher),
        *watcher.mutations,
        *_differential_run(f, gm, args, kwargs, definition),
    ]
    report = NonstrictReport(name, findings, gm)
    gm.meta[REPORT_KEY] = report
    return report


def _keywords_as_trailing_arguments(f: Callable[..., Any], count: int, keywords: list[str]):
    """`f` taking its keyword arguments as positional ones after the first `count`
    (make_fx traces positional arguments only)."""

    def call(*flat: Any) -> Any:
        return f(*flat[:count], **dict(zip(keywords, flat[count:])))

    return call


class _TraceWatcher:
    """Follows the user's lines while the traced function runs.

    A line-level `sys.settrace` hook on the user's frames only. At each event
    it compares cheap fingerprints (the inputs' containers, the number of size
    guards) with the previous event's and blames a change on the line that
    just ran. It also collects the user's code objects with their globals and
    closures, to name baked-in Python values.
    """

    def __init__(self) -> None:
        self.mutations: list[Finding] = []
        self.guard_lines: list[str] = []
        self.code_seen: dict[types.CodeType, tuple[dict, dict]] = {}
        self._inputs: tuple = ()
        self._fingerprint: Any = None
        self._shape_env = None
        self._last_line = ""
        self._previous_trace = None

    def start(self, call_args: tuple, call_kwargs: dict) -> None:
        self._inputs = (call_args, call_kwargs)
        self._fingerprint = _fingerprint(self._inputs)
        self._shape_env = _shape_env_of(self._inputs)
        self._previous_trace = sys.gettrace()
        sys.settrace(self._on_call)

    def stop(self) -> None:
        self._check(self._last_line)
        sys.settrace(self._previous_trace)

    def _on_call(self, frame: types.FrameType, event: str, arg: Any):
        if not is_user_file(frame.f_code.co_filename):
            return None
        self.code_seen.setdefault(frame.f_code, (frame.f_globals, _closure_values(frame)))
        return self._on_event

    def _on_event(self, frame: types.FrameType, event: str, arg: Any):
        self._check(self._last_line)
        here = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        if event == "return" and frame.f_back is not None and is_user_file(frame.f_back.f_code.co_filename):
            back = frame.f_back
            here = f"{back.f_code.co_filename}:{back.f_lineno}"
        self._last_line = here
        return self._on_event

    def _check(self, line: str) -> None:
        if self._shape_env is not None:
            new_guards = len(self._shape_env.guards) - len(self.guard_lines)
            self.guard_lines.extend([line] * new_guards)
        fingerprint = _fingerprint(self._inputs)
        if fingerprint != self._fingerprint:
            self._fingerprint = fingerprint
            self.mutations.append(
                Finding(
                    "input_mutation",
                    "the function mutated an input's contents (a list, dict or attribute) while "
                    "it was traced; the graph will not repeat this mutation when it runs",
                    line,
                    "Return the new value instead of mutating the input, or keep the mutation "
                    "outside the traced function.",
                )
            )


def _fingerprint(value: Any) -> Any:
    """Identity and length of every container reachable from the inputs."""
    if isinstance(value, (list, tuple)):
        return (type(value), id(value), len(value), tuple(_fingerprint(v) for v in value))
    if isinstance(value, dict):
        return (dict, id(value), tuple((k, _fingerprint(v)) for k, v in value.items()))
    if isinstance(value, torch.Tensor) or not hasattr(value, "__dict__"):
        return id(value)
    return (type(value), tuple((k, _fingerprint(v)) for k, v in vars(value).items()))


def _shape_env_of(inputs: Any):
    for leaf in pytree.tree_leaves(inputs):
        fake_mode = getattr(leaf, "fake_mode", None)
        if fake_mode is not None:
            return fake_mode.shape_env
    return None


def _closure_values(frame: types.FrameType) -> dict:
    code = frame.f_code
    return {name: frame.f_locals.get(name) for name in code.co_freevars}


def _definition_location(f: Any) -> str:
    code = getattr(getattr(f, "forward", f), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""


def _captured_constants(f, gm, record, watcher: _TraceWatcher) -> Iterator[Finding]:
    names = _names_of_read_values(watcher)
    module_state = {}
    if isinstance(f, torch.nn.Module):
        module_state = {id(t): name for name, t in (*f.named_parameters(), *f.named_buffers())}
    for constant in record.constants:
        if constant.from_literal:
            continue
        tensor = getattr(gm, constant.target)
        if id(tensor) in module_state:
            label = f"`{module_state[id(tensor)]}` of the traced module"
        elif id(tensor) in names:
            label = f"`{names[id(tensor)]}`"
        else:
            label = f"of shape {tuple(tensor.shape)}"
        message = f"tensor {label} is not an input and was baked into the graph as a constant"
        if constant.requires_grad:
            message += "; it requires grad, so it will never get a gradient through the graph"
        yield Finding(
            "captured_constant",
            message,
            constant.user_location,
            "Pass the tensor to the function as an argument so the graph takes it as an input.",
        )


def _specialised_inputs(leaves: list, paths: list[str], definition: str) -> Iterator[Finding]:
    for leaf, path in zip(leaves, paths):
        if isinstance(leaf, torch.Tensor) or leaf is None:
            continue
        yield Finding(
            "specialised_input",
            f"input `{path}` = {leaf!r} is not a tensor: its value is baked into the graph, "
            "which is only valid for that value",
            definition,
            "Trace again for each value you call with, or pass the value as a tensor.",
        )


def _baked_globals(watcher: _TraceWatcher) -> Iterator[Finding]:
    for name, value, location in _read_values(watcher):
        if isinstance(value, torch.Tensor):
            continue  # reported as captured constants, where the graph uses them
        yield Finding(
            "baked_global",
            f"`{name}` = {value!r} is read from outside the function; its current value is "
            "baked into the graph",
            location,
            f"Pass `{name}` as an argument, or trace again whenever it changes.",
        )


def _names_of_read_values(watcher: _TraceWatcher) -> dict[int, str]:
    return {id(value): name for name, value, _ in _read_values(watcher)}


def _read_values(watcher: _TraceWatcher) -> Iterator[tuple[str, Any, str]]:
    """Globals and closure variables of plain value types that the user's code read."""
    seen = set()
    for code, (f_globals, closure) in watcher.code_seen.items():
        for instruction in dis.get_instructions(code):
            if instruction.opname == "LOAD_GLOBAL":
                scope = f_globals
            elif instruction.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
                scope = closure
            else:
                continue
            name = instruction.argval
            value = scope.get(name)
            if (code, name) in seen or isinstance(value, bool) or not isinstance(value, _BAKED_VALUE_TYPES):
                continue
            seen.add((code, name))
            line = instruction.positions.lineno if instruction.positions else code.co_firstlineno
            yield name, value, f"{code.co_filename}:{line}"


def _size_assumptions(shape_env, watcher: _TraceWatcher) -> Iterator[Finding]:
    if shape_env is None:
        return
    names = {
        symbol: sources[0].name
        for symbol, sources in shape_env.var_to_sources.items()
        if sources
    }
    for guard, line in zip(shape_env.guards, watcher.guard_lines):
        condition = _readable_condition(guard.expr, names)
        yield Finding(
            "size_assumption",
            f"the graph assumes `{condition}` (a branch or check on sizes was decided while "
            "tracing); inputs of other sizes may need a different graph",
            line if is_user_file(line.rsplit(":", 1)[0]) else "",
            "Trace again for other sizes, or make the computation independent of the size.",
        )


def _readable_condition(expr, names: dict) -> str:
    text = str(expr)
    for symbol in sorted(names, key=lambda s: -len(str(s))):
        text = text.replace(str(symbol), names[symbol])
    return text


def _differential_run(f, gm, args: tuple, kwargs: dict, definition: str) -> Iterator[Finding]:
    fresh_args, fresh_kwargs = pytree.tree_map_only(torch.Tensor, _fresh_like, (args, kwargs))
    eager_args, eager_kwargs = copy.deepcopy((fresh_args, fresh_kwargs))
    seed = torch.initial_seed()
    try:
        torch.manual_seed(seed)
        expected = f(*eager_args, **eager_kwargs)
        torch.manual_seed(seed)
        actual = gm(*fresh_args, *fresh_kwargs.values())
    except Exception as exc:  # the program itself may reject fresh values
        yield Finding(
            "differential_mismatch",
            f"the differential run on fresh inputs could not complete: {type(exc).__name__}: {exc}",
            definition,
            "Check that the function accepts other values of the same shapes and dtypes.",
        )
        return
    mismatch = _first_mismatch(expected, actual)
    if mismatch:
        yield Finding(
            "differential_mismatch",
            f"on fresh inputs of the same shapes and dtypes the graph and the function disagree "
            f"({mismatch}): evidence of a hidden constant or specialisation",
            definition,
            "Make every value the function depends on an explicit input.",
        )


def _fresh_like(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor with `tensor`'s metadata and new values (integers: the same values reshuffled,
    so indices stay in range)."""
    with torch.no_grad():
        if tensor.is_floating_point() or tensor.is_complex():
            fresh = torch.randn_like(tensor)
        else:
            flat = tensor.reshape(-1)
            fresh = flat[torch.randperm(flat.numel(), device=tensor.device)].reshape(tensor.shape).clone()
    return fresh.requires_grad_(tensor.requires_grad)


def _first_mismatch(expected: Any, actual: Any) -> str:
    expected_leaves, expected_spec = pytree.tree_flatten(expected)
    actual_leaves, actual_spec = pytree.tree_flatten(actual)
    if expected_spec != actual_spec:
        return f"output structure {expected_spec} vs {actual_spec}"
    for index, (want, got) in enumerate(zip(expected_leaves, actual_leaves)):
        if isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor):
            if want.shape != got.shape or not torch.allclose(want.detach(), got.detach(), rtol=1e-4, atol=1e-5, equal_nan=True):
                return f"output {index} differs"
        elif want != got:
            return f"output {index}: {want!r} vs {got!r}"
    return ""
