"""A captured graph drawn as SVG: a layered layout, top to bottom, nodes coloured by kind.

Kinds: `input` (placeholders, and attributes the graph reads), `op` (a torch
operation or method), `nonstrict` (a `nonstrict_trace` call: one opaque node),
`leaf` (a `leaf_function` call), `output`.

Layout, in three steps:
1. layers: an operation sits one layer below the deepest operation it uses;
   an input sits just above its first user (not all in one top row, which
   would be as wide as the model has parameters); the output at the bottom;
2. order within a layer: a few sweeps down and up, sorting each layer by the
   mean position of its neighbours in the layer before (the barycenter
   heuristic), which removes most crossings of a chain-like graph;
3. coordinates: boxes as wide as their label, each layer centred.
Edges are cubic curves from the bottom of a node to the top of its user.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import torch

from .._core.flat_call import FlatCall
from .._core.source_lines import innermost_line
from .._core.leaf_op import LeafCall
from ..backends.ddp_buckets import BUCKETS_KEY

KINDS = {
    "input": "graph input (argument, parameter, buffer)",
    "op": "torch operation",
    "nonstrict": "nonstrict_trace call",
    "leaf": "leaf_function call",
    "output": "graph output",
}

_BOX_HEIGHT = 24
_LAYER_GAP = 44
_NODE_GAP = 14
_CHAR_WIDTH = 6.6
_LABEL_LIMIT = 30
_SWEEPS = 4


def node_kind(node: torch.fx.Node) -> str:
    if node.op in ("placeholder", "get_attr"):
        return "input"
    if node.op == "output":
        return "output"
    if isinstance(node.target, FlatCall):
        return "nonstrict"
    if isinstance(node.target, LeafCall):
        return "leaf"
    return "op"


def node_label(node: torch.fx.Node) -> str:
    if node.op in ("placeholder", "get_attr", "output"):
        text = node.name if node.op != "output" else "output"
    elif node.op == "call_method":
        text = f".{node.target}"
    elif node.op == "call_module":
        text = str(node.target)
    elif isinstance(node.target, FlatCall):
        text = f"nonstrict {getattr(node.target.fn, '__name__', 'call')}"
    elif isinstance(node.target, LeafCall):
        text = f"leaf {node.target.name}"
    else:
        text = getattr(node.target, "__name__", str(node.target))
    return text if len(text) <= _LABEL_LIMIT else text[:_LABEL_LIMIT - 1] + "…"


def _describe(node: torch.fx.Node, bucket: int | None) -> str:
    """The node's tooltip: its fx line, the value's type and shape, the user's line it came from,
    its DDP bucket."""
    value = node.meta.get("example_value", node.meta.get("val"))
    lines = [node.format_node() or node.name]
    if isinstance(value, torch.Tensor):
        lines.append(f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}")
    where = innermost_line(node)
    if where:
        lines.append(where)
    if bucket is not None:
        lines.append(f"DDP bucket piece {bucket}")
    return "\n".join(lines)


def bucket_pieces(gm: torch.fx.GraphModule) -> dict[str, int]:
    """For a graph compiled in DDP bucket pieces, each node's piece (by node name); else empty."""
    pieces = getattr(gm, "meta", {}).get(BUCKETS_KEY, [])
    return {name: index for index, names in enumerate(pieces) for name in names}


@dataclass
class Placed:
    node: torch.fx.Node
    kind: str
    label: str
    layer: int
    x: float = 0.0  # left edge
    width: float = 0.0


def _layers(nodes: list[torch.fx.Node]) -> dict[torch.fx.Node, int]:
    depth: dict[torch.fx.Node, int] = {}
    for node in nodes:
        if node_kind(node) not in ("input", "output"):
            depth[node] = 1 + max((depth[used] for used in node.all_input_nodes if used in depth), default=0)
    bottom = max(depth.values(), default=0) + 1
    for node in nodes:
        if node.op == "output":
            depth[node] = bottom
        elif node_kind(node) == "input":
            depth[node] = max(min((depth[user] for user in node.users if user.op != "output"), default=bottom) - 1, 0)
    used = {layer: index for index, layer in enumerate(sorted(set(depth.values())))}  # no empty rows
    return {node: used[layer] for node, layer in depth.items()}


