"""Corpus programs for constructs met in real Hugging Face models (tests/real_models/),
each reduced to the general Python behaviour the tracer must model: an augmented
assignment whose left operand is a number and right operand a tensor, a registry
dict keyed by classes and typing forms, the `delattr` builtin, a dict read by key
(guarded on the keys read, not all of them), an object's `__dict__` that stays one state with
its attributes, ..."""
from __future__ import annotations

import collections
import os
import typing

import torch

from .harness import module_program, program_decorator, rand

PROGRAMS = []
program = program_decorator(PROGRAMS)


@program("augmented_assignment_of_a_tensor_to_a_number", lambda: rand(3, 4))
def _(x):
    buckets = 0  # T5's relative-position buckets start as the int 0
    buckets += (x > 0).to(torch.long) * 4
    scale = 1.5
    scale *= x
    return buckets, scale


_HANDLERS = {list: lambda items: len(items), dict: lambda items: len(items) + 1,
             typing.Union: lambda items: 2.0}
_ANNOTATION = typing.Optional[int]


@program("registry_dict_keyed_by_classes_and_typing_forms", lambda: rand(3))
def _(x):
    # huggingface_hub's strict dataclasses look validators up by `typing.get_origin(annotation)`
    for kind in (list, dict, tuple):
        handler = _HANDLERS.get(kind)
        if handler is not None:
            x = x * handler([1, 2])
    union = _HANDLERS[typing.get_origin(_ANNOTATION)]
    return x + union([]), tuple in _HANDLERS, dict in _HANDLERS


class _Settings:
    def __init__(self):
        self.encoder_layers = 2
        self.decoder_layers = 3


@program("delattr_builtin_on_an_object_made_in_the_region", lambda: rand(3))
def _(x):
    # T5's config.get_text_config(decoder=True) deletes the keys of the other side by name
    settings = _Settings()
    for key in ("encoder_layers",):
        delattr(settings, key)
    return x * settings.decoder_layers, hasattr(settings, "encoder_layers")


_ENV = {"GW_SCALE": "2"}


def _env_with(**extra):
    def make():
        _ENV.clear()
        _ENV.update(GW_SCALE="2", **extra)
        return rand(3)
    return make


@program("dict_read_by_key_does_not_recompile_when_another_key_is_added", _env_with(),
         changed=_env_with(GW_OTHER="1"), frames_changed=1, reset=_env_with())
def _(x):
    # os.environ.get in library code: Inductor sets variables of its own between calls
    scale = float(_ENV.get("GW_SCALE", "1"))
    return x * scale if _ENV.get("GW_DEBUG") is None else x


@program("dict_read_by_key_recompiles_when_an_absent_key_appears", _env_with(),
         changed=_env_with(GW_DEBUG="1"), frames_changed=2, reset=_env_with())
def _(x):
    return x * 2 if "GW_DEBUG" not in _ENV else x - 1


@program("dict_read_by_key_recompiles_when_its_value_changes", _env_with(),
         changed=lambda: (_env_with()(), _ENV.update(GW_SCALE="3"))[0], frames_changed=2, reset=_env_with())
def _(x):
    return x * float(_ENV["GW_SCALE"])


@program("dict_iterated_recompiles_when_another_key_is_added", _env_with(),
         changed=_env_with(GW_OTHER="1"), frames_changed=2, reset=_env_with())
def _(x):
    return x * len([key for key in _ENV if key.startswith("GW_")])


@program("environment_variable_read_through_os_environ", lambda: rand(3))
def _(x):
    return x * 2 if os.environ.get("GW_CORPUS_UNSET_VARIABLE") is None else x


class _GuardedConfig:
    """Hugging Face configs read their own `__dict__` on every attribute access."""

    def __init__(self):
        self.problem_type = None
        self.num_labels = 3

    def __getattribute__(self, key):
        if super().__getattribute__("__dict__").get("_per_layer") is not None:
            raise AttributeError(key)
        return super().__getattribute__(key)

    def __setattr__(self, key, value):
        super().__setattr__(key, value)


class _Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = _GuardedConfig()
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x):
        # BertForSequenceClassification's first training step decides the problem type
        if self.config.problem_type is None:
            self.config.problem_type = "single_label" if self.config.num_labels > 1 else "regression"
        logits = self.head(x)
        return logits.softmax(-1) if self.config.problem_type == "single_label" else logits


PROGRAMS.append(module_program(
    "attribute_store_on_an_object_that_reads_its_own_dict", _Classifier, lambda: rand(2, 4),
    frames=[1, 2],  # the store changes what the second call's guards see
    observe=lambda world: vars(world.config)))


class _Record:
    def __init__(self):
        self.first = 1
        self.second = 2
        self.third = 3


_RECORD = _Record()


def _fresh_record():
    global _RECORD
    _RECORD = _Record()


@program("dict_of_an_object_sees_stores_and_deletions_in_cpython_order", lambda: rand(3),
         reset=_fresh_record, frames=[1, 2],
         reference={"xfail": "list(obj.__dict__) keeps a deleted and re-stored attribute in its old place",
                    "why": "torch.compile 2.13 replays the store without the deletion"})
def _(x):
    _RECORD.second = 2
    state = _RECORD.__dict__
    del _RECORD.first
    _RECORD.first = 10  # deleted and stored again: last in the __dict__
    _RECORD.fourth = 4
    state["fifth"] = 5  # a store through the dict is an attribute store
    del state["second"]
    _RECORD.added = 0
    del _RECORD.added  # added and deleted in the region: nothing left to replay
    return x * _RECORD.fifth, list(state), len(state), "second" in state, dict(vars(_RECORD))


