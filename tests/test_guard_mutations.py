"""Guard mutations: every way a user can change what a compiled function read, between calls.

Each case builds a fresh world (a function or module, its inputs, and a list of changes a
user may make between calls), runs it eagerly and compiled, calling twice and then once
after each change, and asserts that the compiled run is never stale: every call's output
(or raised error) equals eager's. It also asserts how many graphs were compiled after each
call: a change recompiles or leaves the entry valid, never both ways at random.

`torch_frames` is what `torch.compile` counts on the same program (checked by the slow test
at the end, which runs PyTorch's compiler); where graphwright differs, `why` says so.
"""
from __future__ import annotations

import dataclasses
import functools
import sys
import types
from typing import Any, Callable

import pytest
import torch
from torch import nn

import graphwright
from graphwright.testing import CompileCounter
from tests.programs.harness import assert_same


@dataclasses.dataclass
class World:
    """What one case builds: the target to compile, its inputs, the changes made between
    calls, and how to undo changes to process-wide state."""

    target: Callable
    inputs: Callable[[], tuple]
    changes: list[Callable[[], None]]
    cleanup: Callable[[], None] = lambda: None


@dataclasses.dataclass
class Case:
    name: str
    build: Callable[[], World]
    frames: list[int]  # graphs compiled after the two first calls and after each change
    torch_frames: list[int] | None = None  # torch.compile's counts, where they differ
    torch_stale: bool = False  # torch.compile gives a stale result here (a PyTorch gap)
    torch_skip: bool = False  # torch.compile cannot run the program at all
    why: str = ""
    fullgraph: bool = True


CASES: list[Case] = []


def case(frames: list[int], **fields: Any) -> Callable[[Callable[[], World]], Callable[[], World]]:
    def register(build: Callable[[], World]) -> Callable[[], World]:
        CASES.append(Case(build.__name__, build, frames, **fields))
        return build
    return register


@dataclasses.dataclass
class Raised:
    """A call that raised: compared by type and message."""

    kind: type
    message: str


def call_all(world: World, callee: Callable, counter: Any) -> list[tuple[Any, int | None]]:
    records = []
    for change in [None, None, *world.changes]:
        if change is not None:
            change()
        torch.manual_seed(0)
        try:
            output = callee(*world.inputs())
        except Exception as error:  # the user's error, or a typed graphwright error
            output = Raised(type(error), str(error))
        if isinstance(output, torch.Tensor) and output.is_nested:
            output = list(output.unbind())
        elif isinstance(output, torch.Tensor) and output.device.type != "meta":
            output = output.detach().clone()
        records.append((output, None if counter is None else counter.frame_count))
    return records


def graph_break() -> None:
    """Rebound per run to the graph break of the compiler under test (PyTorch does not know
    graphwright's)."""


def run(item: Case, compiler: str) -> list[tuple[Any, int | None]]:
    global graph_break
    if compiler == "torch":
        import torch._dynamo

        graph_break = torch._dynamo.graph_break
    else:
        graph_break = graphwright.graph_break
    world = item.build()
    try:
        if compiler == "eager":
            return call_all(world, world.target, None)
        if compiler == "torch":
            import torch._dynamo.testing

            torch._dynamo.reset()
            counter = torch._dynamo.testing.CompileCounter()
            return call_all(world, torch.compile(world.target, backend=counter, fullgraph=item.fullgraph), counter)
        graphwright.reset()
        counter = CompileCounter()
        compiled = graphwright.compile(world.target, backend=counter, fullgraph=item.fullgraph)
        records = call_all(world, compiled, counter)
        wrapper = getattr(compiled, "_compiled_forward", compiled)
        for entry in wrapper._cache.entries:  # every guard made can say what it checks (logs, dumps)
            assert all(guard.describe() for guard in entry.guards)
        return records
    finally:
        world.cleanup()


