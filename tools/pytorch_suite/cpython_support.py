"""What PyTorch's CPython 3.13 test files need to run on Python 3.11, in either mode.

`plugin.py` calls `install()` for a CPython test file (`GW_SUITE_CPYTHON=1`):

- `CPythonTestCase.setUpClass` skips a class unless the running Python is the one its
  folder names (`cpython/v3_13`); the harness runs the 3.13 files on 3.11, so the
  check is lifted and the rest of the set-up kept (TorchDynamo's config for
  tracing into `unittest`, which graphwright does not read);
- 3.11's `test.support` lacks helpers that 3.13's files import: stand-ins with the
  same meaning are added (`get_c_recursion_limit`, `suppress_immortalization`,
  `force_not_colorized*`, `BrokenIter`, and `test.support.testcase`'s mixins);
- 3.11's `collections.abc` lacks 3.12's `Buffer` (the buffer protocol's ABC): a stand-in
  with its meaning (a class with `__buffer__`, and the builtin buffer types) is added.
"""
from __future__ import annotations

import abc
import contextlib
import math
import sys
import types
import unittest
from typing import Any


def install() -> None:
    _lift_version_gate()
    _complete_test_support()
    _complete_collections_abc()


def _lift_version_gate() -> None:
    import torch._dynamo.config
    from torch._dynamo import test_case

    def setUpClass(cls: type) -> None:
        test_case.TestCase.setUpClass.__func__(cls)
        cls._stack = contextlib.ExitStack()
        cls._stack.enter_context(torch._dynamo.config.patch(enable_trace_unittest=True,
                                                             enable_trace_load_build_class=True))

    test_case.CPythonTestCase.setUpClass = classmethod(setUpClass)


def _complete_test_support() -> None:
    from test import support

    stand_ins = {
        # 3.11 bounds C recursion by the Python limit; 3.13's tests nest this deep to
        # provoke RecursionError
        "get_c_recursion_limit": lambda: 10_000,
        "exceeds_recursion_limit": lambda: 100_000,
        "suppress_immortalization": _no_op_context,
        "force_not_colorized": lambda function: function,
        "force_not_colorized_test_class": lambda cls: cls,
        "skip_on_s390x": lambda function: function,
        "Py_TRACE_REFS": False,
        "BrokenIter": BrokenIter,
    }
    for name, value in stand_ins.items():
        if not hasattr(support, name):
            setattr(support, name, value)
    if "test.support.testcase" not in sys.modules:
        module = types.ModuleType("test.support.testcase")
        module.ExceptionIsLikeMixin = ExceptionIsLikeMixin
        module.FloatsAreIdenticalMixin = FloatsAreIdenticalMixin
        module.ComplexesAreIdenticalMixin = ComplexesAreIdenticalMixin
        sys.modules["test.support.testcase"] = support.testcase = module


def _complete_collections_abc() -> None:
    import collections.abc

    if hasattr(collections.abc, "Buffer"):
        return

    class Buffer(metaclass=abc.ABCMeta):
        __slots__ = ()

        @abc.abstractmethod
        def __buffer__(self, flags: int) -> memoryview:
            raise NotImplementedError

        @classmethod
        def __subclasshook__(cls, candidate: type) -> Any:
            if cls is Buffer:
                return any("__buffer__" in vars(base) for base in candidate.__mro__) or NotImplemented
            return NotImplemented

    Buffer.__module__ = "collections.abc"
    for builtin in (bytes, bytearray, memoryview):  # 3.12 gives them `__buffer__`
        Buffer.register(builtin)
    collections.abc.Buffer = Buffer


@contextlib.contextmanager
def _no_op_context(*_args: Any, **_kwargs: Any) -> Any:
    yield


class BrokenIter:
    """An iterable that raises ZeroDivisionError where asked: on creation, `iter` or `next`."""

    def __init__(self, init_raises: bool = False, next_raises: bool = False, iter_raises: bool = False):
        if init_raises:
            raise ZeroDivisionError
        self.next_raises = next_raises
        self.iter_raises = iter_raises

    def __next__(self) -> None:
        if self.next_raises:
            raise ZeroDivisionError

    def __iter__(self) -> "BrokenIter":
        if self.iter_raises:
            raise ZeroDivisionError
        return self


class ExceptionIsLikeMixin:
    def assertExceptionIsLike(self: unittest.TestCase, exc: BaseException | None,
                              template: BaseException | None) -> None:
        """Same type and args, and for exception groups the same tree of such exceptions."""
        if exc is None and template is None:
            return
        self.assertIsNotNone(exc)
        self.assertIsNotNone(template)
        self.assertEqual(type(exc), type(template))
        if isinstance(exc, BaseExceptionGroup):
            self.assertEqual(exc.message, template.message)
            self.assertEqual(len(exc.exceptions), len(template.exceptions))
            for inner, expected in zip(exc.exceptions, template.exceptions):
                self.assertExceptionIsLike(inner, expected)
        else:
            self.assertEqual(exc.args, template.args)


class FloatsAreIdenticalMixin:
    def assertFloatsAreIdentical(self: unittest.TestCase, x: float, y: float) -> None:
        """Equal and of the same sign, zeros included; NaN is identical to NaN."""
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                self.fail(f"{x!r} and {y!r} are not identical")
        elif x != y or math.copysign(1.0, x) != math.copysign(1.0, y):
            self.fail(f"{x!r} and {y!r} are not identical")


class ComplexesAreIdenticalMixin(FloatsAreIdenticalMixin):
    def assertComplexesAreIdentical(self: unittest.TestCase, x: complex, y: complex) -> None:
        self.assertFloatsAreIdentical(x.real, y.real)
        self.assertFloatsAreIdentical(x.imag, y.imag)
