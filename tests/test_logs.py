"""Log channels (`GRAPHWRIGHT_LOGS`, `graphwright.set_logs`): each emits what it names, and
nothing is emitted while a channel is off, whatever the root logger's level."""
from __future__ import annotations

import contextlib
import inspect
import logging
import os
import subprocess
import sys

import pytest
import torch

import graphwright
from graphwright._core import logs

CHANNELS = ("graph_code", "guards", "recompiles", "graph_breaks", "bytecode", "aot_graphs")


@pytest.fixture(autouse=True)
def fresh_caches():
    graphwright.reset()
    yield
    graphwright.reset()


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def channels(self) -> set[str]:
        return {record.name.removeprefix("graphwright.") for record in self.records}

    def text(self, channel: str) -> str:
        return "\n".join(r.getMessage() for r in self.records if r.name == f"graphwright.{channel}")


@contextlib.contextmanager
def recording(**channels):
    """Records of the `graphwright` loggers while `set_logs(**channels)` holds."""
    handler = Records()
    logs.ROOT.addHandler(handler)
    graphwright.set_logs(**channels)
    try:
        yield handler
    finally:
        graphwright.set_logs()
        logs.ROOT.removeHandler(handler)


def scaled(x, n):
    y = x.sin() * n
    print("between graphs")  # line BREAK_LINE: a graph break
    return y.cos()


BREAK_LINE = inspect.getsourcelines(scaled)[1] + 2


def run_program():
    """Every event a channel names: graphs, a break and its resume function, a recompile, AOT
    forward and backward graphs."""
    graphwright.reset()
    compiled = graphwright.compile(scaled, backend="aot_eager")
    compiled(torch.randn(4, requires_grad=True), 2).sum().backward()
    compiled(torch.randn(8, requires_grad=True), 2)


def test_every_channel_is_off_by_default_even_with_the_root_logger_at_debug(capsys):
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)
    handler = Records()
    logs.ROOT.addHandler(handler)
    try:
        run_program()
    finally:
        root.setLevel(level)
        logs.ROOT.removeHandler(handler)
    assert handler.records == []
    assert "graphwright" not in capsys.readouterr().err


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_channel_logs_only_its_own_records(channel):
    with recording(**{channel: True}) as handler:
        run_program()
    assert handler.channels() == {channel}


def test_graph_code_shows_each_captured_graph():
    with recording(graph_code=True) as handler:
        run_program()
    text = handler.text("graph_code")
    assert "TRACED GRAPH of scaled" in text and "TRACED GRAPH of graphwright_resume_in_scaled" in text
    assert "sin" in text and "cos" in text and 'f32[4]' in text


def test_guards_are_described_in_the_users_terms():
    with recording(guards=True) as handler:
        run_program()
    text = handler.text("guards")
    assert "GUARDS of scaled" in text
    assert "tensor x: Tensor, torch.float32, cpu, size=[4], contiguous, requires_grad=True" in text
    assert "n == 2" in text and "grad mode is enabled" in text


def test_recompiles_name_the_failed_guard_like_pytorch():
    with recording(recompiles=True) as handler:
        run_program()
    text = handler.text("recompiles")
    code = scaled.__code__
    assert f"Recompiling function scaled in {code.co_filename}:{code.co_firstlineno}" in text
    assert "triggered by the following guard failure(s):" in text
    assert "- entry 0: tensor 'x' size mismatch at index 0: expected 4, actual 8" in text


def test_recompiles_list_the_failure_of_every_entry():
    def f(x):
        return x + 1

    compiled = graphwright.compile(f, backend="eager", dynamic=False)
    with recording(recompiles=True) as handler:
        for size in (2, 3, 4):
            compiled(torch.randn(size))
    last = handler.records[-1].getMessage()
    assert "- entry 1: tensor 'x' size mismatch at index 0: expected 3, actual 4" in last
    assert "- entry 0: tensor 'x' size mismatch at index 0: expected 2, actual 4" in last


def test_graph_breaks_name_the_users_line_and_reason():
    with recording(graph_breaks=True) as handler:
        run_program()
    text = handler.text("graph_breaks")
    assert f"Graph break in user code at {__file__}:{BREAK_LINE}" in text
    assert "Call to `print`" in text and 'print("between graphs")' in text


