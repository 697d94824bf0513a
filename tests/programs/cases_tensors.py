"""Corpus programs for tensor work: torch functions, methods, operators,
metadata (shape, dtype, device, requires_grad, torch.Size), indexing,
in-place updates, grad modes and autocast, subclasses and inference tensors,
aliasing inputs, out= arguments, data-dependent shapes, torch.cond and vmap."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .harness import BACKEND, Args, module_program, program_decorator, rand

PROGRAMS = []


program = program_decorator(PROGRAMS)




@program("torch_functions", lambda: (rand(3, 4, requires_grad=True), rand(3, 4)), grad=True)
def _(x, y):
    z = torch.cat([x, y], dim=0)
    s = torch.stack([x, y]).sum(0)
    w = torch.where(x > y, x, y)
    return torch.clamp(z, -0.5, 0.5), torch.softmax(s, dim=-1), w, torch.tanh(x) * torch.exp(y)


@program("functional_ops", lambda: rand(2, 5, requires_grad=True), grad=True)
def _(x):
    return (F.relu(x), F.gelu(x), F.layer_norm(x, (5,)), F.dropout(x, p=0.5, training=False),
            F.log_softmax(x, dim=1), F.pad(x, (1, 1)), F.normalize(x, dim=-1))


@program("tensor_view_and_layout_methods", lambda: rand(2, 3, 4, requires_grad=True), grad=True)
def _(x):
    a = x.view(6, 4).t().contiguous()
    b = x.permute(2, 0, 1).reshape(4, -1)
    c = x.transpose(0, 1).flatten(1)
    d = x.unsqueeze(0).squeeze(0).expand(2, 3, 4)
    first, second = x.chunk(2, dim=2)
    parts = x.split([1, 2], dim=1)
    return a, b, c, d, first * second, parts[1]


@program("python_operators_on_tensors", lambda: (rand(3, 3), rand(3, 3)))
def _(a, b):
    return (a + b, a - 2, 3 * a, a / b, a // 1, a % 2, a ** 2, -a, abs(a), a @ b,
            a > b, a <= 0.5, (a > 0) & (b > 0), (a > 0) | (b > 0), ~(a > 0), a == a)


@program("reductions_and_namedtuple_results", lambda: rand(4, 5, requires_grad=True), grad=True)
def _(x):
    values, indices = x.max(dim=1)
    top = torch.topk(x, 2)
    return (x.sum(), x.mean(0, keepdim=True), x.std(1), values, indices, top.values,
            x.amax(-1), x.norm(), x.argmin(dim=0))


@program("shape_size_dim_ndim_numel", lambda: rand(4, 6),
         changed=lambda: rand(8, 6), frames_changed=2)
def _(x):
    batch = x.shape[0]
    width = x.size(1)
    y = x.reshape(batch * 2, width // 2)
    return y * x.dim() + x.ndim + x.numel(), batch, x.size()


@program("torch_size_arithmetic", lambda: rand(2, 3, 4))
def _(x):
    shape = x.shape
    assert isinstance(shape, torch.Size)
    new_shape = shape[:-1] + (2, 2)
    b, t, c = x.shape
    zeros = x.new_zeros(shape[:-1] + (1,))
    return (x.view(new_shape), torch.cat([x, zeros], -1), list(shape), b * t * c,
            shape[-1], len(shape), tuple(shape) == (2, 3, 4))


@program("branch_on_dtype", lambda: rand(3),
         changed=lambda: rand(3).double(), frames_changed=2)
def _(x):
    if x.dtype == torch.float32:
        return x.half().float() * 2, x.dtype
    return x + 1, x.dtype, x.dtype.is_floating_point


@program("isinstance_of_legacy_tensor_types_asks_dtype", lambda: rand(3),
         changed=lambda: rand(3).double(), frames_changed=2)
def _(x):
    made = torch.empty(2, dtype=torch.int64)
    return (x * 2, isinstance(x, torch.FloatTensor), isinstance(x, (torch.DoubleTensor, torch.HalfTensor)),
            isinstance(made, torch.LongTensor), isinstance(made, torch.FloatTensor), isinstance(x, torch.Tensor))


@program("tensor_built_from_a_list_of_zero_dim_tensors", lambda: (rand(3, requires_grad=True), rand(2)))
def _(x, y):
    table = torch.tensor([[x.sum(), y[0]], [2.0, x.max()]])
    counts = torch.tensor([x.argmax()], dtype=torch.int64)
    return table * 2 + y.sum(), counts, table.requires_grad


@program("device_metadata", lambda: rand(3))
def _(x):
    ones = torch.ones(3, device=x.device, dtype=x.dtype)
    assert x.device.type == "cpu"
    return x + ones, str(x.device), x.is_cuda


@program("branch_on_requires_grad", lambda: rand(3),
         changed=lambda: rand(3, requires_grad=True), frames_changed=2, grad=True)
def _(x):
    if x.requires_grad:
        return x * 2
    return x - 2


@program("transpose_property_and_matmul_family", lambda: (rand(3, 4), rand(2, 3, 4)))
def _(m, batch):
    return m.T @ m, m.mT, torch.bmm(batch, batch.transpose(1, 2)), torch.einsum("ij,bkj->bki", m, batch)


@program("in_place_update_of_an_input_tensor", lambda: rand(3))
def _(x):
    x.add_(1)
    x.mul_(2)
    x[0] = -1.0
    return x.sum()


@program("setitem_on_a_fresh_tensor", lambda: rand(3, 4))
def _(x):
    y = x.clone()
    y[0] = 0
    y[:, 1] += 1
    y[1:, -1] = x[1:, 0]
    y.view(-1)[2] = 5.0
    return y


@program("advanced_indexing_with_index_tensors", lambda: (rand(5, 3), torch.tensor([4, 0, 2])))
def _(x, idx):
    return x[idx], x.index_select(0, idx), torch.gather(x, 0, idx.view(3, 1).expand(3, 3)), x[idx, 1]


@program("factory_functions", lambda: rand(4))
def _(x):
    n = x.shape[0]
    return (torch.arange(n) * x, torch.zeros_like(x), torch.ones(n, 2), torch.full((2,), 7.0),
            torch.eye(n) @ x, torch.linspace(0, 1, n) + x, torch.tensor([1.0, 2.0]), torch.empty(0).shape)


@program("dtype_conversions", lambda: rand(4) * 10)
def _(x):
    return (x.long(), x.to(torch.float64), x.int().float(), x.bool(), x.type(torch.int8),
            (x > 0).to(x.dtype), x.to(dtype=torch.bfloat16))


@program("integer_tensor_ops", lambda: torch.arange(12).reshape(3, 4))
def _(x):
    return x // 3, x % 5, x & 6, x << 1, x.sum(dtype=torch.int32), x.float().mean()


@program("no_grad_block", lambda: rand(3, requires_grad=True), grad=True)
def _(x):
    with torch.no_grad():
        frozen = x * 2
    assert not frozen.requires_grad
    return x * frozen, frozen


@program("enable_grad_inside_no_grad", lambda: rand(3, requires_grad=True), grad=True)
def _(x):
    with torch.no_grad():
        a = x + 1
        with torch.enable_grad():
            b = x * 3
    return a, b, torch.is_grad_enabled()


def _call_under_no_grad(world, compiled, args):
    if args.kwargs.pop("no_grad"):
        with torch.no_grad():
            return compiled(*args.args)
    return compiled(*args.args)


@program("global_grad_mode_is_guarded", lambda: Args(rand(3, requires_grad=True), no_grad=True),
         changed=lambda: Args(rand(3, requires_grad=True), no_grad=False), frames_changed=2,
         call=_call_under_no_grad, grad=True)
def _(x):
    return x * x


@torch.no_grad()
def _frozen_update(x):
    return x * 10


@program("no_grad_as_decorator_on_helper", lambda: rand(3, requires_grad=True), grad=True)
def _(x):
    return x * 2 + _frozen_update(x)


@program("autocast_region", lambda: (rand(4, 4), rand(4, 4)))
def _(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = a @ b
    return low, low.dtype, (a @ b).dtype


@program("set_grad_enabled_false", lambda: rand(3, requires_grad=True), grad=True)
def _(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return x + y


GLOBAL_BIAS = torch.linspace(-1, 1, 4)


@program("global_tensor_read", lambda: rand(4))
def _(x):
    return x + GLOBAL_BIAS


@program("detach_clone_and_requires_grad_of_results", lambda: rand(3, requires_grad=True), grad=True)
def _(x):
    d = x.detach()
    c = x.clone()
    return d * 2, c * 3, d.requires_grad, c.requires_grad, c.is_leaf


@program("hand_written_attention", lambda: (rand(2, 5, 8, requires_grad=True),), grad=True)
def _(x):
    q, k, v = x, x * 0.5, x + 1
    scores = q @ k.transpose(-2, -1) / (x.shape[-1] ** 0.5)
    mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


@program("non_contiguous_input_is_guarded", lambda: rand(4, 4),
         changed=lambda: rand(4, 4).t(), frames_changed=2)
def _(x):
    return x.view(16) if x.is_contiguous() else x.reshape(16) * 2


@program("tensor_builtins_len_and_iteration", lambda: rand(3, 2))
def _(x):
    rows = [r.sum() for r in x]
    return len(x), torch.stack(rows), max(x.shape)


class TaggedTensor(torch.Tensor):
    """A plain tensor subclass, as libraries use to tag tensors."""


@program("tensor_subclass_input_keeps_its_type", lambda: rand(3).as_subclass(TaggedTensor),
         changed=lambda: rand(3), frames_changed=2)
def _(x):
    return x * 2 + 1


def _two_tensor_pair():
    from torch.testing._internal.two_tensor import TwoTensor

    return rand(3, requires_grad=True), TwoTensor(rand(3), rand(3))


@program("wrapper_subclass_input_changed_in_place", _two_tensor_pair, grad=True)
def _(x, pair):
    with torch.no_grad():
        pair.clamp_(-0.5, 0.5)
    return x * 2 + pair


def _inference_tensor():
    with torch.inference_mode():
        return rand(3)


@program("inference_mode_tensor_input_is_guarded", _inference_tensor,
         changed=lambda: rand(3), frames_changed=2)
def _(x):
    return x.sin() * 2


def _call_in_inference_mode(world, compiled, args):
    with torch.inference_mode(args.kwargs["inference"]):
        return compiled(*args.args)


@program("caller_in_inference_mode", lambda: Args(rand(3), inference=False),
         call=_call_in_inference_mode, changed=lambda: Args(rand(3), inference=True),
         frames_changed=2)
def _(x):
    return x.cos() + 1


@program("zero_dim_and_empty_tensors", lambda: (torch.tensor(2.5), rand(0, 3)),
         changed=lambda: (torch.tensor(-1.0), rand(2, 3)), frames_changed=2)
def _(scalar, batch):
    total = batch.sum(0) * scalar
    return total, scalar.dim(), batch.numel(), batch.shape[0] == 0, scalar * 2


@program("bool_and_int64_inputs", lambda: (torch.tensor([True, False, True]), torch.tensor([3, -1, 4])))
def _(mask, values):
    return values.masked_fill(~mask, 0), mask.sum(), values.float().mean(), mask.any()


@program("data_dependent_output_shapes", lambda: (rand(6), rand(6) > 0))
def _(values, mask):
    return values[mask] * 2, torch.nonzero(mask), values.masked_select(mask).sum()


def _call_with_view_of_first(world, compiled, args):
    base = args.args[0]
    other = base[0] if args.kwargs["view"] else base[0].clone()
    return compiled(base, other)


@program("input_that_is_a_view_of_another_input", lambda: Args(rand(2, 3), view=False),
         call=_call_with_view_of_first, changed=lambda: Args(rand(2, 3), view=True),
         frames_changed=1)
def _(base, row):
    base.mul_(2)
    return row + 1


@program("in_place_accumulation_picks_up_requires_grad", lambda: rand(3, requires_grad=True),
         grad=True)
def _(x):
    buffer = torch.zeros(3)
    buffer.add_(x * 2)
    return buffer, buffer.requires_grad


@program("out_argument_writes_into_an_input", lambda: (rand(3), rand(3), torch.empty(3)))
def _(a, b, out):
    torch.add(a, b, out=out)
    torch.mul(out, 2, out=out)
    return out.sum()


@program("out_argument_list_of_an_op_returning_none",
         lambda: (rand(5, 3), [torch.zeros(1, 3), torch.zeros(2, 3), torch.zeros(2, 3)]))
def _(x, out):
    # the `_copy` variants of split/unbind write an `out=` list and return None
    result = torch.split_with_sizes_copy(x, [1, 2, 2], 0, out=out)
    return result, out[2] * 2


@program("python_torch_function_given_a_module_and_a_lambda",
         lambda: (rand(4, 5, requires_grad=True), rand(4, 5), rand(4, 5)), grad=True)
def _(anchor, positive, negative):
    by_module = F.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                    distance_function=torch.nn.PairwiseDistance())
    by_lambda = F.triplet_margin_with_distance_loss(
        anchor, positive, negative, distance_function=lambda a, b: (a - b).norm(dim=-1), margin=0.5)
    return by_module + by_lambda


@program("torch_masked_reductions_define_a_class_per_call",
         lambda: (rand(3, 4, requires_grad=True), torch.tensor([[True, False, True, True]] * 3)), grad=True)
def _(x, mask):
    return torch.masked.softmax(x, 1, mask=mask).nan_to_num(), torch.masked.mean(x, 0, mask=mask)


class AutocastForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    @torch.autocast("cpu", dtype=torch.bfloat16)
    def forward(self, x):
        return self.lin(x), self.lin(x).dtype


PROGRAMS.append(module_program(
    "autocast_as_a_decorator_on_forward", AutocastForward, lambda: rand(2, 4, requires_grad=True),
    grad=True,
    xfail="torch.autocast used as a decorator: entering an autocast object made outside the "
          "region (GB019, whose hint suggests torch.autocast)"))


@torch.enable_grad()
def _grad_enabled_helper(x):
    return x * 3


def _call_under_no_grad_always(world, compiled, args):
    with torch.no_grad():
        return compiled(*args.args)


@program("enable_grad_decorator_inside_a_no_grad_caller", lambda: rand(3, requires_grad=True),
         call=_call_under_no_grad_always, grad=True)
def _(x):
    return _grad_enabled_helper(x) + 1, (x * 2).requires_grad


@program("torch_cond_for_a_data_dependent_branch", lambda: rand(3),
         changed=lambda: -rand(3).abs() - 1, frames_changed=1)
def _(x):
    return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 2, (x,))


@program("vmap_over_a_batch", lambda: (rand(4, 3), rand(3)))
def _(batch, weight):
    return torch.vmap(lambda row: (row * weight).sum())(batch)


@program("vision_ops_unfold_fold_pixel_shuffle_grid_sample", lambda: rand(1, 4, 6, 6))
def _(x):
    patches = F.unfold(x, kernel_size=2, stride=2)
    folded = F.fold(patches, output_size=(6, 6), kernel_size=2, stride=2)
    shuffled = F.pixel_shuffle(x, 2)
    theta = torch.tensor([[[1.0, 0.0, 0.1], [0.0, 1.0, -0.1]]])
    grid = F.affine_grid(theta, (1, 4, 6, 6), align_corners=False)
    return folded - x, shuffled, F.grid_sample(x, grid, align_corners=False)


@program("distributions_log_prob_and_entropy", lambda: (rand(4, requires_grad=True), rand(4)),
         grad=True,
         # PyTorch's torch.compile turns validation off for the whole process on its first
         # compile; this program runs with it on, as eager code does by default
         reset=lambda: torch.distributions.Distribution.set_default_validate_args(True),
         xfail="argument validation of torch.distributions (on by default) branches on "
               "`torch._is_all_true(valid)`, a tensor, to raise ValueError (GB002)",
         reference={"xfail": "with validation on, fullgraph stops at `constraints.is_dependent`, "
                             "a function TorchDynamo skips (torch.distributions is on its skip list)",
                    "why": "PyTorch cannot compile it either (it passes only when its own first "
                           "compile turned validation off)"})
def _(mu, value):
    normal = torch.distributions.Normal(mu, torch.ones_like(mu) * 0.5)
    return normal.log_prob(value).sum(), normal.entropy().sum(), normal.mean


@program("number_plus_equals_tensor_is_a_plain_addition", lambda: rand(3))
def _(x):
    # T5's relative position buckets start as the int 0 and grow by tensors with `+=`
    buckets = 0
    buckets += (x > 0).to(torch.long) * 4
    scale = 2.0
    scale *= x
    return buckets, scale


@program("addcdiv_and_addcmul_scaled_by_a_tensor", lambda: (rand(4, requires_grad=True), rand(4), rand(4) + 2),
         grad=True)
def _(param, exp_avg, denom):
    # Adam with tensor step counts: the step size is a 0-dim tensor, where the operator takes a number
    step_size = (1 - torch.tensor(0.9) ** torch.tensor(3.0)) * 0.01
    updated = param.clone()
    updated.addcdiv_(exp_avg, denom, value=-step_size)
    mixed = exp_avg.addcmul(param, denom, value=step_size)
    return updated, mixed, torch.addcdiv(param, exp_avg, denom, value=0.5)


@program("untyped_storage_of_a_view_is_its_base_storage", lambda: rand(4, 6),
         changed=lambda: rand(5, 6), frames_changed=2,
         reference={"xfail": "TorchDynamo models only `size()` and `resize_` of an UntypedStorage: "
                             "`is` between two storages breaks the graph (GB0059)",
                    "why": "PyTorch does not model storage identity or `nbytes()`"})
def _(x):
    # FSDP compares storage sizes in elements; a changed size makes the storage size symbolic
    storage = x[1:].untyped_storage()
    elements = storage.size() // x.element_size()
    return x[1:] * elements, storage is x.untyped_storage(), storage.nbytes()


@program("storage_resized_in_the_graph_is_the_tensors_own", lambda: rand(10),
         reference={"xfail": "`size()` after `resize_` answers the size before it (its example storage is "
                             "not resized)",
                    "why": "a TorchDynamo bug: the storage's size is read from a stale example value"})
def _(x):
    y = torch.sin(x + 1)
    storage = x.clone().untyped_storage()
    before = storage.size()
    storage.resize_(0)
    return torch.cos(y), before, storage.size()


def _returns_the_inputs_storage(world, compiled, args):
    y, storage = compiled(*args.args)
    return y, storage is args.args[0].untyped_storage(), storage.size()


@program("storage_grown_in_place_and_returned", lambda: rand(10), call=_returns_the_inputs_storage)
def _(x):
    storage = x.untyped_storage()
    storage.resize_(storage.size() * 2)
    return x + 1, storage


@program("parameter_made_in_the_region_without_grad_aliases_its_data", lambda: Args(rand(3), inference=True),
         call=_call_in_inference_mode, changed=lambda: Args(rand(3), inference=False), frames_changed=2)
def _(x):
    weight = torch.nn.Parameter(x, requires_grad=False)
    return x * weight, isinstance(weight, torch.nn.Parameter), weight.requires_grad


@program("parameter_made_in_the_region_leaves_it_once_with_its_attributes", lambda: rand(3),
         reference={"why": "TorchDynamo breaks the graph at nn.Parameter() of a tensor the region "
                           "computed (its graph_break_on_nn_param_ctor)",
                    "xfail": "graph break under fullgraph"})
def _(x):
    weight = torch.nn.Parameter(x * 2, requires_grad=False)
    weight.tag = "scaled"
    weight.add_(1)
    return weight, [weight], type(weight).__name__, weight.requires_grad


def _same_parameter_twice(world, compiled, args):
    first, second, *rest = compiled(*args.args)
    return first, first is second, type(first), getattr(first, "tag", None), rest


@program("parameter_made_in_the_region_is_one_object", lambda: rand(3), call=_same_parameter_twice,
         reference={"why": "TorchDynamo breaks the graph at nn.Parameter() of a tensor the region "
                           "computed (its graph_break_on_nn_param_ctor)",
                    "xfail": "graph break under fullgraph"})
def _(x):
    weight = torch.nn.Parameter(x.exp(), requires_grad=False)
    weight.tag = "exp"
    return weight, weight, x.sum()


@program("parameter_requiring_grad_made_in_the_region", lambda: rand(3, requires_grad=True),
         fullgraph=False, frames=2)
def _(x):
    y = x.sin()
    weight = torch.nn.Parameter(y.detach())
    return (y * weight).sum(), weight.requires_grad


@program("operator_without_a_derivative_on_inputs_that_require_grad",
         lambda: (rand(3, 5, requires_grad=True), torch.tensor([[0, 1, 2, 0, 1]]), rand(1, 5)),
         reference={"why": "PyTorch's ahead-of-time autograd traces the backward when it "
                           "compiles, and scatter's reduce= has no derivative",
                    "xfail": "aot_eager: derivative for aten::scatter is not implemented"}
         if BACKEND == "aot_eager" else {})
def _(x, index, src):
    out = torch.scatter(x, 0, index, src, reduce="multiply")
    return out.cos(), out.requires_grad