def assert_same_call(expected: Any, actual: Any, index: int, fullgraph: bool) -> None:
    if isinstance(expected, Raised) or isinstance(actual, Raised):
        assert isinstance(actual, Raised) and isinstance(expected, Raised), \
            f"call {index}: eager gave {expected!r}, compiled {actual!r}"
        if fullgraph and issubclass(actual.kind, graphwright.Unsupported):
            # fullgraph: the program's own exception is a typed error that names it (GB011)
            assert f"{expected.kind.__name__}: {expected.message}" in actual.message, f"call {index}"
            return
        if fullgraph and actual.kind.__name__ == "Unsupported":  # torch.compile's typed error
            return
        assert (actual.kind, actual.message) == (expected.kind, expected.message), f"call {index}"
    elif isinstance(expected, torch.Tensor) and expected.device.type == "meta":
        assert (actual.device, actual.shape, actual.dtype) == (expected.device, expected.shape, expected.dtype)
    else:
        assert_same(expected, actual, f"call {index}")


def check_case(item: Case, compiler: str) -> list[int]:
    eager = run(item, "eager")
    compiled = run(item, compiler)
    for index, ((expected, _), (actual, _)) in enumerate(zip(eager, compiled)):
        assert_same_call(expected, actual, index, item.fullgraph)
    return [frames for _, frames in compiled]


def ones(*shape: int, **options: Any) -> Callable[[], tuple]:
    return lambda: (torch.ones(*shape, **options),)


# -- tensors --------------------------------------------------------------------------------


def tensor_case(first: Callable[[], torch.Tensor], later: Callable[[], torch.Tensor],
                body: Callable = lambda x: x * 2) -> Callable[[], World]:
    """`body(x)` called twice on `first()`, then on `later()` (the change swaps the inputs)."""
    def build() -> World:
        current = [first]

        def swap() -> None:
            current[0] = later
        return World(body, lambda: (current[0](),), [swap])
    return build


def _inference_tensor() -> torch.Tensor:
    with torch.inference_mode():
        return torch.ones(3)


class TaggedTensor(torch.Tensor):
    pass


def _add(name: str, build: Callable[[], World], frames: list[int], **fields: Any) -> None:
    CASES.append(Case(name, build, frames, **fields))


_add("tensor_shape", tensor_case(lambda: torch.ones(3), lambda: torch.ones(4)), [1, 1, 2])
_add("tensor_dtype", tensor_case(lambda: torch.ones(3), lambda: torch.ones(3, dtype=torch.float64)), [1, 1, 2])
_add("tensor_device", tensor_case(lambda: torch.ones(3), lambda: torch.ones(3, device="meta")), [1, 1, 2])
_add("tensor_stride", tensor_case(lambda: torch.ones(3, 3), lambda: torch.ones(3, 3).t(),
                                  lambda x: x.stride()[0] * x), [1, 1, 2])
_add("tensor_contiguity_branch", tensor_case(
    lambda: torch.ones(3, 3), lambda: torch.ones(3, 3).t(),
    lambda x: x.view(-1) if x.is_contiguous() else x.reshape(-1) + 1), [1, 1, 2])
_add("tensor_requires_grad", tensor_case(lambda: torch.ones(3), lambda: torch.ones(3, requires_grad=True),
                                         lambda x: x * 2 if x.requires_grad else x * 3), [1, 1, 2])
_add("tensor_made_in_inference_mode", tensor_case(lambda: torch.ones(3), _inference_tensor,
                                                  lambda x: x * 2 if x.is_inference() else x * 3), [1, 1, 2],
     torch_skip=True, why="torch.compile does not trace Tensor.is_inference() (its GB0045)")
_add("tensor_made_in_inference_mode_used_only", tensor_case(lambda: torch.ones(3), _inference_tensor), [1, 1, 2])
_add("tensor_conjugate_view", tensor_case(lambda: torch.ones(3, dtype=torch.complex64),
                                          lambda: torch.ones(3, dtype=torch.complex64).conj()), [1, 1, 2])
_add("tensor_subclass", tensor_case(lambda: torch.ones(3), lambda: torch.ones(3).as_subclass(TaggedTensor)),
     [1, 1, 2])
_add("tensor_becomes_a_parameter", tensor_case(lambda: torch.ones(3), lambda: nn.Parameter(torch.ones(3))),
     [1, 1, 2])
