"""Python functions and objects: helper functions, closures, lambdas, `nonlocal`,
`functools.partial`, user classes (made in the region or global), dataclasses.

A helper function is a module-level `def` whose body is drawn like `f`'s (any statement,
graph breaks and side effects included), so that every kind of statement also happens
one or two frames down. Closures and lambdas are written inside `f` and hold one
expression over their parameter and the variables they capture.
"""
from __future__ import annotations

from .builder import Builder, TensorVar
from .control_flow import nested_statements
from .expressions import expression, operand, promoted, result_dtype, some_shape
from .shapes import broadcast_operands

AFFINE = '''class Affine:
    def __init__(self, scale, shift):
        self.scale = scale
        self.shift = shift

    def __call__(self, t):
        return t * self.scale + self.shift

    @property
    def doubled(self):
        return self.scale * 2

    def apply(self, t):
        return self(t).tanh() * self.doubled'''

SHIFTED = '''class Shifted(Affine):
    def __call__(self, t):
        return super().__call__(t) - 1.0

    @staticmethod
    def offset(t):
        return t + 0.5'''

PAIR = '''@dataclasses.dataclass
class Pair:
    first: torch.Tensor
    second: torch.Tensor

    def total(self):
        return self.first + self.second * 0.5'''

SCALER_FACTORY = '''def make_scaler(k):
    def scale(t):
        return t * k
    return scale'''


def _argument(b: Builder, shape=None):
    shape = some_shape(b) if shape is None else shape
    return shape, expression(b, shape, b.integer(0, 2))


def helper_function(b: Builder) -> None:
    """A module-level function with a drawn body, called once or twice."""
    if b.nesting >= 2:
        return
    shape, first = _argument(b)
    second_shape, second = _argument(b, b.choice([s for s in broadcast_operands(shape) if s in b.reachable()]))
    name = b.fresh("helper")
    params = [TensorVar("t", shape, first.dtype, first.grad, mutable=False),
              TensorVar("s", second_shape, second.dtype, second.grad, mutable=False)]
    with b.function(params, ints=["k"]) as body:
        nested_statements(b, 3)
        out_shape = some_shape(b)
        result = expression(b, out_shape, b.integer(0, 2))
        b.emit(f"return {result.code}")
    b.define(name, body.source(f"def {name}(t, s, k=2):"))
    call = b.choice(["{f}({a}, {b})", "{f}({a}, {b}, k=3)", "{f}({a}, s={b})", "{f}(*({a}, {b}))"])
    b.assign(call.format(f=name, a=first.code, b=second.code), out_shape, result.dtype, True)
    if b.chance(30):
        b.assign(call.format(f=name, a=first.code, b=second.code), out_shape, result.dtype, True)
        b.feature("helper_called_twice")
    b.feature("helper_function")
    if b.nesting:
        b.feature("helper_in_helper")


def closure(b: Builder) -> None:
    """A function defined in `f` reading variables of `f`, called right away."""
    shape, argument = _argument(b)
    name, param = b.fresh("inner"), b.fresh("t")
    b.emit(f"def {name}({param}):")
    with b.indented(), b.block():
        b.add_tensor(param, shape, argument.dtype, argument.grad)
        out_shape = some_shape(b)
        body = expression(b, out_shape, b.integer(1, 2))
        b.emit(f"return {body.code}")
    b.assign(f"{name}({argument.code})", out_shape, body.dtype, True)
    b.feature("closure")


def lambda_call(b: Builder) -> None:
    shape, argument = _argument(b)
    name, param = b.fresh("fn"), b.fresh("t")
    with b.block():
        b.add_tensor(param, shape, argument.dtype, argument.grad)
        body = expression(b, shape, b.integer(1, 2))
    b.emit(f"{name} = lambda {param}: {body.code}")
    use = b.choice(["call", "map", "twice"])
    if use == "call":
        b.assign(f"{name}({argument.code})", shape, body.dtype, True)
    elif use == "map":
        b.assign(f"sum(map({name}, [{argument.code}, {operand(argument.code)} * 2]))", shape, body.dtype, True)
    else:
        b.assign(f"{name}({name}({argument.code}).to({operand(argument.code)}.dtype))", shape,
                 body.dtype, True)
    b.feature(f"lambda_{use}")


def nonlocal_counter(b: Builder) -> None:
    """A closure that counts its calls in a `nonlocal`."""
    shape, argument = _argument(b)
    count, name, param = b.fresh("count"), b.fresh("bump"), b.fresh("t")
    b.emit(f"{count} = 0")
    b.emit(f"def {name}({param}):")
    b.emit(f"    nonlocal {count}")
    b.emit(f"    {count} += 1")
    b.emit(f"    return {param} * {count}")
    first = b.assign(f"{name}({argument.code})", shape, argument.dtype, argument.grad)
    b.assign(f"{name}({first.name}) + {count}", shape, argument.dtype, argument.grad)
    b.feature("nonlocal")


