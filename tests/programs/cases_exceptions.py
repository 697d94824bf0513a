"""Corpus programs for exceptions and context managers: raising and catching in the same
region, in callees and callers, chaining (`raise ... from`, implicit context), exception
objects and their attributes, `with` blocks whose `__exit__` sees or suppresses an
exception, `contextlib` and `unittest` helpers, and exceptions that escape the compiled
function only because code asks whether it is being compiled (the function then runs as
eager Python, which takes the other path)."""
from __future__ import annotations

import contextlib
import sys
import unittest
import warnings

import torch

from . import library_compiling_query
from .harness import CorpusWarning, module_program, program_decorator, rand
from .markers import graph_break

PROGRAMS = []


program = program_decorator(PROGRAMS)


class ShapeError(ValueError):
    def __init__(self, code, detail="none"):
        super().__init__(f"code {code}")
        self.code = code
        self.detail = detail


class Plain(Exception):
    pass


# -- raising and catching ----------------------------------------------------------------------


@program("raise_from_sets_cause_context_and_suppression", lambda: rand(3))
def _(x):
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise ValueError("outer") from inner
    except ValueError as error:
        return (x + 1, type(error.__cause__).__name__, type(error.__context__).__name__,
                error.__suppress_context__, error.__cause__ is error.__context__)


@program("raise_from_none_keeps_context_but_suppresses_it", lambda: rand(3))
def _(x):
    try:
        try:
            {}["k"]
        except KeyError:
            raise AttributeError("a") from None
    except AttributeError as error:
        return x * 2, error.__cause__, type(error.__context__).__name__, error.__suppress_context__


@program("error_raised_in_an_except_block_takes_the_handled_one_as_context", lambda: rand(3))
def _(x):
    try:
        try:
            1 / 0
        except ZeroDivisionError:
            [][1]
    except IndexError as error:
        return x - 1, type(error.__context__).__name__, error.__cause__, str(error)


@program("raising_the_handled_exception_again_does_not_make_a_context_cycle", lambda: rand(3))
def _(x):
    try:
        try:
            raise KeyError("a")
        except KeyError as first:
            try:
                raise ValueError("b")
            except ValueError:
                raise first
    except KeyError as error:
        return x + 2, type(error.__context__).__name__, error.__context__.__context__


@program("user_exception_class_with_its_own_init_and_attributes", lambda: rand(3),
         reference={"why": "TorchDynamo cannot call BaseException.__init__ through super()",
                    "xfail": "super().__init__ of an exception"})
def _(x):
    try:
        raise ShapeError(7, detail="bad")
    except ValueError as error:
        return x * error.code, error.detail, str(error), repr(error), error.args, isinstance(error, ShapeError)


@program("exception_carrying_a_tensor_attribute", lambda: rand(3))
def _(x):
    try:
        error = Plain("with payload")
        error.payload = x * 3
        raise error
    except Plain as caught:
        return caught.payload + 1, caught.args


@program("raising_a_class_instantiates_it", lambda: rand(3))
def _(x):
    try:
        raise Plain
    except Plain as error:
        return x + 3, error.args, str(error), repr(error)


@program("try_except_else_finally_in_a_loop", lambda: rand(3))
def _(x):
    log = []
    for i in range(3):
        try:
            if i == 1:
                raise RuntimeError(i)
            log.append("body")
        except RuntimeError as error:
            log.append(f"except {error}")
        else:
            log.append("else")
        finally:
            log.append("finally")
    return x + len(log), log


@program("bare_raise_in_a_callee_reraises_its_exception", lambda: rand(3))
def _(x):
    def inner():
        try:
            raise TypeError("t")
        except TypeError:
            raise

    try:
        inner()
    except TypeError as error:
        return x - 1, str(error), error.__context__


@program("exception_raised_in_a_callee_caught_by_the_caller", lambda: rand(3))
def _(x):
    def check(t):
        if t.shape[0] == 3:
            raise Plain("three")
        return t

    try:
        return check(x)
    except Plain as error:
        return x * 10, error.args


