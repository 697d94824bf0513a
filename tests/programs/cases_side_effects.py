"""Corpus programs whose compiled run must leave the world as eager does:
mutated input lists, dicts and objects, globals, closure cells, module
attributes, and logging records and warnings replayed on every call."""
from __future__ import annotations

import logging
import types
import warnings

import torch
from torch import nn

from .harness import (Args, CorpusWarning, Program, corpus_logger, module_program, program_decorator,
                      rand)
from .markers import allow_in_graph, graph_break

PROGRAMS = []


program = program_decorator(PROGRAMS)




@program("append_to_input_list", lambda: (rand(3), [rand(3)]))
def _(x, seen):
    seen.append(x * 2)
    seen.append("tag")
    return x + len(seen)


@program("extend_pop_insert_and_sort_input_list", lambda: (rand(2), [3, 1, 2]))
def _(x, items):
    items.extend([5, 4])
    last = items.pop()
    items.insert(0, last)
    items.sort()
    del items[-1]
    return x * last


@program("setitem_and_delitem_on_input_dict", lambda: (rand(3), {"keep": 1, "drop": 2}))
def _(x, state):
    state["double"] = x * 2
    state["keep"] += 10
    del state["drop"]
    state.setdefault("count", 0)
    state["count"] += 1
    return x + state["keep"]


class Box:
    def __init__(self):
        self.value = 1
        self.history = []


@program("set_attribute_on_input_object", lambda: (rand(3), Box()))
def _(x, box):
    box.value = box.value + 1
    box.last = x.sum()
    box.history.append(box.value)
    return x * box.value


CALLS = 0
SEEN = []


def _reset_globals():
    global CALLS
    CALLS = 0
    SEEN.clear()


def _globals():
    return {"CALLS": CALLS, "SEEN": list(SEEN)}


@program("write_a_global_and_append_to_a_global_list", lambda: rand(3),
         reset=_reset_globals, observe=lambda world: _globals(), repeats=3, frames=[1, 2, 3])
def _(x):
    global CALLS
    CALLS += 1
    SEEN.append(x.mean())
    return x * CALLS


def _make_accumulator():
    total = {"calls": 0}
    count = 0

    def accumulate(x):
        nonlocal count
        count += 1
        total["calls"] += 1
        return x + count

    accumulate.state = lambda: (count, dict(total))
    return accumulate


PROGRAMS.append(Program(
    name="mutate_closure_cell_of_compiled_function", make=_make_accumulator,
    inputs=lambda: rand(2), observe=lambda world: world.state(), repeats=3, frames=[1, 2, 2],
    xfail="automatic dynamic for an int in a closure cell: after one change it should become "
          "symbolic instead of recompiling on every call"))


def _record(log, value):
    log.append(value)
    return value


@program("side_effect_inside_an_inlined_helper", lambda: (rand(3), []))
def _(x, log):
    y = _record(log, x + 1)
    _record(log, "done")
    return y


@program("new_objects_created_and_returned_are_not_side_effects", lambda: rand(2))
def _(x):
    made = Box()
    made.value = x * 3
    out = {"made": made.value, "list": [x]}
    out["list"].append(x + 1)
    return out


@program("in_place_mutation_of_a_global_tensor", lambda: rand(3),
         reset=lambda: GLOBAL_STATE.zero_(), observe=lambda world: GLOBAL_STATE.clone(), repeats=3)
def _(x):
    GLOBAL_STATE.add_(x)
    return GLOBAL_STATE * 2


GLOBAL_STATE = torch.zeros(3)


class Tracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        y = self.lin(x)
        self.last = y.detach()
        return y * self.calls


PROGRAMS.append(module_program(
    "set_module_attributes_in_forward", Tracker, lambda: rand(2, 3), repeats=3, frames=[1, 2, 3],
    # the call counter changes: an int attribute of a module stays a constant, as in PyTorch
    observe=lambda world: (world.calls, world.last)))


LOGGING_DIFFERS = ("PyTorch breaks the graph at a logging.Logger or warnings.warn call; "
                   "graphwright replays the call after the graph")


