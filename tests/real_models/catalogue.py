"""The Hugging Face models of the real-model suite: tiny configs, random weights, their inputs.

Each `RealModel` builds one model from a config small enough for CPU tests (2
layers, hidden size 32, sequences of 8 tokens, 16x16 images) and makes the
inputs of an inference call (`eval_inputs`) and of a training step
(`train_inputs`, labels included). Nothing is downloaded. Dropout
probabilities are 0 so that eager and compiled runs draw no random numbers
and can be compared exactly; everything else keeps the library's defaults.

`transformers` must be imported after `HF_HUB_OFFLINE=1` is set (conftest.py).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
import transformers

VOCAB = 100
BATCH = 2
SEQ = 8


@dataclasses.dataclass(frozen=True)
class RealModel:
    """`build()` makes the model (call under a fixed seed); `eval_inputs(seed)` and
    `train_inputs(seed)` make the keyword arguments of one call; `kv_cache`: the model returns
    a key/value cache and is called with `use_cache=True` in eval."""

    name: str
    build: Callable[[], torch.nn.Module]
    eval_inputs: Callable[[int], dict[str, Any]]
    train_inputs: Callable[[int], dict[str, Any]]
    kv_cache: bool = False


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _tokens(seed: int, length: int = SEQ) -> torch.Tensor:
    return torch.randint(0, VOCAB, (BATCH, length), generator=_generator(seed))


def _padded_mask(length: int = SEQ) -> torch.Tensor:
    """Attention mask with the last two positions of the second sequence padded."""
    mask = torch.ones(BATCH, length, dtype=torch.long)
    mask[1, -2:] = 0
    return mask


def _pixels(seed: int, size: int = 16) -> torch.Tensor:
    return torch.randn(BATCH, 3, size, size, generator=_generator(seed))


def _class_labels(seed: int, classes: int = 3) -> torch.Tensor:
    return torch.randint(0, classes, (BATCH,), generator=_generator(seed + 1000))


def _causal_lm(name: str, build: Callable[[], torch.nn.Module]) -> RealModel:
    def train_inputs(seed: int) -> dict[str, Any]:
        tokens = _tokens(seed)
        return {"input_ids": tokens, "labels": tokens}

    return RealModel(name, build, lambda seed: {"input_ids": _tokens(seed), "use_cache": True},
                     train_inputs, kv_cache=True)


def _sequence_classifier(name: str, build: Callable[[], torch.nn.Module]) -> RealModel:
    def eval_inputs(seed: int) -> dict[str, Any]:
        return {"input_ids": _tokens(seed), "attention_mask": _padded_mask()}

    def train_inputs(seed: int) -> dict[str, Any]:
        return {**eval_inputs(seed), "labels": _class_labels(seed)}

    return RealModel(name, build, eval_inputs, train_inputs)


def _image_classifier(name: str, build: Callable[[], torch.nn.Module], size: int) -> RealModel:
    return RealModel(name, build, lambda seed: {"pixel_values": _pixels(seed, size)},
                     lambda seed: {"pixel_values": _pixels(seed, size), "labels": _class_labels(seed)})


def _gpt2() -> torch.nn.Module:
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))


def _llama() -> torch.nn.Module:
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        bos_token_id=0, eos_token_id=0, pad_token_id=0))


def _qwen2() -> torch.nn.Module:
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        bos_token_id=0, eos_token_id=0, pad_token_id=0))


def _bert() -> torch.nn.Module:
    return transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, num_labels=3))


def _distilbert() -> torch.nn.Module:
    return transformers.DistilBertForSequenceClassification(transformers.DistilBertConfig(
        vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=32,
        dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0, num_labels=3))


def _t5() -> torch.nn.Module:
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
        relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.0,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))


def _t5_eval(seed: int) -> dict[str, Any]:
    return {"input_ids": _tokens(seed), "decoder_input_ids": _tokens(seed + 500, 5), "use_cache": True}


def _t5_train(seed: int) -> dict[str, Any]:
    return {"input_ids": _tokens(seed), "labels": _tokens(seed + 500, 5)}


def _vit() -> torch.nn.Module:
    return transformers.ViTForImageClassification(transformers.ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        image_size=16, patch_size=8, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        num_labels=3))


def _resnet() -> torch.nn.Module:
    return transformers.ResNetForImageClassification(transformers.ResNetConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=3))


def _clip() -> torch.nn.Module:
    text = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "max_position_embeddings": 32}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2, "image_size": 16, "patch_size": 8}
    return transformers.CLIPModel(transformers.CLIPConfig(text_config=text, vision_config=vision,
                                                          projection_dim=16))


def _clip_eval(seed: int) -> dict[str, Any]:
    return {"input_ids": _tokens(seed), "attention_mask": _padded_mask(), "pixel_values": _pixels(seed)}


def _clip_train(seed: int) -> dict[str, Any]:
    return {**_clip_eval(seed), "return_loss": True}


def _decoder_only(config_class: type, model_class: type, **settings: Any) -> Callable[[], torch.nn.Module]:
    """A decoder-only language model (Llama's shape) with 2 layers of width 32."""
    def build() -> torch.nn.Module:
        return model_class(config_class(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=32, bos_token_id=0, eos_token_id=0,
            pad_token_id=0, **settings))
    return build


def _bart() -> torch.nn.Module:
    return transformers.BartForConditionalGeneration(transformers.BartConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
        dropout=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
        forced_eos_token_id=2))


