"""Warnings and logging records, replayed after the graph from the user's own lines.

`warnings.warn`, the `logging` module's functions and `Logger` methods produce
output on the side; the tracer records them and the residual code replays them
after the graph, in program order (`config.reorderable_logging`). A replayed
call runs in generated code, so it would report that code's location (or,
with `stacklevel`, one of graphwright's frames) where Python reports the user's
line: filters keyed on the location (the "default" action shows a warning once
per line) and formatters showing it would differ. The replay is therefore made
at the location the tracer saw, `stacklevel` frames up the traced stack
(`warn_at`, `log_at`), and goes through the real logger's level checks and
handlers at run time. `Logger.isEnabledFor` and `getEffectiveLevel` are
answered now and guarded (levels can change between calls).

Changes of the warning filters (`simplefilter`...) and `warnings.catch_warnings` blocks are
replayed in the same order, so that a warning issued inside such a block is caught by it.

A record that would carry the traced exception or the stack (`exc_info`,
`stack_info`, `Logger.exception`) cannot be rebuilt after the graph: a break.
"""
from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING, Any, Callable

from ..._core import config
from ..interpreter import graph_breaks as gb
from ..residual.resume import original_code
from . import operations
from .values import NONE, ConstantValue, ObjectValue, SequenceValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

LOGGER_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
LOGGER_QUERIES = frozenset({"isEnabledFor", "getEffectiveLevel"})
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
           "error": logging.ERROR, "critical": logging.CRITICAL, "exception": logging.ERROR}
_MODULE_FUNCTIONS = {logging.debug: "debug", logging.info: "info", logging.warning: "warning",
                     logging.error: "error", logging.critical: "critical", logging.exception: "exception",
                     logging.log: "log"}


def warn_at(message: Any, category: type | None, filename: str, lineno: int, module_globals: dict) -> None:
    """`warnings.warn` as called from `filename:lineno` (run by the residual code)."""
    if isinstance(message, Warning):
        category = type(message)
    registry = module_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, category or UserWarning, filename, lineno,
                           module_globals.get("__name__"), registry, module_globals)


def enter_catch_warnings(options: dict) -> None:
    """`with warnings.catch_warnings(**options):` entered by the residual code, in the order
    the region entered it among the replayed warnings and filter changes."""
    manager = warnings.catch_warnings(**options)
    manager.__enter__()
    _CATCHING.append(manager)


def exit_catch_warnings() -> None:
    _CATCHING.pop().__exit__(None, None, None)


_CATCHING: list[warnings.catch_warnings] = []  # entered by residual code, innermost last


def log_at(logger: logging.Logger, level: int, filename: str, lineno: int, function: str, msg: Any,
           args: tuple, extra: dict | None, configure_root: bool) -> None:
    """A logging call as made from `filename:lineno` in `function` (run by the residual code)."""
    if configure_root and not logging.root.handlers:
        logging.basicConfig()  # what the logging module's own functions do first
    if logger.isEnabledFor(level):
        logger.handle(logger.makeRecord(logger.name, level, filename, lineno, msg, args, None, function, extra))


def _bind(tracer: "Tracer", name: str, names: tuple[str, ...], args: list[Value],
          kwargs: dict[str, Value]) -> dict[str, Value]:
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in bound:
            raise tracer.user_error(TypeError(f"{name}() got an unexpected keyword argument '{key}'"))
        bound[key] = value
    return bound


def _location(tracer: "Tracer", stacklevel: Value | None) -> tuple | None:
    """(filename, line, function name, globals) of the frame `stacklevel` frames up the traced
    stack, or None when that frame is outside the compiled region."""
    level = 1 if stacklevel is None else operations.python_value(tracer, stacklevel, "stacklevel")
    if not 1 <= level <= len(tracer.frames):
        return None
    frame = tracer.frames[-level]
    code = original_code(frame.code)  # a resume function reports the function it continues
    return code.co_filename, frame.lineno, code.co_name, frame.globals


