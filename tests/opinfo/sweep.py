"""One operator of PyTorch's `op_db`, run eagerly and compiled on its sample inputs, compared.

`check_op(op_id, compiler)` runs every check on a bounded, evenly spread selection of the op's
samples and returns an `OpReport`: how many checks passed, which were refused (the compiler
declined with a clear error) and which failed (a wrong answer, or an internal error).

The checks, each against eager run on identical copies of the inputs (`layout.clone_inputs`):
- forward: outputs (values, dtype, sizes, significant strides, storage offset, requires_grad),
  the inputs after the call (mutations), which outputs share an input's storage, writing through
  such an output writes the input; then the gradients of every input that requires grad for a
  fixed random cotangent (values, dtype, sizes: their strides are the backward's choice);
- out=: into a contiguous and into a non-contiguous `out`; the returned object is `out` where
  eager's is, and `out` holds eager's values and strides;
- in place: on the input itself, on a view of a base passed in, on a view made inside the
  compiled function from a base passed in; the base sees the change.
Where eager raises, the compiled run must raise the same exception type.
"""
from __future__ import annotations

import dataclasses
import functools
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from .layout import alias_map, clone_inputs, describe_difference, pattern
from . import tables

SEED = 1234
DEFAULT_TOLERANCE = (1.3e-6, 1e-5)  # rtol, atol: torch.testing.assert_close for float32
CHECKS = ("forward", "out_contiguous", "out_noncontiguous", "inplace", "inplace_view",
          "inplace_view_inside")


@functools.cache
def all_ops() -> dict[str, Any]:
    """Every OpInfo of `op_db`, by its id: `name` or `name.variant_test_name`."""
    from torch.testing._internal.common_methods_invocations import op_db
    return {op_id(op): op for op in op_db}


def op_id(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def sample_dtype(op: Any) -> torch.dtype | None:
    """float32, or for an op without float32 support the first dtype it supports of a fixed
    list (bitwise ops, gcd, ...); None for an op without CPU support."""
    supported = op.supported_dtypes("cpu")
    for dtype in (torch.float32, torch.int64, torch.bool, torch.complex64, torch.float64,
                  torch.int32, torch.uint8, torch.bfloat16, torch.float16):
        if dtype in supported:
            return dtype
    return None


def tolerance(op: Any, dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol): the loosest of the defaults and every tolerance or precision override
    PyTorch's own tests declare for this op at `dtype` on CPU."""
    rtol, atol = DEFAULT_TOLERANCE
    for info in op.decorators:
        if not hasattr(info, "decorators") or info.device_type not in (None, "cpu"):
            continue
        if info.dtypes is not None and dtype not in info.dtypes:
            continue
        for decorator in info.decorators:
            override = getattr(decorator, "d", None)
            if not isinstance(override, dict) or dtype not in override:
                continue
            value = override[dtype]
            if isinstance(value, float):  # precisionOverride: an absolute tolerance
                atol = max(atol, value)
            else:  # toleranceOverride: tol(atol, rtol)
                atol, rtol = max(atol, value.atol), max(rtol, value.rtol)
    return rtol, atol


@dataclasses.dataclass
class OpReport:
    op_id: str
    compiler: str
    samples: int = 0
    passed: int = 0
    refused: list[str] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)
    skipped: str = ""

    def summary(self) -> str:
        return (f"{self.op_id} [{self.compiler}]: {self.samples} samples, {self.passed} checks "
                f"passed, {len(self.refused)} refused, {len(self.failures)} failed")


class Refused(Exception):
    """The compiler declined the program with a clear error; the message is its reason."""


class Failed(Exception):
    """The compiled run differs from eager, or the compiler failed internally."""


@dataclasses.dataclass
class Compiler:
    """How to compile a program (`graphwright` or `torch.compile`, fullgraph, one backend), and
    which of its errors are a clear refusal rather than an internal error."""
    name: str
    backend: str

    @property
    def label(self) -> str:
        return f"{self.name}/{self.backend}"

    def compile(self, fn: Callable) -> Callable:
        if self.name == "graphwright":
            import graphwright
            graphwright.reset()
            return graphwright.compile(fn, fullgraph=True, backend=self.backend)
        import torch._dynamo
        torch._dynamo.reset()
        return torch.compile(fn, fullgraph=True, backend=self.backend)

    def refusal(self, error: BaseException) -> str | None:
        """The reason, when `error` is the compiler declining with a clear error."""
        if self.name == "graphwright":
            return graphwright_refusal(error)
        import torch._dynamo.exc as dynamo_exc
        # torch.compile's list is the bar ours is measured against: every error it raises where
        # eager runs counts as its refusal, its internal errors too.
        kind = "Unsupported" if isinstance(error, dynamo_exc.Unsupported) else type(error).__name__
        return f"{kind}: {_first_line(error)}"


