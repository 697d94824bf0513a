"""Hugging Face `diffusers` models compiled by graphwright: the same answers as eager, and no
more graphs than torch.compile needs on the same program.

Tiny models built from configs with random weights (nothing is downloaded): UNet2DModel
(self-attention blocks), UNet2DConditionModel (cross-attention to text states),
AutoencoderKL (encode to a latent distribution, decode its mode, KL term), DiT and SD3
transformers. Each runs two programs, eval (two `no_grad` calls on fresh inputs) and train
(two steps of forward, a squared-output loss, backward, SGD), eagerly and compiled with
`fullgraph=True` and with the default `fullgraph=False`, under the `eager` and `aot_eager`
backends. Compared: every output, gradient and state_dict entry (1e-5), and the graph count
after each call against torch.compile's (`torch._dynamo.testing.CompileCounter`) on the same
program in the same test.

A denoising loop with a scheduler (`DDPMScheduler`, `EulerDiscreteScheduler`, `DDIMScheduler`)
is compiled together with the model call in `test_denoising_*`.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo.testing

import graphwright

from . import module_programs
from .module_programs import ModuleCase
from .programs import Observation, assert_same, leaves

diffusers = pytest.importorskip("diffusers")
from diffusers.models.attention_processor import AttnProcessor  # noqa: E402


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


KL_WEIGHT = 1e-4


def autoencode(vae: torch.nn.Module, sample: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What a latent-diffusion training script does with its VAE: encode, take the posterior's
    mode scaled into latent space, decode it back; the KL term, weighted down as VAE training
    weighs it (1e-6 for Stable Diffusion's), regularises the posterior."""
    posterior = vae.encode(sample).latent_dist
    latents = posterior.mode() * vae.config.scaling_factor
    reconstruction = vae.decode(latents / vae.config.scaling_factor).sample
    return reconstruction, posterior.kl() * KL_WEIGHT


def _unet_with_classic_attention() -> torch.nn.Module:
    unet = diffusers.UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(8, 16),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=8, attention_head_dim=2, norm_num_groups=4)
    unet.set_attn_processor(AttnProcessor())  # baddbmm scores, the mask made by prepare_attention_mask
    return unet


def _tiled_autoencoder() -> torch.nn.Module:
    vae = diffusers.AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16), latent_channels=4, norm_num_groups=4,
        layers_per_block=1, sample_size=16)
    vae.enable_tiling()  # 16x16 tiles overlapping by a quarter, blended in Python loops
    vae.tile_sample_min_size, vae.tile_latent_min_size, vae.tile_overlap_factor = 16, 8, 0.25
    return vae


def _checkpointed_unet() -> torch.nn.Module:
    unet = diffusers.UNet2DModel(
        sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=4, attention_head_dim=4)
    unet.enable_gradient_checkpointing()  # asks is_torch_version(">=", "1.11.0") in every block
    return unet


