"""Corpus programs with graph breaks under fullgraph=False: the function is split
into graphs with Python in between (resume functions), and the compiled run
must be indistinguishable from eager: outputs, gradients, side effects on
lists, dicts, globals and objects, printed output and logging, on the first
and every later call. `frames` are PyTorch's graph counts for the same
program (validated with `make test-corpus-reference`); a repeated call
compiles nothing.

Breaks at top level, several in a row, in callees up to three deep, in
methods and submodules' `forward`, inside `with` blocks of each grad-mode
context and autocast, in `try` blocks, in loops (the frame runs in plain
Python, what it calls is compiled), on data-dependent branches taking each
side, around live closures and values on the stack, and in training steps.
"""
from __future__ import annotations

import functools
import logging

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .harness import Args, CorpusWarning, Program, corpus_logger, module_program, program_decorator, rand
from .markers import disable, graph_break

PROGRAMS = []


program = program_decorator(PROGRAMS)


def breaks(name, inputs, **fields):
    """A program compiled with fullgraph=False (every program in this file)."""
    return program(name, inputs, fullgraph=False, **fields)


# -- at top level ---------------------------------------------------------------------


@breaks("break_before_any_operation", lambda: rand(3), frames=1)
def _(x):
    graph_break()
    return x.sin() * 2


@breaks("break_after_every_operation", lambda: rand(3), frames=1)
def _(x):
    y = x.sin() * 2
    graph_break()
    return y


@breaks("two_breaks_give_three_graphs", lambda: rand(3), frames=3)
def _(x):
    x = x + 1
    graph_break()
    x = x * 2
    graph_break()
    return x - 3


@breaks("three_breaks_in_a_row_give_four_graphs", lambda: rand(3), frames=4)
def _(x):
    a = x.cos()
    graph_break()
    b = a + x
    graph_break()
    c = b * a
    graph_break()
    return c.relu()


@breaks("print_splits_and_prints_in_order", lambda: rand(3), frames=3)
def _(x):
    y = x * 3
    print("first", y.shape)
    z = y.exp()
    print("second", z.dtype)
    return z + 1


@breaks("print_of_a_tensor_prints_its_values", lambda: torch.arange(4.0), frames=2)
def _(x):
    y = x * 2
    print(y)
    return y + 1


@breaks("item_breaks_and_the_number_feeds_the_rest", lambda: rand(4), frames=[2, 3])
def _(x):
    scale = x.abs().max().item()
    return x / scale + scale


@breaks("tolist_breaks_and_the_list_is_used_later", lambda: rand(3), frames=[2, 3])
def _(x):
    values = (x * 10).round().tolist()
    return x + sum(values), values


@breaks("numpy_call_runs_in_python_between_graphs", lambda: rand(3), frames=[2, 3])
def _(x):
    y = x + 1
    total = np.sum(np.asarray(y))
    return y * float(total)


@breaks("disabled_call_runs_eagerly_between_two_graphs", lambda: rand(3), frames=2)
def _(x):
    y = x.sin() + 1
    z = _disabled_scale(y)
    return z.cos() + y


@disable
def _disabled_scale(t):
    return t * 7


@breaks("break_result_used_in_an_expression_on_the_stack", lambda: rand(3), frames=2)
def _(x):
    y = x.sin()
    return y + _disabled_scale(y) * 2


@breaks("break_inside_a_list_being_built", lambda: rand(3), frames=2)
def _(x):
    a = x * 2
    items = [a, _disabled_scale(a), a + 1]
    return torch.stack(items).sum(0)


@breaks("break_inside_torch_cat_arguments", lambda: rand(2, 3), frames=2)
def _(x):
    y = x.relu()
    return torch.cat([y, _disabled_scale(y)], dim=1).sum(1)


@breaks("break_inside_a_dict_being_built", lambda: rand(3), frames=2)
def _(x):
    a = x - 1
    out = {"plain": a, "scaled": _disabled_scale(a)}
    return out["plain"] + out["scaled"]


