"""Corpus programs about facts of constant objects: what real code reads off functions,
code objects, classes and modules (`func.__code__.co_varnames`, `__wrapped__`,
`__defaults__`, `inspect.signature`), the library helpers built on them (functools,
contextlib, operator, itertools, collections), and the markers torch gives such code
(`torch.compiler.is_compiling()`). A changed fact must recompile."""
from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import itertools
import logging
import operator
import typing
import warnings

import torch

import graphwright

from .harness import Args, corpus_logger, module_program, program_decorator, rand
from .markers import graph_break

PROGRAMS = []


program = program_decorator(PROGRAMS)


# -- functions and their code objects ---------------------------------------------------

def _config_defaults(func):
    """The shape of transformers' `merge_with_config_defaults`: finds an argument by name."""

    @functools.wraps(func)
    def wrapper(x, *args, **kwargs):
        names = func.__code__.co_varnames
        if "scale" in names and len(args) < names.index("scale"):
            kwargs.setdefault("scale", 3.0)
        return func(x, *args, **kwargs)

    return wrapper


@_config_defaults
def _scaled(x, bias, scale=1.0):
    return x * scale + bias


@program("decorator_reads_the_wrapped_functions_code_varnames", lambda: rand(3))
def _(x):
    return _scaled(x, 1.0)


def _documented(x, n=2, *, power=1):
    """Documented."""
    return x ** power * n


@program("function_name_qualname_module_doc_defaults_are_constants", lambda: rand(3))
def _(x):
    fn = _documented
    code = fn.__code__
    facts = (fn.__name__, fn.__qualname__, fn.__module__, fn.__doc__, fn.__defaults__,
             fn.__kwdefaults__, code.co_argcount, code.co_kwonlyargcount, code.co_name,
             code.co_varnames[:code.co_argcount])
    return x * len(facts), facts


@program("functools_wraps_exposes_wrapped_and_its_name", lambda: rand(3))
def _(x):
    inner = _scaled.__wrapped__
    return inner(x, 2.0), _scaled.__name__, _scaled.__doc__, inner is _scaled.__wrapped__


@program("function_made_in_the_region_answers_from_its_code", lambda: rand(3))
def _(x):
    def local(a, b=2, *rest, c=3):
        """Local doc."""
        return a * b + c

    code = local.__code__
    return (local(x), local.__name__, local.__qualname__.split(".")[-1], local.__doc__,
            code.co_argcount, code.co_varnames[:2], (lambda: 0).__doc__,
            hasattr(local, "__wrapped__"))


@program("function_made_in_the_region_has_its_defaults", lambda: rand(3),
         reference={"xfail": "reading __defaults__ of a nested function fails inside Dynamo",
                    "why": "PyTorch 2.13 raises 'push expects VariableTracker, got tuple'"})
def _(x):
    def local(a, b=2, *rest, c=3):
        return a * b + c

    return local(x), local.__defaults__, local.__kwdefaults__


class _Layer:
    def forward(self, x, mask=None):
        return x * 2 if mask is None else x * mask


@program("bound_method_forwards_attribute_reads_to_its_function", lambda: rand(3))
def _(x):
    method = _Layer().forward
    return (method(x), method.__name__, method.__func__.__code__.co_varnames,
            method.__func__ is _Layer.forward, method.__defaults__)


def _flagged(x):
    return x + 1


_flagged.use_fast_path = True


def _set_flag(value):
    def make():
        _flagged.use_fast_path = value
        return rand(3)
    return make


@program("function_attribute_changed_between_calls_recompiles", _set_flag(True),
         changed=_set_flag(False), frames_changed=2, reset=_set_flag(True))
def _(x):
    if getattr(_flagged, "use_fast_path", False):
        return _flagged(x)
    return x


def _with_default(x, k=2.0):
    return x * k


def _set_default(value):
    def make():
        _with_default.__defaults__ = (value,)
        return rand(3)
    return make


