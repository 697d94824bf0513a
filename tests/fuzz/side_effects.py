"""Side effects that outlive the call: global lists, dicts, counters and tensors, attributes
of global objects and modules, and the caller's list argument.

Every piece of state a statement changes is listed in the program's `OBSERVED` names and
compared after every call. Values stored are tensors (with or without grad), sizes, and
tuples of them; some statements also read the state back (a global counter the function
itself changes, a tensor stored by the previous call).
"""
from __future__ import annotations

from .builder import Builder
from .expressions import operand

HOLDER = '''class Holder:
    def __init__(self):
        self.count = 0
        self.history = []'''


def _stored_value(b: Builder) -> str:
    var = b.choice(b.tensors)
    b.read(var)
    options = [var.name, f"{var.name}.detach()", f"{var.name}.shape", f"{var.name}.shape[-1] if {var.name}.dim() else 0",
               f"({var.name}.dim(), {var.name}.dtype)", '"tag"', f'f"{{{var.name}.dim()}}-{{{var.name}.dtype}}"',
               f'"size %d" % {var.name}.numel()']
    if "n" in b.ints:
        options.append("n * 2")
    return b.choice(options)


def global_list(b: Builder) -> None:
    b.define("LOG", "LOG = []")
    b.observe("LOG")
    form = b.choice(["LOG.append({v})", "LOG.extend([{v}, {v}])", "LOG.insert(0, {v})",
                     "LOG.append(len(LOG))", "LOG += [{v}]", "LOG[:] = LOG[-3:]"])
    if form.startswith("LOG +="):
        b.declare_global("LOG")  # augmented assignment rebinds the name
    b.emit(form.format(v=_stored_value(b)))
    b.feature("side_effect_list")


def global_dict(b: Builder) -> None:
    b.define("STATE", "STATE = {}")
    b.observe("STATE")
    form = b.choice(['STATE["last"] = {v}', 'STATE["calls"] = STATE.get("calls", 0) + 1',
                     'STATE.setdefault("first", {v})', 'STATE.update(seen={v})', 'STATE.pop("last", None)',
                     'STATE[str(len(STATE))] = {v}'])
    b.emit(form.format(v=_stored_value(b)))
    b.feature("side_effect_dict")


def global_counter(b: Builder) -> None:
    """`global COUNT; COUNT += ...`, sometimes read back into a tensor value."""
    b.define("COUNT", "COUNT = 0")
    b.observe("COUNT")
    b.declare_global("COUNT")
    var = b.choice(b.tensors)
    b.emit(b.choice(["COUNT += 1", f"COUNT = COUNT + {var.name}.dim()", "COUNT -= 2"]))
    if b.chance(40):
        b.read(var)
        b.assign(f"{operand(var.name)} * (COUNT % 3 + 1)", var.shape, var.dtype, var.grad)
        b.feature("global_counter_read")
    b.feature("side_effect_global")


def global_tensor(b: Builder) -> None:
    """`global LAST; LAST = v.detach()`, and the previous call's value read back."""
    b.define("LAST", "LAST = None")
    b.observe("LAST")
    b.declare_global("LAST")
    var = b.choice(b.tensors)
    b.read(var)
    if b.chance(50):
        b.emit(f"if LAST is not None and LAST.shape == {var.name}.shape:")
        b.emit(f"    {var.name} = {var.name} + LAST.to({var.name}.dtype)")
        var.mutable = False
        b.feature("global_tensor_read")
    b.emit(f"LAST = {var.name}.detach() * 2")
    b.feature("side_effect_global_tensor")


def object_attribute(b: Builder) -> None:
    b.define("Holder", HOLDER)
    b.define("HOLDER", "HOLDER = Holder()")
    b.observe("HOLDER")
    form = b.choice(["HOLDER.count += 1", "HOLDER.last = {v}", "HOLDER.history.append({v})",
                     "HOLDER.count = HOLDER.count + len(HOLDER.history)"])
    b.emit(form.format(v=_stored_value(b)))
    b.feature("side_effect_object")


def module_attribute(b: Builder) -> None:
    if not b.modules:
        return
    module = b.choice(b.modules)
    form = b.choice(["{m}.last = {v}", "{m}.steps = getattr({m}, 'steps', 0) + 1",
                     "{m}.flag = not getattr({m}, 'flag', False)"])
    b.emit(form.format(m=module, v=_stored_value(b)))
    b.feature("side_effect_module")


def argument_list(b: Builder) -> None:
    """The caller's list argument `items`, changed in place."""
    if b.depth or "items" not in b.lists:  # in a branch, the elements in scope would differ by path
        return
    form = b.choice(["items.append({v})", "items[0] = {v}", "items.pop()", "items.reverse()", "items.extend(items[:1])"])
    if form == "items.pop()":
        b.emit("if len(items) > 1:")
        b.emit("    items.pop()")
    else:
        b.emit(form.format(v=_stored_value(b)))
    b.lists.discard("items")  # its elements may no longer be the ones in scope
    b.tensors = [t for t in b.tensors if not t.name.startswith("items[")]
    b.feature("side_effect_argument")
