"""Calls of functions marked `nonstrict_trace`, `allow_in_graph` and `leaf_function`.

Each marked function is defined at module level (outside the region, as the markers
require) with a body drawn over its tensor parameter: a `nonstrict_trace` body may hold
a `graph_break()` (the strict tracer never looks inside) and reads a config dict whose
int changes between calls; a `leaf_function` body branches on data and may print or
update a buffer it declares in `mutates_args` (it runs at run time, once per call).
Its outputs depend on its input differentiably: an output that does not require grad
where the input does is a known difference (tests/programs/found/mismatch_2f6ef56de3.py).
"""
from __future__ import annotations

from .builder import Builder, TensorVar
from .expressions import expression, operand, some_shape


def _marked_body(b: Builder, shape, dtype: str, grad: bool, depth: int = 2):
    """The body expression of a marked function over its parameter `t` (and nothing else)."""
    with b.function([TensorVar("t", shape, dtype, grad)]):
        out_shape = some_shape(b)
        result = expression(b, out_shape, b.integer(1, depth))
    return out_shape, result


def nonstrict_call(b: Builder) -> None:
    shape = some_shape(b)
    argument = expression(b, shape, b.integer(0, 2))
    out_shape, result = _marked_body(b, shape, argument.dtype, argument.grad)
    name = b.fresh("traced")
    lines = ["@gw.nonstrict_trace", f"def {name}(t, config):"]
    if b.chance(30):
        lines.append("    gw.graph_break()  # never seen by the strict tracer")
        b.feature("nonstrict_with_break")
    returns_pair = b.chance(30)
    value = f"{operand(result.code)} * config[\"scale\"] + config[\"shift\"]"
    lines.append(f"    return ({value}, t.shape[0] if t.dim() else 1)" if returns_pair else f"    return {value}")
    b.define(name, "\n".join(lines))
    scale = b.choice(["2", "n" if "n" in b.ints else "3", "0.5"])
    call = f'{name}({argument.code}, {{"scale": {scale}, "shift": {b.number()}}})'
    if returns_pair:
        made, count = b.fresh("v"), b.fresh("m")
        b.emit(f"{made}, {count} = {call}")
        b.assign(f"{made} * {count}", out_shape, result.dtype, True)
    else:
        b.assign(call, out_shape, result.dtype, True)
    b.feature("nonstrict_trace")


def allow_in_graph_call(b: Builder) -> None:
    shape = some_shape(b)
    argument = expression(b, shape, b.integer(0, 2))
    out_shape, result = _marked_body(b, shape, argument.dtype, argument.grad)
    name = b.fresh("fused")
    b.define(name, f"@gw.allow_in_graph\ndef {name}(t, k):\n    return {operand(result.code)} * k")
    b.assign(f"{name}({argument.code}, {b.number()})", out_shape, result.dtype, True)
    b.feature("allow_in_graph")


LEAF = '''@gw.leaf_function{marking}
def {name}({params}):
{body}
@{name}.register_fake
def _({params}):
    return (torch.empty_like(t),)'''


def leaf_call(b: Builder) -> None:
    shape = some_shape(b)
    argument = expression(b, shape, b.integer(0, 2))
    with b.function([TensorVar("t", shape, argument.dtype, argument.grad)]):
        first = expression(b, shape, b.integer(1, 2))
        second = expression(b, shape, b.integer(0, 2))
    name = b.fresh("leaf")
    body = ["    if t.sum() > 0:  # needs data: runs at run time only",
            f"        return ({operand(first.code)}.to(t.dtype) + 0.5 * t,)",
            f"    return ({operand(second.code)}.to(t.dtype) - t,)"]
    if b.chance(30):
        body.insert(0, '    print("leaf", t.shape, t.dtype)')
        b.feature("leaf_print")
    buffers = [t for t in b.tensors if t.mutable and not t.grad and b.is_input(t)]
    marking, params, call = "", "t", f"{name}({argument.code})"
    if buffers and b.chance(50):
        buffer = b.choice(buffers)
        marking, params = '(mutates_args={"buf"})', "buf, t"
        body.insert(0, "    buf.add_(t.detach().sum())")
        call = f"{name}({buffer.name}, {argument.code})"
        buffer.mutable = False
        b.feature("leaf_mutates_args")
    b.define(name, LEAF.format(marking=marking, name=name, params=params, body="\n".join(body)))
    b.assign(b.choice(["{c}[0]", "{c}[0] * 1.0"]).format(c=call), shape, argument.dtype, True)
    b.feature("leaf_function")
