"""The backend registry: names, callables, errors."""
import pytest
import torch

import graphwright
from graphwright.backends.registry import lookup_backend


def test_eager_is_listed():
    assert "eager" in graphwright.list_backends()


def test_registered_backend_is_found_by_name():
    @graphwright.register_backend(name="test_identity_backend")
    def identity(gm, example_inputs):
        return gm.forward

    assert lookup_backend("test_identity_backend") is identity
    assert "test_identity_backend" in graphwright.list_backends()


def test_callable_backend_is_used_as_is():
    def backend(gm, example_inputs):
        return gm.forward

    assert lookup_backend(backend) is backend


def test_unknown_backend_names_the_known_ones():
    with pytest.raises(graphwright.GraphwrightError, match="Unknown backend 'nope'") as info:
        lookup_backend("nope")
    assert "eager" in str(info.value)


def test_compile_counter_counts_graphs_and_ops():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(torch.sin, (x,))
    graph.output(graph.call_function(torch.cos, (y,)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    counter = graphwright.testing.CompileCounter()
    compiled = counter(gm, [torch.ones(2)])
    assert counter.frame_count == 1 and counter.op_count == 2
    torch.testing.assert_close(compiled(torch.ones(2)), torch.cos(torch.sin(torch.ones(2))))