@program("function_defaults_replaced_between_calls_recompiles", _set_default(2.0),
         changed=_set_default(5.0), frames_changed=2, reset=_set_default(2.0))
def _(x):
    return _with_default(x), _with_default.__defaults__[0]


# -- torch's own Python functions -------------------------------------------------------

@program("torch_python_helpers_are_traced_into", lambda: rand(3, 4))
def _(x):
    # broadcast_shapes, calculate_gain and F.tanh are Python outside torch.overrides' tables:
    # traced into; parameters_to_vector asks torch._C for the backend name (a constant)
    shape = torch.broadcast_shapes(x.shape, (2, 3, 4))
    gain = torch.nn.init.calculate_gain("leaky_relu", 0.2)
    flat = torch.nn.utils.parameters_to_vector([x, x[0]])
    return x.expand(shape) * gain, torch.nn.functional.tanh(x), flat * 2, torch.is_tensor(x)


@program("torch_tracing_state_checks_are_constants", lambda: rand(3))
def _(x):
    if torch._C._get_tracing_state() is None and not torch.jit.is_tracing():
        x = x * 2
    if torch.jit.is_scripting():
        return x
    return x + 1


@program("torch_pytree_map_calls_back_into_user_code", lambda: {"a": rand(3), "b": [rand(2), 3]})
def _(batch):
    # tree_map is a Python function of torch taking a user callback: it can only be traced into
    return torch.utils._pytree.tree_map(lambda leaf: leaf * 2 if torch.is_tensor(leaf) else leaf, batch)


# -- generators and generator-based context managers ------------------------------------

def _steps(x, n, log):
    for i in range(n):
        log.append(f"make {i}")
        sent = yield x * i
        if sent is not None:
            x = x + sent
    return "finished"


@program("generator_function_runs_lazily_with_side_effects_in_order", lambda: (rand(3), []))
def _(x, log):
    total = x
    for value in _steps(x, 3, log):
        log.append("use")
        total = total + value
    return total


def _delegating(x, log):
    result = yield from _steps(x, 2, log)
    log.append(result)
    yield x - 1


@program("generator_send_next_and_yield_from_with_its_return_value", lambda: (rand(3), []),
         reference={"xfail": "the value of `yield from` is None instead of the generator's return value",
                    "why": "PyTorch 2.13 loses the return value of a generator under `yield from`"})
def _(x, log):
    steps = _steps(x, 3, log)
    first = next(steps)
    second = steps.send(torch.ones(3))
    rest = list(_delegating(x, log))
    return first, second, rest, next(steps, None)


@program("zip_map_and_enumerate_take_items_from_a_generator_when_asked", lambda: (rand(3), []))
def _(x, log):
    pairs = [(i, v) for i, v in enumerate(_steps(x, 5, log)) if i < 2]
    log.append("between")
    doubled = map(lambda v: v * 2, _steps(x, 4, log))
    first = next(doubled)
    log.append("after first")
    zipped = [a + b for a, b in zip(range(2), _steps(x, 9, log))]
    return pairs, first, zipped


@contextlib.contextmanager
def _scaled_context(factor, log):
    log.append("enter")
    try:
        yield factor * 2
    finally:
        log.append("exit")


@program("contextmanager_runs_setup_and_cleanup_around_the_block", lambda: (rand(3), []))
def _(x, log):
    with _scaled_context(3, log) as k:
        y = x * k
    try:
        with _scaled_context(1, log):
            raise ValueError("stop")
    except ValueError:
        y = y - 1
    with contextlib.suppress(KeyError):
        {}["missing"]
    with contextlib.nullcontext(y) as same:
        return same + 1


# -- classes, sets and mapping proxies read from outside --------------------------------

class _Base:
    scale = 2

    def base_method(self):
        return 1


class _Child(_Base):
    """Child doc."""

    def child_method(self):
        return 2


