"""Graph breaks under fullgraph=True raise `Unsupported` in API.md's layout.

Each reason's message has a title line, `  Explanation:`, at least one
`  Hint:`, and `from user code:` followed by one frame per inlined call with
the user's file, line and source text. Under fullgraph=False the same
programs give eager's results and count the break in `counters["graph_break"]`.

The reference mode checks the same programs against torch.compile, whose
message has the same layout.
"""
from __future__ import annotations

import json
import os
import re
import zlib

import pytest
import torch
import torch._dynamo

import graphwright

from .harness import REFERENCE, assert_same, compile_counted, reset_compiler


from .markers import disable, graph_break

PYTORCH_CAPTURES_FLOAT = ("PyTorch 2.13 captures `float()` of an array under fullgraph (an unbacked float); "
                          "graphwright breaks the graph there, as it does for `float()` of a tensor")



def _line(marker: str) -> tuple[int, str]:
    """(line number, stripped source) of the line of this file tagged `# gb:<marker>`."""
    with open(__file__) as source:
        for number, text in enumerate(source, start=1):
            if text.rstrip().endswith(f"# gb:{marker}"):
                return number, text.strip()
    raise LookupError(marker)


def _unsupported_type():
    if REFERENCE:
        import torch._dynamo.exc

        return torch._dynamo.exc.Unsupported
    return graphwright.Unsupported


def _clear_counters():
    if REFERENCE:
        from torch._dynamo.utils import counters

        counters.clear()
    else:
        graphwright.counters.clear()


def _counted_breaks() -> dict:
    if REFERENCE:
        from torch._dynamo.utils import counters

        # PyTorch files a data-dependent jump under "unimplemented", not "graph_break".
        return {**counters["graph_break"], **counters["unimplemented"]}
    return dict(graphwright.counters["graph_break"])


def _calls_graph_break(x):
    graph_break()  # gb:inner-graph-break
    return x + 1


def explicit_break(x):
    y = x * 2
    return _calls_graph_break(y)  # gb:outer-graph-break


def _middle(x):
    return _calls_graph_break(x - 1)  # gb:middle-call


def two_levels_deep(x):
    return _middle(x) * 3  # gb:outermost-call


def unknown_c_function(x):
    checksum = zlib.crc32(b"graphwright")  # gb:c-function
    return x + checksum


def data_dependent_branch(x):
    if x.sum() > 0:  # gb:data-dependent
        return x * 2
    return x - 2


def numpy_call(x):
    scale = x.sum().numpy()
    return x * float(scale)  # gb:numpy


def print_call(x):
    print("value", x.shape)  # gb:print
    return x + 1


async def _add_one(x):
    return x + 1


def coroutine_use(x):
    pending = _add_one(x)  # gb:coroutine
    pending.close()
    return x + 2


