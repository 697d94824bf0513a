"""nonstrict_trace inputs and outputs: pytrees of tensors, primitives, containers, registered
classes and modules; the errors for unregistered classes; constants and specialisation."""
import copy
import dataclasses

import pytest
import torch
import torch.utils._pytree as pytree

import graphwright
from graphwright.testing import CompileCounter, CompileCounterWithBackend


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def compile_one_graph(fn, backend="eager"):
    counter = CompileCounterWithBackend(backend) if backend != "eager" else CompileCounter()
    return graphwright.compile(fn, fullgraph=True, backend=counter), counter


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


class PointTensor:
    def __init__(self, p, t):
        self.p = p
        self.t = t


class Unregistered:
    def __init__(self, x):
        self.x = x


pytree.register_pytree_node(Point, lambda p: ((p.x, p.y), None), lambda xs, _: Point(*xs))
pytree.register_pytree_node(PointTensor, lambda p: ((p.p, p.t), None), lambda xs, _: PointTensor(*xs))


@dataclasses.dataclass
class Pair:
    first: torch.Tensor
    second: torch.Tensor


pytree.register_dataclass(Pair)


class State:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, State) and other.n == self.n

    def __hash__(self):
        return hash(self.n)


pytree.register_constant(State)


@graphwright.nonstrict_trace
def add_all(*args, **kwargs):
    graphwright.graph_break()
    total = 0
    for leaf in pytree.tree_leaves((args, kwargs)):
        if isinstance(leaf, torch.Tensor):
            total = total + leaf
    return total


def test_tensor_arguments_inside_a_larger_expression():
    @graphwright.nonstrict_trace
    def trace_me(x, y):
        graphwright.graph_break()
        return x * y

    def fn(x, y):
        t0 = x + 1
        t2 = trace_me(x, y)
        return t0 * t2

    compiled, counter = compile_one_graph(fn, "aot_eager")
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(x, y), fn(x, y))
    assert counter.frame_count == 1


def test_none_inputs_including_inside_tuples_and_dicts():
    @graphwright.nonstrict_trace
    def trace_me(x, y, pair, d):
        graphwright.graph_break()
        out = x * 2 if y is None else x + y
        if pair[1] is None and d["b"] is None:
            out = out + d["a"]
        return out

    def fn(x):
        return trace_me(x, None, (x, None), {"a": x, "b": None})

    compiled, counter = compile_one_graph(fn)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), fn(x))
    assert counter.frame_count == 1


def test_none_outputs_inside_tuples_and_dicts():
    @graphwright.nonstrict_trace
    def trace_me(x):
        graphwright.graph_break()
        return None, (x + 1, None), {"a": None, "b": x * 2}

    def fn(x):
        none, pair, d = trace_me(x)
        assert none is None and pair[1] is None and d["a"] is None
        return pair[0] + d["b"]

    compiled, counter = compile_one_graph(fn)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), fn(x))
    assert counter.frame_count == 1


def test_primitive_inputs_and_outputs():
    @graphwright.nonstrict_trace
    def trace_me(x, n, scale, flag, name):
        graphwright.graph_break()
        out = x * scale + n if flag else x
        return out, len(name), name.upper(), scale * 2, not flag

    def fn(x):
        out, length, upper, doubled, negated = trace_me(x, 3, 0.5, True, "abc")
        return out + length + doubled, upper, negated

    compiled, counter = compile_one_graph(fn)
    x = torch.randn(4)
    actual, expected = compiled(x), fn(x)
    torch.testing.assert_close(actual[0], expected[0])
    assert actual[1:] == expected[1:] == ("ABC", False)
    assert counter.frame_count == 1


def test_plain_int_output_through_the_wrapper_form():
    def count_rows(x):
        graphwright.graph_break()
        return x.shape[0]

    def fn(x):
        return x * graphwright.nonstrict_trace(count_rows)(x)

    compiled, _ = compile_one_graph(fn)
    x = torch.randn(5, 2)
    torch.testing.assert_close(compiled(x), x * 5)


def test_lists_tuples_and_nested_containers():
    def fn(x, y):
        return add_all([x, (y, [x])], pair=(y, y), nested={"k": [x, {"z": y}]})

    compiled, counter = compile_one_graph(fn)
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(x, y), fn(x, y))
    assert counter.frame_count == 1