@program("class_mro_bases_dict_and_names_are_facts", lambda: rand(3))
def _(x):
    cls = _Child
    names = [klass.__name__ for klass in cls.__mro__]
    own = "child_method" in cls.__dict__ and "base_method" not in cls.__dict__
    return (x * len(names), names, own, cls.__bases__[0] is _Base, cls.__qualname__, cls.__doc__,
            _Base.__dict__["scale"], sorted(k for k in cls.__dict__ if not k.startswith("__")),
            hasattr(_Child(), "__mro__"))


def _set_class_flag(present):
    def make():
        if present:
            _Child.flag = True
        elif "flag" in _Child.__dict__:
            del _Child.flag
        return rand(3)
    return make


@program("attribute_added_to_a_class_dict_recompiles", _set_class_flag(False),
         changed=_set_class_flag(True), frames_changed=2, reset=_set_class_flag(False))
def _(x):
    return x * 2 if "flag" in _Child.__dict__ else x * 3


def _filter_kwargs(func, allowed):
    """The shape of transformers' `filter_out_non_signature_kwargs`: a set in a closure."""
    valid = set(allowed)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **{key: value for key, value in kwargs.items() if key in valid})

    return wrapper


_filtered = _filter_kwargs(lambda x, scale=1.0: x * scale, ["scale"])


@program("set_in_a_closure_filters_keyword_arguments", lambda: rand(3))
def _(x):
    return _filtered(x, scale=2.0, unknown=3)


_NAMES = {"weight", "bias"}


def _set_names(*names):
    def make():
        _NAMES.clear()
        _NAMES.update(names)
        return rand(3)
    return make


@program("global_set_changed_between_calls_recompiles", _set_names("weight", "bias"),
         changed=_set_names("weight"), frames_changed=2, reset=_set_names("weight", "bias"))
def _(x):
    return x * len(_NAMES) if "bias" in _NAMES else x


# -- inspect and typing on constant callables -------------------------------------------

def _target(a, b=2, *rest, c, **extra):
    return a * b + c


@functools.wraps(_target)
def _wrapped_target(*args, **kwargs):
    return _target(*args, **kwargs)


_SIGNATURE = inspect.signature(_target)


@program("inspect_signature_of_a_constant_callable_is_a_constant", lambda: rand(3))
def _(x, **kwargs):
    signature = inspect.signature(_wrapped_target)
    names = list(signature.parameters)
    kinds = [parameter.kind.name for parameter in signature.parameters.values()]
    default = signature.parameters["b"].default
    return (x * default, names, kinds, inspect.isfunction(_target), inspect.isclass(_Child),
            inspect.unwrap(_wrapped_target) is _target, typing.cast(torch.Tensor, x) + 1)


@program("signature_bind_on_traced_arguments", lambda: rand(3))
def _(x):
    # transformers' `select_hidden_states`: a signature made at import binds the call's arguments
    bound = _SIGNATURE.bind(x, 3, c=4)
    bound.apply_defaults()
    return bound.arguments["a"] * bound.arguments["b"], sorted(bound.arguments)


# -- functools caches, operator getters, bound methods ---------------------------------

@functools.lru_cache(None)
def _warn_once(message):
    corpus_logger.warning(message)


class _Reporter:
    @functools.lru_cache(None)  # noqa: B019 (transformers' Logger.warning_once is built this way)
    def report_once(self, message):
        corpus_logger.info(message)


_REPORTER = _Reporter()


def _clear_caches():
    _warn_once.cache_clear()
    _Reporter.report_once.cache_clear()


@program("cached_logging_helper_logs_once_across_calls", lambda: rand(3), repeats=3, reset=_clear_caches,
         reference={"xfail": "logging.Logger methods are a graph break under fullgraph",
                    "why": "PyTorch 2.13 does not replay logging calls outside export"})
