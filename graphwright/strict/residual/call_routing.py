"""Running a function in plain Python while still compiling the functions it calls.

Where a function cannot be split at a graph break (a break in a loop, in a
`try` block, or with no point to resume from), it runs uncompiled. TorchDynamo
still compiles every function such a frame calls, through CPython's frame
evaluation hook; graphwright has no hook, so it rewrites the frame's code
instead: every call site goes through `CallRouter`, which calls a Python
function (or a module's `forward`) through its compiled wrapper and anything
else as it is.

The rewrite, on CPython 3.11 bytecode (assembled with the `bytecode` package):

    LOAD_METHOD name            ->  LOAD_ATTR name; PUSH_NULL; SWAP 2
    [KW_NAMES k] PRECALL n; CALL n
                                ->  BUILD_TUPLE n; LOAD_CONST k; LOAD_CONST router;
                                    SWAP 4; SWAP 3; SWAP 2; PRECALL 3; CALL 3
    CALL_FUNCTION_EX flags      ->  [LOAD_CONST None]; LOAD_CONST router.call_ex;
                                    SWAP 4; SWAP 3; SWAP 2; PRECALL 3; CALL 3

so that a call `f(a, b=c)` becomes `router(f, (a, c), ("b",))`. Only call sites
whose callable has a NULL below it are rewritten (every call but a `with`
block's exit and an `assert`'s error), which a small abstract interpretation of
the stack finds. A comprehension's code (called without a NULL, on the iterator) is
routed too, as its own frame would be seen by a hook: otherwise a helper called from
`[f(x) for x in xs]` would run uncompiled while the function called right after it is
compiled, and code that asks `torch.compiler.is_compiling()` (the optimizers'
`_get_value` and `_stack_if_compiling`) would see two answers in one computation.
"""
from __future__ import annotations

import dis
import functools
import inspect
import os
import site
import sys
import sysconfig
import types
import warnings
import weakref
from typing import Any, Callable

import torch
from bytecode import Bytecode, Instr

from ..marked.markers import disable_mark, is_disabled
from .callees import module_call
from .explicit_super import ExplicitSuper
from .instruction_index import real_instructions
from .module_wrappers import is_module_wrapper, wrapper_method
from .tensor_frames import TensorGate, names_torch

_NULL, _VALUE = "null", "value"
_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})
_GENERATOR_FLAGS = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                    | inspect.CO_ITERABLE_COROUTINE)


def _directories(*paths: str) -> tuple[str, ...]:
    return tuple(sorted({os.path.realpath(path) + os.sep for path in paths}))


_TORCH_DIR = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep
_GRAPHWRIGHT_DIR = os.path.realpath(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))) + os.sep
# The standard library is not compiled, the installed packages are (a virtual environment's
# site-packages lies under its `platstdlib`, a system Python's under its `stdlib`).
_STDLIB_DIRS = _directories(sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
_PACKAGE_DIRS = _directories(*site.getsitepackages(), site.getusersitepackages(),
                             sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])
# routed code -> the code it was made from
_ROUTED_FROM: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Of torch's own code only the optimizers are compiled when called, as TorchDynamo's frame hook
# does (its skip list names every other part of torch that holds Python code).
_COMPILED_TORCH_DIRS = (os.path.join(_TORCH_DIR, "optim") + os.sep,)
# ...but for the learning-rate schedulers, which TorchDynamo never traces: their step counts and
# epochs change on every call, so a trace of them would recompile on every training step.
# `torch._dynamo.external_utils.wrap_dunder_call_ctx_manager`'s wrapper: a context manager of
# torch's used as a decorator runs the function inside its block
_TORCH_CONTEXT_DECORATOR = "wrap_dunder_call_ctx_manager.<locals>.inner"
_NEVER_TRACED_FILES = frozenset({os.path.join(_TORCH_DIR, "optim", "lr_scheduler.py")})


