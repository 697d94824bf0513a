"""leaf_function: every behaviour PyTorch 2.13's `test/dynamo/test_decorators.py` checks for its
`leaf_function` tests, written over graphwright's API (one test here per test there, named
after it; parametrised where PyTorch's is), plus what issue 10 asks of the decorator.
PyTorch's tests compare printed graphs; these check what those graphs show (one opaque call,
module parameters as inputs, the body absent from the aten graphs).

Each program runs eagerly and compiled (the `eager` and `aot_eager` backends), and outputs
and gradients are compared.
"""
import copy
import gc
import weakref

import pytest
import torch
import torch.utils._pytree as pytree

import graphwright
from graphwright.testing import CompileCounterWithBackend
from tests.test_nonstrict_trace_training import Recording


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()
    graphwright.config.leaf_function_validate_outputs = False
    graphwright.config.leaf_function_check_escaped_gradients = False


def _clone_args(args):
    return pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone().requires_grad_(t.requires_grad), args)


def check_modes_agree(module_class, make_args, loss, iterations=2):
    """Run the module eagerly, compiled with `eager` and compiled with `aot_eager` (fullgraph),
    `iterations` times on fresh inputs; outputs, parameter gradients and input gradients agree.
    Returns the two backends' recorders."""
    torch.manual_seed(0)
    eager = module_class()
    modules = {"eager": module_class(), "aot_eager": module_class()}
    recorders = {"eager": CompileCounterWithBackend("eager"), "aot_eager": Recording("aot_eager")}
    compiled = {}
    for name, module in modules.items():
        module.load_state_dict(eager.state_dict())
        compiled[name] = graphwright.compile(module, backend=recorders[name], fullgraph=True)
    for _ in range(iterations):
        for module in (eager, *modules.values()):
            module.zero_grad()
        args = make_args()
        expected = eager(*args)
        loss(expected).backward()
        for name, module in modules.items():
            copied = _clone_args(args)
            out = compiled[name](*copied)
            loss(out).backward()
            torch.testing.assert_close(out, expected, msg=f"{name} output")
            for (param_name, param), reference in zip(module.named_parameters(), eager.parameters()):
                torch.testing.assert_close(param.grad, reference.grad, msg=f"{name} grad of {param_name}")
            for original, copy_ in zip(pytree.tree_leaves(args), pytree.tree_leaves(copied)):
                if isinstance(original, torch.Tensor) and original.requires_grad:
                    torch.testing.assert_close(copy_.grad, original.grad, msg=f"{name} input grad")
    return recorders


def _leaf_nodes(gm):
    return [node for node in gm.graph.nodes if type(node.target).__name__ == "LeafCall"]


def _first_output_sum(out):
    return out[0].sum()


# -- PyTorch's tests ------------------------------------------------------------------------------

def test_leaf_function_simple():
    @graphwright.leaf_function
    def non_tracable_forward(mod, x):
        if x.sum() > 0:  # data-dependent: no tracer could take this branch for every input
            return (mod.linear(x),)
        return (mod.linear(x) + x,)

    @non_tracable_forward.register_fake
    def _(mod, x):
        return (mod.linear(x),)

    class NonTracable(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return non_tracable_forward(self, x)

    recorders = check_modes_agree(NonTracable, lambda: (torch.randn(3, 3, requires_grad=True),),
                                  _first_output_sum)
    graph = recorders["eager"].graphs[0]
    assert len(_leaf_nodes(graph)) == 1
    assert sum(node.op == "placeholder" for node in graph.graph.nodes) == 3  # x, weight, bias
    code = recorders["aot_eager"].aten_code()
    assert "graphwright.leaf_call.default" in code and "graphwright.leaf_call_backward.default" in code
    assert "aten.addmm" not in code  # the body is not traced into


def test_leaf_function_with_logging(capsys):
    @graphwright.leaf_function
    def logging_forward(mod, x):
        print("Processing input")
        return (mod.linear(x),)

    @logging_forward.register_fake
    def _(mod, x):
        return (mod.linear(x),)

    class LoggingModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return logging_forward(self, x)

    check_modes_agree(LoggingModule, lambda: (torch.randn(3, 3, requires_grad=True),), _first_output_sum)
    # eager, compiled eager, compiled aot_eager; two iterations each; never again in backward
    assert capsys.readouterr().out.count("Processing input") == 6


def test_leaf_function_dynamic_autograd_module_config():
    @graphwright.leaf_function
    def configurable_scale(mod, x):
        if mod.use_double_scale:  # module state read at run time, not guarded
            return (mod.linear(x) * 2,)
        return (mod.linear(x) * 3,)

    @configurable_scale.register_fake
    def _(mod, x):
        return (mod.linear(x),)

    class ConfigurableModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)
            self.use_double_scale = True

        def forward(self, x):
            return configurable_scale(self, x)

    eager = ConfigurableModule()
    module = ConfigurableModule()
    module.load_state_dict(eager.state_dict())
    counter = CompileCounterWithBackend("aot_eager")
    compiled = graphwright.compile(module, backend=counter, fullgraph=True)
    value = torch.randn(3, 3)
    grads = []
    for double in (True, False):
        eager.use_double_scale = module.use_double_scale = double
        x, x_compiled = value.clone().requires_grad_(), value.clone().requires_grad_()
        expected, out = eager(x), compiled(x_compiled)
        expected[0].sum().backward()
        out[0].sum().backward()
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(x_compiled.grad, x.grad)
        grads.append(x.grad)
    assert not torch.equal(grads[0], grads[1])  # the autograd graph is built at run time
    assert counter.frame_count == 1


