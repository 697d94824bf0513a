"""Corpus programs about tensor subclasses: traceable wrapper subclasses (PyTorch's TwoTensor, a
user's scaled tensor) desugared by ahead-of-time autograd into their inner tensors, and the
subclasses the strict tracer models without that (`__torch_function__` only, plain Python
subclasses). Programs about AOT autograd name the `aot_eager` backend; the outputs' class,
flatten context and inner tensors are compared (`SubclassState`)."""
from __future__ import annotations

import torch
from torch.testing._internal.two_tensor import TwoTensor

from subclass_models import LabelledTensor, LoggedTensor, RoundedTensor, RowScaledTensor, ScaledTensor, TaggedTensor

from .harness import module_program, program_decorator, rand

PROGRAMS = []


program = program_decorator(PROGRAMS)


def two(*shape: int, requires_grad: bool = False) -> TwoTensor:
    return TwoTensor(torch.randn(*shape), torch.randn(*shape)).requires_grad_(requires_grad)


@program("subclass_input_desugared_into_its_inner_tensors_with_gradients",
         lambda: (two(3, 4, requires_grad=True), rand(4, requires_grad=True)), backend="aot_eager", grad=True)
def _(x, w):
    return (x.sin() * w).cos() + 1


@program("subclass_of_subclasses_is_desugared_all_the_way_down",
         lambda: TwoTensor(two(3), two(3)).requires_grad_(), backend="aot_eager", grad=True)
def _(x):
    return x.exp() * 2


@program("subclass_input_mutated_in_place_is_written_back_through_it",
         lambda: (two(3), rand(3, requires_grad=True)), backend="aot_eager", grad=True)
def _(x, w):
    x.mul_(2)
    return x * w


@program("views_of_a_subclass_input_come_back_as_views_of_it", lambda: two(2, 3), backend="aot_eager")
def _(x):
    return x.view(-1), x.t(), x[1], x * 2


@program("subclass_input_returned_as_it_is_and_a_plain_output_next_to_it", lambda: (two(3), rand(3)),
         backend="aot_eager")
def _(x, y):
    return x, y.sin()


@program("plain_tensor_mutated_in_place_with_a_subclass_argument_stays_plain",
         lambda: (rand(2, 3, requires_grad=True), two(3, requires_grad=True)), backend="aot_eager", grad=True)
def _(x, t):
    u = x * 1
    u[1] += t  # TwoTensor's dispatch adds each inner tensor to the plain row in turn
    u[0].mul_(t)
    return u


@program("plain_output_summed_with_a_subclass_after_the_call_gets_a_subclass_gradient",
         lambda: (rand(2, 3, requires_grad=True), two(2, 3, requires_grad=True)), backend="aot_eager", grad=True,
         reference={"xfail": "we guessed its\nmetadata incorrectly",
                    "why": "PyTorch 2.13's backward raises for a subclass gradient of a plain output"})
def _(x, t):
    # the harness sums the outputs' sines: the plain output's gradient is a TwoTensor
    return {"plain": torch.nn.functional.layer_norm(x, (3,)) * 0.25, "subclass": t}


class _HoldsATensor:
    """Not a tensor: its `__torch_function__` unwraps the tensor it holds (`torch.overrides`)."""

    def __init__(self, tensor):
        self.tensor = tensor

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda value: value.tensor if isinstance(value, _HoldsATensor) else value  # noqa: E731
        args = [[unwrap(item) for item in arg] if isinstance(arg, list) else unwrap(arg) for arg in args]
        return func(*args, **{key: unwrap(value) for key, value in (kwargs or {}).items()})


@program("object_with_torch_function_takes_torch_functions_as_in_eager",
         lambda: (_HoldsATensor(rand(3)), rand(3)))
def _(w, x):
    return torch.add(w, x, alpha=2.0) + torch.stack([w, x]).sum(0)


class _Unit(torch.Tensor):
    unit = 3

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})

    def scaled(self):
        return self * self.unit


@program("python_subclass_made_in_the_region_reads_its_class_members", lambda: rand(3, requires_grad=True),
         grad=True, reference={"xfail": "Unsupported python_type() call",
                               "why": "PyTorch 2.13 cannot trace a Python tensor subclass made in the region"})
def _(x):
    made = _Unit(x.sin())
    made.tag = 2
    return made.scaled() + made.tag


class _TwoTensorLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.linear.weight = torch.nn.Parameter(TwoTensor(torch.randn(3, 4), torch.randn(3, 4)))

    def forward(self, x):
        return torch.relu(self.linear(x))


PROGRAMS.append(module_program("subclass_parameter_of_a_module_trains_through_aot", _TwoTensorLinear,
                               lambda: rand(2, 4), backend="aot_eager", grad=True))


@program("user_scaled_tensor_with_its_own_dispatch_and_gradients",
         lambda: (ScaledTensor(torch.randn(3, 2), 0.5).requires_grad_(), rand(3, 2, requires_grad=True)),
         backend="aot_eager", grad=True)
def _(x, w):
    return (x * w).tanh().sum(0)


@program("a_subclass_flatten_context_change_recompiles", lambda: ScaledTensor(torch.randn(3), 2.0),
         changed=lambda: ScaledTensor(torch.randn(3), 3.0), frames_changed=2, backend="aot_eager")
