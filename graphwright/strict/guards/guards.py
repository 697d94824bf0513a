"""Guards: the conditions under which a captured graph may be reused.

The tracer collects guards as data (`Guard`: a source, a kind, the expected
value) while it reads values from outside. `codegen.py` turns one entry's
guards into straight-line Python (`condition`), cheapest kinds first. When
every entry misses, `failure_reason` explains in the user's terms which guard
failed; that runs only on the slow path, never on a hit.
"""
from __future__ import annotations

import contextlib
import contextvars
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

from ..._core.subclass_protocol import flatten_signature, same_flatten
from ..interpreter.symbolic_sizes import substitute_inputs
from .sources import ExprWriter, Source, literal

# Lower runs first: a cheap type or constant check that fails saves the tensor checks.
_COST = {"grad_mode": 0, "global_state": 0, "torch_function": 0, "global_hooks": 0, "query": 1, "call": 3,
         "subclasses": 3, "type": 1, "id": 1, "code": 1, "const": 2, "len": 2, "keys": 3, "contains": 2,
         "lacks_item": 5, "no_hooks": 3, "lacks": 3, "mro_lacks": 3,
         "tensor": 4, "flatten": 4, "alias": 5, "distinct": 5, "sizes": 6}

# Kinds that check global state, not a value read from a source.
STATE_KINDS = frozenset({"grad_mode", "global_state", "torch_function", "global_hooks", "query", "sizes"})


def autocast_state() -> tuple | None:
    """Which autocast regions are active, with their dtypes; None when none is (the common case)."""
    if not torch._C._is_any_autocast_enabled():
        return None
    return tuple((device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
                 for device in ("cpu", "cuda"))


GLOBAL_HOOK_TABLES = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                      "_global_backward_pre_hooks")


def global_module_hooks() -> bool:
    """Whether hooks registered for every module are installed."""
    hooks = torch.nn.modules.module
    return any(getattr(hooks, table) for table in GLOBAL_HOOK_TABLES)


# Global flags that change which kernels run (as PyTorch's global-state guard checks them):
# read with torch's C getters, the cheapest calls there are on the per-call path.
TORCH_FLAGS = (torch._C._get_deterministic_algorithms, torch._C._get_deterministic_algorithms_warn_only,
               torch._C._get_cublas_allow_tf32)


def global_state() -> tuple:
    """Global torch state that changes what operators return: the default dtype, autocast, and
    the flags of `TORCH_FLAGS` (deterministic algorithms, TF32 matmuls)."""
    return (torch.get_default_dtype(), autocast_state(), tuple(flag() for flag in TORCH_FLAGS))


def torch_function_state() -> tuple[bool, bool]:
    """Whether `__torch_function__` overrides run (off inside `DisableTorchFunctionSubclass()`),
    and whether every one is off, torch function modes too (inside `DisableTorchFunction()`)."""
    return torch._C._is_torch_function_enabled(), torch._C._is_torch_function_all_disabled()


_CALL_TORCH_FUNCTION_STATE: contextvars.ContextVar[tuple[bool, bool] | None] = \
    contextvars.ContextVar("call_torch_function_state", default=None)


@contextlib.contextmanager
def compiling_call() -> Iterator[None]:
    """Compiling runs with subclass dispatch off (reading the inputs runs no subclass's Python):
    the state the call itself has is read first, for the tracer to start from and guard."""
    token = _CALL_TORCH_FUNCTION_STATE.set(torch_function_state())
    try:
        yield
    finally:
        _CALL_TORCH_FUNCTION_STATE.reset(token)


def call_torch_function_state() -> tuple[bool, bool]:
    """The torch function state of the call being compiled (`compiling_call`)."""
    return _CALL_TORCH_FUNCTION_STATE.get() or torch_function_state()


DIMENSION_MARKS = ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices")
_NO_MARKS: frozenset[int] = frozenset()