def test_leaf_function_dynamic_autograd_closure():
    config = {"use_double_scale": True}

    @graphwright.leaf_function
    def configurable_scale(x, y):
        if config["use_double_scale"]:  # a closure read at run time: no recompile
            return (x @ y * 2,)
        return (x @ y * 3,)

    @configurable_scale.register_fake
    def _(x, y):
        return (x @ y,)

    def fn(x, y):
        return configurable_scale(x, y)

    counter = CompileCounterWithBackend("aot_eager")
    compiled = graphwright.compile(fn, backend=counter, fullgraph=True)
    x_value, y_value = torch.randn(3, 3), torch.randn(3, 3)
    grads = []
    for double in (True, False):
        config["use_double_scale"] = double
        x, y = x_value.clone().requires_grad_(), y_value.clone().requires_grad_()
        xc, yc = x_value.clone().requires_grad_(), y_value.clone().requires_grad_()
        expected, out = fn(x, y), compiled(xc, yc)
        expected[0].sum().backward()
        out[0].sum().backward()
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close((xc.grad, yc.grad), (x.grad, y.grad))
        grads.append((x.grad, y.grad))
    assert not torch.equal(grads[0][0], grads[1][0]) and not torch.equal(grads[0][1], grads[1][1])
    assert counter.frame_count == 1


def test_leaf_function_closure_constants_without_grad():
    closure_scale = 2.0
    closure_tensor = torch.tensor([1.0, 2.0, 3.0])

    @graphwright.leaf_function
    def closure_forward(mod, x):
        out = mod.linear(x) * closure_scale * mod.scale
        return (out + closure_tensor + mod.offset,)

    @closure_forward.register_fake
    def _(mod, x):
        return (mod.linear(x) + mod.offset,)

    class ClosureModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)
            self.scale = 3.0
            self.offset = torch.nn.Parameter(torch.ones(3))

        def forward(self, x):
            return closure_forward(self, x)

    recorders = check_modes_agree(ClosureModule, lambda: (torch.randn(3, 3, requires_grad=True),),
                                  _first_output_sum)
    graph = recorders["eager"].graphs[0]
    assert sum(node.op == "placeholder" for node in graph.graph.nodes) == 4  # x, offset, weight, bias


def test_leaf_function_pytree_inputs():
    @graphwright.leaf_function
    def pytree_forward(mod, inputs):
        if inputs["x"].sum() > 0:
            return (mod.linear(inputs["x"]), inputs["y"] + 1)
        return (mod.linear(inputs["x"]) + inputs["y"], inputs["y"] - 1)

    @pytree_forward.register_fake
    def _(mod, inputs):
        return (mod.linear(inputs["x"]), inputs["y"])

    class PytreeModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, inputs):
            return pytree_forward(self, inputs)

    check_modes_agree(
        PytreeModule,
        lambda: ({"x": torch.randn(3, 3, requires_grad=True), "y": torch.randn(3, 3, requires_grad=True)},),
        lambda out: out[0].sum() + out[1].sum())


def test_leaf_function_nested_annotations():
    @graphwright.leaf_function
    def inner_leaf_forward(mod, x):
        return (mod.linear(x) + x,)

    @inner_leaf_forward.register_fake
    def _(mod, x):
        return (mod.linear(x),)

    class InnerLeaf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return inner_leaf_forward(self, x)

    @graphwright.leaf_function
    def outer_leaf_forward(mod, x):
        return mod.inner(mod.linear(x) + x)  # calls the inner leaf function eagerly

    @outer_leaf_forward.register_fake
    def _(mod, x):
        return mod.inner(mod.linear(x))  # its fake runs the inner one's fake

    class OuterLeaf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = InnerLeaf()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return outer_leaf_forward(self, x)

    recorders = check_modes_agree(OuterLeaf, lambda: (torch.randn(3, 3, requires_grad=True),),
                                  _first_output_sum)
    graph = recorders["eager"].graphs[0]
    assert len(_leaf_nodes(graph)) == 1  # one opaque call; the inner one happens inside it
    assert sum(node.op == "placeholder" for node in graph.graph.nodes) == 5


def _nonzero_modules():
    @graphwright.leaf_function
    def nonzero_forward(mod, x):
        out = mod.linear(x)
        return (out, (out > 0).nonzero())

    @nonzero_forward.register_fake
    def _(mod, x):
        out = mod.linear(x)
        return out, (out > 0).nonzero()

    class NonzeroModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return nonzero_forward(self, x)

    class OuterModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre_linear = torch.nn.Linear(3, 3)
            self.nonzero_module = NonzeroModule()
            self.scale = torch.nn.Parameter(torch.tensor(2.0))

        def forward(self, x):
            out, indices = self.nonzero_module(torch.relu(self.pre_linear(x)))
            return out * self.scale + indices.shape[0], indices

    return OuterModule