def test_bytecode_shows_residual_code_and_resume_functions_as_source_and_bytecode():
    with recording(bytecode=True) as handler:
        run_program()
    text = handler.text("bytecode")
    assert "RESIDUAL CODE of scaled" in text and "def ___entry(___gw_fn, x, n):" in text
    assert "return ___MISS" in text  # the guards
    assert f"A resume function: `scaled` ({__file__}:{scaled.__code__.co_firstlineno})" in text
    assert "    return y.cos()" in text  # the user's lines after the break
    assert "RETURN_VALUE" in text and "JUMP_FORWARD" in text  # its bytecode


def test_aot_graphs_show_forward_and_backward_aten_graphs():
    with recording(aot_graphs=True) as handler:
        run_program()
    text = handler.text("aot_graphs")
    assert "AOT FORWARD GRAPH of scaled" in text and "AOT BACKWARD GRAPH of scaled" in text
    assert "torch.ops.aten.sin.default" in text and "torch.ops.aten.cos.default" in text


def test_all_turns_every_channel_on_and_set_logs_resets():
    with recording(all=logging.DEBUG) as handler:
        run_program()
        assert handler.channels() == set(CHANNELS)
        graphwright.set_logs(guards=True)  # a new call replaces the settings
        handler.records.clear()
        run_program()
        assert handler.channels() == {"guards"}


def test_plain_logging_turns_a_channel_on():
    handler = Records()
    logger = logging.getLogger("graphwright.recompiles")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        run_program()
    finally:
        logger.setLevel(logging.INFO)
        logger.removeHandler(handler)
    assert handler.channels() == {"recompiles"}


def test_set_logs_prints_to_stderr(capsys):
    graphwright.set_logs(graph_breaks=True)
    try:
        run_program()
    finally:
        graphwright.set_logs()
    assert "[graphwright.graph_breaks] Graph break in user code" in capsys.readouterr().err
    run_program()
    assert "graphwright" not in capsys.readouterr().err


def _run_with_env(value: str) -> subprocess.CompletedProcess:
    script = ("import torch, graphwright\n"
              "f = graphwright.compile(lambda x: x.sin(), backend='eager')\n"
              "f(torch.randn(2)); f(torch.randn(3))\n")
    env = {**os.environ, "GRAPHWRIGHT_LOGS": value}
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # a fresh process imports torch
def test_environment_variable_chooses_channels():
    result = _run_with_env("recompiles,+graph_code")
    assert result.returncode == 0, result.stderr
    assert "[graphwright.recompiles] Recompiling function <lambda>" in result.stderr
    assert "[graphwright.graph_code] TRACED GRAPH" in result.stderr
    assert "[graphwright.guards]" not in result.stderr


def test_channel_names_as_in_the_environment_variable():
    with recording() as handler:
        logs.set_logs_from_text("recompiles, +graph_code")
        run_program()
        assert handler.channels() == {"recompiles", "graph_code"}
        logs.set_logs_from_text("+all")
        handler.records.clear()
        run_program()
        assert handler.channels() == set(CHANNELS)


def test_unknown_channel_names_are_an_error_naming_the_valid_ones():
    with pytest.raises(graphwright.GraphwrightError) as error:
        logs.set_logs_from_text("graph_code,guard")
    assert "Unknown log channel in GRAPHWRIGHT_LOGS: guard" in str(error.value)
    assert "graph_code, guards, recompiles" in str(error.value)


@pytest.mark.slow  # Inductor compiles
def test_output_code_names_the_module_inductor_wrote_for_each_graph():
    def f(x):
        return (x.sin() * 2).sum(1)

    with recording(output_code=True) as handler:
        graphwright.compile(f, backend="inductor")(torch.randn(4, 4, requires_grad=True)).sum().backward()
    assert handler.channels() == {"output_code"}
    messages = [record.getMessage() for record in handler.records]
    assert [m.split(" graph of ")[0] for m in messages] == ["Output code of the forward", "Output code of the backward"]
    for message in messages:
        path = message.split("written to: ")[1]
        assert os.path.exists(path) and "async_compile" in open(path).read()
