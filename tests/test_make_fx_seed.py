"""The non-strict tracing model, example by example (seed: non_strict_tracing_model).

Each test runs a seed example through graphwright.make_fx and checks the
behaviour the seed describes, against eager and PyTorch's own make_fx.
"""
import ctypes

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

import graphwright


def aten_ops(gm):
    return [str(n.target) for n in gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]


def branchy(x):
    if x.shape[0] > 2:
        return x**2 / 6
    else:
        return x * 3


def test_only_the_branch_taken_at_trace_time_is_captured():
    x = torch.randn(3)
    gm = graphwright.make_fx(branchy, tracing_mode="fake")(x)
    assert aten_ops(gm) == aten_ops(torch_make_fx(branchy, tracing_mode="fake")(x))
    assert "aten.mul.Tensor" not in aten_ops(gm)
    small = torch.randn(2)
    torch.testing.assert_close(gm(small), small**2 / 6)  # specialised: not small * 3


var = torch.tensor(1)


def function_with_global_access(y):
    return y + var


def test_global_tensor_in_fake_mode_is_a_clear_error_naming_the_line():
    x = torch.tensor([0, 1, 2])
    with pytest.raises(graphwright.NonFakeInputError) as info:
        graphwright.make_fx(function_with_global_access, tracing_mode="fake")(x)
    assert "return y + var" in str(info.value)
    assert info.value.user_location.endswith(f"{__file__}:{function_with_global_access.__code__.co_firstlineno + 1}")
    assert "_allow_non_fake_inputs=True" in str(info.value)


def test_global_tensor_is_captured_as_a_constant_and_goes_stale():
    global var
    x = torch.tensor([0, 1, 2])
    var = torch.tensor(1)
    gm = graphwright.make_fx(
        function_with_global_access, tracing_mode="fake", _allow_non_fake_inputs=True
    )(x)
    torch.testing.assert_close(gm(x), function_with_global_access(x))
    var = torch.tensor(2)
    assert not torch.equal(gm(x), function_with_global_access(x))
    torch.testing.assert_close(gm(x), x + 1)
    assert [n.op for n in gm.graph.nodes].count("get_attr") == 1


def test_tensor_passed_explicitly_follows_new_values():
    def function_fixed(y, var):
        return y + var

    x = torch.tensor([0, 1, 2])
    gm = graphwright.make_fx(function_fixed, tracing_mode="fake")(x, torch.tensor(3))
    for value in (3, 4):
        var = torch.tensor(value)
        torch.testing.assert_close(gm(x, var), function_fixed(x, var))


def test_print_happens_at_trace_time_only(capsys):
    def function_with_side_effect(y):
        print(y)

    x = torch.tensor([0, 1, 2])
    function_with_side_effect(x)
    assert capsys.readouterr().out == "tensor([0, 1, 2])\n"
    gm = graphwright.make_fx(function_with_side_effect, tracing_mode="fake")(x)
    assert capsys.readouterr().out == "FakeTensor(..., size=(3,), dtype=torch.int64)\n"
    assert gm(x) is None
    assert capsys.readouterr().out == ""
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "output"]


@pytest.mark.parametrize("tracing_mode", ["fake", "symbolic"])
def test_input_list_shrinks_during_capture_not_when_the_graph_runs(tracing_mode):
    # The seed: "the length of the list shrinks during the graph capture but not in invocations
    # of the graph". PyTorch 2.13's make_fx hands a copy of the list to the function in fake and
    # symbolic modes (the caller's list keeps both tensors); the seed wins: the function gets the
    # caller's own list, fake tensors put in for the run, the real ones still there put back.
    def function_with_input_list_mutation(lst):
        return lst.pop()

    x = torch.tensor([0, 1, 2])
    y = torch.tensor([3, 4, 5])
    lst = [x, y]
    gm = graphwright.make_fx(function_with_input_list_mutation, tracing_mode=tracing_mode)(lst)
    assert len(lst) == 1 and lst[0] is x
    lst = [x, y]
    for _ in range(2):
        torch.testing.assert_close(gm(lst), y)
        assert len(lst) == 2


def test_callers_dicts_and_nested_lists_see_the_mutation_and_get_their_tensors_back():
    def consume(state):
        state["queue"].append(state["queue"].pop(0) * 2)
        del state["scratch"]
        return state["queue"][-1]

    a, b, scratch = torch.ones(2), torch.full((2,), 3.0), torch.zeros(1)
    state = {"queue": [a, b], "scratch": scratch}
    queue = state["queue"]
    gm = graphwright.make_fx(consume, tracing_mode="fake")(state)
    assert list(state) == ["queue"] and state["queue"] is queue
    assert queue[0] is b  # the real tensor, put back
    assert len(queue) == 2 and queue[1].shape == (2,)  # the function's own append stays
    torch.testing.assert_close(gm({"queue": [a, b], "scratch": scratch}), a * 2)


def test_real_mode_trace_mutates_the_callers_list_as_pytorch_does():
    def function_with_input_list_mutation(lst):
        return lst.pop()

    x, y = torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5])
    lst, reference = [x, y], [x, y]
    gm = graphwright.make_fx(function_with_input_list_mutation)(lst)
    torch_make_fx(function_with_input_list_mutation)(reference)
    assert len(lst) == len(reference) == 1
    torch.testing.assert_close(gm([x, y]), y)


def test_data_ptr_in_fake_mode_is_a_clear_trace_error():
    tensor = torch.tensor([42], dtype=torch.int32)

    def function_with_data_ptr(tensor):
        ptr = tensor.data_ptr()
        ctypes_ptr = ctypes.cast(ptr, ctypes.POINTER(ctypes.c_int32))
        ctypes_ptr.contents.value += 1
        return tensor

    with pytest.raises(graphwright.TraceError) as info:
        graphwright.make_fx(function_with_data_ptr, tracing_mode="fake")(tensor)
    assert "cannot follow raw memory access" in str(info.value)
    assert "ptr = tensor.data_ptr()" in str(info.value)
    assert tensor.item() == 42


def add(x, y):
    return x + y


def test_non_tensor_input_is_a_constant_of_the_graph():
    x = torch.tensor([0, 1, 2])
    gm = graphwright.make_fx(add, tracing_mode="fake")(x, 3.14)
    assert "3.14" in gm.code
    assert aten_ops(gm) == aten_ops(torch_make_fx(add, tracing_mode="fake")(x, 3.14))
    torch.testing.assert_close(gm(x, 3.14), add(x, 3.14))
    torch.testing.assert_close(gm(x, 100.0), add(x, 3.14))  # baked in, not read


def test_print_readable_shows_the_aten_graph():
    gm = graphwright.make_fx(add, tracing_mode="fake")(torch.tensor([0, 1, 2]), 3.14)
    text = gm.print_readable(print_output=False)
    assert "class add(torch.nn.Module):" in text
    assert 'add: "f32[3]" = torch.ops.aten.add.Tensor(x_1, 3.14)' in text


def test_user_exception_from_the_traced_function_passes_through_unchanged():
    def f(x):
        return x + undefined_name  # noqa: F821  (the seed's last example has this typo)

    with pytest.raises(NameError):
        graphwright.make_fx(f, tracing_mode="fake")(torch.randn(3))

    def g(x):
        raise ValueError("mine")

    with pytest.raises(ValueError, match="^mine$"):
        graphwright.make_fx(g, tracing_mode="fake")(torch.randn(3))