def never_traced(code: types.CodeType) -> bool:
    """Whether calling `code` is a graph break rather than traced into (a function of torch's
    learning-rate schedulers); run from plain Python, it is not compiled either, but the
    function a decorator of it wraps is (`CallRouter.route`)."""
    return _real_path(code.co_filename) in _NEVER_TRACED_FILES


def _skipped_file(filename: str) -> bool:
    """Code a frame hook would not compile: torch (but its optimizers), graphwright, the
    standard library."""
    if filename in _NEVER_TRACED_FILES:
        return True
    if filename.startswith(_COMPILED_TORCH_DIRS):
        return False
    if filename.startswith((_TORCH_DIR, _GRAPHWRIGHT_DIR)):
        return True
    return filename.startswith(_STDLIB_DIRS) and not filename.startswith(_PACKAGE_DIRS)


_FRAME_READERS = frozenset({eval, exec, locals, globals, vars, dir})


def _in_caller_frame(target: Any, args: tuple, names: tuple, frame: types.FrameType) -> Any:
    """A builtin that reads the frame calling it (`eval(text)`, `locals()`), called for the
    routed code's frame rather than the router's: its names are what the builtin sees."""
    positional = args[:len(args) - len(names)]
    kwargs = dict(zip(names, args[len(positional):]))
    if target in (eval, exec) and len(positional) == 1:
        positional = (*positional, frame.f_globals, frame.f_locals)
    elif not positional and not kwargs and target is not eval and target is not exec:
        return sorted(frame.f_locals) if target is dir else frame.f_globals if target is globals else frame.f_locals
    return target(*positional, **kwargs)


