"""Corpus programs about Python's numbers and the builtins that make them, as CPython's own
tests check them: `bool()` and `len()` refuse extra arguments and check what `__len__` returns
(a negative length is a ValueError, a string a TypeError), a class that sets `__bool__` to None
blocks truth; `int()`, `float()` and `complex()` of instances of Python classes call the class's
own conversion methods in CPython's order (an int subclass's `__int__` included) and check what
they return; the class methods of the builtin numbers (`int.from_bytes`, `float.fromhex`,
`bool.__new__`) compute from constants; `eval` of a literal's text is its value, and `eval` of
other text after a graph break reads the calling function's names; Python's limit on the digits
of int-string conversions, set in the region, holds for the region's conversions and after it;
`struct` packs and unpacks constant numbers.
Each error is the program's own, caught by its handler, as in eager Python."""
from __future__ import annotations

import copy
import math
import struct
import sys

import torch

from .harness import program_decorator, rand

PROGRAMS = []
program = program_decorator(PROGRAMS)


def _outcome(fn, *args, **kwargs):
    try:
        result = fn(*args, **kwargs)
    except (TypeError, ValueError, OverflowError, SyntaxError, struct.error) as error:
        return type(error).__name__, str(error)
    return "ok", result, type(result).__name__


class _Blocked:
    __bool__ = None


class _Negative:
    def __len__(self):
        return -1


class _TextLength:
    def __len__(self):
        return "three"


class _HugeLength:
    def __len__(self):
        return 1 << 70


class _LengthSubclass(int):
    pass


class _SubclassLength:
    def __len__(self):
        return _LengthSubclass(3)


class _IndexLength:
    def __len__(self):
        return _Index(4)


@program("bool_and_len_check_their_arguments_and_what_len_returns", lambda: rand(3),
         reference={"xfail": "`bool(1, 2)` is an IndexError inside TorchDynamo", "why": "PyTorch 2.13 bug"})
def _(x):
    kinds = [_outcome(bool, 1, 2), _outcome(bool, x=1), _outcome(len), _outcome(bool, _Blocked()),
             _outcome(bool, _Negative()), _outcome(len, _Negative()), _outcome(len, _TextLength()),
             _outcome(bool, _TextLength()), _outcome(len, _HugeLength()), _outcome(len, _SubclassLength()),
             _outcome(len, _IndexLength()), _outcome(bool, _IndexLength())]
    return x + 1, kinds


class _OwnInt(int):
    def __int__(self):
        return 42


class _BadInt(int):
    def __int__(self):
        return 4.5


class _Index:
    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


class _Float:
    def __float__(self):
        return 4


class _ParsedText(str):
    def __float__(self):
        return float(str(self)) + 1


class _TextWithFloat(str):
    def __float__(self):
        return 1.5


class _Complex:
    def __complex__(self):
        return 1 + 2j


class _Nothing:
    pass


@program("int_float_complex_of_objects_call_their_conversion_methods", lambda: rand(3),
         reference={"xfail": "a bad `__int__` result is an InternalTorchDynamoError, not the program's TypeError",
                    "why": "PyTorch 2.13 bug"})
def _(x):
    kinds = [_outcome(int, _OwnInt(7)), _outcome(int, _BadInt(7)), _outcome(int, _Index(5)),
             _outcome(float, _Index(5)), _outcome(float, _Index(2 ** 2000)), _outcome(int, _Index(2.5)),
             _outcome(float, _Float()), _outcome(float, _ParsedText("8")), _outcome(complex, _Complex()),
             _outcome(complex, _Index(3)), _outcome(int, _Nothing()), _outcome(float, _Nothing()),
             _outcome(complex, _Nothing()), _outcome(int, _TextWithFloat("12")),
             _outcome(float, _TextWithFloat("8")), _outcome(complex, _TextWithFloat("1+2j"))]
    return x * int(_OwnInt(2)), kinds


@program("class_methods_of_builtin_numbers_compute_from_constants", lambda: rand(3))
def _(x):
    made = [bool.from_bytes(b"\x00" * 8, "big"), int.from_bytes(b"\x01\x02", "little"), float.fromhex("0x1.8p1"),
            bool.__new__(bool), bool.__new__(bool, 5), _outcome(bool.__new__, int, 1)[0],
            _outcome(float.fromhex, "nope")[0]]
    return x + made[1], made