CASES = {
    "unet2d": ModuleCase(
        lambda: diffusers.UNet2DModel(
            sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
            down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
            norm_num_groups=4, attention_head_dim=4),
        lambda seed: {"sample": _randn(seed, 2, 3, 8, 8), "timestep": torch.tensor([3, 7])}, slow=True),
    "unet2d_condition": ModuleCase(
        lambda: diffusers.UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(8, 16),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=8, attention_head_dim=2,
            norm_num_groups=4),
        lambda seed: {"sample": _randn(seed, 2, 4, 8, 8), "timestep": torch.tensor([3, 7]),
                      "encoder_hidden_states": _randn(seed + 10, 2, 5, 8)},
        slow=True),
    "autoencoder_kl": ModuleCase(
        lambda: diffusers.AutoencoderKL(
            in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16), latent_channels=4,
            norm_num_groups=4, layers_per_block=1, sample_size=8),
        lambda seed: {"sample": _randn(seed, 2, 3, 8, 8)},
        function=autoencode, slow=True),
    "dit": ModuleCase(
        lambda: diffusers.DiTTransformer2DModel(
            num_attention_heads=2, attention_head_dim=4, in_channels=4, out_channels=4, num_layers=1,
            sample_size=8, patch_size=2, num_embeds_ada_norm=10, norm_num_groups=4),
        lambda seed: {"hidden_states": _randn(seed, 2, 4, 8, 8), "timestep": torch.tensor([3, 7]),
                      "class_labels": torch.tensor([1, seed])}),
    "sd3": ModuleCase(
        lambda: diffusers.SD3Transformer2DModel(
            sample_size=8, patch_size=2, in_channels=4, num_layers=1, attention_head_dim=4, num_attention_heads=2,
            joint_attention_dim=8, caption_projection_dim=8, pooled_projection_dim=8, out_channels=4,
            pos_embed_max_size=8),
        lambda seed: {"hidden_states": _randn(seed, 2, 4, 8, 8), "timestep": torch.tensor([3, 7]),
                      "encoder_hidden_states": _randn(seed + 10, 2, 5, 8),
                      "pooled_projections": _randn(seed + 20, 2, 8)},
        slow=True),
    "unet_sdxl": ModuleCase(
        lambda: diffusers.UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(8, 16),
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            cross_attention_dim=8, attention_head_dim=2, norm_num_groups=4, addition_embed_type="text_time",
            addition_time_embed_dim=4, projection_class_embeddings_input_dim=8 + 6 * 4,
            transformer_layers_per_block=(1, 2), use_linear_projection=True),
        lambda seed: {"sample": _randn(seed, 2, 4, 8, 8), "timestep": torch.tensor(5),
                      "encoder_hidden_states": _randn(seed + 1, 2, 3, 8),
                      "added_cond_kwargs": {"text_embeds": _randn(seed + 2, 2, 8), "time_ids": _randn(seed + 3, 2, 6)}},
        slow=True),
    "unet_attention_mask": ModuleCase(
        _unet_with_classic_attention,
        lambda seed: {"sample": _randn(seed, 2, 4, 8, 8), "timestep": 3, "encoder_hidden_states": _randn(seed + 1, 2, 3, 8),
                      "encoder_attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0]]),
                      "cross_attention_kwargs": {"scale": 0.5}},
        slow=True),
    "controlnet": ModuleCase(
        lambda: diffusers.ControlNetModel(
            in_channels=4, conditioning_channels=3, layers_per_block=1, block_out_channels=(8, 16),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), cross_attention_dim=8, attention_head_dim=2,
            norm_num_groups=4, conditioning_embedding_out_channels=(4, 8)),
        lambda seed: {"sample": _randn(seed, 2, 4, 8, 8), "timestep": torch.tensor([1, 2]),
                      "encoder_hidden_states": _randn(seed + 1, 2, 3, 8), "controlnet_cond": _randn(seed + 2, 2, 3, 16, 16)},
        slow=True),
    "flux": ModuleCase(
        lambda: diffusers.FluxTransformer2DModel(
            patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8,
            num_attention_heads=2, joint_attention_dim=8, pooled_projection_dim=8, axes_dims_rope=(2, 2, 4)),
        lambda seed: {"hidden_states": _randn(seed, 2, 16, 4), "encoder_hidden_states": _randn(seed + 1, 2, 3, 8),
                      "pooled_projections": _randn(seed + 2, 2, 8), "timestep": torch.tensor([0.5, 0.25]),
                      "img_ids": torch.zeros(16, 3), "txt_ids": torch.zeros(3, 3)},
        slow=True),
    "pixart": ModuleCase(
        lambda: diffusers.PixArtTransformer2DModel(
            sample_size=8, num_layers=1, attention_head_dim=4, num_attention_heads=2, in_channels=4, out_channels=8,
            cross_attention_dim=8, caption_channels=8, norm_num_groups=4),
        lambda seed: {"hidden_states": _randn(seed, 2, 4, 8, 8), "encoder_hidden_states": _randn(seed + 1, 2, 3, 8),
                      "timestep": torch.tensor([3, 4]), "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}},
        slow=True),
    "autoencoder_tiled": ModuleCase(
        _tiled_autoencoder, lambda seed: {"sample": _randn(seed, 1, 3, 32, 32), "sample_posterior": False}, slow=True),
    "unet_gradient_checkpointing": ModuleCase(
        _checkpointed_unet, lambda seed: {"sample": _randn(seed, 2, 3, 8, 8), "timestep": torch.tensor([3, 7])},
        slow=True),
}

