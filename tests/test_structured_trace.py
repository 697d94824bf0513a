"""The compile trace for tlparse: `GRAPHWRIGHT_TRACE=DIR` (or `TORCH_TRACE=DIR`) writes structured
records of every compile, and `tlparse` renders them as it renders a torch.compile trace: each
frame (a compiled function, a resume function) with its stack, graphs, guards, breaks, recompile
reasons, AOT graphs, Inductor's code and metrics, under graphwright's compile ids."""
from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import graphwright
from graphwright._core import structured_trace
from torch._logging._internal import trace_log

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TLPARSE = shutil.which("tlparse") or os.path.join(os.path.dirname(sys.executable), "tlparse")
needs_tlparse = pytest.mark.skipif(not os.path.exists(TLPARSE), reason="tlparse (dev extras) is not installed")

TWO_BREAKS_AND_A_RECOMPILE = """
import torch, graphwright

def f(x):
    y = x.sin()
    print("break 1")
    y = y * 2
    print("break 2")
    return y.cos()

compiled = graphwright.compile(f, backend="aot_eager")
for x in (torch.randn(4), torch.randn(4, 3)):  # the second call recompiles each of the three frames
    torch.testing.assert_close(compiled(x), f(x))
"""

INDUCTOR_TRAINING_STEP = """
import torch, graphwright

model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
compiled = graphwright.compile(model, backend="inductor")
x = torch.randn(4, 8)
compiled(x).sum().backward()
grads = [p.grad.clone() for p in model.parameters()]
model.zero_grad()
model(x).sum().backward()
for grad, p in zip(grads, model.parameters()):
    torch.testing.assert_close(grad, p.grad)
"""