@breaks("break_with_keyword_arguments", lambda: rand(3), frames=3)
def _(x):
    a = x.exp()
    return _breaking_with_keywords(a, scale=3.0, shift=1.0) + a


def _breaking_with_keywords(t, *, scale, shift=0.0):
    graph_break()
    return t * scale + shift


@breaks("break_in_a_call_with_star_arguments", lambda: rand(3), frames=3)
def _(x):
    args = (x.sin(), x.cos())
    options = {"weight": 0.5}
    return _breaking_star(*args, **options)


def _breaking_star(a, b, weight=1.0):
    c = a * weight
    graph_break()
    return c + b


@breaks("method_call_with_a_breaking_argument", lambda: rand(3), frames=1)
def _(x):
    y = x * 2
    return y.add(_disabled_scale(y), alpha=0.5)


@breaks("numbers_and_strings_live_across_a_break", lambda: rand(3), frames=2)
def _(x):
    count, label, ratio = 3, "tag", 0.25
    y = x * count
    graph_break()
    return y * ratio + len(label)


@breaks("shapes_read_before_a_break_used_after", lambda: rand(2, 5), frames=2)
def _(x):
    rows, cols = x.shape
    y = x.reshape(cols, rows)
    graph_break()
    return y.sum(0) * rows


@breaks("local_assigned_only_after_the_break", lambda: rand(3), frames=2)
def _(x):
    y = x + 1
    graph_break()
    late = y * 2
    return late + y


@breaks("early_return_in_a_branch_after_a_break", lambda: (rand(3), True), frames=1,
        changed=lambda: (rand(3), False), frames_changed=2,
        reference={"frames_changed": 1, "why": "PyTorch marks a resume function that traced no operation "
                   "as skipped for good, so the later call that needs operations runs it eagerly; "
                   "graphwright compiles it then (one more graph, the same result)"})
def _(x, early):
    y = x.sin()
    graph_break()
    if early:
        return y
    return y.cos() + 1


@breaks("pytorch_graph_break_marker_is_honoured", lambda: rand(3), frames=2)
def _(x):
    y = x * 5
    torch._dynamo.graph_break()
    return y - 1


# -- data-dependent branches ----------------------------------------------------------


@breaks("data_dependent_if_takes_the_true_side", lambda: rand(3).abs() + 1, frames=2,
        changed=lambda: -rand(3).abs() - 1, frames_changed=3)
def _(x):
    y = x * 2
    if y.sum() > 0:
        y = y + 10
    else:
        y = y - 10
    return y.sin()


@breaks("data_dependent_if_without_else", lambda: -rand(3).abs() - 1, frames=2,
        changed=lambda: rand(3).abs() + 1, frames_changed=3)
def _(x):
    y = x.exp()
    if (x > 0).all():
        y = y * 3
    return y + 1


@breaks("data_dependent_condition_on_any", lambda: torch.tensor([0.0, 1.0]), frames=2,
        changed=lambda: torch.zeros(2), frames_changed=3)
def _(x):
    y = x + 1
    if x.any():
        return y * 2
    return y / 2


@breaks("data_dependent_and_or_chain", lambda: (rand(3).abs(), rand(3).abs()), frames=3)
def _(x, y):
    a = x + y
    if (a.sum() > 0) and (a.max() < 100):
        return a * 2
    return a


@breaks("data_dependent_branch_in_a_helper", lambda: rand(3).abs() + 1, frames=4,
        changed=lambda: -rand(3).abs() - 1, frames_changed=5)
def _(x):
    y = x.cos()
    return _clamp_by_sign(y + x) * 2


def _clamp_by_sign(t):
    if t.mean() > 0:
        return t.clamp(min=0)
    return t.clamp(max=0)