def graphwright_refusal(error: BaseException) -> str | None:
    """A `GraphwrightError` that names what it cannot compile; not the strict tracer's internal
    error (GB016), nor a backend's failure around a raw exception."""
    import graphwright
    if not isinstance(error, graphwright.GraphwrightError):
        return None
    if getattr(error, "gb_id", "") == "GB016" or "Internal error" in str(error):
        return None
    if isinstance(error, graphwright.BackendError) and error.__cause__ is not None:
        return graphwright_refusal(error.__cause__)
    return f"{getattr(error, 'gb_id', '') or type(error).__name__}: {error.title}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else ""


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:400]}"


@dataclasses.dataclass
class Run:
    """One call: what it returned or raised."""
    value: Any = None
    error: BaseException | None = None


def _run(call: Callable[[], Any]) -> Run:
    torch.manual_seed(SEED)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Run(value=call())
    except Exception as error:  # noqa: BLE001 - the program's own exceptions are compared
        return Run(error=error)


def _compare_errors(eager: Run, compiled: Run, compiler: Compiler, what: str) -> bool:
    """Raises for a refusal or a difference in raising; True when both raised alike (nothing
    more to compare)."""
    if eager.error is not None:
        if compiled.error is None:
            raise Failed(f"{what}: eager raises {_describe(eager.error)}; compiled returns")
        if not isinstance(compiled.error, type(eager.error)):
            raise Failed(f"{what}: eager raises {type(eager.error).__name__}, compiled raises "
                         f"{_describe(compiled.error)}")
        return True
    if compiled.error is not None:
        reason = compiler.refusal(compiled.error)
        if reason is not None:
            raise Refused(reason)
        tb = "".join(traceback.format_exception(compiled.error)[-3:])
        raise Failed(f"{what}: compiled raises {_describe(compiled.error)}\n{tb}")
    return False


def _leaves(tree: Any) -> list[Any]:
    return pytree.tree_leaves(tree)


def _differentiable(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())


def _gradients(outputs: Any, inputs: Any, process: Callable[[Any], Any]) -> Run:
    """d(sum of outputs times a fixed random cotangent)/d(each input that requires grad)."""
    def call():
        outs = [t for t in _leaves(process(outputs)) if _differentiable(t)]
        ins = [t for t in _leaves(inputs) if isinstance(t, torch.Tensor) and t.requires_grad]
        if not outs or not ins:
            return None
        generator = torch.Generator().manual_seed(SEED)
        cotangents = [torch.randn(t.shape, dtype=t.dtype, generator=generator) for t in outs]
        return torch.autograd.grad(outs, ins, cotangents, allow_unused=True)
    return _run(call)


def _write_through(outputs: list[Any], aliases: list[int | None]) -> list[Run]:
    """Writes distinct values into every output that shares an input's storage."""
    runs = []
    for out, alias in zip(outputs, aliases):
        if alias is not None:
            runs.append(_run(lambda out=out: out.detach().copy_(pattern(out))))
    return runs


@dataclasses.dataclass
class Case:
    """A program and its inputs: `program(*args, **kwargs)`; each run gets its own copy."""
    program: Callable
    args: tuple
    kwargs: dict

    def copy(self) -> tuple[tuple, dict]:
        return clone_inputs((self.args, self.kwargs))


