"""Corpus programs about guards: what recompiles when it changes (strings,
globals, functions passed in, object attributes, submodules, sizes under
dynamic=False) and graph breaks under fullgraph=False, whose results must
still equal eager's."""
from __future__ import annotations

import types

import torch
import torch._dynamo
from torch import nn

from .harness import Args, Program, function_program, module_program, program_decorator, rand
from .markers import disable, graph_break

PROGRAMS = []


program = program_decorator(PROGRAMS)




@program("ints_passed_in_are_symbolic_from_the_first_call_under_dynamic_true",
         lambda: (rand(5), 4096, [3, 7]), changed=lambda: (rand(5), 4095, [2, 9]), frames_changed=1,
         options={"dynamic": True})
def _(x, a, pair):
    return x + (a % pair[0]) * pair[1]


_SCALE = 3


@program("a_global_int_stays_a_constant_under_dynamic_true", lambda: rand(5), options={"dynamic": True},
         changed=lambda: rand(6), frames_changed=1)
def _(x):
    return x * _SCALE + x.shape[0]


@program("string_argument_is_guarded", lambda: (rand(3), "relu"),
         changed=lambda: (rand(3), "tanh"), frames_changed=2)
def _(x, kind):
    return getattr(torch, kind)(x), kind.upper()


@program("nan_argument_passes_its_own_guard", lambda: (rand(3), float("nan")),
         changed=lambda: (rand(3), 1.5), frames_changed=2, fullgraph=False)
def _(x, n):
    return x * 2 + n


@program("slice_argument_is_guarded", lambda: (rand(6), slice(0, 4, 2)),
         changed=lambda: (rand(6), slice(1, 5, 1)), frames_changed=2)
def _(x, where):
    return x[where] * 2, list(range(10))[where] + [100], where.step


def _marked(dims):
    def make():
        x = rand(3, 3, 3)
        for dim in dims:
            torch._dynamo.mark_dynamic(x, dim)
        return x
    return make


@program("tensor_marked_dynamic_on_other_dimensions_recompiles", _marked([0]),
         changed=_marked([1]), frames_changed=2, fullgraph=False)
def _(x):
    if x.shape[0] > 2:
        return x.cos()
    return x.sin()


SCALE = 2


def _set_scale(value):
    global SCALE
    SCALE = value


def _inputs_with_scale(value):
    def make():
        _set_scale(value)
        return rand(3)
    return make


@program("global_constant_read_is_guarded", _inputs_with_scale(2),
         changed=_inputs_with_scale(5), frames_changed=2, reset=lambda: _set_scale(2))
def _(x):
    return x * SCALE


def _double(x):
    return x * 2


HELPER = _double


def _inputs_with_helper(fn):
    def make():
        global HELPER
        HELPER = fn
        return rand(3)
    return make


@program("global_function_rebinding_is_guarded", _inputs_with_helper(_double),
         changed=_inputs_with_helper(torch.neg), frames_changed=2,
         reset=_inputs_with_helper(_double))
def _(x):
    return HELPER(x) + 1


@program("function_argument_identity_is_guarded", lambda: (rand(3), torch.relu),
         changed=lambda: (rand(3), torch.sigmoid), frames_changed=2)
def _(x, activation):
    return activation(x) * 2


@program("same_function_argument_does_not_recompile", lambda: (rand(3), _double),
         changed=lambda: (rand(3), _double), frames_changed=1)
def _(x, fn):
    return fn(x) + fn(x)


class Settings:
    def __init__(self, depth):
        self.depth = depth
        self.name = "net"


@program("input_object_attribute_is_guarded", lambda: (rand(3), Settings(2)),
         changed=lambda: (rand(3), Settings(3)), frames_changed=2)
def _(x, settings):
    for _ in range(settings.depth):
        x = x * 0.5
    return x


@program("nested_container_constant_is_guarded", lambda: (rand(3), {"cfg": {"n": [1, 2]}}),
         changed=lambda: (rand(3), {"cfg": {"n": [1, 3]}}), frames_changed=2)