# Programs torch.compile(fullgraph=True) cannot compile, and why; graphwright compiles them in one graph.
TORCH_CANNOT = {
    "unet_attention_mask": "a `logger.warning` in diffusers' PEFT scale wrapper (`cross_attention_kwargs` with "
                           "`scale` and no PEFT backend); graphwright replays the call after the graph",
}

def built(name: str) -> torch.nn.Module:
    return module_programs.built(CASES[name])


def run(name: str, mode: str, compile_fn: Callable[[Any], Any] | None = None,
        counter: Any = None) -> tuple[list[Observation], list[int]]:
    return module_programs.run(CASES[name], built(name), mode, compile_fn, counter)


# Models the `aot_eager` backend cannot run, in graphwright and torch.compile alike: why.
AOT_FAILURES = {
    "autoencoder_tiled": "batch-1 tiles: the attention block's output has, in its size-1 batch dimension, a "
                         "stride the fake tensor does not predict, so the traced `group_norm` picks channels-last "
                         "and skips the `.contiguous()` copy that `native_group_norm` needs at run time ('Expected "
                         "X.is_contiguous(memory_format)'); torch.compile(backend='aot_eager') fails the same way",
}


@pytest.mark.parametrize(("name", "mode", "fullgraph", "backend"),
                         module_programs.matrix(CASES, AOT_FAILURES))
def test_compiled_diffusers_model_matches_eager(name: str, mode: str, fullgraph: bool, backend: str) -> None:
    expected, _ = run(name, mode)
    counter = graphwright.testing.CompileCounterWithBackend(backend)
    observed, counts = run(name, mode, lambda f: graphwright.compile(f, fullgraph=fullgraph, backend=counter),
                           counter)
    assert_same(observed, expected)
    theirs = torch._dynamo.testing.CompileCounter()
    compile_theirs = lambda f: torch.compile(f, fullgraph=fullgraph, backend=theirs)  # noqa: E731
    if fullgraph and name in TORCH_CANNOT:
        with pytest.raises(torch._dynamo.exc.Unsupported):
            run(name, mode, compile_theirs, theirs)
        assert counts == [1, 1]
        return
    _, reference = run(name, mode, compile_theirs, theirs)
    assert counts == reference, f"graphs after each call: graphwright {counts}, torch.compile {reference}"


# -- sampling: a scheduler's step compiled together with the model call ------------------------

SCHEDULERS = ("DDPMScheduler", "EulerDiscreteScheduler", "DDIMScheduler")


def denoise(unet: torch.nn.Module, scheduler: Any, latents: torch.Tensor) -> torch.Tensor:
    """A sampling loop as diffusers' pipelines write it, compiled whole."""
    for t in scheduler.timesteps:
        model_input = scheduler.scale_model_input(latents, t)
        noise_prediction = unet(model_input, t).sample
        latents = scheduler.step(noise_prediction, t, latents).prev_sample
    return latents