def _run(tmp_path, source: str, env: dict) -> None:
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    environment = {key: value for key, value in os.environ.items()
                   if key not in (structured_trace.ENV_VAR, structured_trace.TORCH_ENV_VAR)}
    environment.update(env, PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


def _trace_file(folder) -> str:
    files = [name for name in os.listdir(folder) if name.startswith(structured_trace.FILE_PREFIX)]
    assert len(files) == 1, files
    return os.path.join(folder, files[0])


def _records(path: str) -> list[tuple[dict, str | None]]:
    """(metadata, payload) of every record, checking each payload against its MD5."""
    records = []
    with open(path) as file:
        for line in file:
            if line.startswith("\t"):
                metadata, payload = records[-1]
                text = line[1:].rstrip("\n")
                records[-1] = (metadata, text if payload is None else f"{payload}\n{text}")
                continue
            assert re.match(r"V\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ \S+:\d+\] \{", line), line
            records.append((json.loads(line.split("] ", 1)[1]), None))
    for metadata, payload in records:
        if "has_payload" in metadata:
            assert hashlib.md5(payload.encode()).hexdigest() == metadata["has_payload"], metadata
    return records


def _tlparse(trace: str, out) -> str:
    done = subprocess.run([TLPARSE, trace, "-o", str(out), "--no-browser", "--strict", "--strict-compile-id"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return (out / "index.html").read_text()


def _products(index: str) -> dict[str, list[str]]:
    """The index's build products: compile id -> the names of the files listed under it."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", index))
    products, current = {}, None
    for token in text[text.index("Build products below"):].split():
        if re.fullmatch(r"\[[\d/_!-]+\]", token):
            current = products.setdefault(token, [])
        elif current is not None and "/" in token:
            current.append(re.sub(r"_\d+\.\w+$", "", token.split("/", 1)[1]))
    return products


@needs_tlparse
def test_tlparse_lists_every_frame_its_breaks_its_recompile_and_graphs(tmp_path):
    _run(tmp_path, TWO_BREAKS_AND_A_RECOMPILE, {structured_trace.ENV_VAR: str(tmp_path / "trace")})
    trace = _trace_file(tmp_path / "trace")
    index = _tlparse(trace, tmp_path / "out")
    products = _products(index)
    # f, then the resume functions after each break: three frames, each compiled twice
    assert set(products) == {"[0/0]", "[1/0]", "[2/0]", "[0/1]", "[1/1]", "[2/1]"}
    for frame in products.values():
        for product in ("dynamo_output_graph", "dynamo_cpp_guards_str", "compilation_metrics", "aot_inference_graph"):
            assert product in frame
    assert products["[0/0]"].count("dynamo_graph_break_reason") == 1
    assert products["[1/0]"].count("dynamo_graph_break_reason") == 1
    assert "dynamo_graph_break_reason" not in products["[2/0]"]
    assert all("recompile_reasons" in products[f"[{frame}/1]"] for frame in range(3))
    assert not any("recompile_reasons" in products[f"[{frame}/0]"] for frame in range(3))
    # the stack trie: where each frame compiled, coloured by status (a break is a "restart")
    assert "prog.py:13 in &lt;module&gt;" in index and "prog.py:4 in f" in index
    assert "graphwright_resume_in_f_at_6" in index and "graphwright_resume_in_f_at_8" in index
    assert re.search(r"href='#\[0/0\]' class='status-break'", index)
    assert re.search(r"href='#\[2/0\]' class='status-ok'", index)
    # what the files say
    out = tmp_path / "out"
    (reason,) = (out / "-_0_0_0").glob("dynamo_graph_break_reason_*.txt")
    assert "prog.py:6" in reason.read_text() and "print" in reason.read_text()
    (recompile,) = (out / "-_0_1_0").glob("recompile_reasons_*.json")
    assert json.loads(recompile.read_text()) == ["0/0: tensor 'x' dimensionality mismatch: expected 1, actual 2"]
    (graph,) = (out / "-_1_0_0").glob("dynamo_output_graph_*.txt")
    assert "mul" in graph.read_text() and "sin" not in graph.read_text()  # the graph between the breaks
    page = (out / "failures_and_restarts.html").read_text()
    restarts = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    for compile_id in ("[0/0]", "[1/0]", "[0/1]", "[1/1]"):
        assert f"{compile_id} RestartAnalysis Call to `print`" in restarts


@needs_tlparse
@pytest.mark.slow
def test_tlparse_shows_aot_graphs_and_inductors_code_under_graphwrights_compile_id(tmp_path):
    # without the AOT cache: a hit (of an earlier run) skips the AOT graphs and shows the hit
    _run(tmp_path, INDUCTOR_TRAINING_STEP, {structured_trace.ENV_VAR: str(tmp_path / "trace"),
                                            "GRAPHWRIGHT_AOT_CACHE": "0"})
    trace = _trace_file(tmp_path / "trace")
    products = _products(_tlparse(trace, tmp_path / "out"))
    assert list(products) == ["[0/0]"]
    frame = products["[0/0]"]
    for product in ("dynamo_output_graph", "compilation_metrics", "aot_forward_graph", "aot_backward_graph",
                    "inductor_post_grad_graph"):
        assert product in frame
    # Inductor's own records of the forward and the backward, written under our compile id
    assert sum(name.startswith("inductor_output_code") for name in frame) == 2
    events = json.loads((tmp_path / "out" / "chromium_events.json").read_text())
    names = {event["name"] for event in events}
    assert {"graphwright.trace", "graphwright.aot", "graphwright.backend"} <= names


def test_torch_trace_gets_graphwrights_records_in_pytorchs_own_file(tmp_path):
    _run(tmp_path, TWO_BREAKS_AND_A_RECOMPILE, {structured_trace.TORCH_ENV_VAR: str(tmp_path / "trace")})
    records = _records(_trace_file(tmp_path / "trace"))
    kinds = [next(iter(metadata)) for metadata, _ in records]
    names = [metadata["artifact"]["name"] for metadata, _ in records if "artifact" in metadata]
    assert "torch_version" in names  # PyTorch's handler wrote the file
    assert kinds.count("dynamo_start") == 6 and kinds.count("compilation_metrics") == 6
    if os.path.exists(TLPARSE):
        assert "[2/1]" in _products(_tlparse(_trace_file(tmp_path / "trace"), tmp_path / "out"))


def test_records_name_the_compile_and_the_failure_of_a_fullgraph_compile(tmp_path):
    def f(x):
        y = x * 2
        print("no")  # the line the metrics name
        return y

    line = f.__code__.co_firstlineno + 2
    compiled = graphwright.compile(f, fullgraph=True, backend="eager")
    structured_trace.start(tmp_path)
    try:
        with pytest.raises(graphwright.Unsupported):
            compiled(torch.randn(2))
        torch.testing.assert_close(graphwright.compile(lambda x: x + 1, backend="eager")(torch.ones(2)),
                                   torch.ones(2) + 1)
    finally:
        structured_trace.stop()
    assert torch._guards.CompileContext.try_get() is None
    records = _records(_trace_file(tmp_path))
    metrics = [metadata["compilation_metrics"] for metadata, _ in records if "compilation_metrics" in metadata]
    failed, passed = metrics
    assert failed["fail_type"] == "Unsupported" and failed["fail_user_frame_lineno"] == line
    assert failed["fail_user_frame_filename"] == __file__ and not failed["has_guarded_code"]
    assert passed["fail_type"] is None and passed["graph_op_count"] == 1 and passed["guard_count"] > 0
    starts = [metadata for metadata, _ in records if "dynamo_start" in metadata]
    assert [start["frame_compile_id"] for start in starts] == [0, 0]  # two functions, compiled once each
    assert starts[0]["frame_id"] != starts[1]["frame_id"]
    assert starts[0]["dynamo_start"]["stack"][-1]["name"] == "f"


def test_no_trace_without_the_variables(tmp_path):
    if os.environ.get(structured_trace.ENV_VAR) or os.environ.get(structured_trace.TORCH_ENV_VAR):
        pytest.skip("a trace is on for this test run")
    assert not structured_trace.on
    assert not any(isinstance(handler, structured_trace._TraceFile) for handler in trace_log.handlers)
    structured_trace.start(tmp_path)
    structured_trace.stop()
    assert not structured_trace.on and os.listdir(tmp_path) == []  # the file is made on the first record