@program("exception_raised_in_a_generator_caught_by_its_consumer", lambda: rand(3))
def _(x):
    def numbers():
        yield 1
        raise Plain("from the generator")

    seen = []
    try:
        for number in numbers():
            seen.append(number)
    except Plain as error:
        seen.append(str(error))
    return x + len(seen), seen


@program("finally_return_replaces_the_exception", lambda: rand(3))
def _(x):
    def swallow():
        try:
            raise ValueError("lost")
        finally:
            return 5

    return x + swallow()


@program("generator_exit_is_not_an_exception", lambda: rand(3))
def _(x):
    try:
        raise GeneratorExit
    except Exception:
        return x.sin()
    except BaseException:
        return x.cos()


@program("exception_attributes_traceback_and_notes", lambda: rand(3),
         reference={"why": "TorchDynamo does not model BaseException.add_note",
                    "xfail": "add_note unsupported"})
def _(x):
    try:
        error = ValueError("v")
        error.add_note("a note")
        raise error
    except ValueError as caught:
        same = caught.with_traceback(caught.__traceback__) is caught
        return (x * 2, caught.__notes__, same, caught.__traceback__ is not None,
                caught.__traceback__.tb_next is None)


@program("sys_exc_info_inside_a_handler", lambda: rand(3))
def _(x):
    try:
        raise ValueError("v")
    except ValueError:
        kind, value, tb = sys.exc_info()
        inside = kind.__name__, str(value), tb is not None
    return x + 1, inside, sys.exc_info()


@program("key_error_text_and_arguments", lambda: rand(3))
def _(x):
    try:
        {}[(1, 2)]
    except KeyError as error:
        return x + 1, str(error), repr(error), error.args


@program("exception_made_in_the_region_is_returned", lambda: rand(3),
         reference={"why": "TorchDynamo cannot call BaseException.__init__ through super()",
                    "xfail": "super().__init__ of an exception"})
def _(x):
    error = ShapeError(3, detail="returned")
    try:
        raise KeyError("context")
    except KeyError as context:
        error.__context__ = context
    return x + 1, type(error).__name__, error.args, error.detail, type(error.__context__).__name__


@program("stop_iteration_leaving_a_generator_becomes_a_runtime_error", lambda: rand(3),
         reference={"why": "TorchDynamo's RuntimeError has no message and no cause",
                    "xfail": "wrong message"})
def _(x):
    def numbers():
        yield 1
        raise StopIteration("stop")

    generator = numbers()
    next(generator)
    try:
        next(generator)
    except RuntimeError as error:
        return x * 3, str(error), type(error.__cause__).__name__


# -- what operations raise, caught by the program ------------------------------------------------


class Broken:
    def __init__(self):
        self.a = 1

    @property
    def broken(self):
        raise AttributeError("nope")


@program("hasattr_and_getattr_default_catch_attribute_errors", lambda: rand(3))
def _(x):
    obj = Broken()
    return x + getattr(obj, "b", 5) + hasattr(obj, "broken") + getattr(obj, "broken", 2) + hasattr(obj, "a")


@program("missing_key_caught_as_key_error", lambda: (rand(3), {"a": 1}),
         changed=lambda: (rand(3), {"a": 1, "b": 4}), frames_changed=2,
         reference={"why": "TorchDynamo does not guard on the absence of the key it failed to find",
                    "xfail": "stale result after the key is added"})
def _(x, table):
    try:
        value = table["b"]
    except KeyError as error:
        value = len(error.args)
    return x * value


class Countdown:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


@program("user_iterator_ends_a_loop_by_raising_stop_iteration", lambda: rand(3))
def _(x):
    total = sum(v for v in Countdown(4))
    it = Countdown(1)
    return x + total, next(it), next(it, "done")


@program("failed_torch_check_message_function_is_traced", lambda: rand(3),
         reference={"why": "TorchDynamo requires the message function's closure to be constants",
                    "xfail": "message closure over a tensor"})