def _(x, options):
    return x * sum(options["cfg"]["n"])


@program("tuple_of_ints_argument_is_guarded", lambda: (rand(2, 6), (3, 4)),
         changed=lambda: (rand(2, 6), (4, 3)), frames_changed=2)
def _(x, shape):
    return x.reshape(shape)


@program("new_size_recompiles_under_dynamic_false", lambda: rand(4),
         changed=lambda: rand(5), frames_changed=2, options=dict(dynamic=False))
def _(x):
    return x.cumsum(0)


@program("same_size_new_data_does_not_recompile_under_dynamic_false", lambda: rand(4, 2),
         changed=lambda: rand(4, 2) * 100, frames_changed=1, options=dict(dynamic=False))
def _(x):
    return x.softmax(-1)


class Swappable(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3)

    def forward(self, x):
        return self.inner(x).relu()


def _swap_inner(world, compiled, args):
    if args.kwargs["swap"]:
        torch.manual_seed(7)
        compiled.inner = nn.Linear(3, 3)
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "submodule_replaced_by_one_of_the_same_structure", Swappable,
    lambda: Args(rand(2, 3), swap=False), call=_swap_inner,
    changed=lambda: Args(rand(2, 3), swap=True), frames_changed=1))


def _replace_with_different_class(world, compiled, args):
    if args.kwargs["swap"]:
        compiled.inner = nn.Identity()
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "submodule_replaced_by_another_class_recompiles", Swappable,
    lambda: Args(rand(2, 3), swap=False), call=_replace_with_different_class,
    changed=lambda: Args(rand(2, 3), swap=True), frames_changed=2))


@program("explicit_graph_break_splits_into_two_graphs", lambda: rand(3), fullgraph=False,
         frames=2)
def _(x):
    y = x * 2
    graph_break()
    return y + 1


@program("data_dependent_branch_splits_the_graph", lambda: rand(3).abs() + 1, fullgraph=False,
         frames=2, changed=lambda: -rand(3).abs() - 5, frames_changed=3)
def _(x):
    y = x + 1
    if y.sum() > 0:
        return y * 2
    return y - 2


def _explicit_break_in_helper(x):
    graph_break()
    return x + 1


@program("graph_break_inside_an_inlined_helper", lambda: rand(3), fullgraph=False,
         frames=3)
def _(x):
    y = x.cos()
    z = _explicit_break_in_helper(y)
    return z * 3


@program("graph_break_keeps_side_effects_in_order", lambda: (rand(3), []), fullgraph=False,
         frames=2)
def _(x, log):
    log.append("before")
    y = x * 2
    graph_break()
    log.append("after")
    return y + len(log)


PROGRAMS.append(Program(
    name="disabled_function_runs_eagerly_and_splits_the_caller",
    make=lambda: _calls_disabled, inputs=lambda: rand(3), fullgraph=False, frames=2))


@disable
def _disabled_helper(x):
    return x.numpy().sum() + x


def _calls_disabled(x):
    return _disabled_helper(x * 2) - 1


def _set_depth_then_call(world, compiled, args):
    world["settings"].depth = args.kwargs["depth"]
    return compiled(args.args[0], world["settings"])


def _halve_depth_times(x, settings):
    for _ in range(settings.depth):
        x = x * 0.5
    return x


PROGRAMS.append(Program(
    name="attribute_of_the_same_object_changed_between_calls",
    make=lambda: {"settings": Settings(2)}, target=lambda world: _halve_depth_times,
    inputs=lambda: Args(rand(3), depth=2), call=_set_depth_then_call,
    changed=lambda: Args(rand(3), depth=4), frames_changed=2))


CONFIG = {"scale": 2.0, "mode": "add"}


def _set_config(**values):
    def make():
        CONFIG.update(values)
        return rand(3)
    return make


@program("global_dict_entry_changed_between_calls", _set_config(scale=2.0, mode="add"),
         changed=_set_config(scale=2.0, mode="mul"), frames_changed=2,
         reset=lambda: CONFIG.update(scale=2.0, mode="add"))