@breaks("assert_on_a_tensor_condition", lambda: rand(3).abs() + 1, frames=2,
        reference={"frames": 1, "why": "PyTorch turns the assert into `torch._assert_async`, which "
                   "raises RuntimeError where eager raises AssertionError; graphwright breaks there "
                   "and keeps the exception eager raises"})
def _(x):
    y = x.sqrt()
    assert (y > 0).all(), "positive"
    return y.log()


@breaks("item_decides_a_python_branch", lambda: rand(3).abs() + 1, frames=[2, 3],
        changed=lambda: -rand(3).abs() - 1, frames_changed=4)
def _(x):
    total = x.sum().item()
    if total > 0:
        return x * total
    return x - total


# -- breaks in callees ------------------------------------------------------------------


def _leaf_breaks(t):
    t = t + 1
    graph_break()
    return t * 2


def _middle(t):
    return _leaf_breaks(t.sin()) + 1


def _outer(t):
    return _middle(t * 3) - 1


@breaks("break_in_a_callee_one_deep", lambda: rand(3), frames=4)
def _(x):
    return _leaf_breaks(x.exp()) + x


@breaks("break_in_a_callee_two_deep", lambda: rand(3), frames=5)
def _(x):
    return _middle(x) * 2


@breaks("break_in_a_callee_three_deep", lambda: rand(3), frames=8)
def _(x):
    y = x.abs()
    return _outer(y) + y


@breaks("same_breaking_callee_called_twice_compiles_once", lambda: rand(3), frames=3)
def _(x):
    a = _leaf_breaks(x)
    b = _leaf_breaks(a)
    return a + b


@breaks("print_inside_a_callee", lambda: rand(3), frames=4)
def _(x):
    return _noisy(x.sin()) + 1


def _noisy(t):
    u = t * 2
    print("inside", tuple(u.shape))
    return u + 1


@breaks("break_inside_a_lambda", lambda: rand(3), frames=4)
def _(x):
    f = lambda t: _leaf_breaks(t) * 3  # noqa: E731
    return f(x.cos())


@breaks("break_inside_a_partial", lambda: rand(3), frames=2)
def _(x):
    f = functools.partial(_breaking_with_keywords, scale=2.0)
    return f(x + 1, shift=3.0)


@breaks("break_inside_a_list_comprehension", lambda: [rand(3), rand(3)], frames=2)
def _(xs):
    y = xs[0] * 2
    doubled = [_disabled_scale(t) for t in xs]
    return y + doubled[0] + doubled[1]


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def apply(self, t):
        t = t * self.factor
        graph_break()
        return t + self.factor

    @staticmethod
    def halve(t):
        graph_break()
        return t / 2

    @classmethod
    def build(cls, t):
        graph_break()
        return cls(2.0).factor * t

    def __call__(self, t):
        u = t - self.factor
        graph_break()
        return u * 2


@breaks("break_in_a_method_of_a_user_object", lambda: (rand(3), Scaler(3.0)), frames=4)
def _(x, scaler):
    return scaler.apply(x.sin()) + 1


@breaks("break_in_a_staticmethod_and_a_classmethod", lambda: rand(3), frames=4)
def _(x):
    return Scaler.halve(x.exp()) + Scaler.build(x)


@breaks("break_in_a_callable_objects_call", lambda: (rand(3), Scaler(1.5)), frames=4)
def _(x, scaler):
    return scaler(x.cos()) + x


# -- side effects around breaks -------------------------------------------------------


SEEN = []
STATE = {"calls": 0}


def _reset_globals():
    SEEN.clear()
    STATE.clear()
    STATE["calls"] = 0


@breaks("side_effects_on_an_input_list_before_and_after_a_break", lambda: (rand(3), []), frames=2)
def _(x, log):
    log.append("before")
    y = x * 2
    graph_break()
    log.append(len(log))
    return y + len(log)