class _Count(int):
    """A subclass of int with an `__init_subclass__`: a class deriving from it is one the
    tracer cannot build (CPython allows it no stand-in base)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)


def class_definition(x):
    class Local(_Count):  # gb:class-definition
        scale = 2

    return x * Local.scale


class _Breaking(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        graph_break()  # gb:module-forward
        return y


_BREAKING = _Breaking()


def module_call(x):
    return _BREAKING(x) + 1  # gb:module-call


@disable
def _never_compiled(x):
    return x * 2


def disabled_call(x):
    return _never_compiled(x) + 1  # gb:disabled


BREAKS = [
    pytest.param(explicit_break, ["outer-graph-break", "inner-graph-break"], id="graph_break"),
    pytest.param(two_levels_deep, ["outermost-call", "middle-call", "inner-graph-break"],
                 id="graph_break_two_inlined_calls_deep"),
    pytest.param(unknown_c_function, ["c-function"], id="call_to_unknown_c_function"),
    pytest.param(data_dependent_branch, ["data-dependent"], id="data_dependent_branch"),
    pytest.param(numpy_call, ["numpy"], id="numpy",
                 marks=pytest.mark.skipif(REFERENCE, reason=PYTORCH_CAPTURES_FLOAT)),
    pytest.param(print_call, ["print"], id="print"),
    pytest.param(coroutine_use, ["coroutine"], id="coroutine",
                 marks=pytest.mark.skipif(REFERENCE, reason="PyTorch 2.13 breaks at `close()`, a line later")),
    pytest.param(disabled_call, ["disabled"], id="call_to_a_disabled_function"),
    pytest.param(module_call, ["module-call", "module-forward"], id="graph_break_in_a_module_forward"),
    pytest.param(class_definition, ["class-definition"], id="unsupported_opcode_class_definition"),
]


def _raise_under_fullgraph(fn):
    reset_compiler()
    compiled, _ = compile_counted(fn, fullgraph=True)
    with pytest.raises(_unsupported_type()) as caught:
        compiled(torch.ones(3))
    reset_compiler()
    return caught.value


def _assert_user_stack(text: str, markers: list[str]) -> None:
    lines = text.splitlines()
    assert "from user code:" in lines, text
    stack = lines[lines.index("from user code:") + 1:]
    frame_lines = [i for i, line in enumerate(stack) if line.lstrip().startswith("File ")]
    assert len(frame_lines) >= len(markers), text
    # The innermost frames are the user's code; nothing of graphwright or torch in between.
    own = frame_lines[-len(markers):]
    for index, marker in zip(own, markers):
        number, source = _line(marker)
        header = stack[index].strip()
        assert header.startswith(f'File "{__file__}", line {number}, in '), (marker, text)
        assert stack[index + 1].strip() == source, (marker, text)
    internal = (os.path.dirname(graphwright.__file__), os.path.dirname(torch.__file__))
    for index in frame_lines:
        assert not any(directory in stack[index] for directory in internal), text


@pytest.mark.parametrize("fn, markers", BREAKS)
def test_break_under_fullgraph_raises_unsupported_in_the_documented_layout(fn, markers):
    error = _raise_under_fullgraph(fn)
    text = str(error)
    lines = text.splitlines()
    assert lines[0].strip() and not lines[0].startswith(" "), text
    assert lines[1].startswith("  Explanation: ") and len(lines[1]) > len("  Explanation: "), text
    hints = [line for line in lines if line.startswith("  Hint: ")]
    assert hints and all(len(h) > len("  Hint: ") for h in hints), text
    _assert_user_stack(text, markers)


@pytest.mark.parametrize("fn, markers", BREAKS)
def test_break_text_names_a_stable_graph_break_id(fn, markers):
    if REFERENCE:
        pytest.skip("PyTorch names its ids on a web link; the GBnnn ids are graphwright's")
    error = _raise_under_fullgraph(fn)
    assert isinstance(error, graphwright.GraphwrightError)
    assert re.fullmatch(r"GB\d{3}", error.gb_id), error.gb_id
    assert error.gb_id in str(error)


def library_call(x):
    text = json.dumps({"n": 1})  # gb:library
    return x + len(text)


def test_break_inside_a_library_shows_the_users_call_then_the_librarys_innermost_line():
    error = _raise_under_fullgraph(library_call)
    lines = str(error).splitlines()
    stack = lines[lines.index("from user code:") + 1:]
    headers = [line.strip() for line in stack if line.lstrip().startswith("File ")]
    if REFERENCE:  # TorchDynamo shows its own polyfill of the class instantiation last
        headers = [header for header in headers if os.path.dirname(torch._dynamo.__file__) not in header]
    number, _ = _line("library")
    users = [i for i, header in enumerate(headers) if header.startswith(f'File "{__file__}", line {number}, in ')]
    assert users, str(error)
    assert os.path.dirname(json.__file__) in headers[-1], str(error)  # where capture stopped
    assert users[-1] < len(headers) - 1
    assert not any(os.path.dirname(graphwright.__file__) in header for header in headers), str(error)


def test_explicit_graph_break_has_the_title_api_md_fixes():
    error = _raise_under_fullgraph(explicit_break)
    name = "torch._dynamo.graph_break()" if REFERENCE else "graphwright.graph_break()"
    assert str(error).splitlines()[0] == f"Call to `{name}`"


def test_different_reasons_have_different_titles():
    reasons = [explicit_break, unknown_c_function, data_dependent_branch, print_call, disabled_call,
               class_definition]
    if not REFERENCE:
        reasons += [numpy_call, coroutine_use]
    titles = {str(_raise_under_fullgraph(fn)).splitlines()[0] for fn in reasons}
    assert len(titles) == len(reasons), titles


@pytest.mark.parametrize("fn, markers", BREAKS)
def test_break_without_fullgraph_gives_eager_results_and_is_counted(fn, markers, capsys):
    reset_compiler()
    _clear_counters()
    compiled, _ = compile_counted(fn, fullgraph=False)
    for x in (torch.randn(3), -torch.randn(3).abs()):
        assert_same(fn(x.clone()), compiled(x.clone()))
    assert sum(_counted_breaks().values()) >= 1, _counted_breaks()
    reset_compiler()
