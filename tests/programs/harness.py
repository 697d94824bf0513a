"""The differential runner: one program, run eagerly and compiled, compared.

A `Program` is declarative: how to build its world (a function, a module, or
a module with its optimizer), how to make inputs, what to compile out of the
world, and how many graphs the compile counter should have seen after the
first calls and after a call with changed inputs. `check_program` runs the
program twice from the same seeds, once eagerly and once compiled, and
compares everything a user could observe after every call: outputs, the
arguments (mutated lists, dicts, tensors), module state, the program's own
observed state (globals, attributes), logging records and warnings, what it
printed, and gradients.

Adding a program takes a few lines in one of the `cases_*.py` files:

    @program("name_that_reads_as_a_specification", lambda: torch.randn(3),
             changed=lambda: torch.randn(4), frames_changed=2)
    def _(x):
        return x * 2

With `GW_CORPUS_REFERENCE=1` (`make test-corpus-reference`) the same corpus
runs through `torch.compile` with PyTorch's counting backend; that is how
every expectation here was validated. Where graphwright deliberately differs
from PyTorch (the issue says so), a program states PyTorch's numbers in
`reference`. `GW_CORPUS_BACKEND=aot_eager` (or any backend name) puts a real
backend behind the counter, in either mode.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import logging
import math
import os
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch._library.opaque_object import is_opaque_reference_type
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

import graphwright

REFERENCE = os.environ.get("GW_CORPUS_REFERENCE") == "1"
"""Run the corpus through PyTorch's torch.compile instead of graphwright."""

BACKEND = os.environ.get("GW_CORPUS_BACKEND", "")
"""A real backend behind the counter (e.g. "aot_eager"); empty: run the graph as captured."""

corpus_logger = logging.getLogger("graphwright_corpus")
corpus_logger.setLevel(logging.DEBUG)
corpus_logger.propagate = False


class CorpusWarning(UserWarning):
    """The category the corpus programs warn with, so that only theirs are compared."""


class Args:
    """Positional and keyword arguments of one call: `Args(x, n=3)`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs


def _as_args(value: Any) -> Args:
    if isinstance(value, Args):
        return value
    if type(value) is tuple:
        return Args(*value)
    return Args(value)


def _plain_call(world: Any, compiled: Callable, args: Args) -> Any:
    return compiled(*args.args, **args.kwargs)


def _the_world(world: Any) -> Any:
    return world


@dataclasses.dataclass
class Program:
    """One corpus program; see the module docstring.

    `frames` is the compile counter's frame_count after each of the first
    `repeats` calls (the same inputs, fresh tensors; a list when it grows
    from call to call), `frames_changed` after one more call with `changed()`
    inputs (None: no such call).

    `target(world)` is what gets compiled; `call(world, compiled, args)` makes
    one call (the default calls `compiled(*args)`); `observe(world)` returns
    extra state to compare after each call; `reset()` puts globals back
    before each run; `options` go to the compile call; `grad` backpropagates
    through the outputs and compares gradients; `reference` overrides fields
    for the PyTorch run and must say `why` (its `xfail` names a PyTorch bug);
    `xfail` names what the strict tracer still lacks (a strict xfail, so a
    fix is noticed); `backend` puts a real backend behind the counter for
    this program whatever `GW_CORPUS_BACKEND` says (a program about AOT
    autograd names "aot_eager"); `nested(world, compile)` returns the world with a part
    of it compiled on its own by `compile` (the same backend and counter;
    eagerly, the identity), for programs whose compiled code calls code
    compiled separately (a training step calling a compiled model).
    """

    name: str
    make: Callable[[], Any]
    inputs: Callable[[], Any]
    changed: Callable[[], Any] | None = None
    frames: int | list[int] = 1
    frames_changed: int | None = None
    fullgraph: bool = True
    grad: bool = False
    repeats: int = 2
    target: Callable[[Any], Any] = _the_world
    call: Callable[[Any, Callable, Args], Any] = _plain_call
    observe: Callable[[Any], Any] | None = None
    reset: Callable[[], None] | None = None
    options: dict = dataclasses.field(default_factory=dict)
    reference: dict = dataclasses.field(default_factory=dict)
    xfail: str | None = None
    nested: Callable[[Any, Callable[[Any], Any]], Any] | None = None
    backend: str = ""

    def __post_init__(self) -> None:
        if self.reference and "why" not in self.reference:
            raise ValueError(f"{self.name}: a reference override must say why")
        if (self.changed is None) != (self.frames_changed is None):
            raise ValueError(f"{self.name}: changed inputs and frames_changed go together")

    def for_reference(self) -> Program:
        overrides = {k: v for k, v in self.reference.items() if k != "why"}
        return dataclasses.replace(self, reference={}, **overrides)


def function_program(name: str, fn: Callable, inputs: Callable[[], Any], **fields: Any) -> Program:
    """A program that compiles the plain function `fn`."""
    return Program(name=name, make=lambda: fn, inputs=inputs, **fields)


def program_decorator(programs: list[Program]) -> Callable:
    """A decorator `@program(name, inputs, **fields)` that registers the decorated
    function as a corpus program in `programs`."""

    def program(name: str, inputs: Callable[[], Any], **fields: Any) -> Callable:
        def register(fn: Callable) -> Callable:
            programs.append(function_program(name, fn, inputs, **fields))
            return fn

        return register

    return program


def rand(*shape: int, requires_grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=requires_grad)


def module_program(name: str, make_module: Callable[[], torch.nn.Module],
                   inputs: Callable[[], Any], **fields: Any) -> Program:
    """A program that compiles a fresh module built (from the same seed) by `make_module`."""
    return Program(name=name, make=make_module, inputs=inputs, **fields)


def reset_compiler() -> None:
    if REFERENCE:
        import torch._dynamo
        from torch._dynamo.eval_frame import TorchPatcher

        torch._dynamo.reset()
        # what TorchDynamo changes in torch once per process, on its first compile (it turns
        # distributions' argument validation off, wraps optimizers' `_init_group`), done before
        # every program: a program's result must not depend on whether it compiled first
        TorchPatcher.patch()
    else:
        graphwright.reset()


def assert_backend_contract(gm: Any, example_inputs: list) -> None:
    """What every backend may rely on: a linted GraphModule with one real input per placeholder
    (torch.compile also passes PyTorch's opaque reference objects, a DeviceMesh, as inputs)."""
    assert isinstance(gm, torch.fx.GraphModule), type(gm)
    gm.graph.lint()
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    assert len(placeholders) == len(example_inputs), (len(placeholders), len(example_inputs))
    assert [node.op for node in gm.graph.nodes].count("output") == 1
    for value in example_inputs:
        assert isinstance(value, (torch.Tensor, int, float, torch.SymInt)) \
            or REFERENCE and is_opaque_reference_type(type(value)), type(value)
        assert not isinstance(value, torch._subclasses.FakeTensor), "a fake tensor reached the backend"


def _contract_checked(counter: Callable) -> Callable:
    def backend(gm: Any, example_inputs: list) -> Any:
        assert_backend_contract(gm, example_inputs)
        return counter(gm, example_inputs)
    return backend


def compile_counted(target: Any, *, fullgraph: bool, **options: Any) -> tuple[Any, Any]:
    """`target` compiled with a counting backend: (compiled, counter).

    Every graph is checked against the backend contract before the counter
    sees it. A list target is a list of modules compiled one by one, sharing
    the counter.
    """
    compile_fn, counter = counting_compiler(fullgraph=fullgraph, **options)
    return compile_fn(target), counter


def counting_compiler(*, fullgraph: bool, backend: str = "", **options: Any) -> tuple[Callable[[Any], Any], Any]:
    """(a function compiling its target with a counting backend, the counter); see
    `compile_counted`. `backend`: the real backend behind the counter, else `BACKEND`'s."""
    if REFERENCE:
        import torch._dynamo.testing

        testing = torch._dynamo.testing
        compile_fn = torch.compile
    else:
        testing = graphwright.testing
        compile_fn = graphwright.compile
    real_backend = backend or BACKEND
    counter = testing.CompileCounterWithBackend(real_backend) if real_backend else testing.CompileCounter()
    checked = _contract_checked(counter)

    def compile_target(target: Any) -> Any:
        if isinstance(target, list):
            return [compile_fn(t, backend=checked, fullgraph=fullgraph, **options) for t in target]
        return compile_fn(target, backend=checked, fullgraph=fullgraph, **options)

    return compile_target, counter


class _RecordingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelname, record.getMessage()))


@dataclasses.dataclass
class CallRecord:
    """Everything observable after one call."""

    output: Any
    arguments: Any
    observed: Any
    module_state: Any
    logs: list
    printed: str
    grads: Any
    frames: int | None