def test_leaf_function_data_dependent_nonzero():
    # The fake's output size depends on data: an unbacked size, as under torch.compile's fullgraph.
    check_modes_agree(_nonzero_modules(), lambda: (torch.randn(3, 3, requires_grad=True),), _first_output_sum)


def test_leaf_function_data_dependent_item():
    # A scalar the fake computes from data is a graph value (the real one at run time), not a constant.
    @graphwright.leaf_function
    def item_forward(mod, x):
        out = mod.linear(x)
        return (out, out.sum().item())

    @item_forward.register_fake
    def _(mod, x):
        out = mod.linear(x)
        return (out, out.sum().item())

    class ItemModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return item_forward(self, x)

    check_modes_agree(ItemModule, lambda: (torch.randn(3, 3, requires_grad=True),), _first_output_sum)


@graphwright.leaf_function
def _branchy_leaf_forward(mod, x):
    if x.sum() > 0:
        return (mod.linear(x),)
    return (mod.linear(x) + x,)


@_branchy_leaf_forward.register_fake
def _(mod, x):
    return (mod.linear(x),)


class _LeafModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return _branchy_leaf_forward(self, x)


def _check_models_equal(expected_model, model, x):
    x_test = x.detach().clone().requires_grad_()
    expected, out = expected_model(x), model(x_test)
    torch.testing.assert_close(out, expected)
    expected.sum().backward()
    out.sum().backward()
    torch.testing.assert_close(x_test.grad, x.grad)
    for (name, param), reference in zip(model.named_parameters(), expected_model.parameters()):
        torch.testing.assert_close(param.grad, reference.grad, msg=name)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_multiple_compiled_submodules(backend):
    class Submodule1(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre_linear = torch.nn.Linear(4, 4)
            self.leaf = _LeafModule()

        def forward(self, x):
            return self.leaf(torch.relu(self.pre_linear(x)))[0]

    class Submodule2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.leaf = _LeafModule()
            self.post_linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.sigmoid(self.post_linear(self.leaf(x)[0]))

    class Submodule3(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.leaf1 = _LeafModule()
            self.leaf2 = _LeafModule()

        def forward(self, x):
            return self.leaf1(x)[0] + self.leaf2(x)[0]

    class TopLevel(torch.nn.Module):
        def __init__(self, compile_submodules):
            super().__init__()
            self.submodule1, self.submodule2, self.submodule3 = Submodule1(), Submodule2(), Submodule3()
            self.final_linear = torch.nn.Linear(4, 4)
            self.compile_submodules = compile_submodules

        def forward(self, x):
            parts = [self.submodule1, self.submodule2, self.submodule3]
            for part in parts:
                x = graphwright.compile(part, backend=backend)(x) if self.compile_submodules else part(x)
            return self.final_linear(x)

    torch.manual_seed(0)
    expected_model, model = TopLevel(False), TopLevel(True)
    model.load_state_dict(expected_model.state_dict())
    _check_models_equal(expected_model, model, torch.randn(2, 4, requires_grad=True))


@pytest.mark.parametrize("do_compile", [False, True])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_with_graph_breaks(backend, do_compile):
    class TopLevel(torch.nn.Module):
        def __init__(self, do_compile):
            super().__init__()
            self.leaf1, self.leaf2, self.leaf3 = _LeafModule(), _LeafModule(), _LeafModule()
            self.final_linear = torch.nn.Linear(4, 4)
            self.do_compile = do_compile

        def _forward(self, x):
            out = self.leaf1(x)[0]
            graphwright.graph_break()
            out = self.leaf2(out)[0]
            graphwright.graph_break()
            return self.final_linear(self.leaf3(out)[0])

        def forward(self, x):
            if self.do_compile:
                return graphwright.compile(self._forward, backend=backend)(x)
            return self._forward(x)

    torch.manual_seed(0)
    expected_model, model = TopLevel(False), TopLevel(do_compile)
    model.load_state_dict(expected_model.state_dict())
    _check_models_equal(expected_model, model, torch.randn(2, 4, requires_grad=True))


class _HelperModule(torch.nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.scale = scale

    def forward(self, x):
        return self.linear(x) * self.scale


def test_leaf_function_with_module_in_pytree():
    @graphwright.leaf_function
    def main_forward(modules, x):
        if x.sum() > 0:
            return (modules["first"](x) + modules["second"](x),)
        return (modules["first"](x) - modules["second"](x),)

    @main_forward.register_fake
    def _(modules, x):
        return (modules["first"](x) + modules["second"](x),)

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.helper1, self.helper2 = _HelperModule(1.0), _HelperModule(0.5)

        def forward(self, x):
            return main_forward({"first": self.helper1, "second": self.helper2}, x)

    check_modes_agree(Wrapper, lambda: (torch.randn(3, 3, requires_grad=True),), _first_output_sum)


def test_leaf_function_with_module_as_kwarg():
    @graphwright.leaf_function
    def main_forward(x, helper_mod=None):
        if x.sum() > 0:
            return (helper_mod(x),)
        return (helper_mod(x) + x,)

    @main_forward.register_fake
    def _(x, helper_mod=None):
        return (helper_mod(x),)

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.helper = _HelperModule()

        def forward(self, x):
            return main_forward(x, helper_mod=self.helper)

    check_modes_agree(Wrapper, lambda: (torch.randn(3, 3, requires_grad=True),), _first_output_sum)


def test_leaf_function_missing_fake_impl_error():
    @graphwright.leaf_function
    def no_fake(mod, x):
        return (mod.linear(x),)

    class Simple(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return no_fake(self, x)

    module, x = Simple(), torch.randn(3, 3)
    with pytest.raises(graphwright.InvalidMarkingError, match="requires a fake implementation"):
        module(x)
    with pytest.raises(graphwright.GraphwrightError, match="requires a fake implementation"):
        graphwright.compile(module, backend="eager", fullgraph=True)(x)
    with pytest.raises(graphwright.GraphwrightError, match="requires a fake implementation"):
        graphwright.compile(module, backend="eager")(x)  # the break runs the call eagerly: same error


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_constant_tensor_closure_error(backend):
    weight = torch.randn(3, 3)

    @graphwright.leaf_function
    def closure_forward(x):
        return (x @ weight,)  # the real function may read a constant tensor

    @closure_forward.register_fake
    def _(x):
        return (x @ weight,)  # its fake may not: it must only use its arguments

    class Closure(torch.nn.Module):
        def forward(self, x):
            return closure_forward(x)

    module, x = Closure(), torch.randn(3, 3, requires_grad=True)
    torch.testing.assert_close(module(x)[0], x @ weight)
    with pytest.raises(graphwright.Unsupported) as info:
        graphwright.compile(module, backend=backend, fullgraph=True)(x)
    assert "Error in the fake implementation of a leaf_function" in str(info.value)
    assert "fake" in str(info.value) and "real tensor" in str(info.value)
    assert info.value.user_stack[-1].line == "return (x @ weight,)  # its fake may not: it must only use its arguments"


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_input_mutation_error(backend):
    @graphwright.leaf_function
    def mutate_input(x):
        x.add_(1)
        return (x,)

    @mutate_input.register_fake
    def _(x):
        x.add_(1)
        return (x,)

    def fn(x):
        return mutate_input(x)

    with pytest.raises(graphwright.LeafFunctionError, match="mutates its input `x`"):
        fn(torch.randn(3, 3))
    # Compiled, PyTorch reports autograd's refusal of an in-place update of a leaf that requires
    # grad. graphwright meets the undeclared mutation first, when the fake runs as the function
    # will (on its inputs as given), and names the input, as issue 10 asks.
    compiled = graphwright.compile(fn, backend=backend, fullgraph=True)
    with pytest.raises(graphwright.Unsupported, match="mutates its input `x`"):
        compiled(torch.randn(3, 3, requires_grad=True))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fn(torch.randn(3, 3, requires_grad=True))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_validation_dtype_mismatch(backend):
    @graphwright.leaf_function
    def forward(mod, x):
        return (mod.linear(x),)

    @forward.register_fake
    def _(mod, x):
        return (mod.linear(x).double(),)

    class Mismatch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return forward(self, x)

    graphwright.config.leaf_function_validate_outputs = True
    with pytest.raises(graphwright.LeafFunctionError, match="Dtype mismatch"):
        graphwright.compile(Mismatch(), backend=backend)(torch.randn(3, 3))


@pytest.mark.parametrize("validate_outputs", [True, False])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_validation_shape_mismatch(backend, validate_outputs):
    @graphwright.leaf_function
    def forward(mod, x):
        return (mod.linear(x),)

    @forward.register_fake
    def _(mod, x):
        return (torch.zeros(x.shape[0], 6),)

    class Mismatch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return forward(self, x)

    graphwright.config.leaf_function_validate_outputs = validate_outputs
    compiled = graphwright.compile(Mismatch(), backend=backend)
    if validate_outputs:
        with pytest.raises(graphwright.LeafFunctionError, match="Shape mismatch"):
            compiled(torch.randn(3, 3))
    else:
        assert compiled(torch.randn(3, 3))[0].shape == (3, 3)  # what the real function returned


def test_leaf_function_no_module_inputs():
    @graphwright.leaf_function
    def my_custom_fn(inputs, scale, offset):
        x, y = inputs["x"], inputs["y"]
        if x.sum() > 0:
            return (x * scale + y + offset, x.sum() + y.sum())
        return (x * scale - y + offset, x.sum() - y.sum())

    @my_custom_fn.register_fake
    def _(inputs, scale, offset):
        x, y = inputs["x"], inputs["y"]
        return (x * scale + y + offset, x.sum() + y.sum())

    class NoModuleInputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale, self.offset = 2.0, 1

        def forward(self, x, y):
            return my_custom_fn({"x": x, "y": y}, self.scale, self.offset)

    check_modes_agree(NoModuleInputs,
                      lambda: (torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)),
                      lambda out: out[0].sum() + out[1].sum())


@pytest.mark.parametrize("check_escaped_gradients", [True, False])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_escaped_gradient_multiple_tensors(backend, check_escaped_gradients):
    weight1, weight2 = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)

    @graphwright.leaf_function
    def uses_closures(x):
        return (x @ weight1 + x @ weight2,)

    @uses_closures.register_fake
    def _(x):
        return (torch.empty(x.shape[0], 3),)

    compiled = graphwright.compile(lambda x: uses_closures(x), backend=backend, fullgraph=True)
    graphwright.config.leaf_function_check_escaped_gradients = check_escaped_gradients
    x = torch.randn(2, 3, requires_grad=True)
    if check_escaped_gradients:
        with pytest.raises(graphwright.LeafFunctionError, match="2 tensor"):
            compiled(x)
    else:
        assert compiled(x)[0].shape == (2, 3)


@pytest.mark.parametrize("check_escaped_gradients", [True, False])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_escaped_gradient_input_no_grad(backend, check_escaped_gradients):
    weight = torch.randn(3, 3, requires_grad=True)

    @graphwright.leaf_function
    def uses_closure(x):
        return (x @ weight,)

    @uses_closure.register_fake
    def _(x):
        return (torch.empty(x.shape[0], 3),)

    compiled = graphwright.compile(lambda x: uses_closure(x), backend=backend, fullgraph=True)
    graphwright.config.leaf_function_check_escaped_gradients = check_escaped_gradients
    assert compiled(torch.randn(2, 3))[0].shape == (2, 3)  # no input needs grad: nothing to check


@pytest.mark.parametrize("check_escaped_gradients", [True, False])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_escaped_gradient_mixed_inputs(backend, check_escaped_gradients):
    base1, base2 = torch.randn(3, 3, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    closure1, closure2 = base1 * 2, base2 * 3

    @graphwright.leaf_function
    def mixed_inputs(x, y):
        return (x @ closure1 + y, x @ closure2)

    @mixed_inputs.register_fake
    def _(x, y):
        return (torch.empty(x.shape[0], 3), torch.empty(x.shape[0], 4))

    compiled = graphwright.compile(lambda x, y: mixed_inputs(x, y), backend=backend, fullgraph=True)
    graphwright.config.leaf_function_check_escaped_gradients = check_escaped_gradients
    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
    if check_escaped_gradients:
        with pytest.raises(graphwright.LeafFunctionError, match="2 tensor"):
            compiled(x, y)
    else:
        out = compiled(x, y)
        assert out[0].shape == (2, 3) and out[1].shape == (2, 4)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_escaped_gradient_error_message_contains_tensor_info(backend):
    weight = torch.randn(4, 5, dtype=torch.float32, requires_grad=True)

    @graphwright.leaf_function
    def uses_closure(x):
        return (x @ weight,)

    @uses_closure.register_fake
    def _(x):
        return (torch.empty(x.shape[0], 5),)

    compiled = graphwright.compile(lambda x: uses_closure(x), backend=backend, fullgraph=True)
    graphwright.config.leaf_function_check_escaped_gradients = True
    with pytest.raises(graphwright.LeafFunctionError, match=r"shape=\[4, 5\].*dtype="):
        compiled(torch.randn(2, 4, requires_grad=True))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_escaped_gradient_actually_lost(backend):
    weight = torch.randn(3, 3, requires_grad=True)

    @graphwright.leaf_function
    def uses_closure(x):
        return (x @ weight,)

    @uses_closure.register_fake
    def _(x):
        return (torch.empty(x.shape[0], 3),)

    compiled = graphwright.compile(lambda x: uses_closure(x), backend=backend, fullgraph=True)
    x = torch.randn(2, 3, requires_grad=True)
    compiled(x)[0].sum().backward()
    torch.testing.assert_close(x.grad, weight.detach().sum(dim=1).expand(2, 3))
    assert weight.grad is None


def test_leaf_function_and_nonstrict_trace_mutually_exclusive():
    message = "cannot be both marked as @leaf_function and @nonstrict_trace"
    with pytest.raises(graphwright.InvalidMarkingError, match=message):
        @graphwright.leaf_function
        @graphwright.nonstrict_trace
        def bad1(x):
            return (x,)
    with pytest.raises(graphwright.InvalidMarkingError, match=message):
        @graphwright.nonstrict_trace
        @graphwright.leaf_function
        def bad2(x):
            return (x,)


def test_leaf_function_no_return_value(capsys):
    @graphwright.leaf_function
    def no_return(x):
        print("processing")

    @no_return.register_fake
    def _(x):
        pass

    class Mod(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            no_return(x)
            return (self.linear(x),)

    recorders = check_modes_agree(Mod, lambda: (torch.randn(3, 3, requires_grad=True),), _first_output_sum)
    assert capsys.readouterr().out.count("processing") == 6
    graph = recorders["eager"].graphs[0]
    assert len(_leaf_nodes(graph)) == 1  # kept although nothing uses its (empty) result


def test_leaf_function_output_structure_mismatch():
    @graphwright.leaf_function
    def mismatched(x):
        return {"a": x, "b": x * 2}

    @mismatched.register_fake
    def _(x):
        return (x, x * 2)

    compiled = graphwright.compile(lambda x: mismatched(x), backend="eager")
    with pytest.raises(graphwright.LeafFunctionError, match="output structure mismatch"):
        compiled(torch.randn(3, 3))


def test_leaf_function_nested_output():
    @graphwright.leaf_function
    def nested_output(linear1, linear2, linear3, x):
        shift = 0 if x.sum() > 0 else 1
        return {"out": (linear1(x) + shift, linear2(x) + shift), "extra": linear3(x) + shift, "count": 42}

    @nested_output.register_fake
    def _(linear1, linear2, linear3, x):
        return {"out": (linear1(x), linear2(x)), "extra": linear3(x), "count": 42}

    class NestedOutput(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1, self.linear2, self.linear3 = (torch.nn.Linear(3, 3) for _ in range(3))

        def forward(self, x):
            result = nested_output(self.linear1, self.linear2, self.linear3, x)
            return result["out"][0] * result["count"] + result["out"][1] + result["extra"]

    check_modes_agree(NestedOutput, lambda: (torch.randn(3, 3, requires_grad=True),), lambda out: out.sum())


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


pytree.register_pytree_node(Point, lambda p: ((p.x, p.y), ()), lambda xy, _: Point(*xy),
                            serialized_type_name=f"{__name__}.Point")


def test_leaf_function_custom_pytree_output():
    @graphwright.leaf_function
    def point_fn(linear1, linear2, x):
        return (Point(linear1(x), linear2(x)), 0.5)

    @point_fn.register_fake
    def _(linear1, linear2, x):
        return (Point(linear1(x), linear2(x)), 0.5)

    class PointModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1, self.linear2 = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)

        def forward(self, x):
            p, scale = point_fn(self.linear1, self.linear2, x)
            return (p.x * scale, p.y * scale)

    check_modes_agree(PointModule, lambda: (torch.randn(3, 3, requires_grad=True),),
                      lambda out: out[0].sum() + out[1].sum())


def test_leaf_function_fake_requires_grad_ignored():
    @graphwright.leaf_function
    def double(x):
        return (x * 2,)

    @double.register_fake
    def _(x):
        return (torch.empty_like(x).requires_grad_(False),)

    counter = CompileCounterWithBackend("eager")
    compiled = graphwright.compile(lambda x: double(x), backend=counter, fullgraph=True)
    x = torch.randn(3, 3, requires_grad=True)
    out = compiled(x)
    assert out[0].requires_grad
    out[0].sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3, 3), 2.0))
    (node,) = _leaf_nodes(counter.graphs[0])
    assert node.meta["example_value"][0].requires_grad


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_input_mutation_non_grad(backend):
    @graphwright.leaf_function(mutates_args={"buf"})
    def mutate_buffer(x, buf):
        buf.add_(1)
        return (x + buf,)

    @mutate_buffer.register_fake
    def _(x, buf):
        buf.add_(1)
        return (x + buf,)

    def fn(x, buf):
        return mutate_buffer(x, buf)

    x, buf = torch.randn(3, 3), torch.randn(3, 3)
    buf_eager, buf_compiled = buf.clone(), buf.clone()
    torch.testing.assert_close(fn(x, buf_eager)[0], x + buf + 1)
    torch.testing.assert_close(buf_eager, buf + 1)
    compiled = graphwright.compile(fn, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x, buf_compiled)[0], x + buf + 1)
    torch.testing.assert_close(buf_compiled, buf + 1)  # applied once


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_input_mutation_mixed(backend):
    @graphwright.leaf_function(mutates_args={"buf"})
    def mixed(x, buf):
        buf.mul_(2)
        return (x * buf,)

    @mixed.register_fake
    def _(x, buf):
        buf.mul_(2)
        return (x * buf,)

    def fn(x, buf):
        return mixed(x, buf)

    x, buf = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3)
    buf_eager, buf_compiled = buf.clone(), buf.clone()
    torch.testing.assert_close(fn(x, buf_eager)[0], x * (buf * 2))
    torch.testing.assert_close(buf_eager, buf * 2)
    compiled = graphwright.compile(fn, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x, buf_compiled)[0], x * (buf * 2))
    torch.testing.assert_close(buf_compiled, buf * 2)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_input_mutation_module_buffer(backend):
    @graphwright.leaf_function(mutates_args={"model.running_mean"})
    def update_stats(model, x):
        model.running_mean.add_(x.mean(dim=0))
        return (model.linear(x),)

    @update_stats.register_fake
    def _(model, x):
        model.running_mean.add_(x.mean(dim=0))
        return (model.linear(x),)

    class WithStats(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("running_mean", torch.zeros(3))
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x):
            return update_stats(self, x)

    module, x = WithStats(), torch.randn(4, 3)
    eager_module, compiled_module = copy.deepcopy(module), copy.deepcopy(module)
    expected = eager_module(x)
    torch.testing.assert_close(eager_module.running_mean, x.mean(dim=0))
    out = graphwright.compile(compiled_module, backend=backend, fullgraph=True)(x)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(compiled_module.running_mean, x.mean(dim=0))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_input_mutation_pytree(backend):
    @graphwright.leaf_function(mutates_args={"buffers"})
    def update_buffers(x, buffers):
        for buf in buffers:
            buf.add_(1)
        return (x + sum(buffers),)

    @update_buffers.register_fake
    def _(x, buffers):
        for buf in buffers:
            buf.add_(1)
        return (x + sum(buffers),)

    def fn(x, buffers):
        return update_buffers(x, buffers)

    x, bufs = torch.randn(3, 3), [torch.randn(3, 3), torch.randn(3, 3)]
    expected = x + (bufs[0] + 1) + (bufs[1] + 1)
    bufs_eager, bufs_compiled = [b.clone() for b in bufs], [b.clone() for b in bufs]
    torch.testing.assert_close(fn(x, bufs_eager)[0], expected)
    compiled = graphwright.compile(fn, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x, bufs_compiled)[0], expected)
    for eager_buf, compiled_buf, original in zip(bufs_eager, bufs_compiled, bufs):
        torch.testing.assert_close(eager_buf, original + 1)
        torch.testing.assert_close(compiled_buf, original + 1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_input_mutation_pytree_fine_grained(backend):
    @graphwright.leaf_function(mutates_args={"buffers[0]"})
    def update_first(x, buffers):
        buffers[0].add_(1)
        return (x + buffers[0] + buffers[1],)

    @update_first.register_fake
    def _(x, buffers):
        buffers[0].add_(1)
        return (x + buffers[0] + buffers[1],)

    def fn(x, buffers):
        return update_first(x, buffers)

    x, bufs = torch.randn(3, 3), [torch.randn(3, 3), torch.randn(3, 3)]
    expected = x + (bufs[0] + 1) + bufs[1]
    bufs_eager, bufs_compiled = [b.clone() for b in bufs], [b.clone() for b in bufs]
    torch.testing.assert_close(fn(x, bufs_eager)[0], expected)
    compiled = graphwright.compile(fn, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x, bufs_compiled)[0], expected)
    for result in (bufs_eager, bufs_compiled):
        torch.testing.assert_close(result[0], bufs[0] + 1)
        torch.testing.assert_close(result[1], bufs[1])


