"""Checks every test gets for free: it leaves no torch dispatch or torch function mode on the
stack (a mode left behind by a failed compile changes what every later PyTorch call does).

Also how `pytest -n N --dist loadfile` (the Makefile's) shares the tests among its workers: a
worker takes a whole file, so a file's module-scoped fixtures (the DDP runs) are made once,
except a file of `SPLIT_BY_FIRST_ID_PART`, where the tests whose parametrized id starts with the
same word (before its first '-') are a unit of their own: the real-model suite's 53 models, whose
cases share their built model and eager runs, spread over the workers instead of one of them
running that file while the other has finished. Units are taken most tests first (pytest-xdist's
order), except `LONG_UNITS`, long for their number of tests, taken before any other: a unit taken
last ends the run alone while the other worker waits."""
from __future__ import annotations

import pytest
import torch

SPLIT_BY_FIRST_ID_PART = frozenset({"tests/real_models/test_real_models.py"})
# Longest first; CPU seconds measured with cold Inductor caches (bench/RESULTS.md, "Test suite time").
LONG_UNITS = (
    "tests/test_dynamic_shapes.py",  # 206 s, 47 tests: Inductor over ten sizes of a transformer
    "tests/test_inductor_cache.py",  # 188 s, 11 tests: each a new process compiling with Inductor
    "tests/test_distributed_dtensor.py",  # 157 s, 25 tests: 2 and 4 gloo processes
    "tests/fuzz/test_fuzz.py",  # 61 s, 1 test: 200 generated programs
    "tests/test_memory.py",  # 61 s, 15 tests: 1,000 compile cycles
)


@pytest.fixture(autouse=True)
def _no_mode_left_on_the_stack():
    yield
    dispatch, function = torch._C._len_torch_dispatch_stack(), torch._C._len_torch_function_stack()
    assert (dispatch, function) == (0, 0), (
        f"the test left {dispatch} dispatch mode(s) and {function} torch function mode(s) on the stack")


def work_unit(nodeid: str) -> str:
    """The tests a worker takes together with the test `nodeid`: its file's, or in a file split
    by id, the file's tests whose id starts with the same word."""
    path, _, rest = nodeid.partition("::")
    if path in SPLIT_BY_FIRST_ID_PART and "[" in rest:
        return f"{path}:{rest.partition('[')[2].partition('-')[0]}"
    return path


def pytest_xdist_make_scheduler(config, log):
    # pytest-xdist's own loadgroup cannot be used: it renames items through `Item._nodeid`,
    # which pytest 9 no longer reads, so its groups are silently ignored.
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            for unit in reversed(LONG_UNITS):
                if unit in self.workqueue:
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return WorkUnitScheduling(config, log)