def _check_enabled(tracer: "Tracer", name: str) -> None:
    if not config.reorderable_logging:
        raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"call {name}", name=name)


def _warn(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    _check_enabled(tracer, "warnings.warn")
    bound = _bind(tracer, "warn", ("message", "category", "stacklevel", "source"), args, kwargs)
    location = _location(tracer, bound.get("stacklevel"))
    if location is None or "source" in bound:
        tracer.side_effects.replay_call(warnings.warn, args, kwargs)
        return NONE
    filename, lineno, _, module_globals = location
    tracer.side_effects.replay_call(warn_at, [bound["message"], bound.get("category", NONE), ConstantValue(filename),
                                              ConstantValue(lineno), ConstantValue(module_globals)], {})
    return NONE


def _filter_change(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value], function: Callable) -> Value:
    """`warnings.simplefilter(...)` and friends: replayed in order with the warnings."""
    _check_enabled(tracer, f"warnings.{function.__name__}")
    tracer.side_effects.replay_call(function, args, kwargs)
    return NONE


def _log(tracer: "Tracer", logger: Value, method: str, args: list[Value], kwargs: dict[str, Value],
         module_function: bool) -> Value:
    name = f"logging.{method}" if module_function else f"Logger.{method}"
    _check_enabled(tracer, name)
    if method == "log":
        if not args:
            raise tracer.user_error(TypeError("log() missing required argument 'level'"))
        level, args = args[0], args[1:]
    else:
        level = ConstantValue(_LEVELS[method])
    if not args:
        raise tracer.user_error(TypeError(f"{method}() missing required argument 'msg'"))
    msg, log_args = args[0], args[1:]
    options = {key: operations.python_value(tracer, value, name) for key, value in kwargs.items()
               if key in ("exc_info", "stack_info")}
    if method == "exception" or any(options.values()):
        raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"{name} with the exception or stack",
                                 name=f"{name} recording the traced exception or stack")
    unknown = set(kwargs) - {"exc_info", "stack_info", "stacklevel", "extra"}
    if unknown:
        raise tracer.user_error(TypeError(f"{method}() got an unexpected keyword argument '{unknown.pop()}'"))
    location = _location(tracer, kwargs.get("stacklevel"))
    if location is None:
        tracer.side_effects.replay_call(_replay_target(logger, method, module_function), args, kwargs)
        return NONE
    filename, lineno, function, _ = location
    tracer.side_effects.replay_call(log_at, [logger, level, ConstantValue(filename), ConstantValue(lineno),
                                             ConstantValue(function), msg, SequenceValue(log_args, tuple),
                                             kwargs.get("extra", NONE), ConstantValue(module_function)], {})
    return NONE


def _replay_target(logger: Value, method: str, module_function: bool) -> Callable:
    if module_function:
        return getattr(logging, method)
    return getattr(logger.obj, method)


def call_logger_method(tracer: "Tracer", logger: ObjectValue, name: str, args: list[Value],
                       kwargs: dict[str, Value]) -> Value:
    """A method of a real `logging.Logger`: a query answered now, or a record replayed."""
    if name in LOGGER_QUERIES:
        python_args = tuple(operations.python_value(tracer, arg) for arg in args)
        result = getattr(logger.obj, name)(*python_args)
        tracer.add_guard(logger.source, "call", (name, python_args, result))  # levels can change
        return ConstantValue(result)
    return _log(tracer, logger, name, args, kwargs, module_function=False)


def _module_function(method: str) -> Callable:
    def handler(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
        return _log(tracer, tracer.wrap(logging.root, None), method, args, kwargs, module_function=True)
    return handler


HANDLERS: dict[Any, Callable] = {warnings.warn: _warn,
                                 **{function: lambda tracer, args, kwargs, function=function: _filter_change(
                                     tracer, args, kwargs, function)
                                    for function in (warnings.simplefilter, warnings.filterwarnings,
                                                     warnings.resetwarnings)},
                                 **{function: _module_function(method) for function, method in _MODULE_FUNCTIONS.items()}}