@program("eval_of_a_literal_is_its_value", lambda: rand(3),
         reference={"xfail": "`eval('{[]: 1}')` is an InternalTorchDynamoError, not the program's TypeError",
                    "why": "PyTorch 2.13 bug"})
def _(x):
    values = [eval(repr(False)) is False, eval("0x_f"), eval(" 1_000"), eval("(1_2.5+3_3j)"), eval("[1, (2, -3)]"),
              _outcome(eval, "1__0")[0], _outcome(eval, "0_7")[0], _outcome(eval, "{[]: 1}")[0]]
    return x * values[1], values


@program("eval_of_a_name_after_a_graph_break_reads_the_calling_frame", lambda: rand(3),
         fullgraph=False, frames=0,
         reference={"xfail": "`eval` after the break runs outside the function's frame: NameError",
                    "why": "PyTorch 2.13 bug"})
def _(x):
    scale = 3
    shown = eval("scale + 1")
    return x * shown, sorted(locals()), "scale" in dir(), sorted(vars())


def _restore_digit_limit():
    sys.set_int_max_str_digits(sys.int_info.default_max_str_digits)


@program("int_digit_limit_set_in_the_region_holds_inside_and_after_it", lambda: rand(3),
         observe=lambda world: sys.get_int_max_str_digits(), reset=_restore_digit_limit,
         reference={"xfail": "a ValueError of `sys.set_int_max_str_digits` is an InternalTorchDynamoError",
                    "why": "PyTorch 2.13 bug"})
def _(x):
    sys.set_int_max_str_digits(1000)
    too_long = _outcome(int, "1" * 1200)[0]
    fits = int("7" * 900) % 10
    return x + fits, too_long, sys.get_int_max_str_digits(), _outcome(sys.set_int_max_str_digits, 5)[0]


@program("struct_packs_and_unpacks_constant_numbers", lambda: rand(3),
         reference={"xfail": "the OverflowError of `struct.pack` is an InternalTorchDynamoError", "why": "PyTorch 2.13 bug"})
def _(x):
    packed = struct.pack("<d", 1.5)
    (back,) = struct.unpack("<d", packed)
    return x * back, packed, struct.unpack(">f", struct.pack(">f", 3.40282356e38)), \
        _outcome(struct.pack, "<f", 1e300)[0], _outcome(struct.unpack, "<d", b"\x00")[0]


class _OwnRounding(float):
    def __floor__(self):
        return 42

    def __ceil__(self):
        return 43

    def __round__(self, digits=None):
        return 45


class _OwnFloat(int):
    def __float__(self):
        return 2.5


@program("rounding_and_math_of_number_subclasses_call_their_own_methods", lambda: rand(3), fullgraph=False)
def _(x):
    rounding, own_float = _OwnRounding(2.0), _OwnFloat(3)
    values = [math.floor(rounding), math.ceil(rounding), round(rounding), round(rounding, 1),
              math.trunc(rounding), math.floor(own_float), round(own_float), math.sqrt(own_float)]
    return x + values[0], values


class _RaisingEquality(Exception):
    pass


class _NoEquality:
    def __eq__(self, other):
        raise _RaisingEquality


class _Sliced:
    def __getitem__(self, key):
        return key


@program("slices_of_objects_keep_their_members_and_compare_as_tuples", lambda: rand(3))
def _(x):
    member = _Nothing()
    whole, own = slice(member), slice(_NoEquality())
    other = slice(_NoEquality())
    taken = _Sliced()[member:2]
    checks = [whole.stop is member, whole.start, whole.step, whole == whole, own == own, whole != whole,
              whole == 3, _outcome(lambda: whole < 3)[0], isinstance(whole, slice), taken.start is member,
              taken.stop, copy.copy(whole) is whole, _outcome(hash, whole)[0],
              _outcome(slice)[0]]
    try:
        checks.append(own == other)
    except _RaisingEquality:
        checks.append("raised")
    return x + taken.stop, checks
