"""Graph nodes that compute symbolic sizes.

In symbolic mode a size is a `torch.SymInt` whose sympy expression is built
from the symbols `ShapeEnv` gave the input dimensions. This module owns the
other direction: when a SymInt reaches the graph (an operator argument, an
output), it rebuilds the expression from `aten.sym_size.int(input, dim)`
nodes and Python arithmetic on them, one node per distinct sub-expression.
A SymInt whose expression became a number is just that number.

It never hooks SymNode methods; it only reads `symint.node.expr`.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import sympy
import torch
import torch.fx
from torch.utils._sympy import functions as symfn

from .._core.errors import DataDependentError, TraceError
from .._core.user_stack import user_frames_of_stack

_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
_aten = torch.ops.aten

# sympy function -> the Python operation a graph node applies to its operands.
_FUNCTION_OPS: dict[type, Callable[..., Any]] = {
    symfn.FloorDiv: operator.floordiv,
    symfn.CleanDiv: operator.floordiv,
    symfn.PythonMod: operator.mod,
    symfn.Mod: operator.mod,
    symfn.Max: torch.sym_max,
    symfn.Min: torch.sym_min,
    symfn.PowByNatural: operator.pow,
    symfn.FloatPow: operator.pow,
    symfn.IntTrueDiv: operator.truediv,
    symfn.FloatTrueDiv: operator.truediv,
    symfn.ToFloat: torch.sym_float,
    symfn.TruncToInt: torch.sym_int,
    symfn.FloorToInt: math.floor,
    symfn.CeilToInt: math.ceil,
    sympy.Eq: operator.eq,
    sympy.Ne: operator.ne,
    sympy.StrictLessThan: operator.lt,
    sympy.LessThan: operator.le,
    sympy.StrictGreaterThan: operator.gt,
    sympy.GreaterThan: operator.ge,
    sympy.And: operator.and_,
    sympy.Or: operator.or_,
    sympy.Not: torch.sym_not,
}


def is_symbolic(value: object) -> bool:
    return isinstance(value, _SYM_TYPES)


class SymbolicSizeNodes:
    """Maps sympy expressions over input-size symbols to graph nodes.

    >>> sizes = SymbolicSizeNodes(graph)
    >>> sizes.bind_tensor(placeholder_node, fake_x)   # s0 -> sym_size(x, 0)
    >>> sizes.node_for(fake_x.size(0) * 2)            # mul = sym_size_int * 2
    """

    def __init__(self, graph: torch.fx.Graph) -> None:
        self._graph = graph
        # symbol (or expression, see `bind_symbol`) -> (target, args, value) of the node that
        # reads it from an input; target None means the input node itself is the value.
        self._symbol_origins: dict[sympy.Basic, tuple[Any, tuple, Any]] = {}
        self._expr_nodes: dict[sympy.Basic, torch.fx.Node] = {}

    def bind_tensor(self, node: torch.fx.Node, tensor: torch.Tensor) -> None:
        """Record which sizes, strides and storage offset of an input tensor name
        which symbols (the first binding of a symbol wins)."""
        for dim, size in enumerate(tensor.shape):
            self._bind(size, _aten.sym_size.int, (node, dim))
        for dim, stride in enumerate(tensor.stride()):
            self._bind(stride, _aten.sym_stride.int, (node, dim))
        self._bind(tensor.storage_offset(), _aten.sym_storage_offset.default, (node,))

    def bind_symbol(self, node: torch.fx.Node, value: Any) -> None:
        """A node whose value is symbolic (a SymInt input, an `.item()` result): a symbol, or an
        expression of a symbol that has no value of its own (`t.item()` of a bool tensor is
        `Eq(u0, 1)`), which only this node computes."""
        self._bind(value, None, (node,), expressions=True)

    def _bind(self, value: Any, target: Any, args: tuple, expressions: bool = False) -> None:
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            expr = value.node.expr
            if (isinstance(expr, sympy.Symbol) or expressions and not expr.is_number) \
                    and expr not in self._symbol_origins:
                self._symbol_origins[expr] = (target, args, value)

    def node_for(self, value: Any) -> Any:
        """A node computing `value` (a SymInt/SymFloat/SymBool), or a Python number."""
        expr = value.node.expr
        if expr.is_number:
            return _python_number(value, expr)
        return self._emit(expr)

    def _emit(self, expr: sympy.Basic) -> torch.fx.Node:
        node = self._expr_nodes.get(expr)
        if node is None:
            node = self._build(expr)
            self._expr_nodes[expr] = node
        return node

    def _operand(self, expr: sympy.Basic) -> Any:
        if expr is sympy.true or expr is sympy.false:
            return bool(expr)
        if expr.is_number:
            return int(expr) if expr.is_integer else float(expr)
        return self._emit(expr)

    def _build(self, expr: sympy.Basic) -> torch.fx.Node:
        if isinstance(expr, sympy.Symbol) or expr in self._symbol_origins:
            return self._symbol_node(expr)
        if isinstance(expr, sympy.Add):
            return self._build_sum(expr)
        if isinstance(expr, sympy.Mul):
            return self._build_product(expr)
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
            return self._apply(operator.pow, [self._operand(expr.base), int(expr.exp)])
        if isinstance(expr, symfn.Identity):
            return self._emit(expr.args[0])
        if isinstance(expr, sympy.Piecewise):
            return self._build_piecewise(expr.args)
        op = _FUNCTION_OPS.get(type(expr))
        if op is None:
            raise TraceError(
                f"Cannot express the symbolic size `{expr}` in the graph",
                explanation=f"The size expression uses `{type(expr).__name__}`, which the "
                "non-strict tracer does not turn into graph operations.",
                hints=['Trace with tracing_mode="fake" to specialise the sizes.'],
                user_stack=user_frames_of_stack(),
            )
        operands = [self._operand(arg) for arg in expr.args]
        if isinstance(expr, (sympy.And, sympy.Or)):  # n-ary in sympy, binary in Python
            result = operands[0]
            for operand in operands[1:]:
                result = self._apply(op, [result, operand])
            return result
        return self._apply(op, operands)

    def _symbol_node(self, symbol: sympy.Symbol) -> torch.fx.Node:
        origin = self._symbol_origins.get(symbol)
        if origin is None:
            raise DataDependentError(
                f"The size `{symbol}` depends on tensor data",
                explanation="A size or number in the program comes from the values of a "
                "tensor (for example `.item()` or the output of `nonzero`), which fake "
                "tensors do not have.",
                hints=[
                    'Trace with tracing_mode="real", or move the data-dependent decision '
                    "out of the traced function.",
                ],
                user_stack=user_frames_of_stack(),
            )
        target, args, value = origin
        if target is None:
            return args[0]
        node = self._graph.call_function(target, args)
        node.meta["val"] = value
        return node

    def _build_sum(self, expr: sympy.Add) -> torch.fx.Node:
        terms = sorted(expr.args, key=lambda term: term.is_number)  # constant last
        total = self._operand(terms[0])
        for term in terms[1:]:
            if term.could_extract_minus_sign():
                total = self._apply(operator.sub, [total, self._operand(-term)])
            else:
                total = self._apply(operator.add, [total, self._operand(term)])
        return total

    def _build_product(self, expr: sympy.Mul) -> torch.fx.Node:
        coefficient, rest = expr.as_coeff_Mul()
        if coefficient == -1:
            return self._apply(operator.neg, [self._operand(rest)])
        factors = sorted(expr.args, key=lambda factor: factor.is_number)  # constant last
        product = self._operand(factors[0])
        for factor in factors[1:]:
            product = self._apply(operator.mul, [product, self._operand(factor)])
        return product

    def _build_piecewise(self, pieces: tuple) -> Any:
        """`Piecewise((e1, c1), (e2, c2), ..., (en, True))` (a size that depends on a value's
        sign, e.g. `narrow` at a data-dependent start) as nested `torch.sym_ite` nodes."""
        (value, condition), rest = pieces[0], pieces[1:]
        if condition is sympy.true or not rest:
            return self._operand(value)
        operands = [self._operand(condition), self._operand(value), self._build_piecewise(rest)]
        values = [o.meta["val"] if isinstance(o, torch.fx.Node) else o for o in operands]
        node = self._graph.call_function(torch.sym_ite, tuple(operands))
        node.meta["val"] = _if_then_else(*values)
        return node

    def _apply(self, op: Callable[..., Any], operands: list[Any]) -> torch.fx.Node:
        values = [o.meta["val"] if isinstance(o, torch.fx.Node) else o for o in operands]
        node = self._graph.call_function(op, tuple(operands))
        node.meta["val"] = op(*values)
        return node


def _if_then_else(condition: Any, then: Any, otherwise: Any) -> Any:
    """`torch.sym_ite` on a traced value, whose branches may be a SymInt and a plain int (the
    graph runs it on two ints)."""
    if not isinstance(condition, torch.SymBool):
        return then if condition else otherwise
    if type(then) is not type(otherwise):
        node = (then if is_symbolic(then) else otherwise).node
        then, otherwise = (v if is_symbolic(v) else torch.SymInt(node.wrap_int(v)) for v in (then, otherwise))
    return torch.sym_ite(condition, then, otherwise)


def _python_number(value: Any, expr: sympy.Basic) -> Any:
    if isinstance(value, torch.SymBool):
        return bool(expr)
    if isinstance(value, torch.SymInt):
        return int(expr)
    return float(expr)