def denoise_step(unet: torch.nn.Module, scheduler: Any, latents: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """One step of that loop, compiled and called by a Python loop."""
    model_input = scheduler.scale_model_input(latents, t)
    noise_prediction = unet(model_input, t).sample
    return scheduler.step(noise_prediction, t, latents).prev_sample


def sample(kind: str, loop: str, compile_fn: Callable[[Any], Any] | None = None,
           counter: Any = None) -> tuple[list[tuple[str, Any]], list[int]]:
    """Three sampling steps from fixed noise (DDPM adds fresh noise each step: seeded); what
    was observed (the latents after each step, the scheduler's state at the end) and the
    graph count after each compiled call."""
    unet = copy.deepcopy(built("unet2d")).eval()
    scheduler = getattr(diffusers, kind)(num_train_timesteps=50)
    scheduler.set_timesteps(3)
    latents = _randn(0, 1, 3, 8, 8)
    compile_fn = compile_fn or (lambda f: f)
    torch.manual_seed(5)
    observed, counts = [], []
    with torch.no_grad():
        if loop == "compiled":
            latents = compile_fn(denoise)(unet, scheduler, latents)
            observed.append(("latents", latents))
            counts.append(counter.frame_count if counter else 0)
        else:
            step = compile_fn(denoise_step)
            for index, t in enumerate(scheduler.timesteps):
                latents = step(unet, scheduler, latents, t)
                observed.append((f"latents after step {index}", latents))
                counts.append(counter.frame_count if counter else 0)
    observed += [(f"scheduler.{name}", value) for name, value in leaves(vars(scheduler), "state")]
    return observed, counts


# Graphs after the last call (graphwright, torch.compile), fullgraph=False. Both break at the
# schedulers' data-dependent branches, `.item()` and `nonzero`. torch.compile traces indexing by
# a 0-d timestep tensor (`alphas_cumprod[t]` in DDPM and DDIM) and compiles those graphs again
# for every timestep; graphwright breaks there (GB003: `getitem` needs the index's value) and
# its graphs serve every step. Euler's step index is a symbolic int from its second value on.
SAMPLER_GRAPHS = {"DDPMScheduler": (13, 18), "EulerDiscreteScheduler": (12, 12), "DDIMScheduler": (9, 14)}


def _sampler_cases() -> list:
    return [pytest.param(kind, loop, marks=[pytest.mark.slow], id=f"{kind}-{loop}-loop")
            for kind in SCHEDULERS for loop in ("compiled", "python")]


@pytest.mark.parametrize(("kind", "loop"), _sampler_cases())
def test_denoising_loop_matches_eager_with_no_more_graphs_than_torch_compile(kind: str, loop: str) -> None:
    expected, _ = sample(kind, loop)
    counter = graphwright.testing.CompileCounter()
    observed, counts = sample(kind, loop, lambda f: graphwright.compile(f, backend=counter), counter)
    assert [path for path, _ in observed] == [path for path, _ in expected]
    for (path, value), (_, wanted) in zip(observed, expected):
        if isinstance(wanted, torch.Tensor):
            torch.testing.assert_close(value, wanted, atol=1e-5, rtol=1e-5, msg=lambda text: f"{path}: {text}")
        else:
            assert value == wanted, path
    theirs = torch._dynamo.testing.CompileCounter()
    _, reference = sample(kind, loop, lambda f: torch.compile(f, backend=theirs), theirs)
    assert (counts[-1], reference[-1]) == SAMPLER_GRAPHS[kind]


def test_a_denoising_step_under_fullgraph_stops_where_torch_compile_does() -> None:
    """Euler's first step finds its index with `(timesteps == t).nonzero()` and branches on
    `len(indices) > 1`: data-dependent in both compilers."""
    with pytest.raises(graphwright.Unsupported, match="Data-dependent branching") as ours:
        sample("EulerDiscreteScheduler", "python", lambda f: graphwright.compile(f, fullgraph=True))
    assert ours.value.gb_id == "GB002" and "u0 > 1" in str(ours.value)
    with pytest.raises(torch._dynamo.exc.UserError, match="u0 > 1"):
        sample("EulerDiscreteScheduler", "python", lambda f: torch.compile(f, fullgraph=True))
