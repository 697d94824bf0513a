"""Corpus programs for constructs met in real Hugging Face models (tests/real_models/),
each reduced to the general Python behaviour the tracer must model: an augmented
assignment whose left operand is a number and right operand a tensor, a registry
dict keyed by classes and typing forms, the `delattr` builtin, a dict read by key
(guarded on the keys read, not all of them), ..."""
from __future__ import annotations

import os
import typing

import torch

from .harness import program_decorator, rand

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
