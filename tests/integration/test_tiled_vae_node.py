"""Tiled VAE Encode in a real ComfyUI: a random-weight SD1.5 VAE file loaded by core VAELoader."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from devtools.comfy_harness import COMFY

VAE_FILE = "swapline_test_sd15_vae.safetensors"
SD15 = {"double_z": True, "z_channels": 4, "resolution": 256, "in_channels": 3, "out_ch": 3, "ch": 128,
        "ch_mult": [1, 2, 4, 4], "num_res_blocks": 2, "attn_resolutions": [], "dropout": 0.0}


def sd15_vae_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights under the keys and shapes of vae-ft-mse-840000 (encoder.*, decoder.*,
    quant_conv.*, post_quant_conv.*), stored as float16 to keep the file at 160 MB."""
    if str(COMFY) not in sys.path:
        sys.path.append(str(COMFY))      # after the repo: our `nodes` package must win over nodes.py
    if "comfy.model_management" not in sys.modules:
        from comfy.cli_args import args

        args.cpu = True
    from comfy.ldm.models.autoencoder import AutoencoderKL

    model = AutoencoderKL(ddconfig=dict(SD15), embed_dim=4)
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for name, p in model.state_dict().items():
        if p.ndim > 1:
            t = torch.randn(p.shape, generator=g) / math.sqrt(p[0].numel())
        elif "norm" in name and name.endswith("weight"):
            t = 1 + 0.1 * torch.randn(p.shape, generator=g)
        else:
            t = 0.05 * torch.randn(p.shape, generator=g)
        sd[name] = t.half().contiguous()
    return sd


@pytest.fixture(scope="module")
def vae_file(models_dir):
    from safetensors.torch import save_file

    folder = models_dir / "vae"
    folder.mkdir(exist_ok=True)
    path = folder / VAE_FILE
    if not path.exists():
        sd = sd15_vae_state_dict()
        assert {"encoder.conv_in.weight", "encoder.mid.attn_1.q.weight", "quant_conv.weight",
                "post_quant_conv.weight", "decoder.conv_out.weight"} <= set(sd)
        save_file(sd, str(path))
    return path.name


def put_image(comfy, name: str, h: int, w: int) -> str:
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([(xx * 255 // w), (yy * 255 // h), ((xx + yy) % 64) * 4], axis=-1).astype(np.uint8)
    img[h // 4:h // 2, w // 3:2 * w // 3] = (230, 40, 90)
    Image.fromarray(img).save(comfy.base_dir / "input" / name)
    return name


def load_latent(comfy, hist: dict, node: str) -> torch.Tensor:
    from safetensors.torch import load_file

    item = hist["outputs"][node]["latents"][0]
    return load_file(str(comfy.output_path(item)))["latent_tensor"].float()


def psnr(a: torch.Tensor, ref: torch.Tensor) -> float:
    mse = float(((a - ref) ** 2).mean())
    rng = float(ref.max() - ref.min())
    return 10 * math.log10(rng * rng / max(mse, 1e-30))


def test_tiled_vae_encode_in_a_prompt(comfy, vae_file):
    info = comfy.object_info("SwaplineTiledVAEEncode")["SwaplineTiledVAEEncode"]
    assert info["output"] == ["LATENT"] and info["category"] == "Swapline/latent"
    assert set(info["input"]["optional"]) == {"images", "frames"}

    # 203 x 330: not multiples of 8, so the node must crop as core VAE Encode does (to 200 x 328)
    image = put_image(comfy, "swapline_vae_input.png", 203, 330)
    prompt = {
        "1": {"class_type": "LoadImage", "inputs": {"image": image}},
        "2": {"class_type": "VAELoader", "inputs": {"vae_name": vae_file}},
        "3": {"class_type": "SwaplineTiledVAEEncode",
              "inputs": {"vae": ["2", 0], "images": ["1", 0], "mode": "tiled", "tile_size": 96,
                         "overlap": 32, "frames_per_chunk": 4}},
        "4": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["2", 0]}},
        "5": {"class_type": "SaveImage", "inputs": {"images": ["4", 0], "filename_prefix": "swapline_vae_roundtrip"}},
        "6": {"class_type": "SaveLatent", "inputs": {"samples": ["3", 0], "filename_prefix": "latents/swapline_tiled"}},
        "7": {"class_type": "VAEEncode", "inputs": {"pixels": ["1", 0], "vae": ["2", 0]}},
        "8": {"class_type": "SaveLatent", "inputs": {"samples": ["7", 0], "filename_prefix": "latents/core_full"}},
    }
    hist = comfy.run(prompt)

    saved = Image.open(comfy.output_path(hist["outputs"]["5"]["images"][0]))
    assert saved.size == (328, 200)
    ours, core = load_latent(comfy, hist, "6"), load_latent(comfy, hist, "8")
    assert ours.shape == core.shape == (1, 4, 25, 41)
    assert psnr(ours, core) >= 40, psnr(ours, core)
    report = hist["outputs"]["3"]["swapline_vae_encode"][0]
    assert report["tiled"] == 1 and report["tiles"] == [96] and report["fallback"] is None, report