def test_pre_existing_dict_input():
    @graphwright.nonstrict_trace
    def trace_me(d, t):
        graphwright.graph_break()
        return d["a"] + d["b"] * t

    d = {"a": torch.randn(3), "b": torch.randn(3)}

    def fn(t):
        return trace_me(d, t) + 1

    compiled, counter = compile_one_graph(fn, "aot_eager")
    t = torch.randn(3)
    torch.testing.assert_close(compiled(t), fn(t))
    assert counter.frame_count == 1


def test_newly_constructed_dict_mutated_before_and_after_the_call():
    @graphwright.nonstrict_trace
    def trace_me(d):
        graphwright.graph_break()
        return d["x"] * d["y"]

    def fn(x, y):
        d = {"x": x}
        d["y"] = y + 1
        out = trace_me(d)
        d["x"] = out
        d["z"] = out * 2
        return d

    compiled, counter = compile_one_graph(fn)
    x, y = torch.randn(3), torch.randn(3)
    actual, expected = compiled(x, y), fn(x, y)
    assert actual.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key])
    assert counter.frame_count == 1


def test_registered_pytree_class_as_input_and_output():
    @graphwright.nonstrict_trace
    def trace_me(p):
        graphwright.graph_break()
        return Point(p.x + p.y, p.x * p.y)

    def fn(x, y):
        p = trace_me(Point(x, y))
        return p.x - p.y

    compiled, counter = compile_one_graph(fn, "aot_eager")
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(x, y), fn(x, y))
    assert counter.frame_count == 1


def test_pre_existing_registered_instance_and_returned_instance_leaving_the_region():
    @graphwright.nonstrict_trace
    def trace_me(p):
        graphwright.graph_break()
        return Point(p.y, p.x * 2)

    def fn(p):
        return trace_me(p)

    compiled, _ = compile_one_graph(fn)
    p = Point(torch.randn(2), torch.randn(2))
    actual, expected = compiled(p), fn(p)
    assert isinstance(actual, Point)
    torch.testing.assert_close(actual.x, expected.x)
    torch.testing.assert_close(actual.y, expected.y)


def test_nested_user_classes_holding_tensors():
    @graphwright.nonstrict_trace
    def trace_me(pt):
        graphwright.graph_break()
        return PointTensor(Point(pt.p.x * pt.t, pt.p.y), pt.t + 1)

    def fn(x, y, t):
        out = trace_me(PointTensor(Point(x, y), t))
        return out.p.x + out.p.y + out.t

    compiled, counter = compile_one_graph(fn)
    args = [torch.randn(3) for _ in range(3)]
    torch.testing.assert_close(compiled(*args), fn(*args))
    assert counter.frame_count == 1


def test_register_dataclass_input_and_output():
    @graphwright.nonstrict_trace
    def swap(pair):
        graphwright.graph_break()
        return Pair(pair.second * 2, pair.first)

    def fn(a, b):
        out = swap(Pair(a, b))
        return out.first + out.second

    compiled, counter = compile_one_graph(fn, "aot_eager")
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(a, b), fn(a, b))
    assert counter.frame_count == 1


def test_register_constant_same_instance_does_not_recompile_and_unequal_value_does():
    @graphwright.nonstrict_trace
    def trace_me(x, state):
        graphwright.graph_break()
        return x + state.n

    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(x, state):
        return trace_me(x, state)

    x = torch.randn(3)
    state = State(42)
    torch.testing.assert_close(fn(x, state), x + 42)
    torch.testing.assert_close(fn(x, state), x + 42)
    assert counter.frame_count == 1
    torch.testing.assert_close(fn(x, State(42)), x + 42)
    assert counter.frame_count == 1
    torch.testing.assert_close(fn(x, State(41)), x + 41)
    assert counter.frame_count == 2


def test_unregistered_class_input_is_the_required_error_with_a_registration_hint():
    @graphwright.nonstrict_trace
    def trace_me(p):
        return p.x + 1

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return trace_me(Unregistered(x))

    with pytest.raises(graphwright.Unsupported) as info:
        fn(torch.randn(3))
    message = str(info.value)
    assert "Invalid input type for nonstrict_trace-ed function" in message
    assert "register_pytree_node" in message and "Unregistered" in message
    assert "test_nonstrict_trace_pytrees.py" in message


def test_unregistered_class_nested_in_a_registered_one_is_an_input_error():
    @graphwright.nonstrict_trace
    def trace_me(p):
        return p.x.x + 1

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x, y):
        return trace_me(Point(Unregistered(x), y))

    with pytest.raises(graphwright.Unsupported, match="Invalid input type for nonstrict_trace-ed function"):
        fn(torch.randn(3), torch.randn(3))