@dataclass(frozen=True)
class TensorMeta:
    """What a tensor guard checks: everything fake-tensor tracing specialised on."""

    cls: type
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dynamic: frozenset[int] = frozenset()  # symbolic dimensions: checked by the "sizes" guard
    inference: bool = False
    # The tensor's dispatch keys as an int (conjugate and negative bits, subclasses'
    # Python key), or None where they cannot change between calls: module state,
    # whose tensors are made once (checking them on every call costs ~0.4 us each).
    dispatch_keys: int | None = None
    # The dimensions marked dynamic (`mark_dynamic`, `maybe_mark_dynamic`) of a tensor that had
    # marks: a tensor marked on other dimensions recompiles, as in PyTorch. An unmarked tensor
    # is not checked for marks (it would cost every call a failed attribute lookup).
    marks: tuple[tuple[str, frozenset[int]], ...] = ()

    @staticmethod
    def of(tensor: torch.Tensor, dynamic: frozenset[int] = frozenset(),
           check_dispatch_keys: bool = True) -> "TensorMeta":
        keys = torch._C._dispatch_keys(tensor).raw_repr() if check_dispatch_keys else None
        marks = tuple((name, frozenset(getattr(tensor, name))) for name in DIMENSION_MARKS if hasattr(tensor, name))
        return TensorMeta(type(tensor), tensor.dtype, tensor.device, tensor.requires_grad,
                          tuple(tensor.shape), tuple(tensor.stride()), dynamic, tensor.is_inference(),
                          keys, marks)

    def is_contiguous_layout(self) -> bool:
        expected, step = [], 1
        for size in reversed(self.shape):
            expected.append(step)
            step *= max(size, 1)
        return tuple(reversed(expected)) == self.stride


def dies_with_its_scope(obj: Any) -> bool:
    """Whether `obj` is a class or function made by a call (its qualified name says `<locals>`):
    such an object, and what its closure holds (a module's parameters), lives as long as the
    program keeps it, so a cache entry guarding it must not keep it alive (one made at module
    level lives as long as the process anyway)."""
    return isinstance(obj, (type, types.FunctionType)) and "<locals>" in obj.__qualname__


