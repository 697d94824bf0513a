"""`compile(mode=..., options=...)` reach Inductor's config as `torch.compile` passes them."""
from __future__ import annotations

import os
import tempfile

import pytest
import torch

import graphwright


@pytest.fixture(autouse=True)
def fresh_caches():
    graphwright.reset()
    yield
    graphwright.reset()


def f(x):
    return (x.sin() * 2).sum(1)


@pytest.fixture
def inductor_calls(monkeypatch):
    """Replaces Inductor's graph compiler by one that records the config it sees and runs the
    aten graph as it is (no C++ compile)."""
    import torch._inductor.compile_fx as compile_fx
    from torch._inductor import config

    seen = []

    def compile_fx_inner(gm, example_inputs, **kwargs):
        seen.append({"kind": "backward" if kwargs.get("is_backward") else "forward",
                     "max_autotune": config.max_autotune, "cudagraphs": config.triton.cudagraphs,
                     "coordinate_descent_tuning": config.coordinate_descent_tuning,
                     "simdlen": config.cpp.simdlen})
        return lambda args: gm(*args)

    monkeypatch.setattr(compile_fx, "compile_fx_inner", compile_fx_inner)
    return seen


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_a_mode_sets_inductor_config_as_torch_compile_does(inductor_calls, mode):
    from torch._inductor import list_mode_options

    expected = list_mode_options(mode)
    x = torch.randn(3, 4, requires_grad=True)
    compiled = graphwright.compile(f, mode=mode)
    compiled(x).sum().backward()  # the backward compiles lazily, still under the mode's config
    assert [call["kind"] for call in inductor_calls] == ["forward", "backward"]
    for call in inductor_calls:
        assert call["max_autotune"] is expected.get("max_autotune", False)
        assert call["cudagraphs"] is expected.get("triton.cudagraphs", False)
        assert call["coordinate_descent_tuning"] is expected.get("coordinate_descent_tuning", False)


def test_default_mode_and_no_options_leave_the_config_alone(inductor_calls):
    graphwright.compile(f, mode="default")(torch.randn(3, 4))
    graphwright.compile(f)(torch.randn(3, 5))
    assert all(not call["max_autotune"] and not call["cudagraphs"] for call in inductor_calls)


def test_options_reach_inductor_config_during_every_compile(inductor_calls):
    from torch._inductor import config

    x = torch.randn(3, 4, requires_grad=True)
    compiled = graphwright.compile(f, options={"max_autotune": True, "cpp.simdlen": 8})
    compiled(x).sum().backward()
    assert len(inductor_calls) == 2
    assert all(call["max_autotune"] and call["simdlen"] == 8 for call in inductor_calls)
    assert config.max_autotune is False and config.cpp.simdlen is None  # only while compiling


def test_option_names_may_use_dashes_as_in_torch_compile(inductor_calls):
    graphwright.compile(f, options={"max-autotune": True})(torch.randn(2, 2))
    assert inductor_calls[0]["max_autotune"]


def test_unknown_option_is_an_error_listing_the_valid_ones():
    with pytest.raises(graphwright.GraphwrightError) as error:
        graphwright.compile(f, options={"max_autotun": True})
    message = str(error.value)
    assert "Unknown Inductor option 'max_autotun'" in message
    assert "the valid ones are:" in message and "coordinate_descent_tuning" in message
    assert "Did you mean 'max_autotune'" in message


def test_option_of_the_wrong_type_is_an_error():
    with pytest.raises(graphwright.GraphwrightError, match="'max_autotune' takes a bool, got str"):
        graphwright.compile(f, options={"max_autotune": "yes"})


def test_unknown_mode_is_an_error_listing_the_modes():
    with pytest.raises(graphwright.GraphwrightError) as error:
        graphwright.compile(f, mode="fastest")
    assert "Unknown compile mode 'fastest'" in str(error.value)
    assert "'reduce-overhead'" in str(error.value) and "'max-autotune-no-cudagraphs'" in str(error.value)


def test_mode_and_options_together_are_an_error_as_in_pytorch():
    with pytest.raises(graphwright.GraphwrightError,
                       match="Either mode or options can be specified, but both can't be specified"):
        graphwright.compile(f, mode="max-autotune", options={"max_autotune": True})
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        torch.compile(f, mode="max-autotune", options={"max_autotune": True})


def test_a_user_backend_receives_mode_and_options_as_keyword_arguments():
    received = []

    def backend(gm, example_inputs, **kwargs):
        received.append(kwargs)
        return gm.forward

    graphwright.compile(f, backend=backend, mode="max-autotune")(torch.randn(2, 2))
    graphwright.compile(f, backend=backend, options={"anything": 1})(torch.randn(2, 3))
    graphwright.compile(f, backend=backend, mode="default")(torch.randn(2, 4))
    assert received == [{"mode": "max-autotune"}, {"options": {"anything": 1}}, {}]


def test_a_backend_that_takes_no_options_is_an_error_naming_it():
    with pytest.raises(graphwright.GraphwrightError, match="Backend 'aot_eager' takes no `mode`"):
        graphwright.compile(f, backend="aot_eager", mode="max-autotune")


def test_equal_options_share_one_cache(inductor_calls):
    x = torch.randn(2, 2)
    graphwright.compile(f, options={"max_autotune": True})(x)
    graphwright.compile(f, options={"max_autotune": True})(x)
    assert len(inductor_calls) == 1


@pytest.mark.slow  # Inductor compiles
def test_options_change_the_generated_code():
    default_source = _output_code()
    graphwright.reset()
    assert "cpp_fused_" in default_source
    assert "cpp_fused_" not in _output_code(options={"cpp.descriptive_names": False})


@pytest.mark.slow  # Inductor compiles
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune-no-cudagraphs"])
def test_modes_compile_and_match_eager_on_the_cpu(mode):
    x = torch.randn(8, 8, requires_grad=True)
    compiled = graphwright.compile(f, mode=mode)
    out = compiled(x)
    out.sum().backward()
    expected_grad = torch.autograd.grad(f(x).sum(), x)[0]
    assert torch.allclose(out, f(x)) and torch.allclose(x.grad, expected_grad)


def _output_code(**options) -> str:
    """The module Inductor generates for `f` without gradients (copied by the dump)."""
    with tempfile.TemporaryDirectory() as folder:
        with graphwright.debug.dump(folder):
            graphwright.compile(f, **options)(torch.randn(8, 8))
        with open(os.path.join(folder, "f", "entry_0", "inductor_inference.py")) as file:
            return file.read()