class OpChecker:
    """Runs the checks of one op under one compiler, collecting an `OpReport`."""

    def __init__(self, op: Any, compiler: Compiler, max_samples: int) -> None:
        self.op = op
        self.max_samples = max_samples
        self.compiler = compiler
        self.dtype = sample_dtype(op)
        self.rtol, self.atol = tolerance(op, self.dtype) if self.dtype else DEFAULT_TOLERANCE
        self.values = op_id(op) not in tables.METADATA_ONLY
        self.report = OpReport(op_id(op), compiler.label)

    def samples(self, requires_grad: bool) -> list[Any]:
        samples = list(self.op.sample_inputs("cpu", self.dtype, requires_grad=requires_grad))
        limit = self.max_samples
        if len(samples) <= limit:
            return samples
        step = (len(samples) - 1) / max(limit - 1, 1)
        return [samples[round(i * step)] for i in range(limit)]

    def run(self, checks: tuple[str, ...] = CHECKS) -> OpReport:
        if self.dtype is None:
            self.report.skipped = "no CPU dtype: the op runs on other devices only"
            return self.report
        grad = self.op.supports_autograd and self.dtype in self.op.supported_backward_dtypes("cpu")
        if "forward" in checks:
            for index, sample in enumerate(self.samples(requires_grad=grad)):
                self.report.samples += 1
                self._record(f"forward[{index}]", lambda: self.check_forward(sample))
        plain = self.samples(requires_grad=False)
        if self.op.supports_out:
            for layout in ("contiguous", "noncontiguous"):
                if f"out_{layout}" in checks:
                    for index, sample in enumerate(plain[:tables.MAX_VARIANT_SAMPLES]):
                        self._record(f"out_{layout}[{index}]",
                                     lambda: self.check_out(sample, layout == "contiguous"))
        if self.op.inplace_variant is not None:
            for where in ("inplace", "inplace_view", "inplace_view_inside"):
                if where in checks:
                    for index, sample in enumerate(plain[:tables.MAX_VARIANT_SAMPLES]):
                        self._record(f"{where}[{index}]", lambda: self.check_inplace(sample, where))
        return self.report

    def _record(self, name: str, check: Callable[[], None]) -> None:
        try:
            check()
        except Refused as refused:
            self.report.refused.append(f"{name}: {refused}")
        except Failed as failed:
            self.report.failures.append(f"{name}: {failed}")
        except Exception as error:  # noqa: BLE001 - a bug of the harness is reported, not hidden
            tb = "".join(traceback.format_exception(error)[-3:])
            self.report.failures.append(f"{name}: harness error {_describe(error)}\n{tb}")
        else:
            self.report.passed += 1

    def _differential(self, case: Case, what: str) -> tuple[Run, Run, tuple, tuple] | None:
        """Runs `case` eagerly and compiled; None when both raised alike."""
        eager_args, eager_kwargs = case.copy()
        compiled_args, compiled_kwargs = case.copy()
        eager = _run(lambda: case.program(*eager_args, **eager_kwargs))
        compiled_fn = self.compiler.compile(case.program)
        compiled = _run(lambda: compiled_fn(*compiled_args, **compiled_kwargs))
        if _compare_errors(eager, compiled, self.compiler, what):
            return None
        return eager, compiled, (eager_args, eager_kwargs), (compiled_args, compiled_kwargs)

    def _expect_same(self, expected: Any, actual: Any, what: str) -> None:
        problem = describe_difference(expected, actual, rtol=self.rtol, atol=self.atol,
                                      values=self.values)
        if problem:
            raise Failed(f"{what}: {problem}")

    def check_forward(self, sample: Any) -> None:
        target = self.op.op
        case = Case(lambda *a, **k: target(*a, **k), (sample.input, *sample.args), sample.kwargs)
        ran = self._differential(case, "call")
        if ran is None:
            return
        eager, compiled, eager_inputs, compiled_inputs = ran
        self._expect_same(eager.value, compiled.value, "result")
        self._expect_same(eager_inputs, compiled_inputs, "inputs after the call")
        eager_outputs, compiled_outputs = _leaves(eager.value), _leaves(compiled.value)
        eager_aliases = alias_map(eager_outputs, _leaves(eager_inputs))
        compiled_aliases = alias_map(compiled_outputs, _leaves(compiled_inputs))
        if eager_aliases != compiled_aliases:
            raise Failed(f"aliasing: outputs share the storage of inputs {compiled_aliases}, "
                         f"eager's {eager_aliases} (None: own storage)")
        eager_grads = _gradients(eager.value, eager_inputs, sample.output_process_fn_grad)
        compiled_grads = _gradients(compiled.value, compiled_inputs, sample.output_process_fn_grad)
        if not _compare_errors(eager_grads, compiled_grads, self.compiler, "backward"):
            rtol, atol = self.rtol, self.atol + self.op.gradcheck_nondet_tol
            # A gradient's strides are the backward's choice, never the program's: `.grad`
            # takes its parameter's layout whatever `autograd.grad` returns.
            problem = describe_difference(eager_grads.value, compiled_grads.value, rtol=rtol,
                                          atol=atol, values=self.values, strides=False)
            if problem:
                raise Failed(f"gradients: {problem}")
        eager_writes = _write_through(eager_outputs, eager_aliases)
        compiled_writes = _write_through(compiled_outputs, compiled_aliases)
        for eager_write, compiled_write in zip(eager_writes, compiled_writes):
            _compare_errors(eager_write, compiled_write, self.compiler, "writing through an alias")
        self._expect_same(eager_inputs, compiled_inputs, "inputs after writing through aliases")

    def check_out(self, sample: Any, contiguous: bool) -> None:
        target = self.op.op
        args = (sample.input, *sample.args)
        reference = _run(lambda: target(*clone_inputs(args), **clone_inputs(sample.kwargs)))
        leaves = _leaves(reference.value) if reference.error is None else []
        if not leaves or not all(isinstance(t, torch.Tensor) for t in leaves):
            return  # eager has no tensor result to give an `out` the shape of
        out = pytree.tree_map(lambda t: _out_buffer(t, contiguous), _as_out_tree(reference.value))
        case = Case(lambda *a, **k: target(*a, **k), args, {**sample.kwargs, "out": out})
        ran = self._differential(case, "call with out=")
        if ran is None:
            return
        eager, compiled, eager_inputs, compiled_inputs = ran
        eager_out, compiled_out = eager_inputs[1]["out"], compiled_inputs[1]["out"]
        if _identity(eager.value, eager_out) != _identity(compiled.value, compiled_out):
            raise Failed(f"returned objects are `out` {_identity(compiled.value, compiled_out)}, "
                         f"eager's {_identity(eager.value, eager_out)}")
        self._expect_same(eager.value, compiled.value, "result")
        self._expect_same(eager_inputs, compiled_inputs, "inputs and out after the call")

    def check_inplace(self, sample: Any, where: str) -> None:
        target = self.op.inplace_variant
        first = sample.input
        if where == "inplace" or not isinstance(first, torch.Tensor):
            case = Case(lambda *a, **k: target(*a, **k), (first, *sample.args), sample.kwargs)
            viewed = False
        else:
            base, view_of = _base_and_view(first)
            with torch.no_grad():
                view_of(base).copy_(first)
            if where == "inplace_view":
                case = Case(lambda base, view, *a, **k: target(view, *a, **k),
                            (base, view_of(base), *sample.args), sample.kwargs)
            else:
                case = Case(lambda base, *a, **k: target(view_of(base), *a, **k),
                            (base, *sample.args), sample.kwargs)
            viewed = True
        ran = self._differential(case, f"in-place call ({where})")
        if ran is None:
            return
        eager, compiled, eager_inputs, compiled_inputs = ran
        self._expect_same(eager.value, compiled.value, "result")
        self._expect_same(eager_inputs, compiled_inputs, "inputs after the call")
        if where != "inplace_view_inside":
            mutated = 1 if viewed else 0
            eager_same = eager.value is eager_inputs[0][mutated]
            compiled_same = compiled.value is compiled_inputs[0][mutated]
            if eager_same != compiled_same:
                raise Failed(f"the result is the mutated input: {compiled_same}, eager: {eager_same}")


def _as_out_tree(value: Any) -> Any:
    """Eager's result as the `out` argument takes it: a tensor or a plain tuple of tensors."""
    if isinstance(value, torch.Tensor):
        return value
    return tuple(_as_out_tree(v) for v in value)


def _out_buffer(t: torch.Tensor, contiguous: bool) -> torch.Tensor:
    """An `out` tensor of `t`'s shape and dtype, filled with distinct values: contiguous, or a
    permuted (ndim >= 2) or strided view of a larger buffer."""
    if contiguous:
        return pattern(t).contiguous()
    base, view_of = _base_and_view(t)
    view = view_of(base)
    view.copy_(pattern(t))
    return view


def _base_and_view(t: torch.Tensor) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """A fresh base tensor and how to view it as a non-contiguous tensor of `t`'s shape: the
    reversed shape permuted back (ndim >= 2), every second element after the first (ndim 1), an
    element past the start (ndim 0)."""
    if t.dim() >= 2:
        order = tuple(reversed(range(t.dim())))
        base = torch.zeros(tuple(reversed(t.shape)), dtype=t.dtype)
        return base, lambda b: b.permute(order)
    if t.dim() == 1:
        return torch.zeros(2 * t.shape[0] + 1, dtype=t.dtype), lambda b: b[1::2]
    return torch.zeros(2, dtype=t.dtype), lambda b: b[1]


def _identity(result: Any, out: Any) -> list[bool]:
    """Which of the result's tensors are the very objects of `out`."""
    results, outs = _leaves(result), _leaves(out)
    return [r is o for r, o in zip(results, outs)] + [False] * abs(len(results) - len(outs))


def check_op(op_name: str, compiler: Compiler, checks: tuple[str, ...] = CHECKS,
             max_samples: int = tables.MAX_SAMPLES) -> OpReport:
    """The `checks` (by default all of `CHECKS`) on `op_name`'s samples under `compiler`."""
    return OpChecker(all_ops()[op_name], compiler, max_samples).run(checks)