def _(x):
    try:
        torch._check(x.shape[0] == 4, lambda: f"need four, got {x.shape[0]}")
    except RuntimeError as error:
        return x * 2, str(error)
    return x


class _Probing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        try:
            self.not_there
        except AttributeError as error:
            return self.linear(x), str(error)


PROGRAMS.append(module_program("missing_module_attribute_caught", _Probing, lambda: rand(2, 3)))


# -- with blocks -------------------------------------------------------------------------------


class Suppress:
    def __init__(self):
        self.seen = None

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        self.seen = (kind.__name__, str(value), traceback is not None)
        return kind is KeyError


@program("exit_sees_the_exception_and_suppresses_it", lambda: rand(3),
         reference={"why": "TorchDynamo's str() of a KeyError omits the quotes of its key",
                    "xfail": "str(KeyError) differs"})
def _(x):
    manager = Suppress()
    with manager:
        raise KeyError("quiet")
    return x + 1, manager.seen


@program("exit_lets_an_exception_it_does_not_suppress_pass", lambda: rand(3))
def _(x):
    manager = Suppress()
    try:
        with manager:
            raise ValueError("loud")
    except ValueError as error:
        return x + 2, manager.seen, str(error)


@program("contextlib_suppress", lambda: rand(3))
def _(x):
    with contextlib.suppress(IndexError, KeyError):
        [][0]
    return x * 3


@program("contextmanager_catches_the_exception_of_its_block", lambda: rand(3))
def _(x):
    log = []

    @contextlib.contextmanager
    def guard():
        try:
            yield "value"
        except ValueError as error:
            log.append(str(error))
        finally:
            log.append("done")

    with guard() as value:
        raise ValueError("in body")
    return x + 1, log, value


@program("contextmanager_turns_an_error_into_another", lambda: rand(3))
def _(x):
    @contextlib.contextmanager
    def translate():
        try:
            yield
        except KeyError as error:
            raise ValueError("translated") from error

    try:
        with translate():
            {}["k"]
    except ValueError as error:
        return x * 2, str(error), type(error.__cause__).__name__


@program("exit_stack_enters_grad_mode_and_autocast_through_their_classes", lambda: rand(3, 3, requires_grad=True),
         reference={"why": "TorchDynamo skips set_grad_enabled.__enter__ called through the class",
                    "xfail": "Attempted to call function marked as skipped"})
def _(x):
    # ExitStack.enter_context calls type(cm).__enter__(cm) and binds type(cm).__exit__ to cm
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        stack.enter_context(torch.autocast("cpu", dtype=torch.bfloat16))
        inside = x @ x.T
    return inside, x * 2, type(torch.enable_grad()).__name__


class Counting:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("in")
        return self

    def __exit__(self, *exc):
        self.log.append(("out", exc[0] is None))
        return False


@program("manager_entered_twice_nested", lambda: rand(3))
def _(x):
    log = []
    manager = Counting(log)
    with manager:
        with manager:
            y = x + 1
    return y, log


@program("unittest_assert_raises_as_context_manager_and_with_a_callable", lambda: rand(3),
         reference={"why": "TorchDynamo does not trace TestCase.__init__",
                    "xfail": "TestCase.__init__ skipped"})
def _(x):
    case = unittest.TestCase()
    with case.assertRaises(KeyError):
        {}["x"]
    with case.assertRaisesRegex(ValueError, "bad.*thing") as caught:
        raise ValueError("a bad thing")
    case.assertRaises(TypeError, len, 5)
    return x + 1, str(caught.exception)


@program("warning_inside_catch_warnings_is_caught", lambda: rand(3),
         reference={"why": "TorchDynamo issues the warning while tracing, outside the block it "
                           "entered then", "xfail": "warning lost"})