_add("tensor_becomes_sparse", tensor_case(lambda: torch.ones(3, 3), lambda: torch.ones(3, 3).to_sparse()),
     [1, 1, 1], fullgraph=False)
_add("tensor_becomes_nested", tensor_case(
    lambda: torch.ones(3, 3), lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])),
     [1, 1, 1], fullgraph=False, torch_skip=True,
     why="a strided nested tensor is an unsupported input (GB023): the call runs eagerly; torch.compile "
         "aborts the process on it")
_add("tensor_storage_offset", tensor_case(lambda: torch.ones(4)[:3], lambda: torch.ones(4)[1:],
                                          lambda x: x.storage_offset() * x), [1, 1, 2],
     torch_skip=True, why="torch.compile does not trace Tensor.storage_offset() (its GB0208)")


def _non_leaf() -> torch.Tensor:
    return torch.ones(3, requires_grad=True) * 1


_add("tensor_loses_its_leafness", tensor_case(lambda: torch.ones(3, requires_grad=True), _non_leaf,
                                              lambda x: x * 2 if x.is_leaf else x * 3), [1, 1, 2],
     torch_frames=[1, 1, 1], torch_stale=True, why="torch.compile does not guard is_leaf")


# -- Python arguments, globals, closures and containers ---------------------------------------

SCALE = 2


def _reads_scale(x):
    return x * SCALE


def _set_global(name: str, value: Any) -> Callable[[], None]:
    return lambda: globals().__setitem__(name, value)


def _restore_globals(**saved: Any) -> Callable[[], None]:
    def restore() -> None:
        for name, value in saved.items():
            globals()[name] = value
    return restore


@case([1, 1, 2, 3, 4, 4])
def a_global_changes_value_then_type_then_disappears():
    return World(_reads_scale, ones(3),
                 [_set_global("SCALE", 3), _set_global("SCALE", 3.5), _set_global("SCALE", torch.ones(3)),
                  lambda: globals().pop("SCALE")], _restore_globals(SCALE=2))


GLOBAL_TENSOR = torch.ones(3)


def _reads_global_tensor(x):
    return x * GLOBAL_TENSOR


@case([1, 1, 1, 1, 2, 3])
def a_global_tensor_changes_data_then_metadata():
    def mutate_in_place():
        GLOBAL_TENSOR.mul_(5)
    return World(_reads_global_tensor, ones(3),
                 [_set_global("GLOBAL_TENSOR", torch.full((3,), 2.0)), mutate_in_place,
                  _set_global("GLOBAL_TENSOR", torch.ones(1)),
                  _set_global("GLOBAL_TENSOR", torch.ones(3, dtype=torch.float64))],
                 _restore_globals(GLOBAL_TENSOR=torch.ones(3)))


def _helper(x):
    return x + 1


def _calls_helper(x):
    return _helper(x)


@case([1, 1, 2, 3])
def a_global_function_is_rebound_then_its_code_replaced():
    def other(x):
        return x + 2

    def replace_code():
        other.__code__ = (lambda x: x + 100).__code__
    return World(_calls_helper, ones(3), [_set_global("_helper", other), replace_code],
                 _restore_globals(_helper=_helper))


@case([1, 1, 2, 3])
def a_helpers_defaults_change():
    def helper(x, k=1):
        return x + k

    def f(x):
        return helper(x)
    return World(f, ones(3), [lambda: setattr(helper, "__defaults__", (5,)),
                              lambda: setattr(helper, "__defaults__", (torch.ones(3),))])


@case([1, 1, 2, 3])
def the_compiled_functions_own_defaults_change():
    def f(x, k=2):
        return x * k
    return World(f, ones(3), [lambda: setattr(f, "__defaults__", (3,)),
                              lambda: setattr(f, "__defaults__", (torch.full((3,), 4.0),))])


@case([1, 1, 2])
def the_compiled_functions_keyword_defaults_change():
    def f(x, *, k=2):
        return x * k
    return World(f, ones(3), [lambda: setattr(f, "__kwdefaults__", {"k": 3})])