def _(x):
    _warn_once("deprecated argument")
    _warn_once("deprecated argument")
    _REPORTER.report_once("using the fast path")
    return x * 2


class _Config:
    hidden = 4

    class attention:
        heads = 2


_GET_SIZES = operator.attrgetter("hidden", "attention.heads")


@program("operator_attrgetter_itemgetter_methodcaller", lambda: (rand(4), _Config()),
         reference={"xfail": "Dynamo does not know how to trace method `__call__` of class `attrgetter`",
                    "why": "PyTorch 2.13 does not model operator.attrgetter"})
def _(x, config):
    hidden, heads = _GET_SIZES(config)
    first = operator.itemgetter(0)([x, x + 1])
    pair = operator.itemgetter("a", "b")({"a": x, "b": heads})
    total = operator.methodcaller("sum", dim=0)(x)
    return x * hidden + heads, first, pair, operator.attrgetter("shape")(x), total


_LAYER = _Layer()


@program("bound_method_argument_does_not_recompile", lambda: (rand(3), _LAYER.forward), repeats=3)
def _(x, method):
    return method(x) + 1


# -- warnings and logging records keep the user's location -----------------------------

class _LocatedWarning(UserWarning):
    pass


def _deprecated_helper(x):
    warnings.warn("helper is deprecated", _LocatedWarning, stacklevel=2)
    return x


def _warnings_with_locations(world, compiled, args):
    records = []

    class Recorder(logging.Handler):
        def emit(self, record):
            records.append((record.levelname, record.getMessage(), record.filename, record.lineno,
                            record.funcName))

    recorder = Recorder()
    corpus_logger.addHandler(recorder)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")  # once per location: the location must be the user's
            output = compiled(*args.args)
    finally:
        corpus_logger.removeHandler(recorder)
    located = [(w.category.__name__, str(w.message), w.filename, w.lineno) for w in caught
               if issubclass(w.category, _LocatedWarning)]
    return output, located, records


@program("warnings_and_log_records_report_the_users_line", lambda: rand(3),
         call=_warnings_with_locations,
         reference={"xfail": "logging.Logger methods are a graph break under fullgraph",
                    "why": "PyTorch 2.13 does not replay logging calls outside export"})
def _(x):
    warnings.warn("first", _LocatedWarning)
    warnings.warn(_LocatedWarning("an instance"))
    y = _deprecated_helper(x)
    y = _deprecated_helper(y)  # another line: shown again under the "default" action
    if corpus_logger.isEnabledFor(logging.DEBUG):
        corpus_logger.debug("debug %d", 1)
    corpus_logger.info("scaled by %s", 2)
    corpus_logger.log(logging.WARNING, "tensor %s", y.shape)
    return y * 2


@program("warnings_and_log_records_after_a_graph_break_report_the_users_function", lambda: rand(3),
         call=_warnings_with_locations, frames=2, fullgraph=False,
         reference={"xfail": "logging.Logger methods are a graph break under fullgraph",
                    "why": "PyTorch 2.13 does not replay logging calls outside export"})
def _(x):
    y = _deprecated_helper(x.sin())
    corpus_logger.info("before the break")
    graph_break()
    warnings.warn("in the resumed part", _LocatedWarning)  # replayed by the resume function's entry
    y = _deprecated_helper(y)
    corpus_logger.warning("after the break: %s", y.shape)
    return y * 2


# -- torch's markers ---------------------------------------------------------------------

def _marks_after_the_call(world, compiled, args):
    x = args.args[0]
    output = compiled(x)
    return output, sorted(getattr(x, "_dynamo_static_indices", ()))


@program("mark_static_inside_the_region_applies_to_the_real_tensor", lambda: rand(3, 4),
         call=_marks_after_the_call)
def _(x):
    graphwright.mark_static(x, 1)
    return x * 2


# -- registries keyed by classes, deleting attributes -----------------------------------

def _double_list(value):
    return [item * 2 for item in value]