def test_leaf_function_mutates_args_invalid_parameter():
    with pytest.raises(graphwright.InvalidMarkingError, match="refers to parameter 'buf'"):
        @graphwright.leaf_function(mutates_args={"buf"})
        def bad(x, buffers):
            return (x + buffers,)
    with pytest.raises(graphwright.InvalidMarkingError, match="refers to parameter 'mdl'"):
        @graphwright.leaf_function(mutates_args={"mdl.running_mean"})
        def bad2(x, model):
            return (x,)


def test_leaf_function_mutates_args_non_leaf_expression():
    @graphwright.leaf_function(mutates_args={"model"})
    def bad(x, model):
        model.running_mean.add_(1)
        return (x,)

    @bad.register_fake
    def _(x, model):
        model.running_mean.add_(1)
        return (x,)

    class WithStats(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("running_mean", torch.zeros(3))

        def forward(self, x):
            return bad(x, self)

    # Under fullgraph the error is reported as an exception the traced code raised; split, the
    # call runs as Python and raises it itself.
    compiled = graphwright.compile(WithStats(), backend="eager", fullgraph=True)
    with pytest.raises(graphwright.Unsupported, match="resolved to a non-leaf value"):
        compiled(torch.randn(3))
    with pytest.raises(graphwright.InvalidMarkingError, match="resolved to a non-leaf value"):
        graphwright.compile(WithStats(), backend="eager")(torch.randn(3))
    with pytest.raises(graphwright.InvalidMarkingError, match="resolved to a non-leaf value"):
        WithStats()(torch.randn(3))


# -- what issue 10 adds ---------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_undeclared_mutation_of_an_input_is_an_error_naming_it_when_compiled(backend):
    @graphwright.leaf_function
    def sneaky(x, state):
        state["count"].add_(1)
        return (x * 2,)

    @sneaky.register_fake
    def _(x, state):
        return (torch.empty_like(x),)

    compiled = graphwright.compile(lambda x, state: sneaky(x, state), backend=backend, fullgraph=True)
    with pytest.raises(graphwright.LeafFunctionError, match=r"mutates its input `state\['count'\]`"):
        compiled(torch.randn(3), {"count": torch.zeros(())})


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_declared_mutation_is_applied_once_out_of_autograd_sight(backend):
    @graphwright.leaf_function(mutates_args={"buf"})
    def accumulate(buf, x):
        buf.add_(x.detach() * 3)
        return (x.sin(),)

    @accumulate.register_fake
    def _(buf, x):
        return (torch.empty_like(x),)

    def fn(buf, x):
        (y,) = accumulate(buf, x)
        return (y + buf * 2).sum()

    compiled = graphwright.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(3, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    buf, buf_ref = torch.ones(3), torch.ones(3)
    compiled(buf, x).backward()
    fn(buf_ref, x_ref).backward()
    torch.testing.assert_close(buf, buf_ref)  # once: 1 + 3x
    assert not buf.requires_grad and buf.grad_fn is None  # as in eager: a detached update
    torch.testing.assert_close(x.grad, x_ref.grad)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_declared_mutation_autograd_would_record_is_an_error_naming_the_input(backend):
    # A compiled call copies a declared mutation back without recording it for autograd (as
    # torch.compile does, which then silently drops the gradient through `buf`).
    @graphwright.leaf_function(mutates_args={"buf"})
    def accumulate(buf, x):
        buf.add_(x * 3)
        return (x.sin(),)

    @accumulate.register_fake
    def _(buf, x):
        return (torch.empty_like(x),)

    def fn(buf, x):
        (y,) = accumulate(buf, x)
        return (y + buf * 2).sum()

    compiled = graphwright.compile(fn, backend=backend, fullgraph=True)
    with pytest.raises(graphwright.LeafFunctionError, match="changes its input `buf` in place in a way autograd"):
        compiled(torch.ones(3), torch.randn(3, requires_grad=True))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_body_runs_once_per_call_forward_and_backward(backend):
    calls = []

    @graphwright.leaf_function
    def scaled(x, w):
        calls.append("ran")
        return x * w.exp()

    @scaled.register_fake
    def _(x, w):
        return torch.empty_like(x)

    compiled = graphwright.compile(lambda x, w: scaled(x, w).sum(), backend=backend, fullgraph=True)
    for _ in range(3):
        compiled(torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)).backward()
    assert calls == ["ran"] * 3


def test_local_graph_of_a_call_is_dropped_with_its_outputs():
    from graphwright._core import leaf_op

    @graphwright.leaf_function
    def double(x):
        return x * 2

    @double.register_fake
    def _(x):
        return torch.empty_like(x)

    compiled = graphwright.compile(lambda x: double(x), backend="aot_eager", fullgraph=True)
    before = set(leaf_op._LOCAL_GRAPHS)
    out = compiled(torch.randn(3, requires_grad=True))
    kept = set(leaf_op._LOCAL_GRAPHS) - before
    assert len(kept) == 1
    del out
    gc.collect()
    assert not kept & set(leaf_op._LOCAL_GRAPHS)  # never backwarded, still not leaked
    with torch.no_grad():
        compiled(torch.randn(3, requires_grad=True))
    assert set(leaf_op._LOCAL_GRAPHS) <= before  # nothing kept without gradients


def test_torch_leaf_function_markings_are_honoured():
    from torch._dynamo.decorators import leaf_function as torch_leaf_function

    calls = []

    @torch_leaf_function
    def logged(x):
        calls.append(float(x.sum()))
        return (x * 2,)

    @logged.register_fake
    def _(x):
        return (torch.empty_like(x),)

    recording = Recording("aot_eager")
    compiled = graphwright.compile(lambda x: logged(x)[0] + 1, backend=recording, fullgraph=True)
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x), x * 2 + 1)
    compiled(x)
    assert calls == [3.0, 3.0]  # at run time, once per call
    assert "graphwright.leaf_call" in recording.aten_code()


