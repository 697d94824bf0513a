"""The nonstrict_trace examples that `make demo` runs finish and print what the docs promise."""
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("script, expected", [
    ("nonstrict_trace_seed.py", ["Call to `graphwright.graph_break()`", "nonstrict_get_magic_num",
                                 "inner.weight.grad is set: True", "aten.addmm"]),
    ("nonstrict_trace_choosing.py", ["nonstrict_trace matches eager: True",
                                     "Invalid input type for allow_in_graph-ed function",
                                     "weight.grad: None", "gradients match eager: True"]),
])
def test_example_runs_and_prints_its_results(script, expected):
    result = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    for text in expected:
        assert text in result.stdout
