"""allow_in_graph, disallow_in_graph and disable: every behaviour PyTorch 2.13's
`test/dynamo/test_decorators.py` checks in its tests of these decorators, written over
graphwright's API (one test here per test there, named after it).

Not ported, because they test TorchDynamo's machinery rather than a promise of the API:
`test_disable_recursive_false_weird` (frame execution strategies of the frame-evaluation
hook), `test_dynamo_disable_annotations` (`torch.export` node annotations),
`test_set_stance_fail_on_recompile_with_disable` and `test_set_stance_force_backend_with_disable`
(`set_stance`, which graphwright does not have). Graph breaks split the function, so graph and
op counts are those of `torch.compile`.
"""
import functools

import pytest
import torch

import graphwright
from graphwright.testing import CompileCounter, CompileCounterWithBackend


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def my_custom_function(x):
    return x + 1


def test_disallow_in_graph():
    counter = CompileCounter()

    @graphwright.compile(backend=counter)
    def fn(a):
        x = torch.add(a, 1)
        x = torch.add(x, 1)
        x = torch.sub(x, 1)
        x = torch.add(x, 1)
        return torch.add(x, 1)

    graphwright.disallow_in_graph(torch.sub)
    try:
        a = torch.randn(10)
        torch.testing.assert_close(fn(a), a + 3)
    finally:
        graphwright.allow_in_graph(torch.sub)
    assert counter.frame_count == 2  # the graph breaks at torch.sub
    assert counter.op_count == 4


def test_allow_in_graph():
    counter = CompileCounter()

    @graphwright.compile(backend=counter)
    def fn(a):
        x = torch.add(a, 1)
        x = torch.add(x, 1)
        x = my_custom_function(x)
        x = torch.add(x, 1)
        return torch.add(x, 1)

    graphwright.allow_in_graph(my_custom_function)
    try:
        a = torch.randn(10)
        torch.testing.assert_close(fn(a), a + 5)
    finally:
        graphwright.disallow_in_graph(my_custom_function)  # allowed, so it may be disallowed
    assert counter.frame_count == 1
    assert counter.op_count == 5  # the call is one node


def test_allow_in_graph_no_id_reuse():
    counter = CompileCounter()

    def do_allow_in_graph(x):
        return x + 1

    graphwright.allow_in_graph(do_allow_in_graph)
    del do_allow_in_graph

    # This function may well get the id the deleted one had: it must still be traced into.
    def dont_allow_in_graph(x):
        graphwright.graph_break()
        return x + 1

    @graphwright.compile(backend=counter)
    def fn(a):
        x = torch.add(a, 1)
        x = torch.add(x, 1)
        x = dont_allow_in_graph(x)
        x = torch.add(x, 1)
        return torch.add(x, 1)

    a = torch.randn(10)
    torch.testing.assert_close(fn(a), a + 5)
    assert counter.frame_count == 3  # the graph break inside it was seen


def test_incorrect_usage_disallow_in_graph():
    with pytest.raises(graphwright.InvalidMarkingError, match="disallow_in_graph is expected"):
        @graphwright.disallow_in_graph
        def fn1(x):
            return x.cos()


def test_disable_for_custom_op():
    library = torch.library.Library("gw_test_decorators", "DEF")  # noqa: TOR901
    try:
        library.define("custom(Tensor self) -> Tensor")

        # Its output size depends on the data, and it has no fake kernel: it cannot be traced.
        @torch.library.impl(library, "custom", "CPU")
        def custom_cpu(x):
            return x.nonzero()

        custom = graphwright.disable(torch.ops.gw_test_decorators.custom)

        def fn(x):
            a = torch.nn.functional.relu(x)
            b = custom(a)
            return torch.cos(b)

        x = torch.randint(2, (100,))
        counter = CompileCounter()
        torch.testing.assert_close(graphwright.compile(fn, backend=counter)(x), fn(x))
        assert counter.frame_count == 2
    finally:
        library._destroy()


def test_disable_ignores_outer_wraps():
    def orig_inner():
        pass

    def inner():
        pass

    inner._torchdynamo_orig_callable = orig_inner

    @functools.wraps(inner)
    def wrapper():
        raise AssertionError("wrapper called")

    disabled = graphwright.disable(fn=wrapper, recursive=True)  # neither calls nor unwraps it
    with pytest.raises(AssertionError, match="wrapper called"):
        disabled()


class SimpleLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = torch.nn.Linear(4, 4)

    def forward(self, inp):
        return self.layer0(torch.sigmoid(inp))


class SimpleModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = SimpleLinear()
        self.layer1 = torch.nn.Linear(4, 4)

    def forward(self, inp):
        z = self.layer0(torch.sin(inp))
        return self.layer1(z)


def _sigmoid_hook(module, args):
    return (args[0].sigmoid(),)


def _targets(gm):
    return [node.target for node in gm.graph.nodes]


def _check_layer0_ran_outside_the_graphs(counter):
    assert counter.frame_count == 2
    first, second = (_targets(gm) for gm in counter.graphs)
    assert torch.sin in first
    assert torch.sigmoid not in first and torch.sigmoid not in second  # the hook and layer0 ran eagerly
    assert "sigmoid" not in [target for target in first + second if isinstance(target, str)]


def test_disable_nn_modules_forward_hook():
    torch.manual_seed(0)
    model = SimpleModel()
    model.layer0.register_forward_pre_hook(_sigmoid_hook)
    model.layer0 = graphwright.disable(model.layer0)
    counter = CompileCounterWithBackend("eager")
    x = torch.randn(4)
    torch.testing.assert_close(graphwright.compile(model, backend=counter)(x), model(x))
    _check_layer0_ran_outside_the_graphs(counter)


def test_disable_nn_module_with_class_decorator():
    counter = CompileCounterWithBackend("eager")

    @graphwright.disable
    class DisabledLinear(SimpleLinear):
        pass

    @graphwright.compile(backend=counter)
    class CompiledModel(SimpleModel):
        def __init__(self):
            super().__init__()
            self.layer0 = DisabledLinear()

    torch.manual_seed(0)
    model = CompiledModel()
    model.layer0.register_forward_pre_hook(_sigmoid_hook)
    x = torch.randn(4)
    out = model(x)
    expected = model.layer1(model.layer0.layer0(torch.sigmoid(torch.sigmoid(torch.sin(x)))))
    torch.testing.assert_close(out, expected)
    _check_layer0_ran_outside_the_graphs(counter)


def test_disable_recursive_false():
    def fn2(x):
        return x + 1

    @graphwright.disable(recursive=False)
    def fn1(x):
        if torch.compiler.is_compiling():
            raise RuntimeError("bad")
        x = x.sigmoid()
        return fn2(x.cos())

    def fn(x):
        return fn1(x.tan())

    counter = CompileCounter()
    x = torch.randn(4)
    torch.testing.assert_close(graphwright.compile(fn, backend=counter)(x), fn(x))
    assert counter.frame_count == 2  # fn up to the call, and fn2 called from the uncompiled fn1

    # Applying disable(recursive=False) leaves the original function as it was.
    def fn3(x):
        if torch.compiler.is_compiling():
            return x - 1
        return fn2(x) + 2

    @graphwright.compile(backend=counter)
    def outer(f, x):
        return f(x)

    inp = torch.ones(3)
    fn3_disabled = graphwright.disable(fn3, recursive=False)
    for reset_first, function, expected in [(True, fn3, inp - 1), (False, fn3_disabled, inp + 3),
                                            (True, fn3_disabled, inp + 3), (False, fn3, inp - 1)]:
        if reset_first:
            graphwright.reset()
        counter.clear()
        torch.testing.assert_close(outer(function, inp), expected)
        assert counter.frame_count == 1
    # Compiling a function disabled with recursive=False compiles it.
    graphwright.reset()
    counter.clear()
    torch.testing.assert_close(graphwright.compile(fn3_disabled, backend=counter)(inp), inp - 1)
    assert counter.frame_count == 1


def test_nested_disable_decorator():
    counter = CompileCounter()

    @graphwright.disable()
    def fn1(x):
        return torch.sin(x) * 10

    @graphwright.compile(backend=counter)
    def fn2(x):
        x = x + 1
        x = x + 1
        x = fn1(x)  # graph break
        x = x + 1
        return x + 1

    @graphwright.compile(backend=counter, fullgraph=True)
    def fn3(x):
        return fn2(x)

    x = torch.randn(4, 5)
    torch.testing.assert_close(fn2(x), torch.sin(x + 2) * 10 + 2)
    assert counter.frame_count == 2
    assert counter.op_count == 4
    with pytest.raises(graphwright.Unsupported, match="Call to a function marked `graphwright.disable`"):
        fn3(x)


def test_disable_optimize():
    counter = CompileCounter()

    @graphwright.compile(backend=counter, disable=True)
    def f1(x):
        return x + 1

    torch.testing.assert_close(f1(torch.ones(6)), torch.full((6,), 2.0))
    assert counter.frame_count == 0

    @graphwright.compile(backend=counter, disable=True)
    def f2(x):
        return x + 1

    f2(torch.ones(6))
    assert counter.frame_count == 0
    # PyTorch's test also sets TORCHDYNAMO_DISABLE=1, an environment switch of TorchDynamo's own.