def _(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.warn("hidden", CorpusWarning)
    warnings.warn("shown", CorpusWarning)
    return x.sin()


def _enters_the_returned_manager(world, compiled, args):
    y, manager = compiled(*args.args)
    with manager as caught:
        warnings.simplefilter("always")
        warnings.warn("recorded", CorpusWarning)
    return y, type(manager).__name__, [str(warning.message) for warning in caught]


@program("catch_warnings_made_in_the_region_is_returned_unentered", lambda: rand(3),
         call=_enters_the_returned_manager)
def _(x):
    return x.sin(), warnings.catch_warnings(record=True)


# -- exceptions that escape the compiled function --------------------------------------------------


def _mask_unless_compiling(x, mask=None):
    """A library that skips building its mask when it is compiled, then indexes it."""
    if not torch.compiler.is_compiling():
        mask = torch.ones(3)
    return x * mask[0]


@program("exception_only_under_compilation_runs_the_function_eagerly", lambda: rand(3),
         fullgraph=False, frames=0)
def _(x):
    return _mask_unless_compiling(x) + 1


def _mask_unless_a_helper_says_compiling(x, mask=None):
    if mask is None and not library_compiling_query.is_compiling():
        mask = torch.ones(3)
    return x * mask[0]


@program("exception_only_under_compilation_asked_through_a_helper", lambda: rand(3),
         fullgraph=False, frames=0)
def _(x):
    return _mask_unless_a_helper_says_compiling(x) + 1


@program("exception_only_under_compilation_in_a_resume_function", lambda: rand(3),
         fullgraph=False, frames=1)
def _(x):
    y = x.sin()
    graph_break()
    return _mask_unless_compiling(y * 2)


@program("exception_only_under_compilation_after_a_data_dependent_break", lambda: rand(3),
         fullgraph=False, frames=1)
def _(x):
    if x.sum() > 100:
        return x
    return _mask_unless_compiling(x)


@program("exception_only_under_compilation_in_a_loop", lambda: rand(3), fullgraph=False, frames=0)
def _(x):
    for i in range(3):
        x = x + 1
        if i == 2:
            x = _mask_unless_compiling(x)
    return x


@program("exception_only_under_compilation_in_a_with_block", lambda: rand(3), fullgraph=False, frames=0)
def _(x):
    with torch.no_grad():
        return _mask_unless_compiling(x)


@program("exception_only_under_compilation_inside_a_generator", lambda: rand(3), fullgraph=False, frames=0)
def _(x):
    def values():
        yield x
        yield _mask_unless_compiling(x)

    return sum(values())


@program("exception_only_under_compilation_in_try_finally", lambda: rand(3), fullgraph=False, frames=0)
def _(x):
    log = []
    try:
        return _mask_unless_compiling(x), log
    finally:
        log.append("finally")


class _RaisesInExitWhenCompiled:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if torch.compiler.is_compiling():
            raise RuntimeError("exit")
        return False


@program("exception_only_under_compilation_from_exit", lambda: rand(3), fullgraph=False, frames=0)
def _(x):
    with _RaisesInExitWhenCompiled():
        y = x + 1
    return y


@program("exception_only_under_compilation_caught_by_the_wrong_handler", lambda: rand(3),
         fullgraph=False, frames=0)
def _(x):
    try:
        return _mask_unless_compiling(x)
    except KeyError:
        return x


class _MaskedModule(torch.nn.Module):
    def forward(self, x):
        return _mask_unless_compiling(x) * 2


PROGRAMS.append(module_program("exception_only_under_compilation_in_a_module_forward", _MaskedModule,
                               lambda: rand(3), fullgraph=False, frames=0))


@program("suppress_context_written_then_reraised", lambda: rand(3))
def _(x):
    try:
        try:
            try:
                raise TypeError("first")
            except TypeError:
                raise ValueError("second") from None
        except ValueError as error:
            before = error.__suppress_context__
            error.__suppress_context__ = False
            raise error
    except ValueError as error:
        caught = error
    return x + 1, before, caught.__suppress_context__, type(caught.__context__).__name__, caught.__cause__