class CallRouter:
    """Calls made from plain-Python code: user functions and modules through compiled wrappers.

    A module wrapper (`DistributedDataParallel`) runs its forward as Python through a router
    `inside_wrapper`: the wrapper's own methods run routed, and every module it calls is
    compiled, torch's own modules included.
    """

    def __init__(self, compile_function: Callable[[types.FunctionType], Callable],
                 inside_wrapper: bool = False) -> None:
        self.compile_function = compile_function
        self.inside_wrapper = inside_wrapper
        self._wrapper_router: CallRouter | None = None
        self._wrapper_calls: dict[type, Callable] = {}
        self._compiled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._routed: dict[types.CodeType, types.CodeType] = {}
        self._module_calls: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._uncompiled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def routed_code(self, code: types.CodeType) -> types.CodeType:
        """`code` with every call site going through this router."""
        routed = self._routed.get(code)
        if routed is None:
            try:
                routed = _rewrite_calls(code, self)
            except Exception as error:  # a flaw of ours must not fail the user's program: run it as it is
                warnings.warn(f"graphwright could not route the calls made by {code.co_qualname} "
                              f"({type(error).__name__}: {error}); the functions it calls run uncompiled",
                              stacklevel=2)
                routed = code
            self._routed[code] = routed
        return routed

    def __call__(self, target: Any, args: tuple, names: tuple) -> Any:
        if type(target) is types.BuiltinFunctionType and target in _FRAME_READERS:
            return _in_caller_frame(target, args, names, sys._getframe(1))
        target = self.route(target)
        if not names:
            return target(*args)
        split = len(args) - len(names)
        return target(*args[:split], **dict(zip(names, args[split:])))

    def call_ex(self, target: Any, args: Any, kwargs: Any) -> Any:
        return self.route(target)(*args, **(kwargs or {}))

    def route(self, target: Any) -> Any:
        """What to call instead of `target`: its compiled wrapper where it has Python code."""
        if is_module_wrapper(target):
            return types.MethodType(self.wrapper_call(type(target)), target)
        if self.inside_wrapper:
            function = wrapper_method(target)
            if function is not None:
                return types.MethodType(self._uncompiled_body(function), target.__self__)
        method = type(target) is types.MethodType
        mark = disable_mark(target.__func__ if method else target)
        if mark is not None:
            if mark.recursive:
                return target
            body = self._uncompiled_body(mark.original)
            return types.MethodType(body, target.__self__) if method else body
        if type(target) is types.FunctionType:
            return self._compiled_function(target) or self._wrapper_body(target) or target
        if type(target) is types.MethodType and type(target.__func__) is types.FunctionType:
            compiled = self._compiled_function(target.__func__) or self._wrapper_body(target.__func__)
            return target if compiled is None else types.MethodType(compiled, target.__self__)
        if isinstance(target, torch.nn.Module) and "forward" not in target.__dict__ and \
                (self.inside_wrapper or _forward_is_compiled(target)):
            forward = getattr(type(target), "forward", None)
            call = self._module_calls.get(forward) if type(forward) is types.FunctionType else None
            if call is None and type(forward) is types.FunctionType:
                compiled = self._compiled_function(forward, module_forward=True)
                if compiled is not None:
                    call = self._module_calls[forward] = module_call(compiled, self.route)
            return target if call is None else types.MethodType(call, target)
        if type(target) is functools.partial:
            routed = self.route(target.func)
            return target if routed is target.func else functools.partial(routed, *target.args, **target.keywords)
        call = getattr(type(target), "__call__", None)
        if type(call) is types.FunctionType:
            compiled = self._compiled_function(call)
            return target if compiled is None else types.MethodType(compiled, target)
        return target

    def wrapper_call(self, wrapper_class: type) -> Callable:
        """`module.__call__` for a module wrapper: its hooks, and its forward run as Python with
        the module it wraps compiled."""
        call = self._wrapper_calls.get(wrapper_class)
        if call is None:
            if self._wrapper_router is None:
                self._wrapper_router = CallRouter(self.compile_function, inside_wrapper=True)
            router = self._wrapper_router
            call = module_call(router._uncompiled_body(wrapper_class.forward), router.route)
            self._wrapper_calls[wrapper_class] = call
        return call

    def _uncompiled_body(self, original: Any) -> Any:
        """`original` (disabled with `recursive=False`) run as plain Python whose own calls go
        through this router, so that what it calls is compiled."""
        if type(original) is types.FunctionType:
            body = self._uncompiled.get(original)
            if body is None:
                body = types.FunctionType(self.routed_code(original.__code__), original.__globals__,
                                          original.__name__, original.__defaults__, original.__closure__)
                body.__kwdefaults__ = original.__kwdefaults__
                self._uncompiled[original] = body
            return body
        if type(original) is types.MethodType and type(original.__func__) is types.FunctionType:
            return types.MethodType(self._uncompiled_body(original.__func__), original.__self__)
        forward = getattr(type(original), "forward", None)
        if isinstance(original, torch.nn.Module) and type(forward) is types.FunctionType:
            return types.MethodType(module_call(self._uncompiled_body(forward), self.route), original)
        return original

    def _wrapper_body(self, fn: types.FunctionType) -> Callable | None:
        """A decorator's wrapper from code that is not compiled (torch's `no_grad()` as a
        decorator, a standard-library one, the wrapper of torch's context-manager decorators,
        the switch that lets a region break, `error_on_graph_break(...)`, among them, which keeps no `__wrapped__`): it
        runs as it is, but the function it wraps is compiled when it calls it, as a frame hook
        would see that function's frame."""
        wraps = getattr(fn, "__wrapped__", None) is not None or \
            fn.__code__.co_qualname == _TORCH_CONTEXT_DECORATOR and _is_torch_code(fn)
        if not wraps or fn.__code__.co_flags & _GENERATOR_FLAGS:
            return None
        return self._uncompiled_body(fn)

    def _compiled_function(self, fn: types.FunctionType, module_forward: bool = False) -> Callable | None:
        compiled = self._compiled.get(fn)
        if compiled is None:
            if not compiles_when_called(fn, module_forward):
                return None
            compiled = self.compile_function(fn)
            if not module_forward and not names_torch(fn):
                compiled = TensorGate(fn, compiled, self._uncompiled_body(fn))
            self._compiled[fn] = compiled
        return compiled