@case([1, 1, 2])
def the_compiled_functions_code_is_replaced():
    def f(x):
        return x + 1
    return World(f, ones(3), [lambda: setattr(f, "__code__", (lambda x: x + 100).__code__)])


@case([1, 1, 2])
def a_mutable_default_grows():
    def f(x, seen=[1]):
        return x * len(seen)
    return World(f, ones(3), [lambda: f.__defaults__[0].append(2)])


@case([1, 1, 2, 3])
def a_closure_cell_changes_value_then_becomes_a_tensor():
    k = 2

    def f(x):
        return x * k

    def to_three():
        nonlocal k
        k = 3

    def to_tensor():
        nonlocal k
        k = torch.full((3,), 7.0)
    return World(f, ones(3), [to_three, to_tensor])


@case([1, 1, 2])
def a_closure_cell_holding_a_function_is_rebound():
    def helper(x):
        return x + 1

    def f(x):
        return helper(x)

    def rebind():
        nonlocal helper
        helper = lambda x: x + 2  # noqa: E731
    return World(f, ones(3), [rebind])


@case([1, 1, 2, 3, 4, 5])
def a_list_changes_length_and_items():
    items = [1, 2]

    def f(x):
        for item in items:
            x = x + item
        return x

    def put_tensor():
        items[0] = torch.ones(3)
    return World(f, ones(3), [lambda: items.append(3), lambda: items.__setitem__(0, 10),
                              lambda: items.pop(0), put_tensor])


@case([1, 1, 2, 2, 2, 3, 3])
def a_dict_entry_changes_then_others_come_and_go():
    table = {"a": 1}

    def f(x):
        return x * table["a"]

    def put_tensor():
        table["a"] = torch.ones(3)
    return World(f, ones(3), [lambda: table.__setitem__("a", 2), lambda: table.__setitem__("b", 3),
                              lambda: table.pop("b"), put_tensor, lambda: table.pop("a")])


@case([1, 1, 2, 2])
def a_dict_key_looked_up_with_get_appears_and_disappears():
    table = {"a": 1}

    def f(x):
        return x * table.get("b", 5)
    return World(f, ones(3), [lambda: table.__setitem__("b", 2), lambda: table.pop("b")])


@case([1, 1, 2, 2])
def a_key_tested_with_in_appears_and_disappears():
    table = {"a": 1}

    def f(x):
        return x * 2 if "b" in table else x * 3
    return World(f, ones(3), [lambda: table.__setitem__("b", 2), lambda: table.pop("b")])


@case([1, 1, 2, 3, 4, 5])
def an_iterated_dict_gains_changes_loses_and_reorders_entries():
    table = {"a": 1, "b": 2}

    def f(x):
        for key, value in table.items():
            x = x * value + len(key)
        return x

    def move_to_end():
        table["a"] = table.pop("a")
    return World(f, ones(3), [lambda: table.__setitem__("c", 3), lambda: table.__setitem__("a", 10),
                              lambda: table.pop("b"), move_to_end])


@case([1, 1, 2, 3])
def an_int_argument_changes_then_becomes_a_float():
    current = [2]

    def f(x, n):
        return x * n
    return World(f, lambda: (torch.ones(3), current[0]),
                 [lambda: current.__setitem__(0, 3), lambda: current.__setitem__(0, 2.5)])


# -- global state ---------------------------------------------------------------------------


@case([1, 1, 2, 2])
def grad_mode_is_switched_off_and_on():
    def f(x):
        return x * 2 if torch.is_grad_enabled() else x * 3
    return World(f, ones(3, requires_grad=True), [lambda: torch.set_grad_enabled(False),
                                                  lambda: torch.set_grad_enabled(True)],
                 lambda: torch.set_grad_enabled(True))


@case([1, 1, 2, 2])
def deterministic_algorithms_are_switched_on_and_off():
    def f(x):
        return x * 2 if torch.are_deterministic_algorithms_enabled() else x * 3
    return World(f, ones(3), [lambda: torch.use_deterministic_algorithms(True),
                              lambda: torch.use_deterministic_algorithms(False)],
                 lambda: torch.use_deterministic_algorithms(False))