def _double_tuple(value):
    return tuple(item * 2 for item in value)


_BY_TYPE = {list: _double_list, tuple: _double_tuple, typing.Union: None}


def _set_tuple_handler(handler):
    def make():
        _BY_TYPE[tuple] = handler
        return ((rand(3), rand(3)),)
    return make


@program("registry_keyed_by_classes_dispatches_on_the_type", _set_tuple_handler(_double_tuple),
         changed=_set_tuple_handler(_double_list), frames_changed=2,
         reset=_set_tuple_handler(_double_tuple))
def _(pair):
    # huggingface_hub's validators: a dict from classes (and typing forms) to functions
    handler = _BY_TYPE.get(type(pair))
    return handler(pair), _BY_TYPE.get(dict, "missing"), typing.Union in _BY_TYPE


class _Options:
    def __init__(self):
        self.encoder_layers = 2
        self.scale = 3


@program("delattr_and_setattr_rename_an_attribute", lambda: (rand(3), _Options()))
def _(x, options):
    # the shape of PretrainedConfig.get_text_config renaming encoder_* keys
    value = getattr(options, "encoder_layers")
    delattr(options, "encoder_layers")
    setattr(options, "num_layers", value)
    return x * options.num_layers, hasattr(options, "encoder_layers")


# -- itertools and collections --------------------------------------------------------

@program("map_runs_its_function_when_each_item_is_asked_for", lambda: (rand(3), []))
def _(x, log):
    def scaled(k):
        log.append(f"scale {k}")
        return x * k

    total = x
    for value in map(scaled, [1, 2, 3]):
        log.append("add")
        total = total + value
    return total


@program("itertools_infinite_and_lazy_helpers", lambda: rand(3))
def _(x):
    counter = itertools.count(1)
    numbers = [next(counter) for _ in range(3)]
    alternating = list(itertools.islice(itertools.cycle([x, x * 2]), 3))
    small = list(itertools.takewhile(lambda v: v < 3, [1, 2, 3, 1]))
    rest = list(itertools.dropwhile(lambda v: v < 3, [1, 2, 3, 1]))
    products = list(itertools.starmap(lambda a, b: a * b, [(x, 2), (x, 3)]))
    repeated = list(itertools.repeat(x, 2))
    keys = [(key, len(list(group))) for key, group in itertools.groupby([1, 1, 2, 3, 3])]
    pairs = list(itertools.pairwise([1, 2, 3]))
    kept = list(itertools.compress([x, x + 1, x + 2], [1, 0, 1]))
    running = list(itertools.accumulate([x, x, x], lambda a, b: a * b))
    return numbers, alternating, small, rest, products, repeated, keys, pairs, kept, running


@program("collections_counter_tallies_in_the_region", lambda: rand(3),
         reference={"xfail": "Failed to trace builtin operator `object` (Counter.most_common)",
                    "why": "PyTorch 2.13 cannot trace Counter.most_common"})
def _(x):
    counts = collections.Counter(["relu", "gelu", "relu"])
    counts["tanh"] += 2
    return x * counts["relu"], counts.most_common(1), sorted(counts)


# -- config objects read by a model -------------------------------------------------------

class _ModelConfig:
    """A config object as models hold one (transformers' PretrainedConfig is read this way)."""

    def __init__(self):
        self.use_cache = True
        self.output_attentions = False
        self.layer_types = ["full", "sliding"]