class Guard:
    """A source, a kind and the expected value. An identity or type guard on an object that
    `dies_with_its_scope` holds it weakly: once the object is gone nothing can match it, and
    the guard fails (`expected` is then None)."""

    __slots__ = ("source", "kind", "_expected", "weak")

    def __init__(self, source: Source, kind: str, expected: Any = None) -> None:
        self.source = source
        self.kind = kind
        self.weak = kind in ("type", "id") and dies_with_its_scope(expected)
        self._expected = weakref.ref(expected) if self.weak else expected

    @property
    def expected(self) -> Any:
        return self._expected() if self.weak else self._expected

    def __repr__(self) -> str:
        return f"Guard({self.source!r}, {self.kind!r}, {self.expected!r})"

    @property
    def cost(self) -> int:
        return _COST[self.kind]

    def dedup_key(self) -> tuple:
        if self.kind in ("alias", "distinct"):
            return (self.source, self.kind, self.expected)
        if self.kind == "query":  # one per function asked: its answer may not hash
            return (self.source, self.kind, id(self.expected[0]))
        expected = id(self.expected) if self.kind in ("id", "type", "code") else self.expected
        try:
            hash(expected)
        except TypeError:  # a constant Python 3.11 cannot hash (a slice): its exact text
            expected = (type(expected), repr(expected))
        return (self.source, self.kind, expected)

    def condition(self, value: str, writer: ExprWriter) -> str:
        """Python text that is true when the guard holds; `value` is the re-read expression."""
        kind, expected, ref = self.kind, self.expected, writer.ref
        if self.weak:  # the object if it is still alive, else None, which no value of its kind is
            held = f"{ref(self._expected)}()"
            return f"___type({value}) is {held}" if kind == "type" else f"{value} is {held}"
        if kind == "type":
            return f"___type({value}) is {ref(expected)}"
        if kind == "id":
            return f"{value} is {ref(expected)}"
        if kind == "code":  # an equal code object (the same source exec'd again) behaves the same
            return f"({value} is {ref(expected)} or {value} == {ref(expected)})"
        if kind == "const":
            if expected is None or isinstance(expected, bool):
                return f"{value} is {expected!r}"
            if isinstance(expected, (float, complex)) and expected != expected:  # NaN equals nothing
                return f"___type({value}) is {ref(type(expected))} and {value} != {value}"
            return f"___type({value}) is {ref(type(expected))} and {value} == {literal(expected, ref)}"
        if kind == "len":
            return f"___len({value}) == {expected}"
        if kind == "keys":
            return f"___tuple({value}) == {literal(expected, ref)}"
        if kind == "contains":  # one key of a dict, present or absent
            key, present = expected
            return f"{literal(key, ref)} {'in' if present else 'not in'} {value}"
        if kind == "lacks_item":  # the dict has no item under the object the source reads
            return f"{writer.expr(expected)} not in {value}"
        if kind == "no_hooks":
            return (f"not ({value}._forward_hooks or {value}._forward_pre_hooks"
                    f" or {value}._backward_hooks or {value}._backward_pre_hooks)")
        if kind == "grad_mode":
            return f"{ref(torch.is_grad_enabled)}() is {expected!r}"
        if kind == "global_state":
            dtype, autocast, flags = expected
            autocast_check = (f"not {ref(torch._C._is_any_autocast_enabled)}()" if autocast is None
                              else f"{ref(autocast_state)}() == {ref(autocast)}")
            flag_checks = "".join(f" and {ref(flag)}() is {value!r}" for flag, value in zip(TORCH_FLAGS, flags))
            return f"{ref(torch.get_default_dtype)}() is {ref(dtype)} and {autocast_check}{flag_checks}"
        if kind == "torch_function":  # checked before any read with subclass dispatch off (codegen)
            return " and ".join(f"{ref(check)}() is {flag!r}" for check, flag in
                                zip((torch._C._is_torch_function_enabled, torch._C._is_torch_function_all_disabled),
                                    expected))
        if kind == "global_hooks":  # hooks registered for every module (none when traced)
            hooks = ref(torch.nn.modules.module)
            return " and ".join(f"not {hooks}.{table}" for table in GLOBAL_HOOK_TABLES)
        if kind == "query":  # a call of torch that reads global state, asked again
            function, answer = expected
            if answer is None or isinstance(answer, bool):
                return f"{ref(function)}() is {answer!r}"
            return f"{ref(function)}() == {literal(answer, ref)}"
        if kind == "lacks":
            return f"not ___hasattr({value}, {expected!r})"
        if kind == "mro_lacks":  # no class of the MRO defines the name (as instance lookups see it)
            name, mro = expected
            return f"{value}.__mro__ is {ref(mro)} and " + " and ".join(
                f"{name!r} not in {ref(klass)}.__dict__" for klass in mro)
        if kind == "subclasses":
            return f"___tuple({value}.__subclasses__()) == {literal(expected, ref)}"
        if kind == "call":
            name, args, result = expected
            return f"{value}.{name}({', '.join(repr(arg) for arg in args)}) == {literal(result, ref)}"
        if kind == "alias":
            return f"{value} is {writer.expr(expected)}"
        if kind == "distinct":
            return f"{value} is not {writer.expr(expected)}"
        if kind == "tensor":
            return _tensor_condition(value, expected, ref)
        if kind == "flatten" and len(expected) == 3:  # the class's own `__metadata_guard__` decides
            return f"{ref(same_flatten)}({value}, {ref(expected)})"
        if kind == "flatten":  # a tensor subclass's inner attributes and flatten context
            return f"{ref(flatten_signature)}({value}) == {ref(expected)}"
        if kind == "sizes":
            code, sources = expected
            writer.namespace.update(SYMPY_INTERP)
            return substitute_inputs(code, [writer.expr(source) for source in sources])
        raise AssertionError(kind)

    def describe(self) -> str:
        """What the guard checks, in the user's terms (the `guards` log, dumps)."""
        name, kind, expected = self.source.name(), self.kind, self.expected
        if kind == "tensor":
            shape = ", ".join(f"s{i}" if i in expected.dynamic else str(size) for i, size in enumerate(expected.shape))
            layout = "contiguous" if expected.is_contiguous_layout() else f"stride={list(expected.stride)}"
            return (f"tensor {name}: {expected.cls.__name__}, {expected.dtype}, {expected.device}, "
                    f"size=[{shape}], {layout}, requires_grad={expected.requires_grad}"
                    + (", inference" if expected.inference else ""))
        if kind == "sizes":
            code, sources = expected
            return f"sizes satisfy: {substitute_inputs(code, [source.name() for source in sources])}"
        if kind in ("alias", "distinct"):
            return f"{name} {'is' if kind == 'alias' else 'is not'} {expected.name()}"
        described = {
            "type": lambda: f"type of {name} is {getattr(expected, '__qualname__', expected)}",
            "id": lambda: f"{name} is the object {_short(expected)}",
            "const": lambda: f"{name} == {_short(expected)}",
            "len": lambda: f"len({name}) == {expected}",
            "keys": lambda: f"keys of {name} are {list(expected)}",
            "contains": lambda: f"{name} {'has' if expected[1] else 'lacks'} the key {expected[0]!r}",
            "lacks_item": lambda: f"{name} has no item under {expected.name()}",
            "no_hooks": lambda: f"module {name} has no hooks",
            "lacks": lambda: f"{name} has no attribute '{expected}'",
            "mro_lacks": lambda: f"no class in the MRO of {name} defines '{expected[0]}'",
            "call": lambda: f"{name}.{expected[0]}{expected[1]} == {expected[2]!r}",
            "grad_mode": lambda: f"grad mode is {'enabled' if expected else 'disabled'}",
            "global_state": lambda: f"default dtype is {expected[0]}, autocast state is {expected[1]}, "
                                    f"deterministic algorithms, warn only, TF32 matmuls are {expected[2]}",
            "torch_function": lambda: _torch_function_text(expected),
            "code": lambda: f"{name} is the code object {_short(expected)} (or an equal one)",
            "global_hooks": lambda: "no module hook is registered for every module",
            "query": lambda: f"{getattr(expected[0], '__qualname__', expected[0])}() == {expected[1]!r}",
            "subclasses": lambda: f"the subclasses of {name} are {[cls.__qualname__ for cls in expected]}",
            "flatten": lambda: f"tensor {name} flattens to {list(expected[0])} with context {_short(expected[1])}",
        }
        describe = described.get(kind)
        return describe() if describe is not None else f"a {kind} guard on {name}"

    def failure(self, actual: Any) -> str | None:
        """Why `actual` fails this guard, in the user's terms; None when it passes."""
        name, kind, expected = self.source.name(), self.kind, self.expected
        if self.weak and expected is None:
            return f"the {'class' if kind == 'type' else 'object'} '{name}' was compiled for is gone"
        if kind == "type" and type(actual) is not expected:
            return f"type of '{name}' changed: expected {expected.__name__}, actual {type(actual).__name__}"
        if kind == "id" and actual is not expected:
            return f"'{name}' is a different object than when it was compiled"
        if kind == "code" and actual != expected:
            return f"'{name}' is other code than when it was compiled"
        if kind == "const" and (type(actual) is not type(expected) or actual != expected):
            return f"'{name}' changed: expected {expected!r}, actual {actual!r}"
        if kind == "len" and len(actual) != expected:
            return f"length of '{name}' changed: expected {expected}, actual {len(actual)}"
        if kind == "keys" and tuple(actual) != expected:
            return f"keys of '{name}' changed: expected {list(expected)}, actual {list(actual)}"
        if kind == "contains" and (expected[0] in actual) is not expected[1]:
            return f"'{name}' {'lacks' if expected[1] else 'has'} the key {expected[0]!r} now"
        if kind == "no_hooks" and (actual._forward_hooks or actual._forward_pre_hooks
                                   or actual._backward_hooks or actual._backward_pre_hooks):
            return f"module '{name}' has hooks now"
        if kind == "call" and (answer := getattr(actual, expected[0])(*expected[1])) != expected[2]:
            return f"'{name}.{expected[0]}{expected[1]}' changed: expected {expected[2]!r}, actual {answer!r}"
        if kind == "lacks" and hasattr(actual, expected):
            return f"'{name}' has an attribute '{expected}' now"
        if kind == "subclasses" and tuple(actual.__subclasses__()) != expected:
            return f"the subclasses of class '{name}' changed"
        if kind == "mro_lacks" and (actual.__mro__ is not expected[1]
                                    or any(expected[0] in klass.__dict__ for klass in actual.__mro__)):
            return f"class '{name}' has an attribute '{expected[0]}' now"
        if kind == "global_state" and global_state() != expected:
            return f"global torch state changed (default dtype, autocast, deterministic algorithms, TF32): " \
                   f"expected {expected}, actual {global_state()}"
        if kind == "torch_function" and actual != expected:
            return f"torch function state changed: expected {_torch_function_text(expected)}, " \
                   f"actual {_torch_function_text(actual)}"
        if kind == "global_hooks" and global_module_hooks():
            return "hooks for every module were registered (`register_module_forward_hook`...)"
        if kind == "query" and expected[0]() != expected[1]:
            name = getattr(expected[0], "__qualname__", repr(expected[0]))
            return f"'{name}()' changed: expected {expected[1]!r}, actual {expected[0]()!r}"
        if kind == "grad_mode" and torch.is_grad_enabled() is not expected:
            return f"grad mode changed: expected {expected}, actual {torch.is_grad_enabled()}"
        if kind == "tensor":
            return _tensor_failure(name, expected, actual)
        if kind == "flatten" and (not same_flatten(actual, expected) if len(expected) == 3
                                  else flatten_signature(actual) != expected):
            attributes, context = flatten_signature(actual)
            return (f"tensor '{name}' flattens to other inner tensors or context: expected {list(expected[0])} "
                    f"with {_short(expected[1])}, actual {list(attributes)} with {_short(context)}")
        return None


