"""Capture time of Hugging Face models: graphwright.compile vs torch.compile(backend="eager").

`strict/hf-<model>/capture` (cold, fresh process, imports excluded): the first
compiled call of a `transformers==5.24.0` model (random weights, 4 layers,
hidden size 64, batch 2, 32 tokens; eval, `no_grad`, `use_cache=False`, both
sides `fullgraph=True`) minus one eager call. Target (issue 9): at most 0.3x
PyTorch's. While graphwright cannot capture a model, its row is skipped with
the first failure (tests/real_models/README.md keeps the full table).

`strict/hf-<model>/call` (warm): one compiled call of the same model, batch 1, after the
first, best of 5 batches of 50 calls; `strict/hf-<model>/overhead` the same minus an eager
call (guards and wrapper on a cache hit). Target (issue 17): at most 1.0x PyTorch's.
"""
from __future__ import annotations

import os
import re

import torch

from .harness import Skip, workload
from .timing import per_call, timed

SEQ = 32
_CALLS = 50


def _gpt2():
    import transformers

    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=1000, n_positions=64, n_embd=64, n_layer=4, n_head=4, bos_token_id=0, eos_token_id=0))


def _bert():
    import transformers

    return transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=1000, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=64))


def _llama():
    import transformers

    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=0, eos_token_id=0, pad_token_id=0))


HF_MODELS = {"gpt2": _gpt2, "bert": _bert, "llama": _llama}


def _first_failure(error: BaseException) -> str:
    """The error's title and explanation, and the innermost user line it names."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(lines[:2]).replace("Explanation: ", "- ")
    where = re.findall(r'File "[^"]*site-packages/([^"]+)", line (\d+)', str(error))
    return f"{text} ({where[-1][0]}:{where[-1][1]})" if where else text


def _model_and_inputs(name: str, build, batch: int) -> tuple[torch.nn.Module, dict]:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    torch.manual_seed(0)
    model = build().eval()
    inputs = {"input_ids": torch.randint(0, 1000, (batch, SEQ)), "use_cache": False}
    if name == "bert":
        del inputs["use_cache"]
    return model, inputs


def _compile(side: str, model: torch.nn.Module) -> torch.nn.Module:
    if side == "graphwright":
        import graphwright

        return graphwright.compile(model, backend="eager", fullgraph=True)
    return torch.compile(model, backend="eager", fullgraph=True)


def _register(name: str, build) -> None:
    def capture(side: str):
        model, inputs = _model_and_inputs(name, build, batch=2)
        with torch.no_grad():
            model(**inputs)
            eager_time = min(timed(lambda: model(**inputs)) for _ in range(3))
        compiled = _compile(side, model)

        def sample() -> float:
            with torch.no_grad():
                try:
                    return timed(lambda: compiled(**inputs)) - eager_time
                except Exception as error:
                    if side == "graphwright":
                        raise Skip(f"graphwright cannot capture it yet: {_first_failure(error)}") from error
                    raise
        return sample

    def warm_calls(side: str, minus_eager: bool):
        model, inputs = _model_and_inputs(name, build, batch=1)
        compiled = _compile(side, model)
        with torch.no_grad():
            compiled(**inputs)

        def sample() -> float:
            # interleaved, best of several: the difference is small next to timing noise
            eager, fast = [], []
            with torch.no_grad():
                for _ in range(5):
                    if minus_eager:
                        eager.append(per_call(lambda: model(**inputs), _CALLS))
                    fast.append(per_call(lambda: compiled(**inputs), _CALLS))
            return min(fast) - (min(eager) if minus_eager else 0.0)
        return sample

    def call(side: str):
        return warm_calls(side, minus_eager=False)

    def overhead(side: str):
        return warm_calls(side, minus_eager=True)

    capture.__doc__ = f"Hugging Face {name}: first compiled call minus an eager call (capture time)"
    call.__doc__ = f"Hugging Face {name}: one warm compiled call, batch 1"
    overhead.__doc__ = f"Hugging Face {name}: warm compiled call minus eager call (guards + wrapper)"
    workload(f"strict/hf-{name}/capture", cold=True)(capture)
    workload(f"strict/hf-{name}/call")(call)
    workload(f"strict/hf-{name}/overhead")(overhead)


for _name, _build in HF_MODELS.items():
    _register(_name, _build)