def test_unregistered_class_output_is_the_required_error():
    @graphwright.nonstrict_trace
    def trace_me(x):
        return Unregistered(x + 1)

    @graphwright.compile(fullgraph=True, backend="eager")
    def fn(x):
        return trace_me(x).x

    with pytest.raises(graphwright.Unsupported) as info:
        fn(torch.randn(3))
    message = str(info.value)
    assert "Unsupported output type for nonstrict_trace-ed function" in message
    assert "Hint:" in message and "register_pytree_node" in message


def test_captured_global_and_closure_tensors_match_eager():
    cst = torch.ones(1)

    @graphwright.nonstrict_trace
    def trace_me(x):
        graphwright.graph_break()
        return x + cst + GLOBAL_OFFSET

    def fn(x):
        return trace_me(x) * 2

    compiled, counter = compile_one_graph(fn, "aot_eager")
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), fn(x))
    assert counter.frame_count == 1


GLOBAL_OFFSET = torch.full((3,), 0.5)


def test_captured_tensors_are_not_guarded_and_get_no_gradient_under_aot():
    weight = torch.randn(3, requires_grad=True)

    @graphwright.nonstrict_trace
    def trace_me(x):
        return x * weight

    counter = CompileCounterWithBackend("aot_eager")

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(x):
        return trace_me(x)

    x = torch.randn(3, requires_grad=True)
    with pytest.warns(UserWarning, match="requires grad but is not an input"):
        out = fn(x)
    out.sum().backward()
    torch.testing.assert_close(x.grad, weight.detach())
    assert weight.grad is None
    with torch.no_grad():
        weight.mul_(2)  # a constant: the graph is reused, not recompiled
    fn(x)
    assert counter.frame_count == 1


def test_primitive_values_are_specialised_per_call_site():
    @graphwright.nonstrict_trace
    def scale(x, k):
        graphwright.graph_break()
        return x * k

    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(x, k):
        return scale(x, 2) + scale(x, k)

    x = torch.randn(3)
    torch.testing.assert_close(fn(x, 3), x * 2 + x * 3)
    torch.testing.assert_close(fn(x, 3), x * 2 + x * 3)
    assert counter.frame_count == 1
    torch.testing.assert_close(fn(x, 5), x * 2 + x * 5)
    assert counter.frame_count == 2
    constants = [node.target.leaves for gm in counter.graphs for node in gm.graph.nodes
                 if hasattr(node.target, "leaves")]
    assert [2] in [[leaf for leaf in leaves if leaf is not None] for leaves in constants]


def test_container_structure_is_specialised_per_call_site():
    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(xs):
        return add_all(xs)

    two, three = [torch.randn(2) for _ in range(2)], [torch.randn(2) for _ in range(3)]
    torch.testing.assert_close(fn(two), two[0] + two[1])
    torch.testing.assert_close(fn(three), three[0] + three[1] + three[2])
    assert counter.frame_count == 2


class Scaler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("offset", torch.randn(4))

    @graphwright.nonstrict_trace
    def forward(self, x):
        graphwright.graph_break()
        return self.lin(x) + self.offset


def test_method_marked_with_nonstrict_trace_takes_self_as_an_input():
    torch.manual_seed(0)
    model = Scaler()
    reference = copy.deepcopy(model)
    counter = CompileCounterWithBackend("aot_eager")

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(m, x):
        return m(x).sum()

    x = torch.randn(2, 4)
    fn(model, x).backward()
    reference(x).sum().backward()
    assert counter.frame_count == 1
    torch.testing.assert_close(model.lin.weight.grad, reference.lin.weight.grad)
    torch.testing.assert_close(model.lin.bias.grad, reference.lin.bias.grad)


def test_method_of_a_plain_object_takes_self_as_an_input():
    class Holder:
        def __init__(self, t):
            self.t = t

        @graphwright.nonstrict_trace
        def apply(self, x):
            graphwright.graph_break()
            return x * self.t

    pytree.register_pytree_node(Holder, lambda h: ((h.t,), None), lambda xs, _: Holder(*xs))
    try:
        holder = Holder(torch.randn(3))
        compiled, counter = compile_one_graph(lambda x: holder.apply(x) + 1)
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), x * holder.t + 1)
        assert counter.frame_count == 1
    finally:
        pytree.SUPPORTED_NODES.pop(Holder)


