"""einops (`rearrange`, `reduce`, `repeat`, `einsum`, the `Rearrange` layer) inside compiled
modules: einops finds its backend among the subclasses of a base class and parses its
patterns with `str` methods, all on the first call of a fresh process. Compared with eager
(values, gradients) and with torch.compile's graph count on the same program."""
import pytest
import torch
import torch._dynamo.testing
from torch import nn

import graphwright
from graphwright.testing import CompileCounterWithBackend

einops = pytest.importorskip("einops")
from einops import einsum, rearrange, reduce, repeat  # noqa: E402
from einops.layers.torch import Rearrange  # noqa: E402


class PatchAttention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.to_patches = Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, image):
        tokens = self.to_patches(image)
        q, k, v = rearrange(self.qkv(tokens), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        attention = einsum(q, k, "b h i d, b h j d -> b h i j").softmax(-1)
        mixed = rearrange(einsum(attention, v, "b h i j, b h j d -> b h i d"), "b h n d -> b n (h d)")
        pooled = reduce(self.out(mixed), "b n d -> b d", "mean")
        return pooled + repeat(tokens.mean((1, 2)), "b -> b d", d=pooled.shape[-1])


@pytest.mark.parametrize("fullgraph", [True, False])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_einops_attention_compiles_in_one_graph_with_eager_gradients(backend, fullgraph):
    torch.manual_seed(0)
    model = PatchAttention()
    image = torch.randn(2, 4, 4, 4, requires_grad=True)
    counter = CompileCounterWithBackend(backend)
    compiled = graphwright.compile(model, backend=counter, fullgraph=fullgraph)
    output = compiled(image)
    output.sum().backward()
    got = [image.grad.clone()] + [p.grad.clone() for p in model.parameters()]
    image.grad = None
    model.zero_grad()
    expected_output = model(image)
    expected_output.sum().backward()
    expected = [image.grad] + [p.grad for p in model.parameters()]
    torch.testing.assert_close(output, expected_output)
    for value, wanted in zip(got, expected):
        torch.testing.assert_close(value, wanted)
    theirs = torch._dynamo.testing.CompileCounter()
    torch.compile(model, backend=theirs, fullgraph=fullgraph)(image)
    assert counter.frame_count == theirs.frame_count == 1