@program("dict_of_an_object_read_after_a_store", lambda: rand(3), reset=_fresh_record)
def _(x):
    _RECORD.second = x.shape[0]
    state = _RECORD.__dict__
    return x * state["second"], state.get("missing"), sorted(state.items())


class _Holder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 1

    def forward(self, x):
        self.k = self.k + 1
        return x * self.__dict__["k"], "k" in vars(self)


PROGRAMS.append(module_program(
    "module_dict_read_after_a_store_sees_the_store", _Holder, lambda: rand(2),
    frames=[1, 2], observe=lambda world: world.k))


class _Scaled(torch.nn.Module):
    """A module without parameters, as transformers' activations are."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.act = torch.nn.functional.gelu
        self.scale = scale

    def forward(self, x):
        return self.act(x) * self.scale


_ACTIVATIONS = {"gelu": (_Scaled, {"scale": 2.0})}


@program("module_built_in_the_region_from_a_registry", lambda: rand(3))
def _(x):
    # DeBERTa's pooler builds `ACT2FN[name]` (a new activation module) on every call
    cls, kwargs = _ACTIVATIONS["gelu"]
    act = cls(**kwargs)
    return act(x), act.training


_MADE = []


def _made_modules():
    return [(type(m).__name__, m.scale, m.training, m(torch.ones(2)), m is not _MADE[0]) for m in _MADE]


@program("module_built_in_the_region_escapes_it", lambda: rand(3), reset=_MADE.clear,
         observe=lambda world: _made_modules(), frames=[1, 2])  # the list's length is guarded
def _(x):
    act = _Scaled(3.0)
    act.eval()
    _MADE.append(act)  # a new module per call, working after the call as in eager
    return act(x)


@program("requires_grad_set_on_a_tensor_made_in_the_region", lambda: rand(2, 3), grad=True,
         reference={"xfail": "setattr() on Tensor.requires_grad is a graph break (GB0206)",
                    "why": "torch.compile 2.13 leaves new leaves in the middle of a graph to eager"})
def _(x):
    # Wav2Vec2's feature encoder: `hidden_states.requires_grad = True` for gradient checkpointing
    hidden = x[:, None]
    hidden.requires_grad = True
    return (hidden * 2).sum(), hidden.requires_grad


class _Registry(dict):
    """transformers' `_CanRecordRegistry`: a dict subclass keyed by class name, filled as models
    are built, read with its own `get`."""

    def __setitem__(self, model, value):
        super().__setitem__(type(model).__name__, value)

    def __getitem__(self, key):
        raise AssertionError("guards must not run an overridden __getitem__")

    def get(self, model):
        return super().get(type(model).__name__) or {}


class _Classifier:
    pass


_REGISTRY = _Registry()
_CLASSIFIER = _Classifier()


def _registry_with(*names, scale=2.0):
    def make():
        dict.clear(_REGISTRY)
        _REGISTRY[_CLASSIFIER] = {"scale": scale}
        for name in names:
            dict.__setitem__(_REGISTRY, name, {"scale": 0.0})
        return rand(3)
    return make


@program("dict_subclass_read_by_key_does_not_recompile_when_another_key_is_added", _registry_with(),
         changed=_registry_with("Other", "More"), frames_changed=1, reset=_registry_with(),
         reference=dict(frames_changed=2, why="2.13 guards every key of a dict subclass it reads"))
def _(x):
    return x * _REGISTRY.get(_CLASSIFIER)["scale"], "Absent" in _REGISTRY


@program("dict_subclass_read_by_key_recompiles_when_its_value_changes", _registry_with(),
         changed=_registry_with(scale=3.0), frames_changed=2, reset=_registry_with())
def _(x):
    return x * _REGISTRY.get(_CLASSIFIER)["scale"]


_COUNTS = collections.defaultdict(int)


def _counts_with(**counts):
    def make():
        _COUNTS.clear()
        _COUNTS.update(counts)
        return rand(3)
    return make


@program("defaultdict_key_removed_misses_without_the_guard_inserting_it", _counts_with(a=2),
         changed=_counts_with(b=1), frames_changed=2, reset=_counts_with(a=2),
         observe=lambda world: sorted(_COUNTS.items()))
def _(x):
    return x * _COUNTS.get("a", 5)


_COLLECTED = {"outputs": None}


def _record_output(module, args, output):
    if _COLLECTED["outputs"] is not None:
        _COLLECTED["outputs"].append(output)


class _HooksInstalledOnFirstCall(torch.nn.Module):
    """transformers' output capturing: the first call that asks for hidden states registers a
    forward hook on every layer, then runs the layers, whose hooks must run in that same call."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        if not getattr(self, "_hooks_installed", False):
            for layer in self.layers:
                layer.register_forward_hook(_record_output)
            self._hooks_installed = True
        _COLLECTED["outputs"] = []
        for layer in self.layers:
            x = layer(x)
        collected, _COLLECTED["outputs"] = _COLLECTED["outputs"], None
        return x, tuple(collected)


PROGRAMS.append(module_program(
    "forward_hooks_registered_in_the_region_run_in_the_same_call", _HooksInstalledOnFirstCall,
    lambda: rand(2, 4), frames=[1, 2], observe=lambda module: len(module.layers[0]._forward_hooks),
    reference=dict(xfail="2.13 cannot store RemovableHandle.next_id (register_forward_hook)",
                   why="PyTorch cannot compile this program with fullgraph")))