def test_torch_guards_stack_frame_register_inlining_disable():
    class Encoder(torch.nn.Module):
        def __init__(self, y):
            super().__init__()
            self.a = y

        @graphwright.disable
        def helper(self, x, y):
            return x * y

        def forward(self, a, *args):
            return self.helper(a + a, self.a)

    encoder, x = Encoder(2.0), torch.tensor([0.5, 0.5])
    counter = CompileCounter()
    torch.testing.assert_close(graphwright.compile(encoder, backend=counter)(x), encoder(x))
    # The disabled helper is never traced: its multiplication is in no graph.
    assert all(torch.mul not in _targets(gm) and "mul" not in _targets(gm) for gm in counter.graphs)


def test_torch_guards_stack_frame_register_inlining_partially_disable():
    class Encoder(torch.nn.Module):
        def __init__(self, y):
            super().__init__()
            self.register_parameter("param", y)

        @graphwright.disable
        def helper_disabled(self, x, y):
            return x.sin() * y.cos()

        def helper(self, x, y):
            return x * y

        def forward(self, a, *args):
            x = a + a
            return self.helper(x, self.param) + self.helper_disabled(x, self.param)

    encoder = Encoder(torch.nn.Parameter(torch.tensor([0.25, 0.25])))
    x = torch.tensor([0.5, 0.5])
    counter = CompileCounter()
    torch.testing.assert_close(graphwright.compile(encoder, backend=counter)(x), encoder(x))
    assert counter.frame_count == 2  # before the disabled call, and after it
    assert counter.op_count == 3


@pytest.mark.parametrize("recursive", [True, False])
def test_disable_recursive_flags(recursive):
    torch.manual_seed(0)
    model, other_model = SimpleModel(), SimpleModel()
    x = torch.randn(4)
    expected = model(x), other_model(x)
    model.forward = graphwright.disable(model.forward, recursive=recursive)
    other_model = graphwright.disable(other_model, recursive=recursive)
    from graphwright.strict.marked.markers import disable_mark
    assert disable_mark(model.forward).recursive is recursive
    assert disable_mark(other_model).recursive is recursive
    # Both can still be compiled, and give the same results.
    counter = CompileCounter()
    torch.testing.assert_close(graphwright.compile(model, backend=counter)(x), expected[0])
    torch.testing.assert_close(graphwright.compile(other_model, backend=counter)(x), expected[1])


def test_disable_class_and_instance_method():
    class Foo:
        def run(self, a, b, c):
            return self.work(a, b, c)

        @graphwright.disable
        def work(self, a, b, c):
            return a + b - c

    a, b, c = (torch.randint(0, 10, (10,)) for _ in range(3))
    foo = Foo()
    foo.work = graphwright.disable(foo.work)  # re-decorating the bound method keeps its binding
    torch.testing.assert_close(foo.run(a, b, c), a + b - c)
    foo2 = Foo()
    foo2.work = graphwright.disable(graphwright.disable(foo2.work))
    torch.testing.assert_close(foo2.run(a, b, c), a + b - c)
    counter = CompileCounter()
    compiled = graphwright.compile(lambda foo, a, b, c: foo.run(a, b, c) * 2, backend=counter)
    torch.testing.assert_close(compiled(foo2, a, b, c), (a + b - c) * 2)

    class Bar:
        def method(self, x):
            return x + 1

    bar = Bar()
    twice = graphwright.disable(graphwright.disable(Bar.method))
    assert twice(bar, 1) == 2
    assert graphwright.disable(bar.method)(1) == 2


def test_disable_functools_wraps():
    @graphwright.disable
    def inner_fn(x):
        return x + 1

    @functools.wraps(inner_fn)  # copies the disabled wrapper's attributes, its mark among them
    def outer_wrapper(x):
        return inner_fn(x) * 2

    disabled_outer = graphwright.disable(outer_wrapper)
    x = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(disabled_outer(x), outer_wrapper(x))
    # The copied mark does not disable `outer_wrapper`: it is traced, up to the disabled call.
    counter = CompileCounter()
    compiled = graphwright.compile(lambda x: outer_wrapper(x.sin()), backend=counter)
    torch.testing.assert_close(compiled(x), (x.sin() + 1) * 2)
    assert counter.frame_count == 2 and counter.op_count == 2  # sin, then the * 2 after the break
