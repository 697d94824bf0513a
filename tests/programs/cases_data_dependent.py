"""Corpus programs whose values or shapes depend on tensor data: `.item()` and `.tolist()`
(unbacked symbols), operators with data-dependent output shapes (`nonzero`, boolean masks,
`masked_select`, `unique`), and `torch._check` facts. Under `fullgraph=True` they are one
graph; under `fullgraph=False` they break unless `config.capture_scalar_outputs` /
`config.capture_dynamic_output_shape_ops` is set (PyTorch's names and defaults), and the
graphs before and after are still captured.
"""
from __future__ import annotations

import contextlib

import torch

import graphwright

from .harness import REFERENCE, program_decorator, rand

PROGRAMS = []


program = program_decorator(PROGRAMS)


@contextlib.contextmanager
def _capturing(scalars: bool = True, shapes: bool = True):
    """The compiler's configuration for data-dependent values, during one call."""
    if REFERENCE:
        import torch._dynamo

        config = torch._dynamo.config
    else:
        config = graphwright.config
    saved = (config.capture_scalar_outputs, config.capture_dynamic_output_shape_ops)
    config.capture_scalar_outputs, config.capture_dynamic_output_shape_ops = scalars, shapes
    try:
        yield
    finally:
        config.capture_scalar_outputs, config.capture_dynamic_output_shape_ops = saved


def _captured(world, compiled, args):
    with _capturing():
        return compiled(*args.args, **args.kwargs)


def _positives():
    return torch.tensor([1.5, -2.0, 3.0, 0.5, -1.0, 2.0])


# -- fullgraph: one graph ---------------------------------------------------------------


@program("item_is_a_graph_value_under_fullgraph", lambda: rand(5), repeats=3, grad=True)
def _(x):
    scale = x.abs().max().item()
    return x / scale + scale


@program("item_used_as_a_size_with_a_check", _positives, repeats=2)
def _(x):
    count = (x > 0).sum().item()
    torch._check(count >= 1)
    return torch.ones(count) * x.max(), x * count


@program("check_is_size_then_a_branch_the_facts_decide", _positives)
def _(x):
    count = (x > 0).sum().item()
    torch._check_is_size(count)
    torch._check(count > 0)
    if count > 0:
        return torch.arange(count).float()
    return x


@program("tolist_values_feed_python_arithmetic", lambda: torch.tensor([2.0, 3.0, 4.0]),
         reference={"xfail": "Tensor.tolist() with non-integer tensor is unsupported",
                    "why": "graphwright captures each element as an unbacked float"})
def _(x):
    a, b, c = x.tolist()
    return x * (a + b * c)


@program("boolean_mask_with_gradients", lambda: (rand(6, requires_grad=True), rand(6) > 0), grad=True)
def _(values, mask):
    picked = values[mask]
    return picked.sin().sum() + values.mean()


@program("nonzero_masked_select_and_unique", lambda: (rand(8).round(), rand(8) > 0))
def _(values, mask):
    where = torch.nonzero(mask).squeeze(1)
    return where * 2, values.masked_select(mask) + 1, torch.unique(values)


@program("nonzero_size_used_downstream", _positives)
def _(x):
    idx = (x > 0).nonzero().squeeze(1)
    return torch.zeros(idx.shape[0], 2) + idx.unsqueeze(1).float()


@program("item_of_a_one_element_vector_is_a_number_checked_as_a_size", lambda: torch.tensor([3]),
         changed=lambda: torch.tensor([5]), frames_changed=1)
def _(x):
    n = x.item()
    torch._check(n >= 0)
    return torch.arange(0, n), torch.empty((n - 1) // 2).shape[0]


@program("tolist_of_a_dynamic_vector_with_symbolic_logic_checked", lambda: torch.tensor([5, 6]),
         changed=lambda: torch.tensor([8, 7]), frames_changed=1, options={"dynamic": True})
def _(xs):
    from torch.fx.experimental.symbolic_shapes import sym_and

    u0, u1 = xs.tolist()
    torch._check(sym_and(u0 >= 3, u0 <= 10, u1 >= 2))
    return torch.ones(u0) * u1, u0 + u1


@program("check_pinning_an_item_to_a_number", lambda: torch.tensor([3]), options={"dynamic": True})
def _(x):
    n = x.item()
    torch._check(n == 3)
    return torch.ones(n) * 2


def _rows_and_total():
    return rand(4, 2), rand(6, 2), torch.tensor(3)


@program("check_equating_an_item_with_a_sum_of_sizes", _rows_and_total,
         changed=lambda: (rand(5, 2), rand(2, 2), torch.tensor(0)), frames_changed=1, options={"dynamic": True})
def _(x, y, z):
    total = (z + 7).item()
    torch._check(x.shape[0] < 100)
    torch._check(total == x.shape[0] + y.shape[0])
    return torch.cat([x, y]) * total


@program("len_of_a_nonzero_result_is_its_data_dependent_size", _positives)
def _(x):
    found = (x > 0).nonzero()
    return torch.zeros(len(found)) + found.sum()


# -- fullgraph=False: breaks by default, captured when configured ------------------------


@program("item_breaks_by_default_without_fullgraph", lambda: rand(5), fullgraph=False, frames=[2, 3])
def _(x):
    y = x.exp()
    scale = y.sum().item()
    return y / scale


@program("item_captured_when_configured", lambda: rand(5), fullgraph=False, frames=1, call=_captured,
         repeats=3)
def _(x):
    y = x.exp()
    scale = y.sum().item()
    return y / scale


@program("mask_breaks_by_default_without_fullgraph", lambda: (rand(6), rand(6) > 0), fullgraph=False,
         frames=2)
def _(values, mask):
    doubled = values * 2
    return doubled[mask].sum() + 1


@program("mask_captured_when_configured", lambda: (rand(6), rand(6) > 0), fullgraph=False, frames=1,
         call=_captured)
def _(values, mask):
    doubled = values * 2
    return doubled[mask].sum() + 1


@program("min_and_max_of_scalar_tensors_and_numbers", lambda: (rand(3), rand(3)))
def _(a, b):
    c = a + b
    a, b = a.sum(), b.sum()
    a = min(max(a, 0), 1)
    b = max(0, min(1, b))
    return max(a, b) - min(a, b) + c


@program("bool_of_a_scalar_tensor_is_captured_under_fullgraph", lambda: torch.tensor(3.5),
         changed=lambda: torch.tensor(0.0), frames_changed=1)
def _(x):
    flag = bool(x)
    return bool((x == 0).all()), flag, bool(x.item() > 1)


@program("new_tensor_of_data_dependent_counts", lambda: torch.tensor([1, 0, 0, 5]),
         changed=lambda: torch.tensor([1, 2, 0, 5]), frames_changed=1)
def _(a):
    n = a.nonzero().squeeze(-1).numel()
    return a.new_tensor([n, n + 1, n * 2]), a.new_tensor([[n, a.shape[0]], [2, n - 1]])


@program("narrow_at_a_start_read_from_a_tensor", lambda: (rand(3, 5), torch.tensor(-2)),
         changed=lambda: (rand(3, 5), torch.tensor(1)), frames_changed=1,
         reference={"frames_changed": 2, "why": "TorchDynamo compiles a second graph for a "
                                                "start of the other sign; graphwright's graph "
                                                "computes the size for either"})
def _(x, start):
    # the result's size depends on the start's sign: a size the graph computes
    return torch.narrow(x, 1, start, 2).exp()
