"""The report as one self-contained HTML page: inline CSS, SVG and a few lines of JavaScript.

Nothing is fetched: the page opens from a file, offline. Per compiled function:
a summary line; compile time per phase (a bar and a table); every graph break
with the user's stack, the source around the breaking line, what runs instead
and the suggested fix; every recompile with the guard failures that caused it;
every cache entry with its guards and the graphs it compiled, each drawn
(`drawing`) and with its code. Clicking a node marks its edges.
"""
from __future__ import annotations

import datetime
import html
import linecache
import sys

import torch

from .._core.counters import PHASES
from .drawing import KINDS, bucket_pieces, graph_svg
from .record import BreakRecord, EntryRecord, FunctionRecord, Recording

_CONTEXT_LINES = 2

_STYLE = """
:root { --input:#4e79a7; --op:#9c9c9c; --nonstrict:#f28e2b; --leaf:#d62728; --output:#59a14f; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 16px 24px; color: #222; }
h1 { font-size: 22px; margin: 4px 0; } h2 { font-size: 18px; margin: 0 0 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
small, .muted { color: #666; }
code, pre { font: 12.5px/1.4 ui-monospace, Menlo, Consolas, monospace; }
pre { background: #f6f6f4; padding: 8px; overflow: auto; border-radius: 4px; }
section.function { border: 1px solid #ddd; border-radius: 6px; padding: 12px 16px; margin: 16px 0; }
table { border-collapse: collapse; } td, th { padding: 2px 10px 2px 0; text-align: left; vertical-align: top; }
.bar { display: flex; height: 12px; width: 420px; border-radius: 3px; overflow: hidden; background: #eee; }
.bar span { display: block; height: 100%; }
.phase-trace { background: #4e79a7; } .phase-guards { background: #edc948; } .phase-residual { background: #b07aa1; }
.phase-aot { background: #f28e2b; } .phase-backend { background: #59a14f; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
.break { border-left: 4px solid #d62728; background: #fff6f5; padding: 6px 10px; margin: 8px 0; }
.break.fatal { border-left-color: #7a0000; }
.recompile { border-left: 4px solid #edc948; background: #fffbea; padding: 6px 10px; margin: 8px 0; }
.source .here { background: #ffd9d6; font-weight: 600; }
.fix { background: #eef7ee; padding: 4px 8px; border-radius: 4px; }
.entry { margin: 10px 0 0; padding-left: 10px; border-left: 2px solid #eee; }
figure.graph-figure { margin: 8px 0; }
.graph-scroll { overflow: auto; max-height: 640px; border: 1px solid #eee; border-radius: 4px; }
svg.graph .edge { fill: none; stroke: #999; stroke-width: 1.1; }
svg.graph .edge.marked { stroke: #d62728; stroke-width: 2.2; }
svg.graph .node rect { stroke: #333; stroke-width: .6; }
svg.graph .node text { font: 11px ui-monospace, Menlo, monospace; text-anchor: middle; fill: #fff; pointer-events: none; }
svg.graph .node { cursor: pointer; } svg.graph .node.marked rect { stroke: #000; stroke-width: 2.2; }
.kind-input rect, .swatch.kind-input { fill: var(--input); background: var(--input); }
.kind-op rect, .swatch.kind-op { fill: var(--op); background: var(--op); }
.kind-nonstrict rect, .swatch.kind-nonstrict { fill: var(--nonstrict); background: var(--nonstrict); }
.kind-leaf rect, .swatch.kind-leaf { fill: var(--leaf); background: var(--leaf); }
.kind-output rect, .swatch.kind-output { fill: var(--output); background: var(--output); }
.legend span.item { margin-right: 14px; }
nav a { margin-right: 10px; }
"""