@program("logger_calls_replayed_in_order_on_every_call", lambda: rand(3), repeats=3,
         reference=dict(fullgraph=False, frames=2, why=LOGGING_DIFFERS))
def _(x):
    corpus_logger.info("start %d", 1)
    y = x * 2
    corpus_logger.warning("scaled by %s", 2.0)
    corpus_logger.debug("done")
    return y + 1


@program("warnings_warn_replayed_on_every_call", lambda: rand(3), repeats=3,
         reference=dict(fullgraph=False, frames=1, why=LOGGING_DIFFERS))
def _(x):
    warnings.warn("first", CorpusWarning)
    y = x.relu()
    warnings.warn(f"second {3}", CorpusWarning)
    return y


@program("logger_and_warnings_interleaved_with_tensor_work", lambda: rand(4), repeats=2,
         reference=dict(fullgraph=False, frames=0, why=LOGGING_DIFFERS))
def _(x):
    total = x
    for i in range(2):
        total = total * 2
        warnings.warn(f"step {i}", CorpusWarning)
    corpus_logger.error("total computed")
    return total


class Logged(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        corpus_logger.info("forward of %s", type(self).__name__)
        return self.lin(x)


PROGRAMS.append(module_program(
    "logging_inside_module_forward", Logged, lambda: rand(2, 3), repeats=2,
    reference=dict(fullgraph=False, frames=1, why=LOGGING_DIFFERS)))


@program("logged_tensor_values_are_the_computed_ones", lambda: rand(3), repeats=2,
         reference=dict(fullgraph=False, frames=[1, 2], why=LOGGING_DIFFERS))
def _(x):
    y = x * 3
    corpus_logger.info("mean %s, shape %s", y.mean(), tuple(y.shape))
    return y


def _pass_one_list_twice(world, compiled, args):
    x, shared = args.args
    return compiled(x, shared, shared if args.kwargs["alias"] else list(shared))


@program("one_list_passed_as_two_arguments", lambda: Args(rand(2), [1], alias=True),
         call=_pass_one_list_twice, changed=lambda: Args(rand(2), [1], alias=False),
         frames_changed=2)
def _(x, first, second):
    first.append(2)
    return x * len(second)


def _identities(world, compiled, args):
    x, items = args.args
    out, again, same_list, mutated = compiled(x, items)
    return out is again, same_list is items, mutated is x, out


@program("returned_objects_keep_their_identity", lambda: (rand(3), [1]), call=_identities)
def _(x, items):
    y = x * 2
    items.append(3)
    x.add_(1)
    return y, y, items, x


GLOBAL_TOTAL = torch.zeros(2)


def _reset_total():
    global GLOBAL_TOTAL
    GLOBAL_TOTAL = torch.zeros(2)


@program("global_tensor_rebound_to_a_new_tensor", lambda: rand(2), repeats=3,
         reset=_reset_total, observe=lambda world: GLOBAL_TOTAL)
def _(x):
    global GLOBAL_TOTAL
    GLOBAL_TOTAL = GLOBAL_TOTAL + x
    return GLOBAL_TOTAL * 2


def _logger_level(level):
    def make():
        corpus_logger.setLevel(level)
        return rand(3)
    return make


@program("logger_level_checks_and_log_with_a_level", _logger_level(logging.DEBUG),
         changed=_logger_level(logging.INFO), frames_changed=2,
         reset=lambda: corpus_logger.setLevel(logging.DEBUG),
         reference=dict(fullgraph=False, frames=2, frames_changed=2, why=LOGGING_DIFFERS))
def _(x):
    y = x + 1
    if corpus_logger.isEnabledFor(logging.DEBUG):
        corpus_logger.debug("shape %s", tuple(x.shape))
        y = y * 2
    corpus_logger.log(logging.WARNING, "level %d", logging.WARNING)
    return y


corpus_state = types.ModuleType("corpus_state")
corpus_state.calls = 0


class Registry:
    created = 0
    names: list = []


def _reset_module_and_class_state():
    corpus_state.calls = 0
    Registry.created = 0
    Registry.names = []


@program("writes_to_a_module_attribute_and_class_attributes", lambda: rand(2), repeats=3,
         frames=[1, 2, 3], reset=_reset_module_and_class_state,
         observe=lambda world: (corpus_state.calls, Registry.created, list(Registry.names)))
def _(x):
    corpus_state.calls += 1
    Registry.created = Registry.created + 2
    Registry.names.append("call")
    return x * corpus_state.calls


@program("writes_to_class_attributes", lambda: rand(2), repeats=3, frames=[1, 2, 3],
         reset=_reset_module_and_class_state,
         observe=lambda world: (Registry.created, list(Registry.names)))
def _(x):
    Registry.created = Registry.created + 2
    Registry.names.append("call")
    return x * Registry.created


def _with_deterministic(world, compiled, args):
    """The call made with deterministic algorithms on (warn only) or off, as asked."""
    torch.use_deterministic_algorithms(args.kwargs["deterministic"], warn_only=True)
    try:
        output = compiled(*args.args)
        return (output, torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled())
    finally:
        torch.use_deterministic_algorithms(False)


@program("deterministic_algorithms_switched_off_in_the_region", lambda: Args(rand(4), deterministic=True),
         call=_with_deterministic, repeats=3)
def _(x):
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    return x + 1, before, torch.are_deterministic_algorithms_enabled()


@program("deterministic_algorithms_state_is_guarded", lambda: Args(rand(4), deterministic=True),
         call=_with_deterministic, changed=lambda: Args(rand(4), deterministic=False), frames_changed=2)
def _(x):
    return x * 2


# -- the attention backends `torch.nn.attention.sdpa_kernel` switches -----------------------


_MATH = torch.nn.attention.SDPBackend.MATH
_FLASH = torch.nn.attention.SDPBackend.FLASH_ATTENTION
_ALL_BACKENDS = list(torch.nn.attention.SDPBackend.__members__.values())


@allow_in_graph
def _attention_backends_now(x):
    """A mask of the attention backends enabled when the graph runs this call."""
    enabled = torch.nn.attention._cur_sdpa_kernel_backends()
    return x.new_tensor([float(backend in enabled) for backend in _ALL_BACKENDS])


def _with_attention_backends(world, compiled, args):
    """The call made with only the backends `args` names enabled; what is enabled after it."""
    with torch.nn.attention.sdpa_kernel(args.kwargs["backends"]):
        output = compiled(*args.args)
        return output, torch.nn.attention._cur_sdpa_kernel_backends()


@program("attention_backends_chosen_in_the_region_hold_while_the_graph_runs",
         lambda: Args(rand(1, 2, 3, 4), backends=[_MATH, _FLASH]), call=_with_attention_backends,
         changed=lambda: Args(rand(1, 2, 3, 4), backends=[_FLASH, _MATH]), frames_changed=1)
def _(q):
    with torch.nn.attention.sdpa_kernel([_MATH]):
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        inside = _attention_backends_now(q)
    return out, inside, _attention_backends_now(q), torch.nn.attention._cur_sdpa_kernel_backends()


@program("attention_backends_the_region_restores_are_those_it_was_entered_with",
         lambda: Args(rand(1, 2, 3, 4), backends=[_MATH, _FLASH]), call=_with_attention_backends,
         changed=lambda: Args(rand(1, 2, 3, 4), backends=[_FLASH]), frames_changed=2,
         reference={"why": "TorchDynamo does not guard the backends a region restores: it restores "
                           "those of the call it compiled",
                    "xfail": "backends restored wrongly"})
def _(q):
    with torch.nn.attention.sdpa_kernel(_MATH):
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    return out * 2, _attention_backends_now(q)


@program("attention_backends_switched_across_a_graph_break",
         lambda: Args(rand(1, 2, 3, 4), backends=[_MATH, _FLASH]), call=_with_attention_backends,
         fullgraph=False, frames=2)
def _(q):
    with torch.nn.attention.sdpa_kernel([_MATH]):
        first = _attention_backends_now(q)
        graph_break()
        second = _attention_backends_now(q) + torch.nn.functional.scaled_dot_product_attention(q, q, q).sum()
    return first, second, _attention_backends_now(q)
