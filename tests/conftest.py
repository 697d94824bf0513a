"""Checks every test gets for free: it leaves no torch dispatch or torch function mode on the
stack (a mode left behind by a failed compile changes what every later PyTorch call does)."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _no_mode_left_on_the_stack():
    yield
    dispatch, function = torch._C._len_torch_dispatch_stack(), torch._C._len_torch_function_stack()
    assert (dispatch, function) == (0, 0), (
        f"the test left {dispatch} dispatch mode(s) and {function} torch function mode(s) on the stack")
