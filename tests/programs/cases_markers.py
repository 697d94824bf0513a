"""Programs calling marked functions: nonstrict_trace, leaf_function, allow_in_graph,
disallow_in_graph and disable (on functions, modules, and with recursive=False), and
`error_on_graph_break(False)` blocks and decorators where a region breaks on purpose.

Compiled with the compile counter (and a real backend with `GW_CORPUS_BACKEND`), each must
match eager: a leaf function's Python runs once per call (its calls are observed), a declared
mutation happens once, a disabled function's callees are still compiled where asked.
"""
from __future__ import annotations

import torch

from .harness import program_decorator, rand
from .markers import (
    allow_in_graph,
    disable,
    disallow_in_graph,
    error_on_graph_break,
    graph_break,
    leaf_function,
    nonstrict_trace,
)

PROGRAMS = []

program = program_decorator(PROGRAMS)


@nonstrict_trace
def _scaled_by_entry(x, d):
    graph_break()  # the strict tracer never looks inside
    return x * d["a"] + d["b"]


@program("nonstrict_call_with_an_int_in_a_dict_that_changes_between_calls",
         lambda: (rand(3), {"a": 2, "b": 1.5}), changed=lambda: (rand(3), {"a": 5, "b": 1.5}),
         frames_changed=2, grad=True)
def _(x, d):
    return _scaled_by_entry(x, d).sin()


@nonstrict_trace
def _with_size(x):
    return x + 1, x.size(0)


@program("nonstrict_call_returning_a_symbolic_size", lambda: rand(4), changed=lambda: rand(6),
         frames_changed=1, options={"dynamic": True})
def _(x):
    t, n = _with_size(x)
    return t * n


@nonstrict_trace
def _tripled(x):
    return x * 3


@program("nonstrict_call_under_no_grad_on_a_view_of_a_tensor_that_requires_grad",
         lambda: rand(4, 2, requires_grad=True), grad=True)
def _(x):
    doubled = x * 2
    with torch.no_grad():
        row = _tripled(doubled[0])
    return row, doubled.sin()


@leaf_function
def _scaled_by_sign(x):
    return (x * 2,) if x.sum() > 0 else (x * 3,)  # needs data: runs at run time only


@_scaled_by_sign.register_fake
def _(x):
    return (torch.empty_like(x),)


def _two_tensor_argument():
    from torch.testing._internal.two_tensor import TwoTensor

    return rand(2), TwoTensor(torch.tensor([1.0, 2.0]), torch.tensor([-5.0, 1.0]))


@program("leaf_call_on_a_tensor_subclass_runs_once_on_it", _two_tensor_argument, fullgraph=False,
         reference={"why": "torch.compile's leaf function operator refuses the subclass",
                    "xfail": "no rule for HOP invoke_leaf_function and subclass TwoTensor (NotImplementedError)"})
def _(x, pair):
    return _scaled_by_sign(pair)[0] + x


def _two_tensor_weight():
    from torch.testing._internal.two_tensor import TwoTensor

    return rand(2, requires_grad=True), TwoTensor(torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0]))


@program("leaf_call_backward_on_a_gradient_that_is_a_tensor_subclass", _two_tensor_weight, grad=True,
         fullgraph=False,  # AOT refuses the graph holding the subclass: it runs as captured
         reference={"why": "torch.compile's leaf function operator refuses the subclass",
                    "xfail": "no rule for HOP invoke_leaf_function and subclass TwoTensor (NotImplementedError)"})
def _(x, weight):
    return _scaled_by_sign(x.sin())[0] * weight


_LEAF_CALLS = []


@leaf_function
def _logged_stats(x):
    _LEAF_CALLS.append(round(float(x.sum()), 4))  # needs tensor data: only at run time
    print("mean", round(float(x.mean()), 4))
    return (x.mean(dim=1), x.pow(2))


@_logged_stats.register_fake
def _(x):
    return (x.new_empty(x.shape[0]), torch.empty_like(x))


@program("leaf_function_runs_once_per_call_forward_and_backward", lambda: rand(3, 4, requires_grad=True),
         grad=True, observe=lambda world: list(_LEAF_CALLS), reset=_LEAF_CALLS.clear)
def _(x):
    mean, square = _logged_stats(x.sin())
    return mean.sum() + square.mean()


@leaf_function(mutates_args={"state"})
def _accumulate(state, x):
    state["total"].add_(x.detach().sum())
    state["count"].add_(1)
    return (x * 2,)


@_accumulate.register_fake
def _(state, x):
    return (torch.empty_like(x),)


@program("leaf_function_with_a_declared_mutation_of_dict_entries",
         lambda: ({"total": torch.zeros(()), "count": torch.zeros((), dtype=torch.int64)}, rand(3)))
def _(state, x):
    (doubled,) = _accumulate(state, x)
    return doubled + state["total"]


@allow_in_graph
def _fused_offset(x, scale, pair):
    return x * scale + pair[0] - pair[1]


@program("allow_in_graph_call_is_one_node_between_operations", lambda: (rand(4), rand(4)), grad=True)
def _(x, y):
    return _fused_offset(x.cos(), 2.0, (y, y * 0.5)).relu()


disallow_in_graph(torch.special.log_ndtr)


@program("disallowed_torch_operator_splits_the_graph", lambda: rand(5), frames=2, fullgraph=False)
def _(x):
    y = x.sin() + 1
    z = torch.special.log_ndtr(y)
    return z.cos() * 2


def _compiled_helper(t):
    return t.tanh() * 3


@disable(recursive=False)
def _uncompiled_caller(t):
    return _compiled_helper(t.exp()) + 1  # the exp runs eagerly; the helper is compiled


@program("disabled_non_recursively_compiles_what_the_function_calls", lambda: rand(3), frames=3,
         fullgraph=False)
def _(x):
    return _uncompiled_caller(x.cos()).sin()


class _Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        return x * self.weight


_DISABLED_SCALE = disable(_Scale())


@program("disabled_module_call_runs_eagerly_between_two_graphs", lambda: rand(4, requires_grad=True),
         frames=2, fullgraph=False, grad=True)
def _(x):
    return _DISABLED_SCALE(x.sin()).cos()


# `error_on_graph_break(False)` inside a block that forbids breaks: the break in it splits the
# function (under fullgraph=False), and the rest is still forbidden to break


@error_on_graph_break(False)
def _reported(x):
    graph_break()
    return x.sum()


@program("break_allowed_in_a_block_inside_a_block_that_forbids_them", lambda: rand(3), fullgraph=False,
         frames=2)
def _(x):
    with error_on_graph_break(True):
        x = x + 1
        with error_on_graph_break(False):
            graph_break()
        x = x * 2
    return x


@program("break_allowed_in_a_decorated_helper_called_where_breaks_are_forbidden", lambda: rand(3),
         fullgraph=False, frames=3,
         reference={"frames": 4, "why": "TorchDynamo also compiles a resume frame of its decorator's own "
                                        "wrapper (torch._dynamo.external_utils), a graph with no operation"})
def _(x):
    with error_on_graph_break(True):
        y = _reported(x * 2)
    return x + y