@breaks("global_list_and_dict_written_around_a_break", lambda: rand(3), frames=[1, 2, 3],
        reset=_reset_globals, observe=lambda world: (list(SEEN), dict(STATE)), repeats=3)
def _(x):
    SEEN.append("start")
    STATE["calls"] += 1
    y = x + STATE["calls"]
    graph_break()
    SEEN.append("end")
    STATE["last"] = "end"
    return y


class Counter:
    def __init__(self):
        self.count = 0
        self.trace = []


@breaks("object_attributes_written_around_a_break", lambda: (rand(3), Counter()), frames=2)
def _(x, counter):
    counter.count += 1
    counter.trace.append("a")
    y = x * counter.count
    graph_break()
    counter.count += 10
    counter.trace.append("b")
    return y + counter.count


@breaks("list_created_before_a_break_mutated_after", lambda: rand(3), frames=2)
def _(x):
    parts = [x + 1]
    graph_break()
    parts.append(x * 2)
    parts.append(parts[0] - 1)
    return torch.stack(parts).sum(0)


@breaks("closure_defined_before_a_break_called_after", lambda: rand(3), frames=2)
def _(x):
    offset = x.mean()

    def shift(t):
        return t + offset

    graph_break()
    return shift(x * 2)


@breaks("nonlocal_cell_updated_across_a_break", lambda: rand(3), frames=2)
def _(x):
    total = x.sum()

    def add(t):
        nonlocal total
        total = total + t.sum()

    add(x)
    graph_break()
    add(x * 2)
    return total


@breaks("logging_and_warnings_replayed_around_a_break", lambda: rand(3), frames=1)
def _(x):
    corpus_logger.info("before %s", "break")
    y = x * 2
    graph_break()
    import warnings
    warnings.warn("after the break", CorpusWarning)
    corpus_logger.warning("after")
    return y


@breaks("same_list_returned_and_stored_keeps_identity", lambda: (rand(3), {}), frames=1,
        call=lambda world, compiled, args: _identity_kept(compiled(*args.args), args.args[1]))
def _(x, holder):
    items = [x * 2]
    holder["items"] = items
    graph_break()
    return items


def _identity_kept(returned, holder):
    return returned is holder["items"], returned


# -- with blocks ----------------------------------------------------------------------


@breaks("break_inside_no_grad", lambda: rand(3, requires_grad=True), frames=2, grad=True)
def _(x):
    y = x * 2
    with torch.no_grad():
        z = y + 1
        graph_break()
        w = z * 3
    return y + w


@breaks("break_inside_enable_grad_under_a_no_grad_caller", lambda: rand(3, requires_grad=True),
        frames=2, call=lambda world, compiled, args: _under_no_grad(compiled, args))
def _(x):
    y = x * 2
    with torch.enable_grad():
        z = x.sin()
        graph_break()
        w = z * 3
    return y, w, w.requires_grad


def _under_no_grad(compiled, args):
    with torch.no_grad():
        return compiled(*args.args)


@breaks("break_inside_set_grad_enabled_false", lambda: rand(3, requires_grad=True), frames=2, grad=True)
def _(x):
    y = x.exp()
    with torch.set_grad_enabled(False):
        z = y * 2
        graph_break()
        w = z + 1
    return y + w


@breaks("break_inside_nested_grad_contexts", lambda: rand(3, requires_grad=True), frames=2, grad=True)
def _(x):
    y = x * 2
    with torch.no_grad():
        a = y + 1
        with torch.enable_grad():
            b = x.cos()
            graph_break()
            c = b * a
        d = a * 2
    return y + c + d


@breaks("break_inside_autocast", lambda: (rand(4, 4), rand(4, 4)), frames=2)
def _(x, y):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x @ y
        graph_break()
        b = a @ y
    return b.float() + a.float()


@breaks("print_inside_no_grad_keeps_the_mode", lambda: rand(3, requires_grad=True), frames=2)
def _(x):
    with torch.no_grad():
        y = x * 2
        print("grad enabled:", torch.is_grad_enabled())
        z = y + 1
    return z, z.requires_grad, torch.is_grad_enabled()