def _forward_is_compiled(module: torch.nn.Module) -> bool:
    """A module's forward is compiled when called from plain Python unless it is one of torch's
    own modules (`nn.Linear`, or the class FSDP2's `fully_shard` makes of it) whose hooks, if
    any, are torch's own too (FSDP2's, tensor parallelism's): TorchDynamo's frame hook compiles
    neither. A hook of the user's may break, and then the forward is worth a graph."""
    if not type(module).__module__.startswith("torch.") or not _is_torch_code(type(module).forward):
        return True
    hooks = [*module._forward_pre_hooks.values(), *module._forward_hooks.values()]
    return not all(_is_torch_code(hook) for hook in hooks)


def _is_torch_code(fn: Any) -> bool:
    """A function (a bound method, a partial of one) whose code is torch's own."""
    fn = fn.func if isinstance(fn, functools.partial) else fn
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return code is not None and _real_path(code.co_filename).startswith(_TORCH_DIR)


def routes_itself(target: Any) -> bool:
    """Whether calling `target` from plain Python must go through a router: it is disabled with
    `recursive=False`, is a module wrapper, or is a function the tracer never traces, so the
    functions it calls are compiled."""
    if is_module_wrapper(target):
        return True
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    if isinstance(code, types.CodeType) and never_traced(code):
        return True
    mark = disable_mark(target.__func__ if type(target) is types.MethodType else target)
    return mark is not None and not mark.recursive


def compiles_when_called(fn: types.FunctionType, module_forward: bool = False) -> bool:
    """Whether a call from plain Python compiles `fn`, as TorchDynamo's frame hook would: user
    and library code does; the standard library, torch (but for its optimizers), graphwright
    itself, generators and functions marked `disable` do not."""
    if is_disabled(fn):
        return False
    code = fn.__code__
    if code.co_flags & _GENERATOR_FLAGS:
        return False
    if module_forward:
        return True  # `_forward_is_compiled` decided
    return not _skipped_file(_real_path(code.co_filename))


@functools.lru_cache(maxsize=4096)
def _real_path(filename: str) -> str:
    return os.path.realpath(filename)


def _rewrite_calls(code: types.CodeType, router: CallRouter) -> types.CodeType:
    null_heads = _calls_with_null_heads(code)
    program = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    real, _ = real_instructions(code)
    supers = ExplicitSuper(code, cells_are_free=False)
    body: list[Any] = []
    position = 0
    names: tuple = ()
    for item in program:
        if not isinstance(item, Instr):
            body.append(item)
            continue
        offset, position = real[position].offset, position + 1
        here = item.location
        item, added = supers.rewrite(item, offset)
        if added:
            body += [item, *added]
            continue
        if item.name == "LOAD_METHOD":
            body += [Instr("LOAD_ATTR", item.arg, location=here), Instr("PUSH_NULL", location=here),
                     Instr("SWAP", 2, location=here)]
        elif item.name == "KW_NAMES" and real[position].offset in null_heads.get("precall", ()):
            names = item.arg
        elif item.name == "PRECALL" and offset in null_heads.get("precall", ()):
            body += [Instr("BUILD_TUPLE", item.arg, location=here), Instr("LOAD_CONST", names, location=here),
                     *_call_three(router, here)]
            names = ()
        elif item.name == "CALL" and offset in null_heads.get("call", ()):
            continue  # the PRECALL before it made the call
        elif item.name == "LOAD_CONST" and type(item.arg) is types.CodeType and item.arg.co_name in _COMPREHENSIONS:
            body.append(Instr("LOAD_CONST", router.routed_code(item.arg), location=here))
        elif item.name == "CALL_FUNCTION_EX":
            keywords = [] if item.arg & 1 else [Instr("LOAD_CONST", None, location=here)]
            body += [*keywords, *_call_three(router.call_ex, here)]
        else:
            body.append(item)
    program.clear()
    program.extend(body)
    routed = program.to_code(compute_exception_stack_depths=False)  # the original depths hold
    _ROUTED_FROM[routed] = code
    return routed


