"""Clock helpers shared by the workloads."""
from __future__ import annotations

import time
from collections.abc import Callable


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of `fn` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def per_call(fn: Callable[[], object], calls: int) -> float:
    """Mean seconds per call over `calls` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls
