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
    a key/value cache and is called with `use_cache=True` in eval; `slow`: its cases run only
    with the slow tests (the families added for breadth, `BREADTH`)."""

    name: str
    build: Callable[[], torch.nn.Module]
    eval_inputs: Callable[[int], dict[str, Any]]
    train_inputs: Callable[[int], dict[str, Any]]
    kv_cache: bool = False
    slow: bool = False


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


def _built(model_class: str, config_class: str, **settings: Any) -> Callable[[], torch.nn.Module]:
    """`transformers.<model_class>(transformers.<config_class>(**settings))`."""
    return lambda: getattr(transformers, model_class)(getattr(transformers, config_class)(**settings))


_DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=32, bos_token_id=0, eos_token_id=0, pad_token_id=0)
_GPT_STYLE = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=32, resid_pdrop=0.0,
                  embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
_ENCODER = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                max_position_embeddings=40, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3)
_SEQ2SEQ = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
                dropout=0.0)
_VISION = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=16,
               patch_size=8, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3)


def _mel_features(seed: int) -> torch.Tensor:
    return torch.randn(BATCH, 16, 60, generator=_generator(seed))


def _seq2seq(name: str, build: Callable[[], torch.nn.Module]) -> RealModel:
    return RealModel(name, build, _seq2seq_eval, _seq2seq_train, kv_cache=True)


# Families added for breadth, as a new user would try them; their cases are slow.
BREADTH: list[RealModel] = [
    _causal_lm("falcon", _built("FalconForCausalLM", "FalconConfig", vocab_size=VOCAB, hidden_size=32,
                                num_hidden_layers=2, num_attention_heads=4, bos_token_id=0, eos_token_id=0,
                                hidden_dropout=0.0, attention_dropout=0.0)),
    _causal_lm("bloom", _built("BloomForCausalLM", "BloomConfig", vocab_size=VOCAB, hidden_size=32, n_layer=2,
                               n_head=4, bos_token_id=0, eos_token_id=0, pad_token_id=0, hidden_dropout=0.0,
                               attention_dropout=0.0)),
    _causal_lm("gptj", _built("GPTJForCausalLM", "GPTJConfig", **_GPT_STYLE, rotary_dim=4)),
    _causal_lm("gpt_neo", _built("GPTNeoForCausalLM", "GPTNeoConfig", vocab_size=VOCAB, hidden_size=32, num_layers=2,
                                 num_heads=4, attention_types=[[["global", "local"], 1]], window_size=4,
                                 max_position_embeddings=32, resid_dropout=0.0, embed_dropout=0.0,
                                 attention_dropout=0.0, bos_token_id=0, eos_token_id=0)),
    _causal_lm("gpt_bigcode", _built("GPTBigCodeForCausalLM", "GPTBigCodeConfig", **_GPT_STYLE)),
    _causal_lm("codegen", _built("CodeGenForCausalLM", "CodeGenConfig", **_GPT_STYLE, rotary_dim=4, n_ctx=32)),
    _causal_lm("mpt", _built("MptForCausalLM", "MptConfig", vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=4,
                             max_seq_len=32, resid_pdrop=0.0, emb_pdrop=0.0, bos_token_id=0, eos_token_id=0)),
    # SmolLM: Llama's architecture with one key/value head and tied embeddings
    _causal_lm("smollm", _built("LlamaForCausalLM", "LlamaConfig", **_DECODER, num_key_value_heads=1,
                                tie_word_embeddings=True)),
    _causal_lm("qwen3", _built("Qwen3ForCausalLM", "Qwen3Config", **_DECODER, num_key_value_heads=2, head_dim=8)),
    _causal_lm("qwen2_moe", _built("Qwen2MoeForCausalLM", "Qwen2MoeConfig", **_DECODER, num_key_value_heads=2,
                                   num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                                   shared_expert_intermediate_size=16)),
    _causal_lm("phi3", _built("Phi3ForCausalLM", "Phi3Config", **_DECODER, num_key_value_heads=2)),
    _causal_lm("stablelm", _built("StableLmForCausalLM", "StableLmConfig", **_DECODER, num_key_value_heads=2)),
    _causal_lm("starcoder2", _built("Starcoder2ForCausalLM", "Starcoder2Config", **_DECODER, num_key_value_heads=2,
                                    residual_dropout=0.0, embedding_dropout=0.0)),
    _causal_lm("granite", _built("GraniteForCausalLM", "GraniteConfig", **_DECODER, num_key_value_heads=2)),
    _causal_lm("olmo", _built("OlmoForCausalLM", "OlmoConfig", **_DECODER, num_key_value_heads=2)),
    _causal_lm("olmoe", _built("OlmoeForCausalLM", "OlmoeConfig", **_DECODER, num_key_value_heads=2, num_experts=4,
                               num_experts_per_tok=2)),
    _causal_lm("cohere", _built("CohereForCausalLM", "CohereConfig", **_DECODER, num_key_value_heads=2)),
    _causal_lm("gemma2", _built("Gemma2ForCausalLM", "Gemma2Config", **_DECODER, num_key_value_heads=2, head_dim=8,
                                sliding_window=4)),
    _causal_lm("gemma3", _built("Gemma3ForCausalLM", "Gemma3TextConfig", **_DECODER, num_key_value_heads=2,
                                head_dim=8, sliding_window=4)),
    _sequence_classifier("mobilebert", _built("MobileBertForSequenceClassification", "MobileBertConfig",
                                              **{**_ENCODER, "max_position_embeddings": 32}, embedding_size=16,
                                              intra_bottleneck_size=16, true_hidden_size=16,
                                              num_feedforward_networks=2)),
    _sequence_classifier("electra", _built("ElectraForSequenceClassification", "ElectraConfig", **_ENCODER,
                                           embedding_size=16)),
    _sequence_classifier("xlm_roberta", _built("XLMRobertaForSequenceClassification", "XLMRobertaConfig",
                                               **_ENCODER)),
    _sequence_classifier("xlnet", _built("XLNetForSequenceClassification", "XLNetConfig", vocab_size=VOCAB,
                                         d_model=32, n_layer=2, n_head=2, d_inner=64, dropout=0.0,
                                         summary_last_dropout=0.0, num_labels=3)),
    _sequence_classifier("funnel", _built("FunnelForSequenceClassification", "FunnelConfig", vocab_size=VOCAB,
                                          block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64,
                                          hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                                          num_labels=3)),
    _seq2seq("pegasus", _built("PegasusForConditionalGeneration", "PegasusConfig", **_SEQ2SEQ, pad_token_id=0,
                               eos_token_id=1, decoder_start_token_id=0)),
    _seq2seq("marian", _built("MarianMTModel", "MarianConfig", **_SEQ2SEQ, pad_token_id=VOCAB - 1, eos_token_id=0,
                              decoder_start_token_id=VOCAB - 1)),
    _seq2seq("mbart", _built("MBartForConditionalGeneration", "MBartConfig", **_SEQ2SEQ, pad_token_id=1,
                             bos_token_id=0, eos_token_id=2)),
    # Whisper's encoder under an audio classifier, on 16 mel bins of 60 frames
    RealModel("whisper", _built("WhisperForAudioClassification", "WhisperConfig", vocab_size=VOCAB, d_model=32,
                                encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                                decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, dropout=0.0,
                                num_mel_bins=16, max_source_positions=30, max_target_positions=32, num_labels=3,
                                classifier_proj_size=16),
              lambda seed: {"input_features": _mel_features(seed)},
              lambda seed: {"input_features": _mel_features(seed), "labels": _class_labels(seed)}),
    _image_classifier("swin", _built("SwinForImageClassification", "SwinConfig", image_size=16, patch_size=2,
                                     embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0,
                                     num_labels=3), 16),
    _image_classifier("convnext", _built("ConvNextForImageClassification", "ConvNextConfig", num_stages=2,
                                         hidden_sizes=[8, 16], depths=[1, 1], drop_path_rate=0.0, num_labels=3), 32),
    _image_classifier("deit", _built("DeiTForImageClassification", "DeiTConfig", **_VISION), 16),
    _image_classifier("beit", _built("BeitForImageClassification", "BeitConfig", **_VISION, drop_path_rate=0.0,
                                     use_relative_position_bias=True), 16),
    _image_classifier("segformer", _built("SegformerForImageClassification", "SegformerConfig",
                                          num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
                                          patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
                                          mlp_ratios=[2, 2], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                          classifier_dropout_prob=0.0, drop_path_rate=0.0, num_labels=3), 32),
]


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
    *(dataclasses.replace(model, slow=True) for model in BREADTH),
]}