class _Configured(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = _ModelConfig()
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.proj(x)
        if self.config.use_cache:
            y = y * 2
        for kind in self.config.layer_types:
            y = y + 1 if kind == "full" else y - getattr(self.config, "sliding_scale", 0.5)
        return y


def _change_config(world, compiled, args):
    if args.kwargs["change"]:
        compiled.config.use_cache = False
        compiled.config.layer_types.append("full")
    return compiled(*args.args)


PROGRAMS.append(module_program(
    "config_attribute_changed_between_calls_recompiles", _Configured,
    lambda: Args(rand(2, 3), change=False), call=_change_config,
    changed=lambda: Args(rand(2, 3), change=True), frames_changed=2))


# -- decorators applied inside the region --------------------------------------------------

def _inner_op(x):
    """Inner doc."""
    return x * 2


_inner_op.tag = "inner"


def _plus_one(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1

    return wrapper


def _use_returned_wrapper(world, compiled, args):
    result, wrapper = compiled(*args.args)
    return result, wrapper(args.args[0]), wrapper.__name__, wrapper.__wrapped__ is _inner_op, sorted(vars(wrapper))


@program("functools_wraps_applied_inside_the_region", lambda: rand(3), call=_use_returned_wrapper,
         reference={"xfail": "the wrapper's __dict__ also lists __module__, __name__, __doc__...",
                    "why": "PyTorch 2.13 puts update_wrapper's special attributes in the __dict__"})
def _(x):
    def annotated(a: torch.Tensor, n: int = 2) -> torch.Tensor:
        return a * n

    wrapped = _plus_one(_inner_op)
    facts = (wrapped.__name__, wrapped.__qualname__, wrapped.__doc__, wrapped.__wrapped__ is _inner_op,
             wrapped.tag, sorted(wrapped.__dict__), annotated.__annotations__, wrapped.__annotations__)
    return (wrapped(x), facts), wrapped


def _counted(x):
    return x + 1


_counted.calls = 0


@program("attribute_stored_on_a_real_function_is_replayed", lambda: rand(3), repeats=3,
         reset=lambda: setattr(_counted, "calls", 0), observe=lambda world: _counted.calls,
         frames=[1, 2, 2],  # the count changed: the second compile reads it as a symbol
         reference={"xfail": "setattr() is not supported on type function",
                    "why": "PyTorch 2.13 cannot store attributes on functions"})
def _(x):
    # a function-level counter, as decorators keep call statistics on the function
    _counted.calls = _counted.calls + 1
    return _counted(x) * _counted.calls


# -- what libraries ask of builtin types and classes --------------------------------------

class _ArrayBackend:
    """einops' shape of backend discovery: the backends are the subclasses of a base class."""

    framework = None

    def handles(self, x):
        return False


class _TorchArrayBackend(_ArrayBackend):
    framework = "torch"

    def handles(self, x):
        return isinstance(x, torch.Tensor)


class _NumpyArrayBackend(_ArrayBackend):
    framework = "numpy"


@program("backends_found_among_the_subclasses_of_a_base_class", lambda: rand(3))
def _(x):
    pending, found = list(_ArrayBackend.__subclasses__()), None
    while pending:
        backend = pending.pop()
        pending.extend(backend.__subclasses__())
        if backend().handles(x):
            found = backend
    return x * 2, found.framework


@program("methods_of_builtin_types_called_unbound", lambda: rand(3),
         reference=dict(xfail="2.13 cannot call int.bit_length unbound", why="PyTorch breaks the graph here"))
def _(x):
    # einops parses its patterns so: `str.isalnum` as a function, `map(str.strip, ...)`
    names = [name for name in "b h (n d) -> b n".replace("(", " ").replace(")", " ").split()]
    words = list(filter(str.isalnum, names))
    padded = list(map(str.strip, [" a ", "b "]))
    return x * len(words), words, padded, int.bit_length(37), tuple.count((1, 2, 1), 1)


@program("set_algebra_on_sets_of_constants", lambda: rand(3))
def _(x):
    left, right = set("bhnd"), {"b", "n", "c"}
    extra = set.symmetric_difference(left, right)
    common = left.intersection(right, {"b", "n"})
    left.difference_update({"h"})
    return (x * len(extra), sorted(extra), sorted(common), sorted(left.union(right)),
            left.issubset(right), left.isdisjoint({"z"}), sorted(frozenset(left) - right))