def _(x):
    if CONFIG["mode"] == "add":
        return x + CONFIG["scale"]
    return x * CONFIG["scale"]


class Units:
    factor = 2.0


def _set_class_factor(value):
    def make():
        Units.factor = value
        return rand(3)
    return make


@program("class_attribute_changed_between_calls", _set_class_factor(2.0),
         changed=_set_class_factor(3.0), frames_changed=2, reset=_set_class_factor(2.0))
def _(x):
    return x * Units.factor


@program("python_float_argument_changed", lambda: (rand(3), 0.5),
         changed=lambda: (rand(3), 0.25), frames_changed=2)
def _(x, alpha):
    return x * alpha + (1 - alpha)


def _call_with_aliasing(world, compiled, args):
    x = args.args[0]
    other = x if args.kwargs["alias"] else x.clone()
    return compiled(x, other)


@program("aliased_inputs_are_guarded", lambda: Args(rand(3), alias=False),
         call=_call_with_aliasing, changed=lambda: Args(rand(3), alias=True), frames_changed=2)
def _(a, b):
    a.add_(1)
    return b * 2


@program("dict_key_order_changed", lambda: {"a": rand(2), "b": rand(2) + 5},
         changed=lambda: {"b": rand(2) + 5, "a": rand(2)}, frames_changed=2)
def _(d):
    return [value * (i + 1) for i, value in enumerate(d.values())], list(d)


def _mutate_returned_view(world, compiled, args):
    out = compiled(*args.args)
    out.add_(100)
    return out


@program("returned_view_of_an_input_still_aliases_it", lambda: rand(2, 3),
         call=_mutate_returned_view)
def _(x):
    return x.view(-1)


def _call_on_a_row(world, compiled, args):
    base = args.args[0]
    return compiled(base[1])


@program("in_place_update_of_a_view_input_reaches_its_base", lambda: rand(3, 4),
         call=_call_on_a_row)
def _(row):
    row.mul_(2)
    return row.sum()


class Box:
    def __init__(self):
        self.value = 1


@program("assignments_into_an_input_list_and_object_deletion", lambda: ([rand(2), rand(2)], Box()))
def _(xs, box):
    xs[0] = xs[0] * 2
    xs[1] += 1
    del box.value
    return xs[0] + xs[1]


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 3)
        self.second = nn.Linear(3, 3)

    def forward(self, x):
        return self.second(self.first(x).relu())


def _freeze_first(world, compiled, args):
    compiled.first.weight.requires_grad_(not args.kwargs["freeze"])
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "freezing_a_parameter_recompiles_and_keeps_gradients_right", Frozen,
    lambda: Args(rand(2, 3), freeze=False), call=_freeze_first, grad=True,
    changed=lambda: Args(rand(2, 3), freeze=True), frames_changed=2))


def _replace_parameter(world, compiled, args):
    if args.kwargs["replace"]:
        torch.manual_seed(3)
        compiled.first.weight = nn.Parameter(torch.randn(3, 3))
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "replacing_a_parameter_object_uses_the_new_one", Frozen,
    lambda: Args(rand(2, 3), replace=False), call=_replace_parameter, grad=True,
    changed=lambda: Args(rand(2, 3), replace=True), frames_changed=1))


def _evaluate_submodule(world, compiled, args):
    compiled.drop.train(args.kwargs["train"])
    return compiled(*args.args)


class WithDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x))


PROGRAMS.append(module_program(
    "training_flag_of_one_submodule_is_guarded", WithDropout,
    lambda: Args(rand(3, 4), train=True), call=_evaluate_submodule,
    changed=lambda: Args(rand(3, 4), train=False), frames_changed=2))


def _closure_with_rebound_cell():
    scale = 2.0

    def scaled(x):
        return x * scale

    def rebind(value):
        nonlocal scale
        scale = value

    scaled.rebind = rebind
    return scaled


