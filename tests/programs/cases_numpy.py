"""Corpus programs about NumPy code in a compiled region: arrays are traced as tensors of the
graph, with NumPy's meaning (its dtypes and promotion, float64 by default, true division of
integers giving floats, scalars where NumPy returns scalars), and the caller gets NumPy arrays
back where the eager function returns them.

Pure NumPy functions, NumPy mixed with tensors (`Tensor.numpy()`, `torch.from_numpy`, a tensor
operator with an array), ndarray arguments (guarded on dtype and shape, dynamic like tensors,
written in place), arrays made in the region and returned, NumPy scalars, reductions,
indexing, `np.where`, `np.einsum`, `np.linalg`; and what cannot be traced (`np.random`, a
NumPy function with no tensor counterpart) breaking the graph with eager's result.
"""
from __future__ import annotations

import numpy as np
import torch

from .harness import Args, program_decorator, rand
from .markers import graph_break

PROGRAMS = []
program = program_decorator(PROGRAMS)

SCALARS_ARE_0D_ARRAYS = dict(
    xfail="2.13 returns a 0-d ndarray where NumPy returns a NumPy scalar (a wrong type)",
    why="PyTorch gives NumPy scalars another type than eager")
NO_DTYPE_ATTRIBUTE = dict(xfail="2.13 cannot trace `ndarray.dtype` (a graph break under fullgraph)",
                          why="PyTorch does not trace ndarray.dtype")


def array(*shape: int, dtype=np.float64) -> np.ndarray:
    """A fresh array of the given shape, from torch's seeded generator (the harness seeds it)."""
    return torch.randn(*shape, dtype=torch.float64).numpy().astype(dtype)


def integers(*shape: int) -> np.ndarray:
    return torch.randint(1, 20, shape).numpy()


# -- pure NumPy --------------------------------------------------------------------


@program("pure_numpy_function_is_one_graph_returning_an_ndarray", lambda: Args(array(5, 3), array(4, 3)),
         changed=lambda: Args(array(7, 3), array(4, 3)), frames_changed=2)
def _(a, b):
    diff = a[:, None, :] - b[None, :, :]
    return np.sqrt((diff ** 2).sum(axis=-1))


@program("numpy_code_without_inputs_makes_new_arrays_each_call", lambda: ())
def _():
    grid = np.arange(12).reshape(3, 4)
    return grid * 2, np.linspace(0.0, 1.0, 5), np.ones((2, 2), dtype=np.float32)


@program("numpy_function_of_constants_is_computed_while_tracing", lambda: rand(3))
def _(x):
    return x / np.sqrt(64) + np.prod((2, 3)), np.arange(3) * 2


@program("integer_division_of_arrays_gives_float64_as_in_numpy", lambda: integers(2, 3),
         reference=dict(xfail="2.13 divides integer arrays in float32, torch's default dtype (a wrong dtype)",
                        why="PyTorch's true division of integer arrays is float32"))
def _(a):
    return a / 2, a / a, a // 3, a % 4, -a, a ** 2


@program("numpy_promotion_rules_hold_for_arrays_and_python_numbers", lambda: array(4, dtype=np.float32))
def _(a):
    small = a.astype(np.int8)
    return a * 2.0, a * 2, a + a.astype(np.float64), small + 1, small * 1.5, a > 0


@program("numpy_scalar_keeps_its_dtype_in_promotion", lambda: array(4, dtype=np.float32))
def _(a):
    return a * np.float64(2), a + np.float32(1), a * np.int16(3), np.float64(1) + a


@program("reductions_with_axis_and_keepdims", lambda: array(3, 4))
def _(a):
    return a.mean(axis=0), np.max(a, axis=1, keepdims=True), np.cumsum(a, axis=1), a.argmin(axis=0)


@program("full_reductions_give_numpy_scalars", lambda: array(3, 4), reference=SCALARS_ARE_0D_ARRAYS)
def _(a):
    square = a[:, :3] @ a[:, :3].T + np.eye(3) * 4
    return a.sum(), np.std(a), np.argmax(a), (a > 0).any(), a[0, 1], np.linalg.det(square), \
        np.float32(3) * np.int8(2), a.max() * np.float32(2)


@program("reductions_of_integers_promote_as_numpy", lambda: integers(2, 5))
def _(a):
    return np.mean(a, axis=1), a.sum(axis=0), np.prod(a, axis=1)


# -- indexing, broadcasting, np.where, einsum, linalg --------------------------------


@program("basic_and_advanced_indexing", lambda: Args(array(4, 5), np.array([3, 0, 3])))
def _(a, rows):
    return a[1:, ::2], a[rows], a[:, [0, 2]], a[rows, rows + 1], a[None, ..., 1]


@program("boolean_mask_indexing_is_captured_under_fullgraph", lambda: array(6))
def _(a):
    return a[a > 0] * 2


@program("broadcasting_and_where", lambda: Args(array(3, 1), array(4)))
def _(col, row):
    grid = col + row
    return np.where(grid > 0, grid, 0.0), np.where(row < 0, -1, 1)