@case([1, 1, 2, 2])
def the_default_dtype_changes():
    def f(x):
        return x + torch.ones(3)
    return World(f, ones(3), [lambda: torch.set_default_dtype(torch.float64),
                              lambda: torch.set_default_dtype(torch.float32)],
                 lambda: torch.set_default_dtype(torch.float32))


@case([1, 1, 2, 3])
def an_attribute_of_a_python_module_changes():
    config = types.ModuleType("guard_mutation_config")
    config.FLAG, config.K = True, 2
    sys.modules[config.__name__] = config

    def f(x):
        import guard_mutation_config
        return x * guard_mutation_config.K if guard_mutation_config.FLAG else x - 1

    def enable_with_five():
        config.FLAG, config.K = True, 5
    return World(f, ones(3), [lambda: setattr(config, "FLAG", False), enable_with_five],
                 lambda: sys.modules.pop(config.__name__))


@case([1, 1, 2, 2])
def a_torch_function_is_monkeypatched():
    original = torch.nn.functional.gelu

    def f(x):
        return torch.nn.functional.gelu(x)

    def restore():
        torch.nn.functional.gelu = original
    return World(f, ones(3), [lambda: setattr(torch.nn.functional, "gelu", lambda x: x * 100), restore],
                 restore)


@dataclasses.dataclass
class Settings:
    use_bias: bool = True
    scale: float = 2.0


@case([1, 1, 2, 3])
def a_config_objects_flags_change():
    settings = Settings()

    def f(x):
        return x * settings.scale + (1 if settings.use_bias else 0)
    return World(f, ones(3), [lambda: setattr(settings, "use_bias", False), lambda: setattr(settings, "scale", 3.0)])


# -- user objects and classes ---------------------------------------------------------------


@case([1, 1, 2, 2])
def an_instance_attribute_shadows_then_uncovers_a_method():
    class Scaler:
        def factor(self):
            return 1

    scaler = Scaler()

    def f(x):
        return x * scaler.factor()
    return World(f, ones(3), [lambda: setattr(scaler, "factor", lambda: 7), lambda: delattr(scaler, "factor")])


@case([1, 1, 2, 2, 2], torch_frames=[1, 1, 2, 2, 3],
      why="graphwright's second entry (the attribute, a symbolic int read through the instance) also "
          "serves the class attribute")
def an_instance_attribute_is_added_removed_and_the_class_one_changed():
    class Holder:
        k = 1

    holder = Holder()

    def f(x):
        return x * holder.k
    return World(f, ones(3), [lambda: setattr(holder, "k", 3), lambda: delattr(holder, "k"),
                              lambda: setattr(Holder, "k", 5)])


@case([1, 1, 2, 2], torch_frames=[1, 1, 1, 1], torch_stale=True,
      why="torch.compile does not guard a method found on a base class against a subclass override")
def a_method_is_overridden_on_a_subclass_then_the_override_removed():
    class Base:
        def value(self):
            return 1

    class Derived(Base):
        pass

    obj = Derived()

    def f(x):
        return x * obj.value()
    return World(f, ones(3), [lambda: setattr(Derived, "value", lambda self: 5), lambda: delattr(Derived, "value")])


@case([1, 1, 2])
def an_objects_class_is_changed():
    class First:
        def value(self):
            return 1

    class Second:
        def value(self):
            return 9

    obj = First()

    def f(x):
        return x * obj.value()
    return World(f, ones(3), [lambda: setattr(obj, "__class__", Second)])


@case([1, 1, 2, 3])
def a_property_reads_changed_state_then_is_replaced():
    class Box:
        def __init__(self):
            self.k = 2

        @property
        def value(self):
            return self.k

    box = Box()

    def f(x):
        return x * box.value
    return World(f, ones(3), [lambda: setattr(box, "k", 3), lambda: setattr(Box, "value", property(lambda s: 11))])