def _rebind_then_call(world, compiled, args):
    world.rebind(args.kwargs["scale"])
    return compiled(*args.args)


PROGRAMS.append(Program(
    name="closure_cell_rebound_between_calls", make=_closure_with_rebound_cell,
    inputs=lambda: Args(rand(3), scale=2.0), call=_rebind_then_call,
    changed=lambda: Args(rand(3), scale=5.0), frames_changed=2))


def _call_each(world, compiled, args):
    return [compiled(t) for t in args.args]


@program("automatic_dynamic_sizes_serve_later_sizes", lambda: Args(rand(4, 3)),
         call=_call_each, changed=lambda: Args(rand(6, 3), rand(8, 3)), frames_changed=2)
def _(x):
    return (x * x.shape[0]).sum(0)


@program("dynamic_true_compiles_one_graph_for_all_sizes", lambda: Args(rand(4, 3)),
         call=_call_each, changed=lambda: Args(rand(6, 3), rand(9, 3)), frames_changed=1,
         options=dict(dynamic=True))
def _(x):
    return torch.cat([x, x[: x.shape[0] // 2]]).mean(0) + x.shape[0]


@program("different_keyword_arguments_recompile", lambda: Args(rand(3)),
         changed=lambda: Args(rand(3), scale=3.0), frames_changed=2)
def _(x, scale=2.0):
    return x * scale


def _catch(world, compiled, args):
    try:
        return compiled(*args.args)
    except Exception as error:  # the exception itself is the observable result
        return ("raised", type(error).__name__, str(error))


@program("failing_user_assert_raises_the_same_error", lambda: rand(3), call=_catch,
         changed=lambda: rand(4), frames_changed=1, fullgraph=False)
def _(x):
    assert x.shape[0] == 3, "expected three values"
    return x * 2


GLOBAL_MODEL = None


def _install_global_model():
    global GLOBAL_MODEL
    GLOBAL_MODEL = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    return _uses_global_model


def _uses_global_model(x):
    return GLOBAL_MODEL(x) * 2


def _nudge_global_model_then_call(world, compiled, args):
    with torch.no_grad():
        GLOBAL_MODEL[0].weight.add_(args.kwargs["nudge"])
    return compiled(*args.args)


PROGRAMS.append(Program(
    name="global_module_called_from_a_function_sees_updated_weights",
    make=_install_global_model, inputs=lambda: Args(rand(2, 4), nudge=0.5),
    call=_nudge_global_model_then_call, repeats=3,
    observe=lambda world: GLOBAL_MODEL.state_dict()))


def _pass_instance(world, compiled, args):
    return compiled(world[args.kwargs["which"]], *args.args)


def _apply_module(module, x):
    return module(x).sigmoid()


PROGRAMS.append(Program(
    name="module_passed_as_an_argument_another_instance_of_the_class",
    make=lambda: [nn.Linear(3, 3), nn.Linear(3, 3)], target=lambda world: _apply_module,
    inputs=lambda: Args(rand(2, 3), which=0), call=_pass_instance,
    changed=lambda: Args(rand(2, 3), which=1), frames_changed=1))


class Clamped(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("seen", torch.zeros(3))

    def forward(self, x):
        with torch.no_grad():
            self.lin.weight.clamp_(-0.2, 0.2)
        self.seen = self.seen + x.detach().sum(0)
        return self.lin(x)


PROGRAMS.append(module_program(
    "parameter_clamped_in_place_and_buffer_reassigned", Clamped, lambda: rand(2, 3),
    repeats=3, grad=True))


@program("parameter_versus_plain_tensor_input", lambda: rand(3),
         changed=lambda: nn.Parameter(rand(3)), frames_changed=2, grad=True)
def _(x):
    if isinstance(x, nn.Parameter):
        return x * 2
    return x - 2


def _maybe_under_autocast(world, compiled, args):
    if args.kwargs["autocast"]:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return compiled(*args.args)
    return compiled(*args.args)


@program("autocast_state_of_the_caller_is_guarded", lambda: Args(rand(3, 3), rand(3, 3), autocast=False),
         call=_maybe_under_autocast,
         changed=lambda: Args(rand(3, 3), rand(3, 3), autocast=True), frames_changed=2)
def _(a, b):
    return a @ b


def _with_default_dtype(dtype):
    def make():
        torch.set_default_dtype(dtype)
        return rand(3).to(torch.float32)
    return make


@program("default_dtype_is_guarded", _with_default_dtype(torch.float32),
         changed=_with_default_dtype(torch.float64), frames_changed=2,
         reset=lambda: torch.set_default_dtype(torch.float32))
def _(x):
    return torch.ones(3) + x, torch.arange(3.0).dtype


PROGRAMS.append(module_program(
    "channels_last_input_is_guarded", lambda: nn.Conv2d(3, 4, 3),
    lambda: rand(2, 3, 6, 6), grad=True,
    changed=lambda: rand(2, 3, 6, 6).to(memory_format=torch.channels_last), frames_changed=2))


@program("bool_versus_int_argument", lambda: (rand(2), True),
         changed=lambda: (rand(2), 1), frames_changed=2)
def _(x, n):
    return x * n, type(n).__name__


@program("dict_value_changing_from_tensor_to_int", lambda: {"a": rand(2)},
         changed=lambda: {"a": 3}, frames_changed=2)
def _(d):
    return d["a"] * 2 + torch.ones(2)


@program("tuple_versus_list_argument", lambda: (rand(2), (1, 2)),
         changed=lambda: (rand(2), [1, 2]), frames_changed=2)
def _(x, sizes):
    return x * len(sizes), type(sizes).__name__


TABLE = torch.arange(3.0)


def _change_table(kind):
    def make():
        global TABLE
        if kind == "replace":
            TABLE = torch.arange(3.0) * 10
        elif kind == "in_place":
            TABLE.mul_(-1)
        return rand(3)
    return make


def _reset_table():
    global TABLE
    TABLE = torch.arange(3.0)


def _reads_table(x):
    return x + TABLE


for _kind in ("replace", "in_place"):
    PROGRAMS.append(function_program(
        f"global_tensor_{_kind}d_between_calls_is_read_anew", _reads_table,
        _change_table("none"), changed=_change_table(_kind), frames_changed=1,
        reset=_reset_table))


def _closure_over_a_tensor():
    weights = torch.ones(3)

    def weighted(x):
        return x * weights

    weighted.weights = weights
    return weighted


def _bump_captured(world, compiled, args):
    world.weights.add_(args.kwargs["bump"])
    return compiled(*args.args)


PROGRAMS.append(Program(
    name="captured_tensor_mutated_between_calls_is_read_anew", make=_closure_over_a_tensor,
    inputs=lambda: Args(rand(3), bump=1.0), call=_bump_captured, repeats=3))


class TensorAttributes(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.temperature = torch.tensor(2.0)
        self.register_buffer("offset", torch.zeros(3))

    def forward(self, x):
        return self.lin(x) / self.temperature + self.offset.sum()


def _change_module_state(world, compiled, args):
    change = args.kwargs["change"]
    if change == "plain_tensor_attribute":
        compiled.temperature = torch.tensor(4.0)
    elif change == "parameter_data":
        compiled.lin.weight.data = torch.full((3, 3), 0.5)
    elif change == "buffer_shape":
        compiled.offset = torch.ones(5)
    return compiled(*args.args)


for _change, _frames in [("plain_tensor_attribute", 1), ("parameter_data", 1), ("buffer_shape", 2)]:
    PROGRAMS.append(module_program(
        f"module_{_change}_changed_between_calls", TensorAttributes,
        lambda: Args(rand(2, 3), change=None), call=_change_module_state,
        changed=lambda change=_change: Args(rand(2, 3), change=change), frames_changed=_frames))


class Selective(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(3, 3) for _ in range(3))
        self.active = [0, 2]

    def forward(self, x):
        for index in self.active:
            x = self.layers[index](x)
        return x


def _set_active(world, compiled, args):
    compiled.active = args.kwargs["active"]
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "module_list_attribute_of_indices_changed_between_calls", Selective,
    lambda: Args(rand(2, 3), active=[0, 2]), call=_set_active,
    changed=lambda: Args(rand(2, 3), active=[1]), frames_changed=2))


@program("switching_back_to_earlier_inputs_reuses_their_entry", lambda: Args(rand(3)),
         call=_call_each, changed=lambda: Args(rand(3).double(), rand(3), rand(3).double()),
         frames_changed=2)
def _(x):
    return x * 2


@program("alternating_sizes_under_dynamic_false_reuse_their_entries", lambda: Args(rand(2)),
         call=_call_each, changed=lambda: Args(rand(3), rand(2), rand(3), rand(2)),
         frames_changed=2, options=dict(dynamic=False))
def _(x):
    return x.cumsum(0)


DYNAMIC = dict(dynamic=True)


@program("symbolic_size_branch_is_guarded", lambda: Args(rand(3, 2)), call=_call_each,
         changed=lambda: Args(rand(6, 2), rand(7, 2)), frames_changed=2, options=DYNAMIC)
def _(x):
    if x.shape[0] > 4:
        return x * 2
    return x - 2


@program("symbolic_sizes_leave_as_python_ints_and_strings", lambda: Args(rand(3, 4)),
         call=_call_each, changed=lambda: Args(rand(5, 4), rand(6, 4)), frames_changed=3,
         options=DYNAMIC)
def _(x):
    rows = x.shape[0]
    return x.view(rows * 4), rows, f"rows={rows}", [0] * rows


@program("symbolic_size_arithmetic_in_reshapes_and_factories", lambda: Args(rand(4, 6)),
         call=_call_each, changed=lambda: Args(rand(6, 6), rand(8, 6)), frames_changed=1,
         options=DYNAMIC)
def _(x):
    half = x.shape[0] // 2
    y = x.reshape(half, 2 * x.shape[1])
    scale = x.shape[1] ** 0.5
    return y / scale + torch.arange(y.shape[1]), torch.zeros(half, 1), x.numel() > 10


@program("size_one_is_specialised_apart_from_larger_sizes", lambda: Args(rand(4, 3)),
         call=_call_each, changed=lambda: Args(rand(1, 3), rand(5, 3)), frames_changed=2,
         options=DYNAMIC)
def _(x):
    return x.sum(0, keepdim=True).expand(x.shape[0], 3) + x


_ORIGINAL_GELU = torch.nn.functional.gelu


def _patched_gelu(x, approximate="none"):
    return x * 10


def _with_gelu(fn):
    def make():
        torch.nn.functional.gelu = fn
        return rand(3)
    return make


@program("monkeypatched_library_function_is_guarded", _with_gelu(_ORIGINAL_GELU),
         changed=_with_gelu(_patched_gelu), frames_changed=2,
         reset=_with_gelu(_ORIGINAL_GELU))
def _(x):
    return torch.nn.functional.gelu(x) + 1


class Patchable(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def activation(self, x):
        return x.relu()

    def forward(self, x):
        return self.activation(self.lin(x))


_ORIGINAL_ACTIVATION = Patchable.activation


def _set_activation(world, compiled, args):
    Patchable.activation = args.kwargs["activation"]
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "method_replaced_on_the_class_between_calls", Patchable,
    lambda: Args(rand(2, 3), activation=_ORIGINAL_ACTIVATION), call=_set_activation,
    changed=lambda: Args(rand(2, 3), activation=lambda self, x: x.sigmoid()), frames_changed=2,
    reset=lambda: setattr(Patchable, "activation", _ORIGINAL_ACTIVATION),
    reference=dict(xfail="2.13 does not guard a method replaced on an nn.Module class "
                         "(wrong result)", why="PyTorch returns a wrong result here"),
    xfail="a method replaced on the module's class is not guarded (wrong result)"))


corpus_settings = types.ModuleType("corpus_settings")
corpus_settings.SCALE = 2.0


def _module_scale(value):
    def make():
        corpus_settings.SCALE = value
        return rand(3)
    return make


@program("attribute_of_an_imported_module_is_guarded", _module_scale(2.0),
         changed=_module_scale(5.0), frames_changed=2, reset=_module_scale(2.0))
def _(x):
    return x * corpus_settings.SCALE


def _call_with_each_int(world, compiled, args):
    x = args.args[0]
    return [compiled(x, n) for n in args.args[1:]]


@program("changing_int_used_as_a_loop_count_recompiles_each_time", lambda: Args(rand(3), 2),
         call=_call_with_each_int, changed=lambda: Args(rand(3), 3, 4), frames_changed=3)
def _(x, n):
    for _ in range(n):
        x = x * 0.5
    return x


@program("changing_int_used_as_a_scale_turns_symbolic", lambda: Args(rand(3), 2),
         call=_call_with_each_int, changed=lambda: Args(rand(3), 3, 4, 5), frames_changed=2)
def _(x, n):
    return x * n + n


class _Settings:
    """An object whose class reads its own `__dict__` on every attribute access (as Hugging Face
    configs do) and maps some names to others."""

    aliases = {"width": "hidden"}

    def __init__(self):
        self.hidden = 4

    def __getattribute__(self, key):
        if key != "aliases" and key in type(self).aliases:
            key = type(self).aliases[key]
        return super().__getattribute__(key)


_SETTINGS = _Settings()


def _settings_with(**attributes):
    def make():
        global _SETTINGS
        _SETTINGS = _Settings()
        for name, value in attributes.items():
            setattr(_SETTINGS, name, value)
        return rand(3)
    return make


@program("absent_attribute_recompiles_when_the_object_gets_it", _settings_with(),
         changed=_settings_with(extra=3), frames_changed=2, reset=_settings_with())
def _(x):
    return x * getattr(_SETTINGS, "extra", 1), hasattr(_SETTINGS, "width"), hasattr(_SETTINGS, "depth")


def _settings_class_with(**attributes):
    def make():
        _settings_with()()
        for name in ("depth",):
            if name in _Settings.__dict__:
                delattr(_Settings, name)
        for name, value in attributes.items():
            setattr(_Settings, name, value)
        return rand(3)
    return make


@program("absent_attribute_recompiles_when_the_class_gets_it", _settings_class_with(),
         changed=_settings_class_with(depth=5), frames_changed=2, reset=_settings_class_with())
def _(x):
    return x * getattr(_SETTINGS, "depth", 1)


class _Block(nn.Module):
    def __init__(self, with_buffer=False):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        if with_buffer:
            self.register_buffer("offset", torch.ones(3))

    def forward(self, x):
        offset = getattr(self, "offset", None)
        return self.lin(x) if offset is None else self.lin(x) + offset


_BLOCKS = [_Block()]


def _block_inputs(with_buffer):
    def make():
        torch.manual_seed(0)
        _BLOCKS[0] = _Block(with_buffer)
        return rand(2, 3)
    return make


@program("absent_module_attribute_recompiles_when_a_buffer_appears", _block_inputs(False),
         changed=_block_inputs(True), frames_changed=2, reset=_block_inputs(False))
def _(x):
    return _BLOCKS[0](x)


@program("a_0_dim_integer_tensor_giving_a_shape_specialises_on_its_value",
         lambda: (rand(6, 4), torch.tensor(2)), changed=lambda: (rand(6, 4), torch.tensor(3)), frames_changed=2)
def _(x, sections):
    return [part * 2 for part in torch.tensor_split(x, sections)]


@program("a_0_dim_integer_tensor_read_before_the_graph_writes_it_keeps_its_first_value",
         lambda: (rand(6, 4), torch.tensor(2)), changed=lambda: (rand(6, 4), torch.tensor(3)), frames_changed=2)
def _(x, sections):
    parts = torch.tensor_split(x, sections)
    sections.add_(1)
    return parts, sections