def _opt() -> torch.nn.Module:
    return transformers.OPTForCausalLM(transformers.OPTConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=2,
        max_position_embeddings=32, word_embed_proj_dim=32, dropout=0.0, pad_token_id=1,
        bos_token_id=2, eos_token_id=2))


def _gpt_neox() -> torch.nn.Module:
    return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=32, bos_token_id=0, eos_token_id=0))


def _roberta() -> torch.nn.Module:
    return transformers.RobertaForSequenceClassification(transformers.RobertaConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=40, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, num_labels=3))


def _deberta() -> torch.nn.Module:
    return transformers.DebertaV2ForSequenceClassification(transformers.DebertaV2Config(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, relative_attention=True, position_buckets=8,
        pos_att_type=["p2c", "c2p"], pooler_dropout=0.0, num_labels=3))


def _albert() -> torch.nn.Module:
    return transformers.AlbertForSequenceClassification(transformers.AlbertConfig(
        vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, classifier_dropout_prob=0.0, num_labels=3))


def _wav2vec2() -> torch.nn.Module:
    return transformers.Wav2Vec2ForSequenceClassification(transformers.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2, hidden_dropout=0.0, activation_dropout=0.0,
        attention_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0,
        apply_spec_augment=False, classifier_proj_size=16, num_labels=3))


def _audio(seed: int) -> torch.Tensor:
    return torch.randn(BATCH, 400, generator=_generator(seed))


def _seq2seq_eval(seed: int) -> dict[str, Any]:
    return {"input_ids": _tokens(seed), "decoder_input_ids": _tokens(seed + 500, 5), "use_cache": True}


def _seq2seq_train(seed: int) -> dict[str, Any]:
    return {"input_ids": _tokens(seed), "labels": _tokens(seed + 500, 5)}


MODELS: dict[str, RealModel] = {model.name: model for model in [
    _causal_lm("gpt2", _gpt2),
    _sequence_classifier("bert", _bert),
    _causal_lm("llama", _llama),
    RealModel("t5", _t5, _t5_eval, _t5_train, kv_cache=True),
    _image_classifier("vit", _vit, 16),
    _image_classifier("resnet", _resnet, 32),
    _causal_lm("qwen2", _qwen2),
    _sequence_classifier("distilbert", _distilbert),
    RealModel("clip", _clip, _clip_eval, _clip_train),
    RealModel("bart", _bart, _seq2seq_eval, _seq2seq_train, kv_cache=True),
    _causal_lm("mistral", _decoder_only(transformers.MistralConfig, transformers.MistralForCausalLM,
                                        num_key_value_heads=2, sliding_window=4)),
    _causal_lm("mixtral", _decoder_only(transformers.MixtralConfig, transformers.MixtralForCausalLM,
                                        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)),
    _causal_lm("opt", _opt),
    _causal_lm("gpt_neox", _gpt_neox),
    _causal_lm("phi", _decoder_only(transformers.PhiConfig, transformers.PhiForCausalLM)),
    _causal_lm("gemma", _decoder_only(transformers.GemmaConfig, transformers.GemmaForCausalLM,
                                      num_key_value_heads=2, head_dim=8)),
    _sequence_classifier("roberta", _roberta),
    _sequence_classifier("deberta", _deberta),
    _sequence_classifier("albert", _albert),
    RealModel("wav2vec2", _wav2vec2, lambda seed: {"input_values": _audio(seed)},
              lambda seed: {"input_values": _audio(seed), "labels": _class_labels(seed)}),
]}
