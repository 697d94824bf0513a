"""A nonstrict_trace call in a strict region: opaque to the strict tracer, traced into by AOT."""
import torch

import graphwright
from graphwright.backends.registry import lookup_backend

from aot_models import aten_targets


@graphwright.nonstrict_trace
def wobble(x, scale):
    graphwright.graph_break()
    return x.sin() * scale


def test_nonstrict_trace_body_appears_in_the_aot_graphs_and_gradients_match():
    compiled_graphs = []

    def keep_aot_eager(gm, example_inputs):
        compiled_graphs.append(lookup_backend("aot_eager")(gm, example_inputs))
        return compiled_graphs[-1]

    @graphwright.compile(fullgraph=True, backend=keep_aot_eager)
    def fn(x):
        return wobble(x, 2.0) + 1

    x = torch.randn(4, requires_grad=True)
    out = fn(x)
    out.sum().backward()
    torch.testing.assert_close(out, x.detach().sin() * 2 + 1)
    torch.testing.assert_close(x.grad, x.detach().cos() * 2)
    (compiled,) = compiled_graphs
    (signature,) = compiled.signatures.values()
    assert "aten.sin.default" in aten_targets(signature.partition.forward)
    assert "aten.cos.default" in aten_targets(signature.partition.backward)
