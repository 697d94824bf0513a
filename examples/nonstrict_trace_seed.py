"""The seed examples of `nonstrict_trace`, run with graphwright.compile instead of torch.compile.

1. A function that graph-breaks fails under fullgraph=True.
2. Marking it with `@graphwright.nonstrict_trace` removes the break: one graph.
3. The wrapper can also be applied inside the compiled region.
4. Training: an `nn.Module` passed to a nonstrict_trace'd function gets gradients under
   aot_eager, whose aten graph contains the function's body.
"""
import torch

import graphwright
from graphwright.backends import lookup_backend


def section(title: str) -> None:
    print(f"\n--- {title} ---")


def show_graphs(gm: torch.fx.GraphModule, example_inputs: list):
    print(gm.code.strip())
    return gm.forward


section("1. A graph break under fullgraph=True is an error")


def get_magic_num_unmarked():
    # This explicit graph break call emulates any kind of graph break,
    # e.g. a function implemented in C or an unsupported language feature.
    graphwright.graph_break()
    return torch.tensor([42])


@graphwright.compile(fullgraph=True, backend="eager")
def func_unmarked(x):
    n = get_magic_num_unmarked()
    return x + n


try:
    func_unmarked(torch.rand(10))
except graphwright.Unsupported as error:
    print(error)

section("2. @nonstrict_trace: no graph break, no error (the graph shows one opaque call)")


@graphwright.nonstrict_trace
def get_magic_num():
    graphwright.graph_break()
    return torch.tensor([42])


@graphwright.compile(fullgraph=True, backend=show_graphs)
def func(x):
    n = get_magic_num()
    return x + n


print(func(torch.rand(10)))

section("3. nonstrict_trace applied inside the compiled region")


@graphwright.compile(fullgraph=True, backend="eager")
def func_wrapped_inside(x):
    n = graphwright.nonstrict_trace(get_magic_num_unmarked)()
    return x + n


print(func_wrapped_inside(torch.rand(10)))

section("4. Training through a nonstrict_trace'd function taking a module (aot_eager)")


@graphwright.nonstrict_trace
def traced_forward(model, x):
    graphwright.graph_break()  # fine inside a nonstrict_trace body
    return model(x) + x


class MyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(10, 10)

    def forward(self, x):
        return traced_forward(self.inner, x)


aot_graphs = []


def aot_eager_keeping_graphs(gm, example_inputs):
    compiled = lookup_backend("aot_eager")(gm, example_inputs)
    aot_graphs.append(compiled)
    return compiled


model = MyModule()
opt_model = graphwright.compile(model, backend=aot_eager_keeping_graphs, fullgraph=True)
out = opt_model(torch.randn(10, 10))
out.sum().backward()
print("inner.weight.grad is set:", model.inner.weight.grad is not None)
for signature in aot_graphs[0].signatures.values():
    print("aten forward graph (the body of traced_forward, traced into):")
    print(signature.partition.forward.code.strip())