def routed_from(code: types.CodeType) -> types.CodeType | None:
    """The code that `code` is a call-routed copy of; None for any other code."""
    return _ROUTED_FROM.get(code)


def _call_three(function: Any, location: Any) -> list[Instr]:
    """With [NULL, a, b, c] on the stack: call `function(a, b, c)`."""
    return [Instr("LOAD_CONST", function, location=location), Instr("SWAP", 4, location=location),
            Instr("SWAP", 3, location=location), Instr("SWAP", 2, location=location),
            Instr("PRECALL", 3, location=location), Instr("CALL", 3, location=location)]


def _calls_with_null_heads(code: types.CodeType) -> dict[str, set[int]]:
    """The offsets of PRECALL/CALL pairs whose callable has a NULL below it.

    Tracks, per reachable instruction, which stack slots hold NULL: only PUSH_NULL,
    LOAD_GLOBAL (with the NULL bit) and LOAD_METHOD (rewritten to always push one) make
    them, and only CALL and CALL_FUNCTION_EX consume them."""
    instructions, index_of = real_instructions(code)
    table = dis._parse_exception_table(code)
    result: dict[str, set[int]] = {"precall": set(), "call": set()}
    seen: set[int] = set()
    work: list[tuple[int, tuple[str, ...]]] = [(0, ())]
    while work:
        index, stack = work.pop()
        while index < len(instructions) and index not in seen:
            seen.add(index)
            inst = instructions[index]
            for entry in table:
                if entry.start <= inst.offset < entry.end:
                    work.append((index_of[entry.target], stack[:entry.depth] + (_VALUE,) * (1 + entry.lasti)))
            name = inst.opname
            if name == "PRECALL":
                if len(stack) >= inst.arg + 2 and stack[-inst.arg - 2] == _NULL:
                    result["precall"].add(inst.offset)
                    result["call"].add(instructions[index + 1].offset)
            if name in ("RETURN_VALUE", "RAISE_VARARGS", "RERAISE"):
                break
            jumps = inst.opcode in dis.hasjrel or inst.opcode in dis.hasjabs
            if jumps:
                work.append((index_of[inst.argval], _after(inst, stack, jump=True)))
                if name.startswith("JUMP_") and "IF" not in name:
                    break
            stack = _after(inst, stack, jump=False)
            index += 1
    return result


def _after(inst: dis.Instruction, stack: tuple[str, ...], jump: bool) -> tuple[str, ...]:
    name = inst.opname
    if name == "PUSH_NULL":
        return stack + (_NULL,)
    if name == "LOAD_GLOBAL":
        return stack + ((_NULL, _VALUE) if inst.arg & 1 else (_VALUE,))
    if name == "LOAD_METHOD":
        return stack[:-1] + (_NULL, _VALUE)
    if name == "PRECALL":
        return stack
    if name == "CALL":
        return stack[:len(stack) - inst.arg - 2] + (_VALUE,)
    if name == "CALL_FUNCTION_EX":
        return stack[:len(stack) - 3 - (inst.arg & 1)] + (_VALUE,)
    if name == "SWAP":
        items = list(stack)
        items[-1], items[-inst.arg] = items[-inst.arg], items[-1]
        return tuple(items)
    if name == "COPY":
        return stack + (stack[-inst.arg],)
    effect = dis.stack_effect(inst.opcode, inst.arg if inst.opcode >= dis.HAVE_ARGUMENT else None, jump=jump)
    return stack[:len(stack) + effect] if effect < 0 else stack + (_VALUE,) * effect
