"""Runs one generated program eagerly and compiled, compares, and says what happened.

A program's source is loaded as a fresh module (from a file, so that tracebacks and
graphwright's errors can show its lines) once per run: the eager run and each compiled
configuration get their own world, built from the same seeds. Each call of `CALLS`
records what a user could observe (harness.snapshot): the output, the arguments after the
call, the `OBSERVED` module-level state, every module's state and attributes, what was
printed, and gradients after backpropagating through the output.

Outcomes, per compiled configuration:
- `ok`: indistinguishable from eager on every call;
- `expected_break`: `fullgraph=True` raised a typed graphwright error, and the program
  planted a graph break (`BREAKS`);
- `unexpected_break`: `fullgraph=True` raised `Unsupported` for a program without one (the
  tracer does not model a construct: not a wrong answer, counted apart);
- `mismatch`: a different output, state, print or gradient (a wrong answer);
- `internal_error`: a raw exception where eager ran, an internal-error graph break, or a
  fallback to eager because graphwright could not compile or split;
- and for the whole program `invalid` when eager itself raises (a generator slip).
"""
from __future__ import annotations

import ast
import collections
import contextlib
import dataclasses
import hashlib
import io
import re
import sys
import tempfile
import traceback
import types
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

import graphwright
from graphwright.strict.interpreter.graph_breaks import INTERNAL_ERROR

from programs.harness import assert_same, backprop, snapshot, tensor_leaves

PROGRAM_DIR = Path(tempfile.gettempdir()) / "graphwright_fuzz"
OK, EXPECTED_BREAK, UNEXPECTED_BREAK, MISMATCH, INTERNAL, INVALID = (
    "ok", "expected_break", "unexpected_break", "mismatch", "internal_error", "invalid")
FAILURES = (MISMATCH, INTERNAL)
"""The statuses that mean graphwright is wrong."""


@dataclasses.dataclass(frozen=True)
class Config:
    """One way of compiling: a backend (a name or a callable), with or without `fullgraph`."""

    backend: str | Callable
    fullgraph: bool

    def __str__(self) -> str:
        name = self.backend if isinstance(self.backend, str) else getattr(self.backend, "__name__", "backend")
        return f"{name}{' fullgraph' if self.fullgraph else ''}"


QUICK_CONFIGS = (Config("eager", False), Config("eager", True), Config("aot_eager", False),
                 Config("aot_eager", True))
LONG_CONFIGS = QUICK_CONFIGS + (Config("inductor", False),)


@dataclasses.dataclass
class Outcome:
    """What one compiled configuration did with a program."""

    config: Config
    status: str
    detail: str = ""
    breaks: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @property
    def signature(self) -> str:
        """A coarse key for "the same bug", stable while a program shrinks: for a mismatch, what
        differs (output, gradients, printed...) and how (values, strides, dtype...); for an
        internal error, the exception type and where in graphwright; for a break, its id."""
        text = self.detail.strip()
        if self.status == MISMATCH:
            field = re.match(r"call \d+ (\w+)", text)
            return f"{self.status}: {field.group(1) if field else '?'} {_difference_kind(text)}"
        if self.status == INTERNAL:
            error = re.search(r"(\w+(?:Error|Exception)\b)", text)
            where = re.search(r"\[(\S+?):\d+ (\w+)\]", text)
            return (f"{self.status}: {error.group(1) if error else text.split(':')[0]}"
                    f"{' in ' + where.group(1) + ' ' + where.group(2) if where else ''}")
        return f"{self.status}: {text.split(' ')[0]}"


_METADATA = ("type", "dtype", "shape", "device", "requires_grad", "length", "keys")


def _difference_kind(text: str) -> str:
    """What kind of difference `harness.assert_same` reported: a metadata word, `strides`, or
    `values` (a tensor's, or a Python value's: the values themselves stay out of a signature)."""
    location, _, how = text.partition(": ")
    word = how.split(" ")[0]
    if ".stride" in location:
        return "strides"
    if location.endswith(".requires_grad"):
        return "requires_grad"
    return word if word in _METADATA else "values"


@dataclasses.dataclass
class Report:
    """What every configuration did with one program."""

    source: str
    eager_error: str | None
    outcomes: list[Outcome]

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status in FAILURES]


@dataclasses.dataclass
class CallRecord:
    output: Any
    arguments: Any
    observed: Any
    modules: Any
    printed: str
    grads: Any


class WorldError(Exception):
    """A call raised; `call` is its index, the cause is chained."""

    def __init__(self, call: int, error: BaseException) -> None:
        super().__init__(f"call {call}: {type(error).__name__}: {error}")
        self.call = call
        self.error = error


_loaded = 0


def program_file(source: str) -> Path:
    """The file a generated program is loaded from (one per distinct source)."""
    PROGRAM_DIR.mkdir(parents=True, exist_ok=True)
    path = PROGRAM_DIR / f"program_{hashlib.sha1(source.encode()).hexdigest()[:16]}.py"
    if not path.exists():
        path.write_text(source)
    return path