def _(x):
    return x * 3 + 1


@program("subclass_made_in_the_region_is_part_of_the_graph", lambda: rand(3), backend="aot_eager")
def _(x):
    return TwoTensor(x, x * 2) * 3


@program("scaled_tensor_made_in_the_region_from_a_plain_input", lambda: rand(4), backend="aot_eager")
def _(x):
    return (ScaledTensor(x.cos(), 0.25) + 1).sum()


@program("subclass_input_with_symbolic_sizes_serves_two_sizes", lambda: two(4, 2), backend="aot_eager",
         changed=lambda: two(6, 2), frames_changed=1, options={"dynamic": True})
def _(x):
    return x.sin().view(-1) * x.size(0)


_PYTORCH_BACKWARD_BUG = {
    "why": "PyTorch 2.13's aot_eager fails the backward of a Python tensor subclass input",
    "xfail": "Multiple dispatch failed for aten ops: all __torch_dispatch__ handlers returned NotImplemented "
             "(_AnalyzeCustomOpInputOutputMode)",
}


@program("torch_function_subclass_with_its_own_semantics_keeps_them_and_its_class",
         lambda: (rand(3, 2).as_subclass(RoundedTensor).requires_grad_(), rand(3, 2, requires_grad=True)),
         backend="aot_eager", grad=True, reference=_PYTORCH_BACKWARD_BUG)
def _(x, w):
    return (x * w + 1).sin().sum(1)


@program("plain_python_subclass_keeps_its_class_through_aot",
         lambda: (rand(3).as_subclass(TaggedTensor), rand(3, requires_grad=True)), backend="aot_eager", grad=True,
         reference=_PYTORCH_BACKWARD_BUG)
def _(x, w):
    return x.sin() * w


def _inside_disable_torch_function_subclass(world, compiled, args):
    with torch._C.DisableTorchFunctionSubclass():
        return compiled(*args.args)


@program("subclass_hook_stays_off_for_a_call_made_inside_disable_torch_function_subclass",
         lambda: rand(3).as_subclass(LoggedTensor), call=_inside_disable_torch_function_subclass,
         observe=lambda world: list(LoggedTensor.calls), reset=LoggedTensor.calls.clear)
def _(x):
    y = x * 2
    with torch._C.DisableTorchFunction():
        every_override_off = torch._C._is_torch_function_all_disabled()
    return y.sin(), every_override_off, torch._C._is_torch_function_enabled()


class _ClaimsTenDimensions(torch.Tensor):
    """Its `__torch_function__` answers `x.ndim` itself: eager asks it for the properties read on
    an instance (`func` is `Tensor.ndim.__get__`)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func == torch.Tensor.ndim.__get__:
            return 10
        return super().__torch_function__(func, types, args, kwargs)


@program("torch_function_subclass_is_asked_for_the_properties_read_on_it",
         lambda: rand(2, 3).as_subclass(_ClaimsTenDimensions))
def _(x):
    return x * x.shape[0] + x.ndim, x.dtype, x.ndim


@program("subclass_metadata_guard_lets_another_label_reuse_the_graph",
         lambda: LabelledTensor(torch.randn(3), "first", 2), backend="aot_eager",
         changed=lambda: LabelledTensor(torch.randn(3), "second", 2), frames_changed=1)
def _(x):
    # a subclass output would carry the compiled label (the guard says labels do not matter)
    return x.data_ * x.version * 3 + 1


@program("what_a_subclass_intermediate_holds_is_read_in_the_region", lambda: (two(3), rand(3)),
         backend="aot_eager")
def _(x, w):
    t = x * 2 + w
    s = ScaledTensor(w * 1, 3.0) + 1
    return t.a.sin() + t.b, s.data_ * s.scale


@program("subclass_inner_tensor_of_another_rank_is_symbolic_under_dynamic_true",
         lambda: (RowScaledTensor(rand(3, 4), rand(3)), rand(4, requires_grad=True)), backend="aot_eager",
         changed=lambda: (RowScaledTensor(rand(5, 4), rand(5)), rand(4, requires_grad=True)), frames_changed=1,
         options={"dynamic": True}, grad=True,
         reference={"why": "PyTorch 2.13's aot_eager formats a tensor with an unbacked size in this backward",
                    "xfail": "GuardOnDataDependentSymNode"})
def _(x, w):
    return (x * w).sum(1)


@program("subclass_intermediate_written_through_a_view_at_an_offset_comes_back_as_in_eager",
         lambda: (rand(2, 4, requires_grad=True), two(3, requires_grad=True), two(8)), backend="aot_eager", grad=True,
         reference={"why": "TorchDynamo's fake run of select_scatter on a TwoTensor hits the fake tensor cache's "
                           "offset-0 rebuild of the second inner result",
                    "xfail": "Expected a.storage_offset() == b.storage_offset(), got 3 != 0"})
def _(z, tt, flat):
    # both regenerate a view at offset 3 by `select_scatter` on each inner tensor
    u = torch.minimum(z, tt.sum()).clone()
    row = u.select(1, -1)
    row[..., 0] = 0.5
    return row, u, torch.select_scatter((flat * 2).view(2, 4).select(1, -1), flat.sum(), 0, 0) + 1