def test_marked_function_stored_as_an_attribute_and_called_as_obj_f():
    class Config:
        pass

    obj = Config()
    obj.f = graphwright.nonstrict_trace(lambda x, y: x * y + 1)
    compiled, counter = compile_one_graph(lambda x, y: obj.f(x, y))
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(x, y), x * y + 1)
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dict_of_modules_input_gets_gradients(backend):
    @graphwright.nonstrict_trace
    def trace_me(modules, x):
        graphwright.graph_break()
        return modules["a"](x) + modules["b"](x)

    torch.manual_seed(0)
    linear_a, linear_b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    ref_a, ref_b = copy.deepcopy(linear_a), copy.deepcopy(linear_b)

    def fn(x):
        return trace_me({"a": linear_a, "b": linear_b}, x)

    compiled, counter = compile_one_graph(fn, backend)
    x = torch.randn(2, 3)
    compiled(x).sum().backward()
    trace_me({"a": ref_a, "b": ref_b}, x).sum().backward()
    assert counter.frame_count == 1
    for module, reference in ((linear_a, ref_a), (linear_b, ref_b)):
        torch.testing.assert_close(module.weight.grad, reference.weight.grad)
        torch.testing.assert_close(module.bias.grad, reference.bias.grad)


def test_module_whose_weight_was_reassigned_inside_the_region():
    @graphwright.nonstrict_trace
    def trace_me(module, x):
        graphwright.graph_break()
        return module(x)

    torch.manual_seed(0)
    linear = torch.nn.Linear(3, 3)
    replacement = torch.nn.Parameter(torch.randn(3, 3))
    original = linear.weight

    def fn(x):
        linear.weight = replacement
        return trace_me(linear, x)

    compiled, counter = compile_one_graph(fn)
    x = torch.randn(2, 3)
    out = compiled(x)
    torch.testing.assert_close(out, torch.nn.functional.linear(x, replacement, linear.bias))
    assert linear.weight is replacement  # the store is replayed after the graph
    linear.weight = original


def test_two_instances_of_one_module_class_each_get_their_own_constants():
    @graphwright.nonstrict_trace
    def run(m, x):
        return m.lin(x) * m.k

    class WithConstant(torch.nn.Module):
        def __init__(self, k):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.k = k

        def forward(self, x):
            return run(self, x)

    counter = CompileCounter()
    first, second = WithConstant(1.0), WithConstant(5.0)
    compiled_first = graphwright.compile(first, backend=counter, fullgraph=True)
    compiled_second = graphwright.compile(second, backend=counter, fullgraph=True)
    x = torch.randn(3, 2)
    torch.testing.assert_close(compiled_first(x), first(x))
    torch.testing.assert_close(compiled_second(x), second(x))
    torch.testing.assert_close(compiled_first(x), first(x))
    assert counter.frame_count == 2


def test_torch_size_output_is_a_constant():
    @graphwright.nonstrict_trace
    def shape_and_sum(x):
        return x.shape, x.sum()

    compiled, _ = compile_one_graph(lambda x: shape_and_sum(x)[1] * shape_and_sum(x)[0][0])
    x = torch.randn(3, 2)
    torch.testing.assert_close(compiled(x), x.sum() * 3)


class Cached:
    """Registered with only `value` as a child: `cache` is not part of the pytree."""

    def __init__(self, value, cache):
        self.value = value
        self.cache = cache


pytree.register_pytree_node(Cached, lambda c: ((c.value,), None), lambda xs, _: Cached(xs[0], None))


def test_attributes_a_registered_class_leaves_out_are_not_inputs():
    @graphwright.nonstrict_trace
    def trace_me(scale, c):
        assert c.cache is None
        return c.value * scale

    compiled, _ = compile_one_graph(lambda x, y: trace_me(x, Cached(y, x * 100)))
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(x, y), y * x)


class Mode:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, Mode) and other.n == self.n

    def __hash__(self):
        return hash(self.n)

    def __fx_repr__(self):
        return f"Mode({self.n})", {"Mode": Mode}


torch._library.opaque_object.register_opaque_type(Mode, typ="value")


def test_opaque_value_type_is_a_constant_guarded_by_equality():
    @graphwright.nonstrict_trace
    def trace_me(x, mode):
        graphwright.graph_break()
        return x * mode.n

    counter = CompileCounter()

    @graphwright.compile(fullgraph=True, backend=counter)
    def fn(x, mode):
        return trace_me(x, mode)

    x = torch.randn(3)
    torch.testing.assert_close(fn(x, Mode(2)), x * 2)
    torch.testing.assert_close(fn(x, Mode(2)), x * 2)
    assert counter.frame_count == 1
    torch.testing.assert_close(fn(x, Mode(3)), x * 3)
    assert counter.frame_count == 2
