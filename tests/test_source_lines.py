"""Every node knows the user's line it came from: `stack_trace`, `nn_module_stack` and
`source_fn_stack` on the captured graph's nodes, carried into AOT autograd's forward and backward
graphs, into Inductor's generated code, and shown by logs, explain and the report."""
from __future__ import annotations

import inspect
import logging
import os
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import graphwright
from graphwright._core import logs
from graphwright._core.source_lines import innermost_frame

THIS_FILE = os.path.abspath(__file__)


@pytest.fixture(autouse=True)
def fresh_caches():
    graphwright.reset()
    yield
    graphwright.reset()


def line_of(fn, text: str) -> int:
    """The line number of the line of `fn`'s source holding `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        y = self.linear(x)
        return F.gelu(self.norm(y)) * 2


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(Block(), nn.Sequential(Block(), nn.ReLU()))

    def forward(self, x):
        return self.layers(x).sum()


def captured(program, *args, backend_graphs=None):
    graphs = [] if backend_graphs is None else backend_graphs

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    graphwright.compile(program, backend=backend)(*args)
    return graphs


def call_nodes(gm):
    return [node for node in gm.graph.nodes if node.op in ("call_function", "call_method", "call_module")]


def test_every_captured_node_names_the_users_file_line_function_and_code():
    (gm,) = captured(Stack(), torch.randn(3, 4))
    linear, activation = line_of(Block.forward, "self.linear(x)"), line_of(Block.forward, "F.gelu")
    total = line_of(Stack.forward, ".sum()")
    innermost = [innermost_frame(node.meta.get("stack_trace")) for node in call_nodes(gm)]
    assert all(frame is not None and frame[0] == THIS_FILE for frame in innermost), innermost
    assert [int(frame[1]) for frame in innermost] == [linear, activation, activation, activation] * 2 \
        + [total, total]  # the ReLU is called by torch's Sequential: the user's line is the outer call
    assert innermost[0][2:] == ("forward", "y = self.linear(x)")
    # outermost first: the Sequential's call in Stack.forward, then Block.forward's line
    trace = call_nodes(gm)[0].meta["stack_trace"]
    assert trace.index(f"line {total}, in forward") < trace.index(f"line {linear}, in forward")
    assert "torch/nn/modules" not in trace  # torch's own frames are left out


def test_innermost_lines_match_torch_compile():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    torch._dynamo.reset()
    torch.compile(Stack(), backend=backend, fullgraph=True)(torch.randn(3, 4))
    ours = captured(Stack(), torch.randn(3, 4))

    def lines(gm):
        return [innermost_frame(node.meta.get("stack_trace"))[:3] for node in call_nodes(gm)]

    assert lines(ours[0]) == lines(graphs[0])


def test_graph_code_log_prints_the_source_line_above_each_group_of_nodes():
    records = []

    class Handler(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Handler()
    logs.ROOT.addHandler(handler)
    graphwright.set_logs(graph_code=True)
    try:
        graphwright.compile(Block())(torch.randn(3, 4))
    finally:
        graphwright.set_logs()
        logs.ROOT.removeHandler(handler)
    text = "\n".join(records)
    assert "No stacktrace found" not in text
    for code in ("y = self.linear(x)", "return F.gelu(self.norm(y)) * 2"):
        line = line_of(Block.forward, code)
        assert f"# File: {THIS_FILE}:{line} in forward, code: {code}" in text


def test_nn_module_stack_gives_the_path_of_nested_sequentials():
    (gm,) = captured(Stack(), torch.randn(3, 4))
    stacks = {node.name: node.meta.get("nn_module_stack") for node in call_nodes(gm)}
    second_linear = [name for name in stacks if name.startswith("linear")][1]
    assert list(stacks[second_linear].values()) == [
        ("self.layers", nn.Sequential), ("self.layers.1", nn.Sequential),
        ("self.layers.1.0", Block), ("self.layers.1.0.linear", nn.Linear)]
    relu = next(node for node in call_nodes(gm) if node.target in (F.relu, torch.relu))
    assert list(stacks[relu.name].values())[-1] == ("self.layers.1.1", nn.ReLU)
    assert stacks["sum_1"] is None  # made by the compiled module itself, under no module call
    assert relu.meta["source_fn_stack"] == [(relu.name, nn.ReLU)]  # a torch.nn module: its class
    mul = next(node for node in call_nodes(gm) if node.name == "mul")
    assert mul.meta["source_fn_stack"][0][0] == "mul"


def aot_graphs(program, *args):
    """The AOT forward and backward graphs of `program` (as `aot_compile._publish` hands them to
    the `aot_graphs` log and the dump)."""
    from graphwright.aot import compile as aot_compile

    published = {}
    original = aot_compile._publish

    def publish(gm, kind):
        published[kind] = gm
        return original(gm, kind)

    aot_compile._publish = publish
    try:
        graphwright.compile(program, backend="aot_eager")(*args).sum().backward()
    finally:
        aot_compile._publish = original
    return published


def test_aot_forward_and_backward_nodes_carry_the_users_lines():
    graphs = aot_graphs(Block().double(), torch.randn(3, 4, dtype=torch.float64, requires_grad=True))
    linear, activation = line_of(Block.forward, "self.linear(x)"), line_of(Block.forward, "F.gelu")
    for kind in ("forward", "backward"):
        nodes = [node for node in graphs[kind].graph.nodes if node.op == "call_function"]
        lines = {int(innermost_frame(node.meta.get("stack_trace"))[1]) for node in nodes
                 if node.meta.get("stack_trace")}
        assert lines == {linear, activation}, kind
    forward_mm = next(node for node in graphs["forward"].graph.nodes if node.target is torch.ops.aten.addmm.default)
    assert int(innermost_frame(forward_mm.meta["stack_trace"])[1]) == linear
    assert list(forward_mm.meta["nn_module_stack"].values())[-1] == ("self.linear", nn.Linear)
    # the gradient of the weight (mm of the backward) comes from the linear's line
    backward_mm = [node for node in graphs["backward"].graph.nodes if node.target is torch.ops.aten.mm.default]
    assert backward_mm and all(int(innermost_frame(n.meta["stack_trace"])[1]) == linear for n in backward_mm)


@graphwright.nonstrict_trace
def shifted(x):
    z = x.cos()
    return z + 1


def calls_shifted(x):
    return shifted(x * 2).sum()


def test_a_nonstrict_trace_body_records_its_own_lines_after_the_call():
    graphs = aot_graphs(calls_shifted, torch.randn(4, requires_grad=True))
    call_line = line_of(calls_shifted, "shifted(x * 2)")
    body = {"cos": line_of(shifted, "x.cos()"), "add": line_of(shifted, "z + 1")}
    forward = {node.name: node for node in graphs["forward"].graph.nodes}
    for name, line in body.items():
        trace = forward[name].meta["stack_trace"]
        frame = innermost_frame(trace)
        assert (int(frame[1]), frame[2]) == (line, "shifted")
        assert f"line {call_line}, in calls_shifted" in trace  # the call's line comes first
    sin = next(node for node in graphs["backward"].graph.nodes if node.target is torch.ops.aten.sin.default)
    assert int(innermost_frame(sin.meta["stack_trace"])[1]) == body["cos"]  # cos's gradient


def test_compiled_results_and_gradients_are_unchanged_through_aot():
    model = Stack()
    x = torch.randn(3, 4, requires_grad=True)
    expected = model(x)
    expected.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    x2 = x.detach().clone().requires_grad_()
    out = graphwright.compile(model, backend="aot_eager")(x2)
    out.backward()
    torch.testing.assert_close(out, expected)
    for p, grad in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad, grad)
    torch.testing.assert_close(x2.grad, x.grad)


def test_make_fx_records_stack_traces_when_asked():
    def f(x):
        y = x.sin()
        return y * 2

    gm = graphwright.make_fx(f, record_stack_traces=True)(torch.randn(3))
    lines = [innermost_frame(node.meta.get("stack_trace")) for node in gm.graph.nodes if node.op == "call_function"]
    assert [(int(frame[1]), frame[3]) for frame in lines] == [
        (line_of(f, "x.sin()"), "y = x.sin()"), (line_of(f, "y * 2"), "return y * 2")]
    plain = graphwright.make_fx(f)(torch.randn(3))
    assert not any("stack_trace" in node.meta for node in plain.graph.nodes)


def test_explain_lists_each_op_with_its_line():
    def f(x):
        y = x.sin()
        return y * 2

    text = str(graphwright.explain(f)(torch.randn(3)))
    assert f"sin  ({THIS_FILE}:{line_of(f, 'x.sin()')} in f: y = x.sin())" in text
    assert f"mul  ({THIS_FILE}:{line_of(f, 'y * 2')} in f: return y * 2)" in text


def test_report_shows_source_lines_in_graph_code_and_tooltips():
    with graphwright.debug.report() as rep:
        graphwright.compile(Block())(torch.randn(3, 4))
    html = rep.html()
    line = line_of(Block.forward, "self.linear(x)")
    assert f"# File: {THIS_FILE}:{line} in forward, code: y = self.linear(x)" in html
    assert f"{THIS_FILE}:{line} in forward: y = self.linear(x)" in html  # a node's tooltip


@pytest.mark.slow
def test_inductor_generated_code_names_the_users_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch.set_num_threads(1)
    with graphwright.debug.dump(tmp_path / "dump"):
        out = graphwright.compile(Block(), backend="inductor")(torch.randn(3, 4, requires_grad=True))
        out.sum().backward()
    for kind in ("forward", "backward"):
        (module,) = (tmp_path / "dump").rglob(f"inductor_{kind}.py")
        code = module.read_text()
        comments = set(re.findall(r"# File: (.+):(\d+) in (\w+), code: (.*)", code))
        assert (THIS_FILE, str(line_of(Block.forward, "self.linear(x)")), "forward", "y = self.linear(x)") \
            in comments, (kind, code)
        assert {(f, int(n)) for f, n, _, _ in comments} <= {
            (THIS_FILE, line_of(Block.forward, "self.linear(x)")), (THIS_FILE, line_of(Block.forward, "F.gelu"))}
