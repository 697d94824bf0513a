"""`graphwright.debug.report` and `python -m graphwright report`: the HTML page, without a browser.

What the page holds (checked in its text): a drawing per graph with every node, coloured by
kind; every graph break with the user's line and the suggested fix; an error under fullgraph;
recompiles with their reasons; guards; compile time per phase, attributed to the entry that
was being compiled. The page is self-contained. tests/test_report_browser.py opens it.
"""
from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys

import pytest
import torch

import graphwright
from graphwright.__main__ import _report_arguments
from graphwright.report.drawing import layout, node_kind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def fresh_caches():
    graphwright.reset()
    yield
    graphwright.reset()


@graphwright.nonstrict_trace
def centred(t):
    return t - t.mean()


@graphwright.leaf_function
def doubled(t):
    return t * 2


@doubled.register_fake
def _(t):
    return torch.empty_like(t)


def breaking(x):
    y = torch.sin(x) + 1
    print("between two graphs")
    return y.cos()


BREAK_LINE = inspect.getsourcelines(breaking)[1] + 2


def _svgs(page: str) -> list[str]:
    return re.findall(r"<svg class=\"graph\".*?</svg>", page, flags=re.S)


def test_every_graph_is_drawn_with_every_node():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with graphwright.debug.report() as report:
        graphwright.compile(breaking, backend=backend)(torch.randn(3))
    page = report.html()
    svgs = _svgs(page)
    assert len(graphs) == 2 == len(svgs) == report.graph_count
    for gm, svg in zip(graphs, svgs):
        assert svg.count('<g class="node ') == len(gm.graph.nodes)
        for node in gm.graph.nodes:
            assert f'data-name="{node.name}"' in svg


def test_nodes_are_coloured_by_kind():
    def f(x):
        return doubled(centred(x)) + 1

    with graphwright.debug.report() as report:
        graphwright.compile(f, backend="eager", fullgraph=True)(torch.randn(4))
    svg = _svgs(report.html())[0]
    for kind in ("input", "op", "nonstrict", "leaf", "output"):
        assert f'class="node kind-{kind}"' in svg
    assert ".kind-nonstrict rect" in report.html()


def test_a_graph_break_shows_the_users_line_and_a_fix():
    with graphwright.debug.report() as report:
        graphwright.compile(breaking, backend="eager")(torch.randn(3))
    page = report.html()
    assert report.break_count == 1
    block = re.search(r'<div class="break " data-gb="GB008">.*?</div></div>', page, flags=re.S).group(0)
    assert f"{__file__}:{BREAK_LINE}" in block
    assert f'<span class="here">{BREAK_LINE:5d}  ' in block  # the source line, marked
    assert 'print(&quot;between two graphs&quot;)' in block
    assert "Suggested fix" in block and "reorderable_print" in block


def test_an_error_under_fullgraph_is_shown():
    def f(x):
        graphwright.graph_break()
        return x + 1

    with graphwright.debug.report() as report:
        with pytest.raises(graphwright.Unsupported):
            graphwright.compile(f, backend="eager", fullgraph=True)(torch.randn(3))
    page = report.html()
    assert '<div class="break fatal" data-gb="GB001">' in page
    assert "Error under fullgraph=True" in page
    assert "not built" in page


def test_recompiles_show_their_reasons_and_guards_are_listed():
    def f(x):
        return x * 2

    compiled = graphwright.compile(f, backend="eager", dynamic=False)
    with graphwright.debug.report() as report:
        compiled(torch.randn(3))
        compiled(torch.randn(5))
    page = report.html()
    assert '<div class="recompile">' in page
    assert "size mismatch at index 0: expected 3, actual 5" in page
    assert page.count('<details class="guards">') == 2
    assert "tensor x: Tensor, torch.float32, cpu, size=[3]" in page


def test_compile_time_per_phase_is_attributed_to_entries():
    def f(x):
        return torch.relu(x) * 3

    before = dict(graphwright.counters["time"])
    with graphwright.debug.report() as report:
        graphwright.compile(f, backend="aot_eager")(torch.randn(3, requires_grad=True)).sum().backward()
    spent = {phase: seconds - before.get(phase, 0.0) for phase, seconds in graphwright.counters["time"].items()}
    function = next(iter(report.recording.functions.values()))
    attributed = report.recording.function_times(function)
    for phase in ("trace", "guards", "aot", "backend"):
        assert attributed[phase] > 0
        assert attributed[phase] == pytest.approx(spent[phase])
    page = report.html()
    for phase in ("trace", "guards", "residual", "aot", "backend"):
        assert f'<span class="swatch phase-{phase}"></span>{phase}' in page


def test_the_page_is_self_contained():
    with graphwright.debug.report() as report:
        graphwright.compile(breaking, backend="eager")(torch.randn(3))
    page = report.html()
    assert not re.search(r"<link|<img|\bsrc=|@import|url\(", page)
    assert "<style>" in page and "<script>" in page


def test_nothing_compiled():
    with graphwright.debug.report() as report:
        pass
    assert 'id="nothing"' in report.html()


def test_layout_places_every_node_without_overlap():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.b(torch.relu(self.a(x))) + self.a(x).sigmoid()

    graphs = []
    graphwright.compile(Net(), backend=lambda gm, inputs: graphs.append(gm) or gm.forward)(torch.randn(2, 4))
    rows, width = layout(graphs[0])
    placed = [item for row in rows for item in row]
    assert len(placed) == len(graphs[0].graph.nodes)
    assert all(row for row in rows)
    for row in rows:
        for left, right in zip(row, row[1:]):
            assert left.x + left.width <= right.x
        assert row[-1].x + row[-1].width <= width + 1e-6
    layer = {item.node: item.layer for item in placed}
    for node in graphs[0].graph.nodes:
        for used in node.all_input_nodes:
            assert layer[used] < layer[node]
    assert [item.kind for item in rows[-1]] == ["output"]
    assert {node_kind(node) for node in graphs[0].graph.nodes} == {"input", "op", "output"}


def test_command_line_arguments():
    assert _report_arguments(["s.py", "--html", "o.html", "-n", "3"]) == (["s.py", "-n", "3"], "o.html")
    assert _report_arguments(["--html", "o.html", "s.py", "--html", "x"]) == (["s.py", "--html", "x"], "o.html")
    assert _report_arguments(["dir/s.py"]) == (["dir/s.py"], "s.graphwright.html")
    assert _report_arguments([]) is None
    assert _report_arguments(["s.py", "--html"]) is None


def test_command_line_writes_the_page(tmp_path):
    page = tmp_path / "demo.html"
    script = os.path.join(ROOT, "examples", "report_demo.py")
    result = subprocess.run([sys.executable, "-m", "graphwright", "report", script, "--html", str(page)],
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    assert len(_svgs(text)) == 5
    assert text.count('<div class="break ') == 2
    assert '<div class="recompile">' in text
    assert f"graphwright report: {page}" in result.stderr
