"""What `python -m graphwright report` shows: run this script under it.

    python -m graphwright report examples/report_demo.py --html demo.html

The page holds, per compiled function, its graphs drawn (inputs, torch operations, a
`nonstrict_trace` call, a `leaf_function` call, outputs), its guards, a recompile and why,
graph breaks with the line that broke and the suggested fix, and compile time per phase.
"""
import torch

import graphwright


@graphwright.nonstrict_trace
def normalise(t):
    return (t - t.mean()) / (t.std() + 1e-5)


@graphwright.leaf_function
def record_norm(t):
    norms.append(float(t.detach().norm()))  # needs the real data: runs as Python on every call
    return t.clone()


@record_norm.register_fake
def _(t):
    return torch.empty_like(t)


norms = []


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        h = torch.relu(self.up(normalise(x)))
        return x + self.down(record_norm(h))


block = graphwright.compile(Block(), backend="aot_eager", dynamic=False)
for batch in (4, 4, 6):  # the third call has another size: a recompile
    block(torch.randn(batch, 8)).sum().backward()


def scaled(x):
    return x * 2


@graphwright.compile(backend="eager")
def with_breaks(x):
    y = torch.sin(x) + 1
    print("between two graphs")  # a graph break: print is a side effect
    z = scaled(y).cos()
    graphwright.graph_break()  # an explicit one
    return z.sum()


with_breaks(torch.randn(5))
print(f"recorded {len(norms)} norms")