def tensor_leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensor_leaves(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensor_leaves(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [t for f in dataclasses.fields(value) for t in tensor_leaves(getattr(value, f.name))]
    return []


def backprop(output: Any) -> None:
    differentiable = [t for t in tensor_leaves(output) if t.requires_grad]
    if differentiable:
        # sin() keeps the gradient informative where a plain sum would not
        # (the sum of a softmax is constant).
        sum(t.float().sin().sum() for t in differentiable).backward()


def _gradients(args: Args, target: Any) -> dict[str, Any]:
    grads: dict[str, Any] = {}
    leaves = tensor_leaves(list(args.args) + list(args.kwargs.values()))
    for index, tensor in enumerate(leaves):
        if tensor.requires_grad and tensor.is_leaf:
            grads[f"input{index}"] = tensor.grad
    modules = target if isinstance(target, list) else [target]
    for index, module in enumerate(modules):
        if isinstance(module, torch.nn.Module):
            for name, param in module.named_parameters():
                grads[f"module{index}.{name}"] = param.grad
    return grads


@dataclasses.dataclass
class ObjectState:
    """A user object as recorded: its class name, a copy of its attributes and, for a
    subclass of dict, list or tuple, of its items (read through the builtin base, so
    that no overridden method runs)."""

    class_name: str
    attributes: dict
    contents: Any = None


@dataclasses.dataclass
class TensorState:
    """A tensor as recorded: a detached contiguous copy of its values, and what the copy
    loses: its strides where they are significant (as PyTorch's `check_significant_strides`:
    not those of a dimension of length 1, nor any of an empty tensor) and requires_grad."""

    value: torch.Tensor
    stride: tuple
    requires_grad: bool


@dataclasses.dataclass
class SubclassState:
    """A traceable wrapper subclass tensor (TwoTensor) as recorded: its class, its flatten
    context, its own metadata and each inner tensor's state, so that a compiled run returning
    the right class around other inner tensors (or another context) is told apart."""

    class_name: str
    context: Any
    shape: tuple
    stride: tuple
    requires_grad: bool
    inner: dict


def significant_strides(tensor: torch.Tensor) -> tuple:
    if tensor.numel() == 0:
        return (None,) * tensor.dim()
    return tuple(stride if size > 1 else None for stride, size in zip(tensor.stride(), tensor.shape))


def _slot_names(cls: type) -> list[str]:
    return [name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ())]


def _is_user_object(value: Any) -> bool:
    if isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                          torch.nn.Module, type)):
        return False
    return hasattr(value, "__dict__") or bool(_slot_names(type(value)))


def _attributes(value: Any) -> dict:
    attributes = dict(vars(value)) if hasattr(value, "__dict__") else {}
    for name in _slot_names(type(value)):
        if hasattr(value, name):
            attributes[name] = getattr(value, name)
    return attributes


def _contents(value: Any) -> Any:
    if isinstance(value, dict):
        return [(key, dict.__getitem__(value, key)) for key in _builtin_base(type(value)).__iter__(value)]
    if isinstance(value, (list, tuple)):
        return list(_builtin_base(type(value)).__iter__(value))
    return None


def _builtin_base(cls: type) -> type:
    return next(klass for klass in cls.__mro__ if klass in (collections.OrderedDict, dict, list, tuple, object))


def snapshot(value: Any) -> Any:
    """A detached copy, so that later calls cannot change what was recorded."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if is_traceable_wrapper_subclass(value):
        names, context = value.__tensor_flatten__()
        if value.layout is torch.jagged:  # its ragged size is a nested int, its own: the offsets say it
            shape = tuple("ragged" if isinstance(size, torch.SymInt) else size for size in value.shape)
            return SubclassState(type(value).__name__, context, shape, None, value.requires_grad,
                                 {name: snapshot(getattr(value, name)) for name in names})
        return SubclassState(type(value).__name__, context, tuple(value.shape), significant_strides(value),
                             value.requires_grad, {name: snapshot(getattr(value, name)) for name in names})
    if isinstance(value, torch.Tensor):
        return TensorState(value.detach().clone(memory_format=torch.contiguous_format),
                           significant_strides(value), value.requires_grad)
    if _is_user_object(value):
        return ObjectState(type(value).__name__, snapshot(_attributes(value)), snapshot(_contents(value)))
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(snapshot(v) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: snapshot(v) for k, v in value.items()}
    return value


def run_world(program: Program, compiled: bool) -> list[CallRecord]:
    """Run every call of `program`, eagerly or compiled, from fixed seeds."""
    if program.reset is not None:
        program.reset()
    torch.manual_seed(0)
    world = program.make()
    compile_fn, counter = counting_compiler(fullgraph=program.fullgraph, backend=program.backend,
                                            **program.options) if compiled \
        else (_the_world, None)
    if program.nested is not None:
        world = program.nested(world, compile_fn)
    target = program.target(world)
    callee = compile_fn(target)
    makers = [program.inputs] * program.repeats
    if program.changed is not None:
        makers.append(program.changed)
    handler = _RecordingHandler()
    corpus_logger.addHandler(handler)
    records = []
    try:
        for index, maker in enumerate(makers):
            torch.manual_seed(100 + index)
            args = _as_args(maker())
            handler.records = []
            printed = io.StringIO()
            with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(printed):
                warnings.simplefilter("always")
                torch.manual_seed(200 + index)
                output = program.call(world, callee, args)
            logs = handler.records + [
                (w.category.__name__, str(w.message)) for w in caught
                if issubclass(w.category, CorpusWarning)
            ]
            if program.grad:
                backprop(output)
            records.append(CallRecord(
                output=snapshot(output),
                arguments=snapshot((args.args, args.kwargs)),
                observed=snapshot(program.observe(world)) if program.observe else None,
                module_state=snapshot(dict(target.state_dict()))
                if isinstance(target, torch.nn.Module) else None,
                logs=logs,
                printed=printed.getvalue(),
                grads=snapshot(_gradients(args, target)) if program.grad else None,
                frames=counter.frame_count if counter is not None else None,
            ))
    finally:
        corpus_logger.removeHandler(handler)
    return records


def assert_same(expected: Any, actual: Any, path: str = "output") -> None:
    """Equal values, recursively; tensors equal in metadata and close in value."""
    if isinstance(expected, torch.Tensor):
        assert type(actual) is type(expected), f"{path}: type {type(actual)} != {type(expected)}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.stride() == expected.stride(), (
            f"{path}: strides {actual.stride()} != {expected.stride()}")
        assert actual.device == expected.device, f"{path}: device differs"
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{path}: {m}")
        return
    assert type(actual) is type(expected), f"{path}: type {type(actual)} != {type(expected)}"
    if isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        if expected.dtype.kind in "biufc":
            np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-8, equal_nan=True, err_msg=path)
        else:  # objects, strings
            assert np.array_equal(actual, expected), f"{path}: {actual!r} != {expected!r}"
        return
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for index, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{path}[{index}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(expected[key], actual[key], f"{path}[{key!r}]")
    elif dataclasses.is_dataclass(expected):
        for f in dataclasses.fields(expected):
            assert_same(getattr(expected, f.name), getattr(actual, f.name), f"{path}.{f.name}")
    elif isinstance(expected, float):
        assert math.isclose(actual, expected, rel_tol=1e-6) or (
            math.isnan(actual) and math.isnan(expected)), f"{path}: {actual} != {expected}"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def check_program(program: Program) -> None:
    """Run `program` eagerly and compiled and assert they cannot be told apart."""
    if REFERENCE:
        program = program.for_reference()
    reset_compiler()
    try:
        eager = run_world(program, compiled=False)
        reset_compiler()
        compiled = run_world(program, compiled=True)
    finally:
        reset_compiler()
        if program.reset is not None:
            program.reset()  # leave no changed global behind for the next program
    for index, (e, c) in enumerate(zip(eager, compiled)):
        where = f"call {index}"
        assert_same(e.output, c.output, f"{where} output")
        assert_same(e.arguments, c.arguments, f"{where} arguments after the call")
        assert_same(e.observed, c.observed, f"{where} observed state")
        assert_same(e.module_state, c.module_state, f"{where} module state_dict")
        assert_same(e.logs, c.logs, f"{where} logging records and warnings")
        assert_same(e.printed, c.printed, f"{where} printed output")
        assert_same(e.grads, c.grads, f"{where} gradients")
    expected_frames = (list(program.frames) if isinstance(program.frames, list)
                       else [program.frames] * program.repeats)
    if program.changed is not None:
        expected_frames.append(program.frames_changed)
    frames = [c.frames for c in compiled]
    assert frames == expected_frames, f"frame_count after each call: {frames}, expected {expected_frames}"