def partial_call(b: Builder) -> None:
    shape, argument = _argument(b)
    b.define("functools.partial target", "def scaled_sum(t, scale, shift=0.0):\n    return t * scale + shift")
    name = b.fresh("part")
    b.emit(f"{name} = functools.partial(scaled_sum, scale={b.number()})")
    b.assign(f"{name}({argument.code}, shift={b.number()})", shape, argument.dtype, argument.grad)
    b.feature("partial")


def scaler_from_factory(b: Builder) -> None:
    """A closure made by a module-level factory: at module level, or called in `f`."""
    shape, argument = _argument(b)
    b.define("make_scaler", SCALER_FACTORY)
    if b.chance(50):
        name = b.fresh("SCALER")
        b.define(name, f"{name} = make_scaler({b.number()})")
        b.feature("global_closure")
    else:
        name = b.fresh("scaler")
        b.emit(f"{name} = make_scaler({b.choice(['2', '0.5', 'n' if 'n' in b.ints else '3'])})")
        b.feature("closure_made_in_f")
    b.assign(f"{name}({argument.code})", shape, argument.dtype, argument.grad)


def user_object(b: Builder) -> None:
    """An instance of a user class made in `f` (plain, subclass with `super()`, dataclass)."""
    b.define("Affine", AFFINE)
    shape, argument = _argument(b)
    kind = b.choice(["affine", "subclass", "dataclass"])
    name = b.fresh("obj")
    if kind == "dataclass":
        b.define("Pair", PAIR)
        _, other = _argument(b, shape)
        b.emit(f"{name} = Pair({argument.code}, {other.code})")
        use = b.choice(["{o}.total()", "{o}.first * {o}.second", "{o}.total() - {o}.first"])
        dtype = promoted(argument.dtype, other.dtype)
    else:
        cls = "Affine"
        if kind == "subclass":
            b.define("Shifted", SHIFTED)
            cls = "Shifted"
        shift_shape = b.choice([s for s in broadcast_operands(shape) if s in b.reachable()])
        shift = b.choice([b.number(), None])
        if shift is None:
            shift_expr = expression(b, shift_shape, b.integer(0, 1))
            shift = shift_expr.code
            dtype = result_dtype(shape, argument.dtype, shift_shape, shift_expr.dtype)
        else:
            dtype = argument.dtype
        b.emit(f"{name} = {cls}({b.number()}, {shift})")
        use = b.choice(["{o}({a})", "{o}.apply({a})", "{a} * {o}.doubled"]
                       + (["{o}.offset({a}) + {o}({a})"] if kind == "subclass" else []))
    b.assign(use.format(o=name, a=argument.code), shape, dtype, True)
    b.feature(f"object_{kind}")


def global_object(b: Builder) -> None:
    """A user object made at module level, read in `f`; `mutate()` changes an attribute."""
    b.define("Affine", AFFINE)
    name = b.fresh("AFFINE")
    b.define(name, f"{name} = Affine({b.number()}, {b.number()})")
    if b.chance(50):
        b.mutations.append(f"{name}.scale = {b.number()}")
        b.feature("global_object_mutated")
    shape, argument = _argument(b)
    use = b.choice(["{o}({a})", "{o}.apply({a})", "{a} * {o}.scale + {o}.shift"])
    b.assign(use.format(o=name, a=argument.code), shape, argument.dtype, True)
    b.feature("global_object")


SCALING_CONTEXT = '''class Scaling:
    """A user context manager: counts its entries, scales values inside."""

    entered = 0

    def __init__(self, factor):
        self.factor = factor

    def __enter__(self):
        Scaling.entered += 1
        return self.factor

    def __exit__(self, kind, value, traceback):
        return False'''

GENERATOR = '''def scaled_copies(t, count):
    for index in range(count):
        yield t * (index + 1)'''


def user_context_manager(b: Builder) -> None:
    """`with Scaling(k) as factor:` around a value (a class attribute counts entries)."""
    b.define("Scaling", SCALING_CONTEXT)
    b.observe("Scaling.entered")
    shape = some_shape(b)
    name, factor = b.fresh("v"), b.fresh("factor")
    b.emit(f"with Scaling({b.number()}) as {factor}:")
    with b.indented(), b.block():
        expr = expression(b, shape, b.integer(0, 2))
        b.emit(f"{name} = {operand(expr.code)} * {factor}")
    b.add_tensor(name, shape, expr.dtype, expr.grad)
    b.feature("user_context_manager")


def generator_call(b: Builder) -> None:
    """A generator function defined at module level, consumed in `f`."""
    b.define("scaled_copies", GENERATOR)
    shape, argument = _argument(b)
    count = b.choice(["2", "3", "n" if "n" in b.ints else "1"])
    use = b.choice(["sum({g})", "torch.stack(list({g})).sum(0)", "next(iter({g}))",
                    "[t for t in {g}][-1]"])
    b.assign(use.format(g=f"scaled_copies({argument.code}, {count})"), shape, argument.dtype, True)
    b.feature("generator")
