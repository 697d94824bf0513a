"""`nn.Module` calls: modules with parameters made at module level and called in `f`.

A module is one of: a block of its own class (a Linear, a Python attribute it reads, and
optionally a call counter, a buffer it updates in place, a branch on `self.training`),
an `nn.Sequential`, an `nn.LayerNorm`, a residual stack over an `nn.ModuleList`, or a
module holding a bare `nn.Parameter`, or one whose parameter is a `TwoTensor` (a tensor
subclass). Parameters are float32, so the input is cast to
float32. Each module's state (state_dict, plain attributes, training) is compared after
every call; `mutate()` may change an attribute it reads or its training mode.
"""
from __future__ import annotations

from .builder import Builder
from .expressions import expression, operand


def _block_class(b: Builder, name: str, features_in: int, features_out: int) -> str:
    lines = [f"class {name}(nn.Module):",
             "    def __init__(self):",
             "        super().__init__()",
             f"        self.lin = nn.Linear({features_in}, {features_out})",
             "        self.scale = 1.0"]
    forward = ["    def forward(self, t):"]
    if b.chance(50):
        lines.append("        self.calls = 0")
        forward.append("        self.calls += 1")
        b.feature("module_counter")
    forward.append("        h = torch.tanh(self.lin(t)) * self.scale")
    if b.chance(40):
        forward += ["        if self.training:", "            h = h + 0.25"]
        b.feature("module_training_branch")
    if b.chance(40):
        lines.append(f"        self.register_buffer(\"seen\", torch.zeros({features_out}))")
        forward += ["        with torch.no_grad():",
                    f"            self.seen.add_(h.detach().reshape(-1, {features_out}).mean(0))"]
        b.feature("buffer_mutation")
    forward.append("        return h")
    return "\n".join(lines + [""] + forward)


def module_call(b: Builder) -> None:
    """`v = module(e.float())` on a module made at module level."""
    shapes = sorted({s for s in b.reachable() if s and isinstance(s[-1], int)}, key=repr)
    if not shapes:
        return
    shape = b.choice(shapes)
    features_in = shape[-1]
    kind = b.choice(["block", "sequential", "layer_norm", "stack", "parameter", "subclass_parameter"])
    if kind == "subclass_parameter" and b.jagged:
        kind = "parameter"  # eager's backward of a loss over both cannot mix a TwoTensor with a jagged tensor
    features_out = features_in if kind in ("layer_norm", "stack", "parameter", "subclass_parameter") \
        else b.choice([2, 3, 4])
    name = b.fresh("mod")
    if kind == "block":
        cls = name.capitalize()
        b.define(cls, _block_class(b, cls, features_in, features_out))
        b.define(name, f"{name} = {cls}()")
        b.mutations.append(b.choice([f"{name}.scale = 0.5", f"{name}.eval()", f"{name}.train()"]))
    elif kind == "sequential":
        b.define(name, f"{name} = nn.Sequential(nn.Linear({features_in}, {features_out}), nn.ReLU(), "
                       f"nn.Linear({features_out}, {features_out}))")
    elif kind == "layer_norm":
        b.define(name, f"{name} = nn.LayerNorm({features_in})")
    elif kind == "stack":
        b.define("Stack", STACK)
        b.define(name, f"{name} = Stack({features_in})")
    elif kind == "parameter":
        b.define("Gain", GAIN)
        b.define(name, f"{name} = Gain({features_in})")
    else:
        b.define("TwoTensor", TWO_TENSOR)
        b.define("TwoGain", TWO_GAIN)
        b.define(name, f"{name} = TwoGain({features_in})")
        b.subclass = True
    b.modules.append(name)
    argument = expression(b, shape, b.integer(0, 2))
    code = operand(argument.code) if argument.dtype == "float32" else f"{operand(argument.code)}.float()"
    b.assign(f"{name}({code})", shape[:-1] + (features_out,), "float32", True)
    b.feature(f"module_{kind}")
    b.feature("module_call")


STACK = '''class Stack(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(features, features) for _ in range(2)])

    def forward(self, t):
        for layer in self.layers:
            t = t + layer(t).relu()
        return t'''

TWO_TENSOR = "from torch.testing._internal.two_tensor import TwoTensor"

TWO_GAIN = '''class TwoGain(nn.Module):
    """A parameter that is a tensor subclass: each op runs on both of its tensors."""

    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(TwoTensor(torch.linspace(0.5, 1.5, features), torch.linspace(-1.0, 1.0, features)))

    def forward(self, t):
        return t * self.weight + self.weight.sum()'''

GAIN = '''class Gain(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, features))

    def forward(self, t):
        return t * self.weight + self.weight.sum()'''