def test_registration_lives_as_long_as_the_wrapper():
    from graphwright._core import rules

    def body(x):
        return x

    wrapper = graphwright.leaf_function(body)
    wrapper_id = id(wrapper)
    assert rules.marking_of(wrapper) == rules.LEAF and rules.marking_of(body) is None
    del wrapper
    gc.collect()
    assert wrapper_id not in rules.leaf_function_callables.names


def test_leaf_function_on_an_unweakrefable_callable_stays_marked_while_registered():
    from graphwright._core import rules

    class Scale:
        __slots__ = ("k",)

        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k

    scale = Scale(2.0)
    graphwright.allow_in_graph(scale)
    reference = weakref.ref(graphwright.allow_in_graph)  # the decorator itself is untouched
    assert reference() is not None
    assert scale in rules.allowed_callables
    scale_id = id(scale)
    del scale
    gc.collect()
    # It cannot be weakly referenced, so the registry keeps it alive: its id is never reused
    # by another object while it is marked.
    assert scale_id in rules.allowed_callables.names
    assert rules.allowed_callables._kept_alive[scale_id].k == 2.0


def test_leaf_function_traced_by_make_fx_is_one_opaque_node():
    calls = []

    @graphwright.leaf_function
    def logged(x):
        calls.append(float(x.sum()))
        return (x * 2,)

    @logged.register_fake
    def _(x):
        return (torch.empty_like(x),)

    def f(x):
        return logged(x.sin())[0] + 1

    for mode in ("real", "fake"):
        calls.clear()
        gm = graphwright.make_fx(f, tracing_mode=mode)(torch.ones(3))
        targets = [str(node.target) for node in gm.graph.nodes if node.op == "call_function"]
        assert "graphwright.leaf_call.default" in targets and "aten.mul.Tensor" not in targets
        assert calls == ([3 * float(torch.ones(1).sin())] if mode == "real" else [])
        x = torch.randn(3)
        torch.testing.assert_close(gm(x), x.sin() * 2 + 1)
        assert len(calls) == (2 if mode == "real" else 1)  # and once more when the graph runs


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_function_called_in_a_nonstrict_trace_body_runs_at_run_time(backend):
    calls = []

    @graphwright.leaf_function
    def logged(x):
        calls.append("ran")
        return (x * 2,)

    @logged.register_fake
    def _(x):
        return (torch.empty_like(x),)

    @graphwright.nonstrict_trace
    def body(x):
        graphwright.graph_break()
        return logged(x.cos())[0] + 1

    compiled = graphwright.compile(lambda x: body(x).sum(), backend=backend, fullgraph=True)
    x = torch.randn(3, requires_grad=True)
    compiled(x).backward()
    compiled(x)
    assert calls == ["ran", "ran"]  # once per call at run time, never while tracing
    torch.testing.assert_close(x.grad, -2 * x.detach().sin())
