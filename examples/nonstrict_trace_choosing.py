"""Choosing nonstrict_trace, allow_in_graph or leaf_function: each difference, run.

See docs/choosing-nonstrict-trace.md. Every section compiles with fullgraph=True
and prints what the compiled program did, next to what eager did.
"""
import dataclasses

import torch
import torch.utils._pytree as pytree

import graphwright


def section(title: str) -> None:
    print(f"\n--- {title} ---")


@dataclasses.dataclass
class Batch:
    inputs: torch.Tensor
    mask: torch.Tensor


pytree.register_dataclass(Batch)
linear = torch.nn.Linear(4, 4)
x = torch.randn(2, 4)

section("Inputs: nonstrict_trace takes registered classes and modules")


@graphwright.nonstrict_trace
def masked_forward(model, batch):
    return model(batch.inputs) * batch.mask


@graphwright.compile(fullgraph=True, backend="aot_eager")
def with_nonstrict(x):
    return masked_forward(linear, Batch(x, torch.ones_like(x)))


print("nonstrict_trace matches eager:", torch.allclose(with_nonstrict(x), linear(x)))

section("Inputs: allow_in_graph takes tensors, numbers, None and lists/tuples only")


@graphwright.allow_in_graph
def masked_forward_allowed(model, batch):
    return model(batch.inputs) * batch.mask


@graphwright.compile(fullgraph=True, backend="eager")
def with_allow(x):
    return masked_forward_allowed(linear, Batch(x, torch.ones_like(x)))


try:
    with_allow(x)
except graphwright.Unsupported as error:
    print(str(error).splitlines()[0])


@graphwright.allow_in_graph
def scale_and_shift(t, scale, shifts):
    return t * scale + shifts[0] - shifts[1]


def shown(gm, example_inputs):
    print(gm.code.strip())
    return gm.forward


@graphwright.compile(fullgraph=True, backend=shown)
def with_allow_tensors(x):
    return scale_and_shift(x, 2.0, (x, x * 0.5))


with_allow_tensors(x)

section("Captured tensors: constants of the nonstrict_trace graph, no gradient")
weight = torch.randn(4, requires_grad=True)


@graphwright.nonstrict_trace
def uses_captured(t):
    return t * weight


@graphwright.compile(fullgraph=True, backend="aot_eager")
def captured(t):
    return uses_captured(t).sum()


t = torch.randn(4, requires_grad=True)
captured(t).backward()  # warns once: `weight` requires grad but is not an input
print("t.grad == weight:", torch.allclose(t.grad, weight.detach()), "| weight.grad:", weight.grad)

section("Side effects: leaf_function runs its Python every call; nonstrict_trace only while traced\n"
        "(under aot_eager; under eager the nonstrict body runs at run time too)")
log = []


@graphwright.leaf_function
def log_mean(t):
    log.append(f"leaf saw mean {t.mean().item():.3f}")  # needs real data
    return t.clone()


@log_mean.register_fake
def _(t):
    return torch.empty_like(t)


@graphwright.nonstrict_trace
def log_shape(t):
    log.append("nonstrict body ran")
    return t + 0


@graphwright.compile(fullgraph=True, backend="aot_eager")
def side_effects(t):
    return log_shape(log_mean(t))


for call in range(2):
    side_effects(torch.randn(3))
    print(f"after call {call + 1}: {log}")
    log.clear()

section("Gradients flow through all three")


@graphwright.leaf_function
def leaf_square(t):
    return t * t


@leaf_square.register_fake
def _(t):
    return torch.empty_like(t)


@graphwright.compile(fullgraph=True, backend="aot_eager")
def all_three(t):
    return (masked_forward(linear, Batch(t, torch.ones_like(t))).sum()
            + scale_and_shift(t, 3.0, (t, t)).sum() + leaf_square(t).sum())


t = torch.randn(2, 4, requires_grad=True)
all_three(t).backward()
t_ref = t.detach().requires_grad_()
(linear(t_ref).sum() + (t_ref * 3.0).sum() + (t_ref * t_ref).sum()).backward()
print("gradients match eager:", torch.allclose(t.grad, t_ref.grad))