def _tensor_condition(value: str, meta: TensorMeta, ref: Callable[[Any], str]) -> str:
    device = (f"{value}.is_cpu" if meta.device.type == "cpu"
              else f"{value}.device == {ref(meta.device)}")
    device += f" and {value}.is_inference() is {meta.inference!r}"
    if meta.dispatch_keys is not None:
        device += f" and ___dispatch_keys({value}).raw_repr() == {meta.dispatch_keys}"
    for name, dims in meta.marks:
        device += f" and {ref(getattr)}({value}, {name!r}, {ref(_NO_MARKS)}) <= {ref(dims)}"
    if meta.dynamic:
        sizes = "".join(f" and {value}.size({i}) == {size}" for i, size in enumerate(meta.shape)
                        if i not in meta.dynamic)
        layout = f" and {value}.is_contiguous()" if meta.is_contiguous_layout() else ""
        return (f"___type({value}) is {ref(meta.cls)} and {value}.dtype is {ref(meta.dtype)}"
                f" and {device} and {value}.requires_grad is {meta.requires_grad!r}"
                f" and {value}.dim() == {len(meta.shape)}{sizes}{layout}")
    layout = (f"{value}.is_contiguous()" if meta.is_contiguous_layout()
              else f"{value}.stride() == {meta.stride!r}")
    return (f"___type({value}) is {ref(meta.cls)} and {value}.dtype is {ref(meta.dtype)}"
            f" and {device} and {value}.requires_grad is {meta.requires_grad!r}"
            f" and {value}.shape == {meta.shape!r} and {layout}")