def layout(gm: torch.fx.GraphModule) -> tuple[list[list[Placed]], float]:
    """The graph's nodes by layer, ordered and placed; the drawing's width."""
    nodes = list(gm.graph.nodes)
    depth = _layers(nodes)
    rows: list[list[Placed]] = [[] for _ in range(max(depth.values(), default=0) + 1)]
    placed: dict[torch.fx.Node, Placed] = {}
    for node in nodes:
        label = node_label(node)
        item = Placed(node, node_kind(node), label, depth[node], width=max(48.0, len(label) * _CHAR_WIDTH + 16))
        placed[node] = item
        rows[depth[node]].append(item)
    position = {item.node: index for row in rows for index, item in enumerate(row)}
    for sweep in range(_SWEEPS):
        downward = sweep % 2 == 0
        for row in (rows[1:] if downward else reversed(rows[:-1])):
            def centre(item: Placed) -> float:
                near = item.node.all_input_nodes if downward else list(item.node.users)
                near = [position[other] for other in near
                        if placed[other].layer == item.layer + (-1 if downward else 1)]
                return sum(near) / len(near) if near else position[item.node]
            row.sort(key=centre)
            for index, item in enumerate(row):
                position[item.node] = index
    width = max((sum(item.width for item in row) + _NODE_GAP * (len(row) - 1) for row in rows), default=0.0)
    for row in rows:
        x = (width - sum(item.width for item in row) - _NODE_GAP * (len(row) - 1)) / 2
        for item in row:
            item.x = x
            x += item.width + _NODE_GAP
    return rows, width


def graph_svg(gm: torch.fx.GraphModule, graph_id: str) -> str:
    """The graph as one `<svg class="graph">`, each node a `<g class="node kind-...">`."""
    rows, width = layout(gm)
    margin = 8
    height = len(rows) * (_BOX_HEIGHT + _LAYER_GAP) - _LAYER_GAP + 2 * margin
    width += 2 * margin
    placed = {item.node: item for row in rows for item in row}
    top = {item.node: margin + item.layer * (_BOX_HEIGHT + _LAYER_GAP) for item in placed.values()}
    edges, boxes = [], []
    pieces = bucket_pieces(gm)
    for item in placed.values():
        for used in item.node.all_input_nodes:
            source = placed[used]
            x1, y1 = margin + source.x + source.width / 2, top[used] + _BOX_HEIGHT
            x2, y2 = margin + item.x + item.width / 2, top[item.node]
            bend = (y2 - y1) / 2
            edges.append(f'<path class="edge" data-from="{_attr(used.name)}" data-to="{_attr(item.node.name)}" '
                         f'd="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} '
                         f'{x2:.1f},{y2:.1f}"/>')
        x, y = margin + item.x, top[item.node]
        piece = pieces.get(item.node.name)
        bucket = "" if piece is None else f' data-bucket="{piece}"'
        boxes.append(
            f'<g class="node kind-{item.kind}" data-name="{_attr(item.node.name)}"{bucket} tabindex="0">'
            f'<title>{html.escape(_describe(item.node, piece))}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{item.width:.1f}" height="{_BOX_HEIGHT}" rx="5"/>'
            f'<text x="{x + item.width / 2:.1f}" y="{y + _BOX_HEIGHT / 2 + 4:.1f}">{html.escape(item.label)}</text>'
            '</g>')
    return (f'<svg class="graph" id="{_attr(graph_id)}" data-nodes="{len(placed)}" xmlns="http://www.w3.org/2000/svg" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">'
            f'<g class="edges">{"".join(edges)}</g><g class="nodes">{"".join(boxes)}</g></svg>')


def _attr(text: str) -> str:
    return html.escape(text, quote=True)