@case([1, 1, 2, 2, 2])
def hasattr_sees_an_attribute_come_and_go():
    class Plain:
        pass

    obj = Plain()

    def f(x):
        return x * 2 if hasattr(obj, "flag") else x * 3
    return World(f, ones(3), [lambda: setattr(obj, "flag", 1), lambda: delattr(obj, "flag"),
                              lambda: setattr(Plain, "flag", 1)])


@case([1, 1, 2, 2, 3], torch_frames=[1, 1, 1, 1, 1], torch_stale=True,
      why="torch.compile does not guard the instance dict against an attribute shadowing __getattr__")
def a_python_getattr_answers_until_the_attribute_exists():
    class Dynamic:
        def __getattr__(self, name):
            return 3

    obj = Dynamic()

    def f(x):
        return x * obj.k
    return World(f, ones(3), [lambda: setattr(obj, "k", 4), lambda: delattr(obj, "k"),
                              lambda: setattr(Dynamic, "__getattr__", lambda self, name: 6)])


@case([1, 1, 2, 2])  # the int that changed is symbolic from the second compile on
def closures_of_methods_staticmethods_classmethods_and_properties_change():
    k = 1

    class Holder:
        @staticmethod
        def static():
            return k

        @classmethod
        def klass(cls):
            return k

        @property
        def prop(self):
            return k

    holder = Holder()

    def f(x):
        return x * Holder.static() + Holder.klass() + holder.prop

    def set_k(value):
        def change():
            nonlocal k
            k = value
        return change
    return World(f, ones(3), [set_k(5), set_k(7)])


@case([1, 1, 2])
def a_methods_defaults_change():
    class Holder:
        def value(self, k=2):
            return k

    holder = Holder()

    def f(x):
        return x * holder.value()
    return World(f, ones(3), [lambda: setattr(Holder.value, "__defaults__", (5,))])


@case([1, 1, 2])
def a_functools_partial_is_replaced():
    def scaled(x, k):
        return x * k

    holder = [functools.partial(scaled, k=2)]

    def f(x):
        return holder[0](x)
    return World(f, ones(3), [lambda: holder.__setitem__(0, functools.partial(scaled, k=5))])


# -- modules ----------------------------------------------------------------------------------


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.scale = 2
        self.register_buffer("buf", torch.ones(3))

    def forward(self, x):
        y = self.lin(x) * self.scale + self.buf
        return y * 2 if self.training else y


def net_case(*changes: Callable[[Net], Callable[[], None]], cls: type = Net) -> Callable[[], World]:
    def build() -> World:
        torch.manual_seed(0)
        net = cls()
        return World(net, ones(2, 3), [change(net) for change in changes])
    return build


def _set(path: str, make: Callable[[], Any]) -> Callable[[Net], Callable[[], None]]:
    owner_path, _, name = path.rpartition(".")

    def change(net: Net) -> Callable[[], None]:
        owner = net.get_submodule(owner_path) if owner_path else net
        return lambda: setattr(owner, name, make())
    return change


_add("module_attribute_changes", net_case(_set("scale", lambda: 3), _set("scale", lambda: 3.5)), [1, 1, 2, 3])
_add("module_training_flips", net_case(lambda n: n.eval, lambda n: n.train), [1, 1, 2, 2])
_add("submodule_replaced_by_one_like_it_then_by_another_kind",
     net_case(_set("lin", lambda: nn.Linear(3, 3)), _set("lin", lambda: nn.Sequential(nn.Linear(3, 3), nn.ReLU()))),
     [1, 1, 1, 2])
_add("parameter_replaced_then_its_dtype_changes", net_case(
    _set("lin.weight", lambda: nn.Parameter(torch.full((3, 3), 2.0))),
    _set("lin.weight", lambda: nn.Parameter(torch.full((3, 3), 2.0, dtype=torch.float64)))), [1, 1, 1, 2])
_add("parameter_data_changes_in_place", net_case(lambda n: lambda: n.lin.weight.data.fill_(3.0)), [1, 1, 1])
_add("parameter_stops_requiring_grad", net_case(lambda n: lambda: n.lin.weight.requires_grad_(False)), [1, 1, 2])
_add("parameter_set_to_none", net_case(_set("lin.bias", lambda: None)), [1, 1, 2])
_add("buffer_replaced_then_resized", net_case(_set("buf", lambda: torch.full((3,), 7.0)),
                                               _set("buf", lambda: torch.full((1,), 7.0))), [1, 1, 1, 2])