def _tensor_failure(name: str, meta: TensorMeta, actual: Any) -> str | None:
    if not isinstance(actual, torch.Tensor):
        return f"'{name}' is no longer a tensor: actual {type(actual).__name__}"
    checks = [("type", meta.cls.__name__, type(actual).__name__),
              ("dtype", meta.dtype, actual.dtype), ("device", meta.device, actual.device),
              ("requires_grad", meta.requires_grad, actual.requires_grad),
              ("inference mode", meta.inference, actual.is_inference()),
              ("dimensionality", len(meta.shape), actual.dim())]
    if meta.dispatch_keys is not None:
        checks.append(("dispatch keys", torch._C.DispatchKeySet.from_raw_repr(meta.dispatch_keys),
                       torch._C._dispatch_keys(actual)))
    for mark, dims in meta.marks:
        marked = set(getattr(actual, mark, ()))
        if not marked <= dims:
            checks.append((f"dimensions marked ({mark})", sorted(dims), sorted(marked)))
    for what, expected, got in checks:
        if expected != got:
            return f"tensor '{name}' {what} mismatch: expected {expected}, actual {got}"
    for index, (expected, got) in enumerate(zip(meta.shape, actual.shape)):
        if expected != got and index not in meta.dynamic:
            return f"tensor '{name}' size mismatch at index {index}: expected {expected}, actual {got}"
    contiguous_ok = meta.is_contiguous_layout() and actual.is_contiguous()
    if not contiguous_ok and not meta.dynamic and tuple(actual.stride()) != meta.stride:
        for index, (expected, got) in enumerate(zip(meta.stride, actual.stride())):
            if expected != got:
                return (f"tensor '{name}' stride mismatch at index {index}: "
                        f"expected {expected}, actual {got}")
    return None


def ordered(guards: list[Guard]) -> list[Guard]:
    """Deduplicated, cheapest kinds first, stable otherwise."""
    unique: dict[tuple, Guard] = {}
    for guard in guards:
        unique.setdefault(guard.dedup_key(), guard)
    return sorted(unique.values(), key=lambda guard: guard.cost)


def _short(value: Any, limit: int = 80) -> str:
    text = getattr(value, "__qualname__", None) if not isinstance(value, str) else None
    text = text or (f"module {value.__name__}" if isinstance(value, types.ModuleType) else repr(value))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _torch_function_text(state: tuple[bool, bool]) -> str:
    enabled, all_disabled = state
    if all_disabled:
        return "every __torch_function__ off (DisableTorchFunction)"
    return "__torch_function__ on" if enabled else "subclasses' __torch_function__ off (DisableTorchFunctionSubclass)"