@breaks("data_dependent_branch_inside_no_grad", lambda: rand(3, requires_grad=True).abs(), frames=2)
def _(x):
    with torch.no_grad():
        y = x * 2
        if y.sum() > 0:
            y = y + 1
        z = y * 3
    return z, z.requires_grad


class UserContext:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append("exit")
        return False


@breaks("break_inside_a_user_context_manager", lambda: (rand(3), []), frames=1)
def _(x, log):
    y = x + 1
    z = y * 2
    with UserContext(log):
        w = z.sin()
        graph_break()
        v = w + 1
    return v


# -- try blocks -----------------------------------------------------------------------


@breaks("break_inside_try_finally", lambda: (rand(3), []), frames=1)
def _(x, log):
    y = x * 2
    z = y + 1
    try:
        graph_break()
        w = z * 3
    finally:
        log.append("finally")
    return w


@breaks("break_inside_try_except_that_catches", lambda: rand(3), frames=1)
def _(x):
    y = x.exp()
    z = y + 1
    try:
        w = _raises_value_error(z)
    except ValueError:
        w = z * 100
    return w


@disable
def _raises_value_error(t):
    raise ValueError("nope")


@breaks("break_after_a_try_block", lambda: rand(3), frames=2)
def _(x):
    try:
        y = x * 2
    except RuntimeError:
        y = x
    graph_break()
    return y + 1


# -- loops ----------------------------------------------------------------------------


@breaks("break_in_a_for_loop_runs_the_loop_in_python", lambda: rand(3), frames=0)
def _(x):
    for step in range(3):
        x = x * 2
        graph_break()
        x = x + step
    return x


@breaks("break_in_a_while_loop", lambda: rand(3), frames=0)
def _(x):
    step = 0
    while step < 3:
        x = x + 1
        graph_break()
        step += 1
    return x


@breaks("break_in_a_loop_still_compiles_the_callees", lambda: [rand(3), rand(3), rand(3)], frames=2)
def _(xs):
    total = 0
    for t in xs:
        total = total + _leaf_breaks(t)
    return total


@breaks("loop_before_a_break_is_unrolled_in_the_first_graph", lambda: rand(3), frames=2)
def _(x):
    for _ in range(3):
        x = x * 2
    graph_break()
    return x + 1


@breaks("loop_after_a_break_is_unrolled_in_the_resume_function", lambda: rand(3), frames=2)
def _(x):
    x = x.sin()
    graph_break()
    for _ in range(3):
        x = x * 2
    return x


@breaks("data_dependent_while_loop", lambda: rand(3).abs() + 0.1, frames=2)
def _(x):
    while x.sum() < 100:
        x = x * 2
    return x


# -- modules --------------------------------------------------------------------------


class BreakingBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        x = self.linear(x).relu()
        graph_break()
        return x * 2


class HasBreakingChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(4, 4)
        self.block = BreakingBlock()
        self.post = nn.Linear(4, 2)

    def forward(self, x):
        return self.post(self.block(self.pre(x)))