_add("module_converted_to_double", net_case(lambda n: n.double), [1, 1, 2])
_add("forward_hook_added_to_the_module",
     net_case(lambda n: lambda: n.register_forward_hook(lambda mod, args, out: out * 10)), [1, 1, 2])
_add("forward_hook_added_to_a_submodule",
     net_case(lambda n: lambda: n.lin.register_forward_hook(lambda mod, args, out: out * 10)), [1, 1, 2],
     torch_frames=[1, 1, 1], torch_stale=True,
     why="torch.compile skips the guards on submodules' hooks (skip_nnmodule_hook_guards)")
_add("forward_pre_hook_added_to_a_submodule",
     net_case(lambda n: lambda: n.lin.register_forward_pre_hook(lambda mod, args: (args[0] * 10,))), [1, 1, 2],
     torch_frames=[1, 1, 1], torch_stale=True,
     why="torch.compile skips the guards on submodules' hooks (skip_nnmodule_hook_guards)")
_add("forward_set_on_the_instance_then_deleted",
     net_case(lambda n: lambda: setattr(n, "forward", lambda x: n.lin(x) * 100),
              lambda n: lambda: delattr(n, "forward")), [1, 1, 2, 2])
_add("forward_set_on_a_submodule_instance",
     net_case(lambda n: lambda: setattr(n.lin, "forward", lambda x: x * 100)), [1, 1, 2])


def _global_hooks() -> World:
    world = net_case()()
    handles = []
    world.changes = [lambda: handles.append(nn.modules.module.register_module_forward_hook(
        lambda mod, args, out: out * 10)), lambda: handles.pop().remove()]
    world.cleanup = lambda: [handle.remove() for handle in handles]
    return world


_add("hook_registered_for_every_module_then_removed", _global_hooks, [1, 1, 2, 2], fullgraph=False,
     torch_stale=True, why="a global hook breaks the graph at the submodule's call; torch.compile recompiles "
                           "but misses the hook on submodules")


def _forward_replaced_on_the_class() -> World:
    class Replaceable(Net):
        pass

    world = net_case(cls=Replaceable)()
    original = Replaceable.forward
    world.changes = [lambda: setattr(Replaceable, "forward", lambda self, x: self.lin(x) * 100),
                     lambda: setattr(Replaceable, "forward", original)]
    return world


_add("forward_replaced_on_the_class_then_restored", _forward_replaced_on_the_class, [1, 1, 2, 2])


