"""Models from PyTorch libraries the other suites do not use, for `test_new_libraries.py`:
built from tiny configurations with random weights, as each library's README builds them.

| library | models |
| --- | --- |
| x-transformers | a decoder LM with rotary embeddings; a decoder with memory tokens, memory key/values, T5 relative position bias, GLU feed-forwards, residual attention, QK norm, macaron, token shifting and gated values; a continuous-input decoder with ALiBi (its bias cached with `register_buffer` on the first call); a ViT; an encoder-decoder (`XTransformer`, returns its loss); `AutoregressiveWrapper.generate` with a key/value cache |
| vector-quantize-pytorch | `VectorQuantize` (EMA codebook updates in training), `ResidualVQ`, `FSQ`, `LFQ` |
| torchdiffeq | a neural ODE solved by `odeint` with RK4 on a fixed grid and with adaptive Dopri5 |
| torchmetrics | functional accuracy and MSE; `MulticlassAccuracy` as a submodule; a `MetricCollection` of F1 and precision with a `MeanMetric` of the loss |
| entmax | `entmax15`, `sparsemax` and `entmax_bisect` (autograd.Functions with classmethod `forward`/`backward`) |
| zuko | a conditional masked autoregressive flow (`MAF`): `log_prob`; a neural spline flow (`NSF`): `log_prob` and `rsample` |

Each `LibraryModel` names its library (its tests skip where it is not installed), its
`ModuleCase` and the programs it runs (`eval`, `train`).
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from .module_programs import ModuleCase


@dataclasses.dataclass(frozen=True)
class LibraryModel:
    library: str  # the module to import
    case: ModuleCase
    modes: tuple[str, ...] = ("eval", "train")


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _tokens(seed: int, *shape: int, high: int = 32) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


# -- x-transformers ----------------------------------------------------------------------------


def _decoder_lm() -> nn.Module:
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(num_tokens=32, max_seq_len=16,
                              attn_layers=Decoder(dim=16, depth=2, heads=2, rotary_pos_emb=True))


def _decoder_lm_with_options() -> nn.Module:
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(num_tokens=32, max_seq_len=16, num_memory_tokens=2, attn_layers=Decoder(
        dim=16, depth=2, heads=2, attn_num_mem_kv=2, ff_glu=True, rel_pos_bias=True, residual_attn=True,
        use_rmsnorm=True, attn_qk_norm=True, macaron=True, shift_tokens=1, attn_gate_values=True))


def _continuous_alibi() -> nn.Module:
    from x_transformers import ContinuousTransformerWrapper, Decoder

    return ContinuousTransformerWrapper(dim_in=4, dim_out=4, max_seq_len=16,
                                        attn_layers=Decoder(dim=16, depth=1, heads=2, alibi_pos_bias=True))


def _vit() -> nn.Module:
    from x_transformers import Encoder, ViTransformerWrapper

    return ViTransformerWrapper(image_size=8, patch_size=4, num_classes=5,
                                attn_layers=Encoder(dim=16, depth=2, heads=2))


def _encoder_decoder() -> nn.Module:
    from x_transformers import XTransformer

    return XTransformer(dim=16, enc_num_tokens=32, enc_depth=1, enc_heads=2, enc_max_seq_len=16,
                        dec_num_tokens=32, dec_depth=1, dec_heads=2, dec_max_seq_len=16, tie_token_emb=True)


class Generator(nn.Module):
    """x-transformers' sampling loop: `AutoregressiveWrapper.generate` with a key/value cache
    (top-k filtering, `torch.multinomial`, the cache carried between steps)."""

    def __init__(self) -> None:
        super().__init__()
        from x_transformers import AutoregressiveWrapper, Decoder, TransformerWrapper

        self.wrapper = AutoregressiveWrapper(TransformerWrapper(
            num_tokens=32, max_seq_len=16, attn_layers=Decoder(dim=16, depth=1, heads=2)))

    def forward(self, prompts: torch.Tensor) -> torch.Tensor:
        return self.wrapper.generate(prompts, 3, cache_kv=True)


# -- vector-quantize-pytorch -----------------------------------------------------------------


def _vector_quantize() -> nn.Module:
    from vector_quantize_pytorch import VectorQuantize

    return VectorQuantize(dim=8, codebook_dim=4, codebook_size=16, decay=0.8, commitment_weight=1.0)


def _residual_vq() -> nn.Module:
    from vector_quantize_pytorch import ResidualVQ

    return ResidualVQ(dim=8, codebook_dim=4, num_quantizers=2, codebook_size=16)


def _fsq() -> nn.Module:
    from vector_quantize_pytorch import FSQ

    return FSQ(levels=[5, 5, 3], dim=4)


def _lfq() -> nn.Module:
    from vector_quantize_pytorch import LFQ

    return LFQ(dim=8, codebook_size=16, entropy_loss_weight=0.1)


# -- torchdiffeq -------------------------------------------------------------------------------


class ODEFunction(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.net(y)


class NeuralODE(nn.Module):
    """The state at three times from `torchdiffeq.odeint` (`rk4` on a fixed grid of step 0.25,
    or the adaptive `dopri5`, whose step control branches on the error's value)."""

    def __init__(self, method: str) -> None:
        super().__init__()
        self.func = ODEFunction()
        self.method = method
        self.register_buffer("t", torch.linspace(0, 1, 3))

    def forward(self, y0: torch.Tensor) -> torch.Tensor:
        from torchdiffeq import odeint

        options = {"step_size": 0.25} if self.method == "rk4" else None
        return odeint(self.func, y0, self.t, method=self.method, options=options)


# -- torchmetrics ------------------------------------------------------------------------------


class FunctionalMetrics(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, ...]:
        import torchmetrics.functional as metrics

        logits = self.linear(x)
        accuracy = metrics.accuracy(logits, target, task="multiclass", num_classes=5)
        error = metrics.mean_squared_error(logits.softmax(-1), nn.functional.one_hot(target, 5).float())
        return logits, accuracy, error


class MetricSubmodule(nn.Module):
    """A classifier that keeps its running accuracy in a torchmetrics `Metric` submodule (whose
    `forward` updates the metric's state and computes the batch's value)."""

    def __init__(self) -> None:
        super().__init__()
        from torchmetrics.classification import MulticlassAccuracy

        self.linear = nn.Linear(8, 5)
        self.accuracy = MulticlassAccuracy(num_classes=5)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.linear(x)
        return logits, self.accuracy(logits, target)


class MetricCollectionModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        import torchmetrics
        from torchmetrics.classification import MulticlassF1Score, MulticlassPrecision

        self.linear = nn.Linear(8, 5)
        self.metrics = torchmetrics.MetricCollection([MulticlassF1Score(num_classes=5),
                                                      MulticlassPrecision(num_classes=5)])
        self.mean_loss = torchmetrics.MeanMetric()

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits = self.linear(x)
        loss = nn.functional.cross_entropy(logits, target)
        return logits, self.metrics(logits, target), self.mean_loss(loss)


# -- entmax ------------------------------------------------------------------------------------


class SparseAttentionWeights(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from entmax import entmax15, entmax_bisect, sparsemax

        scores = self.linear(x)
        return (entmax15(scores, dim=-1), sparsemax(scores, dim=-1),
                entmax_bisect(scores, alpha=1.3, dim=-1, n_iter=10))


# -- zuko --------------------------------------------------------------------------------------


class ConditionalFlow(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        import zuko

        self.flow = zuko.flows.MAF(features=3, context=2, transforms=2, hidden_features=[8, 8])

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        return self.flow(context).log_prob(x)


class SplineFlow(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        import zuko

        self.flow = zuko.flows.NSF(features=2, transforms=2, hidden_features=[8])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        distribution = self.flow()
        return distribution.log_prob(x), distribution.rsample((3,))


def _classification(seed: int) -> dict[str, torch.Tensor]:
    return {"x": _randn(seed, 6, 8), "target": _tokens(seed, 6, high=5)}


MODELS: dict[str, LibraryModel] = {
    "xt_decoder_rotary": LibraryModel("x_transformers", ModuleCase(_decoder_lm, lambda s: {"x": _tokens(s, 2, 8)})),
    "xt_decoder_options": LibraryModel("x_transformers", ModuleCase(_decoder_lm_with_options,
                                                                    lambda s: {"x": _tokens(s, 2, 8)})),
    "xt_continuous_alibi": LibraryModel("x_transformers", ModuleCase(_continuous_alibi,
                                                                     lambda s: {"x": _randn(s, 2, 6, 4)})),
    "xt_vit": LibraryModel("x_transformers", ModuleCase(_vit, lambda s: {"img": _randn(s, 2, 3, 8, 8)})),
    "xt_encoder_decoder": LibraryModel("x_transformers", ModuleCase(_encoder_decoder, lambda s: {
        "src": _tokens(s, 2, 6), "tgt": _tokens(s + 3, 2, 7), "mask": torch.ones(2, 6, dtype=torch.bool)})),
    "xt_generate": LibraryModel("x_transformers", ModuleCase(Generator, lambda s: {"prompts": _tokens(s, 2, 4)}),
                                modes=("eval",)),
    "vector_quantize": LibraryModel("vector_quantize_pytorch",
                                    ModuleCase(_vector_quantize, lambda s: {"x": _randn(s, 2, 6, 8)})),
    "residual_vq": LibraryModel("vector_quantize_pytorch",
                                ModuleCase(_residual_vq, lambda s: {"x": _randn(s, 2, 6, 8)})),
    "fsq": LibraryModel("vector_quantize_pytorch", ModuleCase(_fsq, lambda s: {"z": _randn(s, 2, 6, 4)})),
    "lfq": LibraryModel("vector_quantize_pytorch", ModuleCase(_lfq, lambda s: {"x": _randn(s, 2, 6, 8)})),
    "ode_rk4": LibraryModel("torchdiffeq", ModuleCase(lambda: NeuralODE("rk4"), lambda s: {"y0": _randn(s, 2, 4)})),
    "ode_dopri5": LibraryModel("torchdiffeq", ModuleCase(lambda: NeuralODE("dopri5"),
                                                         lambda s: {"y0": _randn(s, 2, 4)})),
    "metrics_functional": LibraryModel("torchmetrics", ModuleCase(FunctionalMetrics, _classification)),
    "metric_submodule": LibraryModel("torchmetrics", ModuleCase(MetricSubmodule, _classification)),
    "metric_collection": LibraryModel("torchmetrics", ModuleCase(MetricCollectionModel, _classification)),
    "entmax": LibraryModel("entmax", ModuleCase(SparseAttentionWeights, lambda s: {"x": _randn(s, 6, 8)})),
    "zuko_maf": LibraryModel("zuko", ModuleCase(ConditionalFlow,
                                                lambda s: {"x": _randn(s, 4, 3), "context": _randn(s + 1, 4, 2)})),
    "zuko_nsf": LibraryModel("zuko", ModuleCase(SplineFlow, lambda s: {"x": _randn(s, 4, 2)})),
}