_SCRIPT = """
document.addEventListener('click', function (event) {
  var node = event.target.closest ? event.target.closest('g.node') : null;
  if (!node) { return; }
  var svg = node.closest('svg.graph');
  var name = node.getAttribute('data-name');
  var marking = !node.classList.contains('marked');
  svg.querySelectorAll('.marked').forEach(function (el) { el.classList.remove('marked'); });
  if (!marking) { return; }
  node.classList.add('marked');
  svg.querySelectorAll('path.edge').forEach(function (edge) {
    if (edge.getAttribute('data-from') === name || edge.getAttribute('data-to') === name) {
      edge.classList.add('marked');
    }
  });
});
document.querySelectorAll('button[data-open]').forEach(function (button) {
  button.addEventListener('click', function () {
    var open = button.getAttribute('data-open') === 'all';
    document.querySelectorAll('details').forEach(function (d) { d.open = open; });
  });
});
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def render(recording: Recording, title: str) -> str:
    """The whole page for what `recording` saw."""
    functions = list(recording.functions.values())
    graphs = sum(len(function.graphs) for function in functions)
    breaks = sum(len(function.breaks) for function in functions)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted">graphwright report · {datetime.datetime.now():%Y-%m-%d %H:%M:%S} · '
        f"Python {sys.version.split()[0]} · torch {_e(torch.__version__)}</p>",
        f'<p id="totals"><b>{len(functions)}</b> compiled functions · <b>{graphs}</b> graphs · '
        f"<b>{breaks}</b> graph breaks · compile time {_seconds(sum(recording.total_times().values()))}</p>",
        _legend(),
        '<p><button type="button" data-open="all">expand all</button> '
        '<button type="button" data-open="none">collapse all</button></p>',
    ]
    if not functions:
        parts.append('<p id="nothing">Nothing was compiled.</p>')
    else:
        parts.append(_overview(recording, functions))
    for index, function in enumerate(functions):
        parts.append(_function(recording, function, index))
    parts.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(parts)


def _legend() -> str:
    items = "".join(f'<span class="item"><span class="swatch kind-{kind}"></span>{_e(text)}</span>'
                    for kind, text in KINDS.items())
    return f'<p class="legend">{items}</p>'


def _overview(recording: Recording, functions: list[FunctionRecord]) -> str:
    rows = ["<tr><th>function</th><th>where</th><th>graphs</th><th>breaks</th><th>entries</th>"
            "<th>recompiles</th><th>compile time</th></tr>"]
    for index, function in enumerate(functions):
        code = function.code
        rows.append(f'<tr><td><a href="#function-{index}">{_e(code.co_qualname)}</a></td>'
                    f"<td><code>{_e(code.co_filename)}:{code.co_firstlineno}</code></td>"
                    f"<td>{len(function.graphs)}</td><td>{len(function.breaks)}</td><td>{len(function.entries)}</td>"
                    f"<td>{len(function.recompiles)}</td>"
                    f"<td>{_seconds(sum(recording.function_times(function).values()))}</td></tr>")
    total = recording.total_times()
    return (f'<table id="overview">{"".join(rows)}</table>'
            f"<h3>Compile time of the run, per phase</h3>{_times(total)}")


def _function(recording: Recording, function: FunctionRecord, index: int) -> str:
    code = function.code
    parts = [f'<section class="function" id="function-{index}" data-graphs="{len(function.graphs)}" '
             f'data-breaks="{len(function.breaks)}">',
             f"<h2>{_e(code.co_qualname)} <small><code>{_e(code.co_filename)}:{code.co_firstlineno}</code>"
             "</small></h2>",
             f'<p class="summary">{len(function.graphs)} graphs · {len(function.breaks)} graph breaks · '
             f"{len(function.entries)} cache entries · {len(function.recompiles)} recompiles</p>",
             "<h3>Compile time per phase</h3>", _times(recording.function_times(function))]
    if function.breaks:
        parts.append("<h3>Graph breaks</h3>")
        parts.extend(_break(brk) for brk in function.breaks)
    if function.recompiles:
        parts.append("<h3>Recompiles</h3>")
        parts.extend(_recompile(entry) for entry in function.recompiles)
    parts.append("<h3>Cache entries and graphs</h3>")
    graph_number = 0
    for entry_index, entry in enumerate(function.entries):
        parts.append(_entry(recording, entry, f"function-{index}-entry-{entry_index}", graph_number))
        graph_number += len(entry.graphs)
    parts.append("</section>")
    return "\n".join(parts)


def _entry(recording: Recording, entry: EntryRecord, anchor: str, first_graph: int) -> str:
    name = entry.code.co_qualname
    state = "" if entry.built else " — <b>not built</b> (the compile raised)"
    parts = [f'<div class="entry" id="{anchor}"><b>{_e(name)}</b>, entry {entry.number}{state} '
             f'<small>compile time {_seconds(sum(recording.entry_times(entry).values()))}</small>']
    if entry.guards:
        items = "".join(f"<li><code>{_e(guard)}</code></li>" for guard in entry.guards)
        parts.append(f'<details class="guards"><summary>{len(entry.guards)} guards</summary><ul>{items}</ul></details>')
    elif entry.built:
        parts.append('<p class="muted">no guards</p>')
    for offset, gm in enumerate(entry.graphs):
        number = first_graph + offset
        graph_id = f"{anchor}-graph-{offset}"
        counts = _kind_counts(gm)
        pieces = len(set(bucket_pieces(gm).values()))
        split = f" · compiled in {pieces} pieces, one per DDP gradient bucket" if pieces else ""
        parts.append(
            f'<figure class="graph-figure" data-graph="{number}">'
            f"<figcaption>Graph {number} <small>({counts}{split})</small></figcaption>"
            f'<div class="graph-scroll">{graph_svg(gm, graph_id)}</div>'
            f"<details><summary>graph code</summary><pre>{_e(_graph_code(gm))}</pre></details></figure>")
    parts.append("</div>")
    return "\n".join(parts)


def _graph_code(gm: torch.fx.GraphModule) -> str:
    """The graph's code with shapes, each group of nodes under the user's line it came from."""
    return gm.print_readable(print_output=False, include_stride=False, include_device=False).strip()


def _kind_counts(gm: torch.fx.GraphModule) -> str:
    from .drawing import node_kind

    counts: dict[str, int] = {}
    for node in gm.graph.nodes:
        kind = node_kind(node)
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{counts[kind]} {kind}" for kind in KINDS if kind in counts)


def _break(brk: BreakRecord) -> str:
    kind = "fatal" if brk.fatal else ""
    headline = "Error under fullgraph=True" if brk.fatal else "Graph break"
    frame = brk.user_stack[-1] if brk.user_stack else None
    where = f" at <code>{_e(frame.filename)}:{frame.lineno}</code>" if frame is not None else ""
    parts = [f'<div class="break {kind}" data-gb="{_e(brk.gb_id)}">',
             f"<b>{headline}{where}</b>: {_e(brk.title)} <small>({_e(brk.gb_id)})</small>",
             f"<p>{_e(brk.explanation)}</p>"]
    if frame is not None:
        parts.append(_source(frame.filename, frame.lineno))
    if brk.user_stack:
        stack = "".join(f"<li><code>{_e(f.filename)}:{f.lineno}</code> in <code>{_e(f.name)}</code>"
                        + (f": <code>{_e(f.line)}</code>" if f.line else "") + "</li>" for f in brk.user_stack)
        parts.append(f"<details><summary>user stack ({len(brk.user_stack)} frames)</summary><ol>{stack}</ol></details>")
    if brk.note:
        parts.append(f"<p><b>Instead:</b> {_e(brk.note)}</p>")
    fixes = [brk.advice] if brk.advice else list(brk.hints)
    parts.append('<div class="fix"><b>Suggested fix:</b><ul>' + "".join(f"<li>{_e(fix)}</li>" for fix in fixes)
                 + "</ul></div></div>")
    return "\n".join(parts)


def _source(filename: str, lineno: int) -> str:
    """The lines around `lineno`, the breaking line marked."""
    lines = []
    for number in range(max(1, lineno - _CONTEXT_LINES), lineno + _CONTEXT_LINES + 1):
        text = linecache.getline(filename, number)
        if not text:
            continue
        mark = ' class="here"' if number == lineno else ""
        lines.append(f"<span{mark}>{number:5d}  {_e(text.rstrip())}</span>")
    return f'<pre class="source">{chr(10).join(lines)}</pre>' if lines else ""


def _recompile(entry: EntryRecord) -> str:
    reasons = "".join(f"<li>entry {len(entry.recompile_reasons) - 1 - i}: <code>{_e(reason)}</code></li>"
                      for i, reason in enumerate(entry.recompile_reasons))
    return (f'<div class="recompile"><b>{_e(entry.code.co_qualname)}</b> compiled entry {entry.number}: '
            f"the call failed the guards of every existing entry<ul>{reasons}</ul></div>")


def _times(times: dict[str, float]) -> str:
    total = sum(times.values())
    if not total:
        return '<p class="muted">no compile time recorded</p>'
    bar = "".join(f'<span class="phase-{phase}" style="width:{100 * times[phase] / total:.2f}%" '
                  f'title="{phase} {times[phase]:.3f} s"></span>' for phase in PHASES if times.get(phase))
    rows = "".join(f'<tr><td><span class="swatch phase-{phase}"></span>{phase}</td><td>{_seconds(times.get(phase, 0.0))}'
                   f"</td><td class=\"muted\">{_e(text)}</td></tr>" for phase, text in PHASES.items())
    return f'<div class="bar">{bar}</div><table class="times">{rows}</table>'


def _seconds(value: float) -> str:
    return f"{value:.3f} s"
