"""Models written as popular single-file PyTorch repositories write them (`repo_models.py`:
a Mamba selective scan, a Perceiver, a Mixtral-style mixture of experts, LLaMA's complex
rotary embeddings), compiled by graphwright: the same answers as eager, and the graph counts
of torch.compile on the same program.

Each runs the eval and train programs of `module_programs.py`, with `fullgraph=True` and with
the default `fullgraph=False`, under the `eager` and `aot_eager` backends; compared: every
output, gradient and state_dict entry (1e-5), and the graph count after each call against
torch.compile's (`torch._dynamo.testing.CompileCounter`), in the same test.
"""
from __future__ import annotations

from typing import Any

import pytest
import torch
import torch._dynamo.testing

import graphwright

from . import module_programs, repo_models
from .module_programs import ModuleCase
from .programs import assert_same


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _tokens(seed: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, 16, shape, generator=torch.Generator().manual_seed(seed))


def _mask(seed: int) -> torch.Tensor:
    mask = torch.rand(2, 5, generator=torch.Generator().manual_seed(seed)) > 0.3
    mask[:, 0] = True  # every row attends somewhere
    return mask


CASES = {
    "mamba": ModuleCase(repo_models.MambaLM, lambda seed: {"input_ids": _tokens(seed, 2, 6)}),
    "perceiver": ModuleCase(repo_models.Perceiver,
                            lambda seed: {"data": _randn(seed, 2, 5, 6), "mask": _mask(seed)}),
    "moe": ModuleCase(repo_models.MoE, lambda seed: {"inputs": _randn(seed, 2, 3, 8)}),
    "rotary": ModuleCase(repo_models.RotaryAttention, lambda seed: {"x": _randn(seed, 2, 6, 16)}),
    "nanogpt": ModuleCase(repo_models.GPT, lambda seed: {"idx": _tokens(seed, 2, 8), "targets": _tokens(seed + 10, 2, 8)}),
    "nanogpt_last_logits": ModuleCase(repo_models.GPT, lambda seed: {"idx": _tokens(seed, 2, 5)}),
}

@pytest.mark.parametrize(("name", "mode", "fullgraph", "backend"), module_programs.matrix(CASES))
def test_repo_style_model_matches_eager_with_torch_compiles_graph_count(name: str, mode: str, fullgraph: bool,
                                                                        backend: str) -> None:
    case = CASES[name]
    model = module_programs.built(case)
    expected, _ = module_programs.run(case, model, mode)
    counter = graphwright.testing.CompileCounterWithBackend(backend)
    observed, counts = module_programs.run(
        case, model, mode, lambda f: graphwright.compile(f, fullgraph=fullgraph, backend=counter), counter)
    assert_same(observed, expected)
    theirs = torch._dynamo.testing.CompileCounter()
    _, reference = module_programs.run(case, model, mode,
                                       lambda f: torch.compile(f, fullgraph=fullgraph, backend=theirs), theirs)
    assert counts == reference, f"graphs after each call: graphwright {counts}, torch.compile {reference}"


# -- decoding: a compiled model called once per generated token ------------------------------


def _generate(model: torch.nn.Module, idx: torch.Tensor) -> torch.Tensor:
    return model.generate(idx, 4, top_k=5)


def decode_with_cache(model: torch.nn.Module, call: Any) -> list[tuple[str, Any]]:
    """LLaMA-style decoding: a prompt at position 0, then one token at a time at the next
    position, the keys and values kept in the module's caches."""
    outputs = [("prompt", call(_randn(1, 2, 5, 16), 0))]
    for position in range(5, 8):
        outputs.append((f"token at {position}", call(_randn(position, 2, 1, 16), position)))
    return outputs + [("cache_k", model.cache_k), ("cache_v", model.cache_v)]


def sample_tokens(model: torch.nn.Module, call: Any) -> list[tuple[str, Any]]:
    """nanoGPT's `generate` (top-k sampling with `torch.multinomial`, compiled whole) on two
    prompts, from a fixed seed."""
    torch.manual_seed(3)
    return [(f"prompt {seed}", call(model, _tokens(seed, 2, 3))) for seed in (1, 2)]


DECODERS = {"llama_kv_cache": (repo_models.CachedRotaryAttention, decode_with_cache, None),
            "nanogpt_generate": (repo_models.GPT, sample_tokens, _generate)}


def _decode(name: str, compile_fn: Any = None, counter: Any = None) -> tuple[list[tuple[str, Any]], list[int]]:
    build, program, function = DECODERS[name]
    torch.manual_seed(0)
    model = build().eval()
    target = function or model
    compiled = compile_fn(target) if compile_fn else target
    counts: list[int] = []

    def call(*args: Any) -> Any:
        output = compiled(*args)
        counts.append(counter.frame_count if counter else 0)
        return output

    with torch.no_grad():
        return [(path, value.clone()) for path, value in program(model, call)], counts


@pytest.mark.parametrize("fullgraph", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["fullgraph", "breaks"])
@pytest.mark.parametrize("name", list(DECODERS))
def test_decoding_matches_eager_with_torch_compiles_graph_count(name: str, fullgraph: bool) -> None:
    expected, _ = _decode(name)
    counter = graphwright.testing.CompileCounter()
    observed, counts = _decode(name, lambda f: graphwright.compile(f, fullgraph=fullgraph, backend=counter), counter)
    for (path, value), (_, wanted) in zip(observed, expected, strict=True):
        torch.testing.assert_close(value, wanted, atol=1e-5, rtol=1e-5, msg=lambda text: f"{path}: {text}")
    theirs = torch._dynamo.testing.CompileCounter()
    _, reference = _decode(name, lambda f: torch.compile(f, fullgraph=fullgraph, backend=theirs), theirs)
    assert counts == reference, f"graphs after each call: graphwright {counts}, torch.compile {reference}"