@program("einsum_matmul_and_linalg", lambda: Args(array(3, 3), array(3, 3)))
def _(a, b):
    m = np.einsum("ij,kj->ik", a, b) + np.eye(3) * 5
    return m @ a, np.linalg.norm(m, axis=1), np.linalg.inv(m), np.linalg.solve(m, b)


@program("iteration_over_an_array_gives_its_rows", lambda: array(3, 2))
def _(a):
    return [row * 2 for row in a]


# -- attributes, dtypes, NumPy scalars ----------------------------------------------


@program("array_attributes_are_answered_from_metadata", lambda: array(3, 4, dtype=np.float32),
         reference=NO_DTYPE_ATTRIBUTE)
def _(a):
    return a.shape, a.ndim, a.size, a.dtype, a.itemsize, a.strides, a.nbytes, a.T, len(a)


@program("astype_with_python_and_numpy_types", lambda: array(5))
def _(a):
    return (a * 5).astype(bool).astype(float).astype(int) + 8, a.astype(np.float32), a.astype("int32")


@program("dtype_queries_run_on_constants", lambda: array(3, dtype=np.float32), reference=NO_DTYPE_ATTRIBUTE)
def _(a):
    limit = np.finfo(a.dtype).max
    wide = np.issubdtype(a.dtype, np.floating) and np.dtype("float64").itemsize == 8
    return np.minimum(a, limit) * wide, np.iinfo(np.int16).max


def _call_with_each_scale(world, compiled, args):
    a = args.args[0]
    return [compiled(a, scale) for scale in args.args[1:]]


@program("changing_numpy_scalar_argument_becomes_a_graph_input_keeping_its_dtype",
         lambda: Args(array(3, dtype=np.float16), np.float32(0.5)), call=_call_with_each_scale,
         changed=lambda: Args(array(3, dtype=np.float16), np.float32(0.25), np.float32(4.0), np.float32(-1.0)),
         frames_changed=2,
         reference=dict(frames_changed=1, why="PyTorch takes every NumPy scalar argument as a 0-d tensor input "
                                               "from the first call; graphwright specialises it until it changes"))
def _(a, scale):
    return a * scale, a + scale


@program("array_of_another_dtype_recompiles", lambda: array(4),
         changed=lambda: integers(4), frames_changed=2)
def _(a):
    return a * 2 + 1


@program("arrays_and_numpy_scalars_stack_into_an_array", lambda: Args(array(3), array(3)),
         reference=dict(xfail="2.13 cannot build `np.array` of a list holding arrays it traces",
                        why="PyTorch reads the list's arrays as Python numbers"))
def _(a, b):
    return np.array([a, b]), np.array([a.max(), b.min(), 1.0]), np.stack([a, b], axis=1)


# -- mixing tensors and arrays -------------------------------------------------------


@program("tensor_to_numpy_and_back_is_one_graph", lambda: rand(4))
def _(x):
    a = x.numpy()
    b = np.tanh(a) * 2 + 1
    return torch.from_numpy(b) + x, b


@program("tensor_operator_with_an_array_follows_torch", lambda: Args(rand(3), array(3)))
def _(x, a):
    return x + a, x * np.float64(2), x * a.sum(), torch.as_tensor(a) * 2, torch.tensor(a, dtype=torch.float32)


@program("numpy_of_a_tensor_shares_its_memory", lambda: rand(3))
def _(x):
    y = x * 2
    a = y.numpy()
    a += 1
    return y


# -- in place -------------------------------------------------------------------------


@program("writes_to_an_array_made_in_the_region", lambda: array(3, 4))
def _(a):
    out = np.zeros_like(a)
    out[0] = 1.0
    out[:, 1] += a[:, 1]
    out[out > 0.5] = 0.5
    out *= 3
    return out


@program("writes_to_an_input_array_reach_the_caller", lambda: array(4, 2))
def _(a):
    a[0] = 5.0
    a[:, 1] *= 2
    a += 1
    return a.sum(axis=0)


# -- graph breaks ---------------------------------------------------------------------


@program("numpy_random_breaks_the_graph_and_the_rest_compiles", lambda: array(4), fullgraph=False, frames=2,
         reference=dict(xfail="2.13 draws np.random numbers from torch's generator (other numbers than NumPy's)",
                        why="PyTorch traces np.random with torch's random generator"))
def _(a):
    b = a * 2
    np.random.seed(0)
    noise = np.random.rand(4)
    return b + noise


@program("numpy_function_without_a_tensor_counterpart_breaks", lambda: array(4), fullgraph=False, frames=2)
def _(a):
    b = np.abs(a) * 2
    c = np.interp(b, [0.0, 10.0], [1.0, 2.0])
    return c - 1


@program("arrays_cross_a_graph_break_as_ndarrays", lambda: integers(6), fullgraph=False, frames=2)
def _(a):
    a = a ** 2
    graph_break()
    return 2 * a, a.shape


@program("item_breaks_the_graph_as_for_tensors", lambda: array(3), fullgraph=False, frames=2)
def _(a):
    outliers = (a > 100.0).sum().item()
    return a * 2 + outliers