def _method_replaced_on_the_class() -> World:
    class WithHelper(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def helper(self, x):
            return x + 1

        def forward(self, x):
            return self.helper(self.lin(x))

    torch.manual_seed(0)
    module = WithHelper()
    original = WithHelper.helper
    return World(module, ones(2, 3), [
        lambda: setattr(WithHelper, "helper", lambda self, x: x + 100), lambda: setattr(WithHelper, "helper", original),
        lambda: setattr(module, "helper", lambda x: x - 100), lambda: delattr(module, "helper"),
        lambda: setattr(original, "__code__", (lambda self, x: x + 1000).__code__)])


_add("method_replaced_on_the_class_shadowed_on_the_instance_and_its_code_replaced", _method_replaced_on_the_class,
     [1, 1, 2, 2, 3, 3, 4], torch_frames=[1, 1, 1, 1, 2, 2, 2], torch_stale=True,
     why="torch.compile does not guard a module's methods against replacement on the class")


def _parameters_registered() -> World:
    class Summing(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x):
            return x * sum(p.sum() for p in self.parameters())

    module = Summing()
    return World(module, ones(3), [
        lambda: module.register_parameter("v", nn.Parameter(torch.ones(3))),
        lambda: module.register_buffer("b", torch.ones(3))])


_add("a_parameter_is_registered_while_forward_iterates_parameters", _parameters_registered, [1, 1, 2, 2])


def _sequential_changed() -> World:
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    return World(seq, ones(2, 3), [lambda: seq.append(nn.Linear(3, 3)), lambda: seq.pop(1) and None,
                                   lambda: seq.__setitem__(0, nn.Identity())])


_add("sequential_grows_shrinks_and_swaps_a_layer", _sequential_changed, [1, 1, 2, 3, 4])


def _module_dict_changed() -> World:
    class Routed(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleDict({"a": nn.Linear(3, 3)})

        def forward(self, x):
            for layer in self.layers.values():
                x = layer(x)
            return x

    torch.manual_seed(0)
    module = Routed()
    return World(module, ones(2, 3), [lambda: module.layers.update({"b": nn.Linear(3, 3)}),
                                      lambda: module.layers.pop("a") and None])


_add("module_dict_gains_and_loses_a_layer", _module_dict_changed, [1, 1, 2, 3])


def _state_dict_loaded() -> World:
    world = net_case()()
    state = {key: value * 2 for key, value in Net().state_dict().items()}
    world.changes = [lambda: world.target.load_state_dict(state) and None]
    return world


_add("state_dict_loaded_in_place", _state_dict_loaded, [1, 1, 1])


# -- what a resume function reads, after a graph break ---------------------------------------

AFTER_BREAK = 2


def _reads_a_global_after_a_break(x):
    x = x + 1
    graph_break()
    return x * AFTER_BREAK


@case([2, 2, 3, 4], fullgraph=False)
def a_global_read_after_a_graph_break_changes_value_then_type():
    return World(_reads_a_global_after_a_break, ones(3),
                 [_set_global("AFTER_BREAK", 3), _set_global("AFTER_BREAK", torch.full((3,), 4.0))],
                 _restore_globals(AFTER_BREAK=2))


@case([2, 2, 3], fullgraph=False)
def a_closure_cell_read_after_a_graph_break_changes():
    k = 2

    def f(x):
        x = x + 1
        graph_break()
        return x * k

    def change():
        nonlocal k
        k = 5
    return World(f, ones(3), [change])


@case([2, 2, 3], fullgraph=False)
def a_default_read_after_a_graph_break_changes():
    def f(x, k=2):
        x = x + 1
        graph_break()
        return x * k
    return World(f, ones(3), [lambda: setattr(f, "__defaults__", (5,))])


def _module_split_by_a_break() -> World:
    class Split(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.scale = 2

        def helper(self, x):
            return x + 1

        def forward(self, x):
            x = self.lin(x)
            graph_break()
            return self.helper(x) * self.scale

    torch.manual_seed(0)
    module = Split()
    return World(module, ones(3), [
        lambda: setattr(module, "scale", 3), lambda: setattr(module, "helper", lambda x: x - 100),
        lambda: setattr(Split, "helper", lambda self, x: x + 50), lambda: setattr(module.lin, "forward", lambda x: x * 0)])


_add("module_attributes_and_methods_read_after_a_graph_break_change", _module_split_by_a_break,
     [2, 2, 3, 4, 4, 6], fullgraph=False)


# -- the suite ------------------------------------------------------------------------------


@pytest.mark.parametrize("item", CASES, ids=[item.name for item in CASES])
def test_a_change_between_calls_recompiles_or_keeps_the_entry_never_a_stale_result(item):
    assert check_case(item, "graphwright") == item.frames


@pytest.mark.parametrize("item", [item for item in CASES if item.fullgraph],
                         ids=[item.name for item in CASES if item.fullgraph])
def test_without_fullgraph_too_no_result_is_stale(item):
    check_case(dataclasses.replace(item, fullgraph=False), "graphwright")


@pytest.mark.slow
@pytest.mark.parametrize("item", CASES, ids=[item.name for item in CASES])
def test_torch_compile_counts_the_same_graphs(item):
    """The reference: PyTorch's own compiler on the same program (its counts, or `why` not)."""
    if item.torch_skip:
        pytest.skip(item.why)
    expected = item.torch_frames or item.frames
    if item.torch_stale:
        frames = [count for _, count in run(item, "torch")]
    else:
        frames = check_case(item, "torch")
    assert frames == expected
