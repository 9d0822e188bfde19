"""The synthetic SD1.5 set goes through ComfyUI 0.3.75's real loaders, in process, on CPU.

Checkpoint -> CLIP text encode -> sampling with a ControlNet applied -> VAE decode: if these
fail, workflow tests built on devtools/synthetic_sd.py test the wrong thing (a checkpoint detected
as another model, a CLIP of uninitialised memory, a ControlNet whose signal never reaches the
UNet).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

import pytest
import torch

from devtools import synthetic_sd as sds
from devtools.inprocess import setup_comfy

setup_comfy()

import comfy.controlnet
import comfy.ldm.models.autoencoder
import comfy.sample
import comfy.sd
import comfy.supported_models
import comfy.utils

LATENT = 32                         # 256x256 pixels
CH = sds.CH


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return sds.build_sd_models(tmp_path_factory.mktemp("sd-models"))


@pytest.fixture(scope="module")
def checkpoint(files):
    model, clip, vae, clipvision = comfy.sd.load_checkpoint_guess_config(
        str(files["checkpoint"]), output_vae=True, output_clip=True, embedding_directory=None)
    assert clipvision is None
    return model, clip, vae


@pytest.fixture(scope="module")
def control(files):
    return comfy.controlnet.load_controlnet(str(files["controlnet"]))


@pytest.fixture(scope="module")
def conds(checkpoint):
    clip = checkpoint[1]
    return {text: clip.encode_from_tokens(clip.tokenize(text), return_pooled=True)
            for text in ("a portrait photo of a face", "")}


def file_keys(path: Path, prefix: str = "") -> dict[str, tuple]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return {k[len(prefix):]: tuple(f.get_slice(k).get_shape()) for k in f.keys() if k.startswith(prefix)}  # noqa: SIM118 (safe_open has no __iter__)


def module_keys(module: torch.nn.Module) -> dict[str, tuple]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def test_files_have_comfyui_folder_names_and_come_from_the_cache(files, tmp_path):
    import folder_paths  # ComfyUI's, the one the server resolves CheckpointLoaderSimple etc. with

    for role, rel in sds.SD_FILES.items():
        assert files[role].is_file() and files[role].as_posix().endswith(rel)
        folder = rel.split("/")[0]
        assert folder in folder_paths.folder_names_and_paths, folder
        assert any(Path(p).name == folder for p in folder_paths.folder_names_and_paths[folder][0])
        assert Path(rel).suffix in folder_paths.folder_names_and_paths[folder][1]
    cache = sds.ensure_cache()
    again = sds.build_sd_models(tmp_path)  # second call: links or copies only
    for role, rel in sds.SD_FILES.items():
        a, b = again[role].stat(), (cache / rel).stat()
        assert a.st_ino == b.st_ino or a.st_size == b.st_size
    assert files["checkpoint"].stat().st_size < 300e6 and files["vae"].stat().st_size < 100e6


def test_checkpoint_is_detected_as_sd15_with_every_key_used(checkpoint, files):
    model, clip, vae = checkpoint
    cfg = model.model.model_config
    assert type(cfg) is comfy.supported_models.SD15  # not a subclass (instructpix2pix, ...)
    for k, v in sds.UNET_CONFIG.items():
        assert cfg.unet_config[k] == v, k
    unet = model.model.diffusion_model
    assert len(unet.input_blocks) == 4 and len(unet.output_blocks) == 4
    # the file holds exactly what ComfyUI's modules have (nothing left uninitialised), shapes too
    assert file_keys(files["checkpoint"], "model.diffusion_model.") == module_keys(unet)
    assert file_keys(files["checkpoint"], "first_stage_model.") == module_keys(vae.first_stage_model)
    clip_keys = module_keys(clip.cond_stage_model.clip_l.transformer)
    # unused by SD1.x (no projected pooled), absent from real files too
    assert clip_keys.pop("text_projection.weight") == (768, 768)
    assert file_keys(files["checkpoint"], "cond_stage_model.transformer.") == clip_keys
    assert isinstance(vae.first_stage_model, comfy.ldm.models.autoencoder.AutoencoderKL)


def test_clip_encodes_prompts_to_finite_distinct_conditioning(conds):
    (c1, p1), (c0, p0) = conds.values()
    assert c1.shape == c0.shape == (1, 77, 768) and p1.shape == (1, 768)
    for t in (c1, p1, c0, p0):
        assert torch.isfinite(t).all()
    assert 0.5 < float(c1.std()) < 2
    assert float((c1 - c0).abs().mean()) > 0.05


def decode_checks(vae, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    a, b = (torch.randn(1, 4, 8, 8, generator=g) * 5 for _ in range(2))
    with torch.no_grad():
        da, db = vae.decode(a), vae.decode(b)
    assert da.shape == (1, 64, 64, 3)
    assert torch.isfinite(da).all() and torch.isfinite(db).all()
    assert float(da.std()) > 0.05                     # not constant
    assert float((da - db).abs().mean()) > 0.05       # follows the latent
    return da


def corr(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.flatten() - a.mean(), b.flatten() - b.mean()
    return float(a @ b / (a.norm() * b.norm()))


def test_vae_file_loads_as_sd_vae_and_roughly_reconstructs(files, checkpoint):
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(str(files["vae"])))   # what VAELoader does
    assert isinstance(vae.first_stage_model, comfy.ldm.models.autoencoder.AutoencoderKL)
    assert vae.latent_channels == 4 and vae.downscale_ratio == 8
    assert file_keys(files["vae"]) == module_keys(vae.first_stage_model)
    own = decode_checks(vae, 0)
    # not the checkpoint's VAE (both are near-identity, so their decodes differ only a little)
    assert float((own - decode_checks(checkpoint[2], 0)).abs().mean()) > 0.005
    key = "decoder.up.0.block.0.conv1.weight"
    assert not torch.equal(vae.first_stage_model.state_dict()[key], checkpoint[2].first_stage_model.state_dict()[key])
    # near-identity: encode -> decode gives back a (blurred, contrast-normalised) copy
    yy, xx = torch.meshgrid(torch.linspace(0, 1, 64), torch.linspace(0, 1, 64), indexing="ij")
    img = torch.stack([xx, yy, (xx + yy) / 2 * (xx > 0.5)], -1)[None]  # BHWC in 0..1
    with torch.no_grad():
        lat = vae.encode(img)
        out = vae.decode(lat)
    assert lat.shape == (1, 4, 8, 8) and torch.isfinite(lat).all()
    assert torch.isfinite(out).all()
    for c in range(3):
        assert corr(out[..., c], img[..., c]) > 0.7, c


def sample(model, control, conds, strength, steps=2, size=LATENT):
    (c1, p1), (c0, p0) = conds.values()
    cnet = control.copy().set_cond_hint(hint_image(size), strength, (0.0, 1.0))
    positive = [[c1, {"pooled_output": p1, "control": cnet}]]
    negative = [[c0, {"pooled_output": p0, "control": cnet}]]
    latent = torch.zeros(1, 4, size, size)
    noise = comfy.sample.prepare_noise(latent, 42)
    return comfy.sample.sample(model, noise, steps, 7.0, "euler", "normal", positive, negative, latent,
                               denoise=1.0, disable_pbar=True, seed=42)


def hint_image(size: int) -> torch.Tensor:
    """(1, 3, 8*size, 8*size) in 0..1: a horizontal ramp, mirrored in the top half."""
    h = torch.linspace(0, 1, 8 * size).repeat(1, 3, 8 * size, 1)
    h[:, :, : 4 * size] = 1 - h[:, :, : 4 * size]
    return h


def test_controlnet_matches_the_unet_and_reaches_it_when_sampling(checkpoint, control, conds):
    model, _, vae = checkpoint
    assert isinstance(control, comfy.controlnet.ControlNet)
    outputs = []
    hook = control.control_model.register_forward_hook(
        lambda m, i, o: outputs.append({k: [tuple(t.shape) for t in v] for k, v in o.items()}))
    try:
        with_control = sample(model, control, conds, 1.0)
    finally:
        hook.remove()
    without = sample(model, control, conds, 0.0)
    assert with_control.shape == without.shape == (1, 4, LATENT, LATENT)
    assert torch.isfinite(with_control).all() and torch.isfinite(without).all()
    assert float((with_control - without).abs().mean()) > 0.05   # the control reaches the UNet
    # one control output per UNet input block (each lands on a skip an output block consumes)
    n, half = 2, LATENT // 2  # cond + uncond in one batch
    assert outputs[0] == {"output": [(n, CH, LATENT, LATENT)] * 2 + [(n, CH, half, half)] * 2,
                          "middle": [(n, CH, half, half)]}
    assert len(outputs[0]["output"]) == len(model.model.diffusion_model.input_blocks)
    with torch.no_grad():
        image = vae.decode(with_control[:, :, :8, :8])
    assert torch.isfinite(image).all() and float(image.std()) > 0.05


def test_sampling_is_deterministic_and_follows_the_prompt(checkpoint, control, conds):
    model = checkpoint[0]
    a = sample(model, control, conds, 1.0, steps=1, size=8)
    b = sample(model, control, conds, 1.0, steps=1, size=8)
    assert torch.equal(a, b)
    swapped = dict(reversed(list(conds.items())))
    assert float((sample(model, control, swapped, 1.0, steps=1, size=8) - a).abs().mean()) > 0.01


def test_builds_are_byte_identical(tmp_path):
    def digest(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()

    cache = sds.ensure_cache()
    fresh = sds.ensure_cache(tmp_path / "cache")
    for rel in sds.SD_FILES.values():
        assert digest(fresh / rel) == digest(cache / rel), rel
