"""The pytest plugin the harness loads into each run (`-p tools.pytorch_suite.plugin`).

It records every test's outcome into the JSON file named by `GW_SUITE_RESULTS`.
With `GW_SUITE_MODE=graphwright` it first rebinds PyTorch's compile entry points
to graphwright, before any test file imports (files bind some of them by name):

- `torch.compile` is `graphwright.compile` (the same signature);
- `torch._dynamo.optimize(backend, nopython=..., error_on_graph_break=..., dynamic=...,
  disable=...)` and `torch._dynamo.optimize_assert(backend, dynamic=...)` return a
  decorator that compiles with graphwright, `nopython`, `error_on_graph_break` and
  `optimize_assert` meaning `fullgraph=True`;
- `torch._dynamo.reset` and `torch.compiler.reset` reset graphwright, then TorchDynamo
  (eager code in PyTorch may still compile with it);
- `torch._dynamo.exc.Unsupported` names both exception types, so that a test
  expecting a graph break under fullgraph sees graphwright's;
- the TorchDynamo config keys that graphwright has under the same meaning
  (`MIRRORED_CONFIG`) are mirrored into `graphwright.config`, whether a test
  patches them or assigns them.

Functions marked with `torch._dynamo` markers (`graph_break`, `disable`,
`allow_in_graph`, `nonstrict_trace`, `mark_dynamic`) need no rebinding:
graphwright honours them.

CPython's test files (PyTorch's `test/dynamo/cpython/3_13`) also get what Python 3.11
lacks (`cpython_support.py`).

The stored test files may be newer than the pinned PyTorch: a name they import at
module level that 2.13 lacks gets a neutral stand-in in both modes
(`_stand_in_newer_names`), so that the file's other tests still run.
"""
from __future__ import annotations

import json
import os
from typing import Any

import pytest

MIRRORED_CONFIG = {
    "cache_size_limit": "cache_size_limit",
    "recompile_limit": "cache_size_limit",
    "capture_scalar_outputs": "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops": "capture_dynamic_output_shape_ops",
    "allow_rnn": "allow_rnn",
    "verbose": "verbose",
}
"""TorchDynamo config key -> the graphwright config key with the same meaning."""

EQUIVALENT_BACKENDS = {"eager_noexcept": "eager"}
"""TorchDynamo's test backends -> graphwright's backend with the same meaning (`eager_noexcept`
runs the graph as `eager` does, reporting its exceptions as its own)."""


def _rebind_to_graphwright() -> None:
    import torch
    import torch._dynamo
    import torch._dynamo.exc
    import torch._dynamo.test_case
    import torch._dynamo.testing

    import graphwright

    def optimize(backend: Any = "inductor", *, nopython: bool = False, error_on_graph_break: bool | None = None,
                 dynamic: bool | None = None, disable: bool = False, **_ignored: Any) -> Any:
        backend = EQUIVALENT_BACKENDS.get(backend, backend) if isinstance(backend, str) else backend
        fullgraph = nopython or bool(error_on_graph_break)
        return graphwright.compile(backend=backend, fullgraph=fullgraph, dynamic=dynamic, disable=disable)

    def optimize_assert(backend: Any = "inductor", *, dynamic: bool | None = None, **_ignored: Any) -> Any:
        return graphwright.compile(backend=backend, fullgraph=True, dynamic=dynamic)

    dynamo_reset = torch._dynamo.reset

    def reset() -> None:
        graphwright.reset()
        dynamo_reset()

    torch.compile = graphwright.compile
    torch._dynamo.optimize = optimize
    torch._dynamo.optimize_assert = torch._dynamo.testing.optimize_assert = optimize_assert
    torch._dynamo.reset = torch._dynamo.testing.reset = torch._dynamo.test_case.reset = reset
    torch.compiler.reset = reset
    torch._dynamo.exc.Unsupported = (graphwright.Unsupported, torch._dynamo.exc.Unsupported)
    _mirror_config(torch._dynamo.config, graphwright.config)


def _mirror_config(dynamo_config: Any, graphwright_config: Any) -> None:
    """Writes of a mirrored key to TorchDynamo's config also set graphwright's (a class of
    its own per config module, so only TorchDynamo's config changes behaviour)."""
    config_class = type(dynamo_config)
    set_dynamo = config_class.__setattr__

    def __setattr__(self: Any, name: str, value: Any) -> None:
        set_dynamo(self, name, value)
        if name in MIRRORED_CONFIG:
            setattr(graphwright_config, MIRRORED_CONFIG[name], getattr(self, name))

    config_class.__setattr__ = __setattr__
    for name, target in MIRRORED_CONFIG.items():
        setattr(graphwright_config, target, getattr(dynamo_config, name))


def _stand_in_newer_names() -> None:
    from torch.testing._internal import common_utils

    if not hasattr(common_utils, "disable_translation_validation_if_dynamic_shapes"):
        # newer PyTorch turns translation validation off for a test; it is off by default
        common_utils.disable_translation_validation_if_dynamic_shapes = lambda test: test


_stand_in_newer_names()
if os.environ.get("GW_SUITE_CPYTHON") == "1":
    from .cpython_support import install

    install()
if os.environ.get("GW_SUITE_MODE") == "graphwright":
    _rebind_to_graphwright()


class _Recorder:
    def __init__(self, path: str) -> None:
        self.path = path
        self.outcomes: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.outcomes.setdefault(report.nodeid, {"outcome": "passed", "message": "", "seconds": 0.0})
        entry["seconds"] += report.duration
        if hasattr(report, "wasxfail"):
            entry["outcome"] = "xfailed" if report.skipped else "xpassed"
        elif report.failed and entry["outcome"] != "failed":
            entry["outcome"] = "failed"
            entry["message"] = _first_line(report)
        elif report.skipped and entry["outcome"] == "passed":
            entry["outcome"] = "skipped"

    def pytest_sessionfinish(self) -> None:
        with open(self.path, "w") as out:
            json.dump(self.outcomes, out, indent=0, sort_keys=True)


def _first_line(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[:2])[:400]  # graphwright's errors: the title, then what broke


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("GW_SUITE_RESULTS")
    if path and not hasattr(config, "workerinput"):  # under xdist, the controller records
        config.pluginmanager.register(_Recorder(path), "gw_suite_recorder")