def load(source: str, path: Path | None = None) -> types.ModuleType:
    """A fresh module running `source` (module-level parameters drawn from seed 0)."""
    global _loaded
    path = path or program_file(source)
    _loaded += 1
    module = types.ModuleType(f"fuzz_program_{_loaded}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # dataclasses and pickling look modules up by name
    torch.manual_seed(0)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def _resolve(module: types.ModuleType, path: str) -> Any:
    """`OBSERVED` names a module-level value, or an attribute path from one (`Scaling.entered`)."""
    value = module
    for name in path.split("."):
        value = getattr(value, name)
    return value


def _modules_of(module: types.ModuleType) -> dict[str, torch.nn.Module]:
    return {name: value for name, value in vars(module).items() if isinstance(value, torch.nn.Module)}


def _module_state(value: torch.nn.Module) -> dict:
    attributes = {k: v for k, v in vars(value).items() if not k.startswith("_") and k != "training"}
    return {"state": dict(value.state_dict()), "attributes": attributes, "training": value.training}


def _gradients(args: Sequence[Any], module: types.ModuleType) -> dict[str, Any]:
    grads = {f"input{i}": t.grad for i, t in enumerate(tensor_leaves(list(args)))
             if t.requires_grad and t.is_leaf}
    for name, value in _modules_of(module).items():
        for param_name, param in value.named_parameters():
            grads[f"{name}.{param_name}"] = param.grad
    return grads


@contextlib.contextmanager
def _config(values: dict) -> Any:
    saved = {name: getattr(graphwright.config, name) for name in values}
    for name, value in values.items():
        setattr(graphwright.config, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(graphwright.config, name, value)


def run_world(source: str, config: Config | None, path: Path | None = None) -> tuple[list[CallRecord], list[str]]:
    """Every call of the program, eagerly (`config` None) or compiled: the records and the
    warnings graphwright gave."""
    module = load(source, path)
    fn = module.f
    options = getattr(module, "CONFIG", {}) if config else {}
    if config is not None:
        fn = graphwright.compile(fn, backend=config.backend, fullgraph=config.fullgraph,
                                 **module.COMPILE_OPTIONS)
    records, fallbacks = [], []
    try:
        with _config(options), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for index, call in enumerate(module.CALLS):
                if call.get("mutate"):
                    module.mutate()
                torch.manual_seed(100 + index)
                args = module.make_inputs(call["A"], call["n"])
                printed = io.StringIO()
                try:
                    with contextlib.redirect_stdout(printed):
                        torch.manual_seed(200 + index)
                        output = fn(*args)
                    backprop(output)
                except Exception as error:
                    raise WorldError(index, error) from error
                records.append(CallRecord(
                    output=snapshot(output), arguments=snapshot(args),
                    observed=snapshot({name: _resolve(module, name) for name in module.OBSERVED}),
                    modules=snapshot({name: _module_state(m) for name, m in _modules_of(module).items()}),
                    printed=printed.getvalue(), grads=snapshot(_gradients(args, module))))
        fallbacks = [str(w.message) for w in caught if str(w.message).startswith("graphwright could not")]
    finally:
        sys.modules.pop(module.__name__, None)
    return records, fallbacks


def compare(eager: list[CallRecord], compiled: list[CallRecord]) -> str | None:
    """The first difference, or None."""
    for index, (e, c) in enumerate(zip(eager, compiled)):
        for field in ("output", "arguments", "observed", "modules", "printed", "grads"):
            try:
                assert_same(getattr(e, field), getattr(c, field), f"call {index} {field}")
            except AssertionError as difference:
                return str(difference)
    return None


def _describe(error: BaseException) -> str:
    cause = error.error if isinstance(error, WorldError) else error
    where = traceback.extract_tb(cause.__traceback__)
    inner = next((f"{Path(fs.filename).name}:{fs.lineno} {fs.name}" for fs in reversed(where)
                  if "graphwright" in fs.filename), "")
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
    return f"{type(cause).__name__}: {text} [{inner}]"


def run_config(source: str, eager: list[CallRecord], config: Config, planted: bool,
               path: Path | None = None) -> Outcome:
    """One compiled configuration against the eager records."""
    graphwright.reset()
    try:
        compiled, fallbacks = run_world(source, config, path)
    except WorldError as failure:
        error = failure.error
        if isinstance(error, graphwright.Unsupported) and error.gb_id == INTERNAL_ERROR.gb_id:
            return Outcome(config, INTERNAL, f"call {failure.call}: {error.title}: {error.explanation}")
        if config.fullgraph and isinstance(error, graphwright.GraphwrightError):
            status = EXPECTED_BREAK if planted else UNEXPECTED_BREAK
            detail = f"{getattr(error, 'gb_id', '')} {error.title}".strip()
            return Outcome(config, status, detail)
        return Outcome(config, INTERNAL, f"call {failure.call}: {_describe(failure)}")
    finally:
        breaks = collections.Counter(graphwright.counters["graph_break"])
        graphwright.reset()
    if fallbacks:
        return Outcome(config, INTERNAL, fallbacks[0].splitlines()[0] + " " + _fallback_reason(fallbacks[0]),
                       breaks)
    difference = compare(eager, compiled)
    if difference is not None:
        return Outcome(config, MISMATCH, difference, breaks)
    return Outcome(config, OK, "", breaks)


def _fallback_reason(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip().startswith("Explanation:")]
    return lines[0] if lines else ""


def check(source: str, configs: Sequence[Config] = QUICK_CONFIGS, path: Path | None = None) -> Report:
    """Run `source` eagerly and under every configuration."""
    graphwright.reset()
    try:
        eager, _ = run_world(source, None, path)
    except WorldError as failure:
        return Report(source, _describe(failure), [])
    module_breaks = _planted(source)
    outcomes = [run_config(source, eager, config, bool(module_breaks), path) for config in configs]
    return Report(source, None, outcomes)


def _planted(source: str) -> list[str]:
    match = re.search(r"^BREAKS = (\[.*\])$", source, re.MULTILINE)
    return ast.literal_eval(match.group(1)) if match else []
