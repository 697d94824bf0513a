"""The non-strict tracing programming model, run with graphwright.make_fx.

Each section is an example from the seed document on non-strict tracing:
branch specialisation, constants, side effects at trace time only, and what
non-strict tracing cannot follow (raw data pointers).
"""
import ctypes

import torch

import graphwright
from graphwright import make_fx


def section(title: str) -> None:
    print(f"\n--- {title} ---")


section("Only the branch taken is captured")


def f(x):
    if x.shape[0] > 2:
        return x ** 2 / 6
    else:
        return x * 3


gm = make_fx(f, tracing_mode="fake")(torch.randn(3))
gm.print_readable()

section("Example 1: a global tensor is baked in as a constant")
var = torch.tensor(1)


def function_with_global_access(y):
    return y + var


x = torch.tensor([0, 1, 2])
gm = make_fx(function_with_global_access, tracing_mode="fake", _allow_non_fake_inputs=True)(x)
print("1. call function", function_with_global_access(x))
print("1. call graph", gm(x))
var = torch.tensor(2)
print("2. call function", function_with_global_access(x))
print("2. call graph", gm(x), "<- still uses the captured 1")


def function_fixed(y, var):
    return y + var


var = torch.tensor(3)
gm = make_fx(function_fixed, tracing_mode="fake")(x, var)
print("3. call function", function_fixed(x, var))
print("3. call graph", gm(x, var))
var = torch.tensor(4)
print("4. call function", function_fixed(x, var))
print("4. call graph", gm(x, var))

section("Example 2: print happens while tracing, not when the graph runs")


def function_with_side_effect(y):
    print(y)


gm = make_fx(function_with_side_effect, tracing_mode="fake")(x)
print("calling the graph prints nothing:")
gm(x)

section("Example 3: an input list shrinks during capture, not when the graph runs")


def function_with_input_list_mutation(lst):
    return lst.pop()


y = torch.tensor([0, 1, 2])
lst = [x, y]
gm = make_fx(function_with_input_list_mutation, tracing_mode="fake")(lst)
print("len(lst) after graph capture", len(lst))
# The graph takes the two tensors it was traced with; it pops nothing.
lst = [x, y]
gm(lst)
print("len(lst) after one call to graph", len(lst))
gm(lst)
print("len(lst) after two calls to graph", len(lst))

section("data_ptr() cannot be traced")


def function_with_data_ptr(tensor):
    ptr = tensor.data_ptr()
    ctypes.cast(ptr, ctypes.POINTER(ctypes.c_int32)).contents.value += 1
    return tensor


try:
    make_fx(function_with_data_ptr, tracing_mode="fake")(torch.tensor([42], dtype=torch.int32))
except graphwright.GraphwrightError as e:
    print(e)

section("Non-tensor inputs are constants: 3.14 is in the graph")


def add(x, y):
    return x + y


make_fx(add, tracing_mode="fake")(x, 3.14).print_readable()

section("Symbolic sizes: the graph computes sizes from its inputs")


def flatten_pairs(x):
    return x.reshape(x.shape[0] * 2, -1)


make_fx(flatten_pairs, tracing_mode="symbolic")(torch.randn(4, 6)).print_readable()

section("check_nonstrict: what the graph silently assumes")
weight = torch.ones(3, requires_grad=True)


def scaled(x, factor):
    if x.shape[0] > 2:
        return x * weight * factor
    return x


print(graphwright.check_nonstrict(scaled, torch.randn(3), 3.14))
