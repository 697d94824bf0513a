"""Hugging Face models compiled as a user compiles them by default (`fullgraph=False`), whose
capture breaks: eager's answer, never an exception eager does not raise.

SwitchTransformers' encoder stack skips building its attention mask when
`is_torchdynamo_compiling()` and then indexes it: tracing raises, the stack runs as Python,
and there the library's helper (torch imported in its body) must answer False, as it does
under torch.compile, whose frame hook skips a frame that holds nothing of torch's.
"""
from __future__ import annotations

import pytest
import torch
import transformers

import graphwright


def _switch_transformers() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.SwitchTransformersConfig(
        vocab_size=256, d_model=128, d_kv=32, d_ff=256, num_layers=2, num_decoder_layers=2,
        num_sparse_encoder_layers=1, num_sparse_decoder_layers=1, num_heads=4, num_experts=4,
        expert_capacity=64)
    return transformers.SwitchTransformersForConditionalGeneration(config).eval()


def _inputs(seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, 256, (2, 8), generator=generator),
            "decoder_input_ids": torch.randint(0, 256, (2, 5), generator=generator)}


@pytest.mark.parametrize("backend", ["eager", pytest.param("aot_eager", marks=pytest.mark.slow)])
def test_switch_transformers_without_fullgraph_gives_eagers_logits(backend: str) -> None:
    model = _switch_transformers()
    compiled = graphwright.compile(model, backend=backend)
    with torch.no_grad():
        for seed in (1, 2):
            expected = model(**_inputs(seed)).logits
            torch.testing.assert_close(compiled(**_inputs(seed)).logits, expected, rtol=1e-5, atol=1e-5)