class GrandParent(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = HasBreakingChild()
        self.head = nn.Linear(2, 1)

    def forward(self, x):
        return self.head(self.child(x).tanh())


class StackOfBreakingBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([BreakingBlock() for _ in range(3)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x.sum(1)


class PrintsInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x)
        print("activations", tuple(y.shape))
        return y.softmax(-1)


class HookedModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.linear.register_forward_hook(_breaking_hook)

    def forward(self, x):
        return self.linear(x).sum(1)


def _breaking_hook(module, args, output):
    graph_break()
    return output * 2


PROGRAMS.append(module_program("break_in_a_modules_own_forward", BreakingBlock, lambda: rand(2, 4),
                               fullgraph=False, frames=2, grad=True))
PROGRAMS.append(module_program("break_in_a_submodules_forward", HasBreakingChild, lambda: rand(2, 4),
                               fullgraph=False, frames=4, grad=True))
PROGRAMS.append(module_program("break_in_a_grandchild_module", GrandParent, lambda: rand(2, 4),
                               fullgraph=False, frames=5, grad=True))
PROGRAMS.append(module_program("breaking_blocks_in_a_module_list_loop", StackOfBreakingBlocks,
                               lambda: rand(2, 4), fullgraph=False, frames=3, grad=True))
PROGRAMS.append(module_program("print_in_forward", PrintsInForward, lambda: rand(2, 4),
                               fullgraph=False, frames=2, grad=True))
PROGRAMS.append(module_program("break_in_a_forward_hook", HookedModule, lambda: rand(2, 4),
                               fullgraph=False, frames=3, grad=True))


class EncodesWithAnLSTM(nn.Module):
    """A recurrent module between two layers, with `allow_rnn` off (PyTorch's default): it runs
    eagerly between two graphs."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 6)
        self.lstm = nn.LSTM(6, 5, num_layers=2, batch_first=True)
        self.head = nn.Linear(5, 2)

    def forward(self, x):
        hidden, _ = self.lstm(self.embed(x).tanh())
        return self.head(hidden[:, -1])


def _call_without_allow_rnn(world, compiled, args):
    import graphwright

    graphwright.config.allow_rnn = False
    try:
        return compiled(*args.args, **args.kwargs)
    finally:
        graphwright.config.allow_rnn = True


PROGRAMS.append(module_program("recurrent_module_between_two_graphs_without_allow_rnn", EncodesWithAnLSTM,
                               lambda: rand(2, 3, 4), fullgraph=False, frames=2, grad=True,
                               call=_call_without_allow_rnn,
                               reference={"frames": 0,
                                          "why": "TorchDynamo refuses the LSTM where it reads "
                                          "`self.lstm`, not at its call, so it cannot resume there and "
                                          "runs the whole forward eagerly: no graph at all"}))


# -- training ---------------------------------------------------------------------------


def _model_and_optimizer():
    model = HasBreakingChild()
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _train_step(world, compiled, args):
    model, optimizer = world
    optimizer.zero_grad()
    loss = F.mse_loss(compiled(*args.args), args.kwargs["target"])
    loss.backward()
    optimizer.step()
    return loss.detach()


PROGRAMS.append(Program(
    name="training_steps_through_a_forward_with_a_break", make=_model_and_optimizer,
    target=lambda world: world[0], inputs=lambda: Args(rand(5, 4), target=rand(5, 2)),
    call=_train_step, repeats=3, fullgraph=False, frames=4,
    observe=lambda world: world[0].state_dict()))


def _loss_with_logging(model, x, y):
    out = model(x)
    loss = F.mse_loss(out, y)
    print("loss computed")
    return loss * 1.0


PROGRAMS.append(Program(
    name="gradients_flow_through_graphs_split_by_a_print", make=lambda: nn.Linear(4, 1),
    target=lambda world: _loss_with_logging, inputs=lambda: (rand(6, 4), rand(6, 1)),
    call=lambda world, compiled, args: _backward_and_grads(world, compiled(world, *args.args)),
    fullgraph=False, frames=2, repeats=2))


def _backward_and_grads(model, loss):
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return loss.detach(), grads


# -- recompiling across breaks --------------------------------------------------------------


@breaks("resume_function_recompiles_on_a_new_shape", lambda: rand(3), frames=2,
        changed=lambda: rand(5), frames_changed=4, options={"dynamic": False})
def _(x):
    y = x * 2
    graph_break()
    return y.sum() + y


# -- instructions the tracer does not model --------------------------------------------


@breaks("class_statement_inside_the_function_is_captured_not_split", lambda: rand(3), frames=1,
        reference={"frames": [2, 3], "why": "TorchDynamo breaks on LOAD_BUILD_CLASS "
                                             "(enable_trace_load_build_class is off by default)"})
def _(x):
    y = x.sin() * 2
    z = y + 1

    class Local:
        scale = 3

    return z * Local.scale


@breaks("deleted_local_is_not_passed_to_the_resume_function", lambda: rand(3), frames=2)
def _(x):
    y = x.exp() + 1
    z = y * 2
    del y
    graph_break()
    return z - 1


@breaks("break_inside_an_except_clause", lambda: rand(3), frames=0)
def _(x):
    try:
        raise ValueError("handled")
    except ValueError:
        graph_break()
        y = x + 1
    return y


@breaks("break_in_a_with_block_inside_an_except_clause", lambda: rand(3, requires_grad=True), frames=0)
def _(x):
    try:
        raise ValueError("handled")
    except ValueError:
        with torch.no_grad():
            graph_break()
            y = x + 1
    return y, y.requires_grad


@breaks("return_inside_a_with_block_after_a_break", lambda: rand(3, requires_grad=True), frames=2)
def _(x):
    y = x.sin() + 1
    with torch.no_grad():
        graph_break()
        return y * 2, torch.is_grad_enabled()


@breaks("break_in_a_no_grad_block_of_a_callee", lambda: rand(3, requires_grad=True), frames=4)
def _(x):
    return _no_grad_helper(x.cos()) + x


def _no_grad_helper(t):
    with torch.no_grad():
        u = t * 2
        graph_break()
        return u + 1


@breaks("break_with_star_args_and_keyword_arguments_at_the_root",
        lambda: Args(rand(3), rand(3), scale=2.0, shift=1.0), frames=2)
def _(*args, scale=1.0, **options):
    a = args[0] * scale
    graph_break()
    return a + args[1] + options["shift"]


class _Tagged(type):
    pass


class _Base(metaclass=_Tagged):
    scale = 3

    @classmethod
    def add(cls, x):
        return x + 1

    def forward(self, x):
        return x * 2


class _Derived(_Base):
    @classmethod
    def add(cls, x):
        graph_break()
        return x + super().add(x) + super().scale

    def forward(self, x):
        def helper():
            return self  # `self` is a cell: `super()` reads it through the cell
        graph_break()
        return super().forward(x) + helper().scale


@program("zero_argument_super_after_a_graph_break", lambda: rand(3), fullgraph=False, frames=4)
def _(x):
    # the rest of each method runs as resume code, whose first parameters are not `cls`/`self`
    obj = _Derived()
    return x + obj.add(x) + obj.forward(x)


_HOOKS_ON_INTERMEDIATES = ("PyTorch captures a hook on an intermediate in the graph, uses before it "
                           "included; graphwright captures it only before any use, else runs the "
                           "function in Python")


@program("hook_on_an_intermediate_used_before_it_is_registered", lambda: rand(3, requires_grad=True),
         grad=True, fullgraph=False, frames=0,
         reference=dict(fullgraph=True, frames=1, why=_HOOKS_ON_INTERMEDIATES))
def _(x):
    # the hook sees the gradient of both uses: the graph before the hook must not keep the first
    y = x * 2
    z = y + 1
    y.register_hook(lambda grad: grad * 2)
    return (z + y * 3).sum()


@program("hook_on_an_intermediate_before_any_use", lambda: rand(3, requires_grad=True), grad=True)
def _(x):
    # captured: the hook's work runs in the graph's backward
    y = x.sin()
    y.register_hook(lambda grad: grad + 1)
    return (y * y).sum()


_scale = {"by": 3.0}


@program("hooks_on_intermediates_reading_a_global_or_returning_none", lambda: rand(3, requires_grad=True),
         grad=True)
def _(x):
    y = x * 2
    y.register_hook(lambda grad: grad * _scale["by"])
    y.cos().register_hook(lambda grad: None)
    return y.sum()
