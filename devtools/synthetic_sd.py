"""The lightest SD1.5 set ComfyUI 0.3.75's real loaders accept: checkpoint, VAE and ControlNet.

Nobody can download Stable Diffusion here, and a full SD1.5 set would be ~5 GB and far too slow
on CPU, so tests build random stand-ins in the original LDM/CompVis key layout, in ComfyUI's models
folders under the file names of the real models workflows/face_refine names (so the shipped
workflow runs unchanged):

- ``checkpoints/v1-5-pruned-emaonly-fp16.safetensors``: ``comfy.sd.load_checkpoint_guess_config``
  detects it as ``supported_models.SD15`` (that match only looks at model_channels 320,
  context_dim 768, conv proj_in, no ``label_emb``, no temporal layers), so the UNet is the
  smallest one detection still reads that way: 320 channels, ``channel_mult`` [1, 1], one res
  block per level, a single depth-1 cross-attention transformer (``input_blocks.1.1``: the only
  place detection reads context_dim from) and a middle block of one res block
  (``transformer_depth_middle`` -1). 4 input blocks, 4 output blocks, 26.8 M parameters.
  The text encoder is full CLIP-L (SD15's clip target always builds it; missing keys would stay
  uninitialised ``torch.empty`` memory) and the VAE is the full SD VAE (sd.VAE hard-codes its
  config; only ``z_channels`` is read from the file), because the checkpoint's own VAE output
  should be usable.
- ``vae/vae-ft-mse-840000-ema-pruned.safetensors``: a full SD1.x VAE (``encoder.conv_in.weight``, ...,
  ``quant_conv``/``post_quant_conv``), what VAELoader's ``comfy.sd.VAE(sd=...)`` builds as
  AutoencoderKL; other random weights than the checkpoint's VAE, so tests can tell them apart.
- ``controlnet/control_v11p_sd15_openpose_fp16.safetensors``: an LDM ControlNet (``control_model.*``)
  matching the tiny UNet: 4 zero convs, one per UNet input block (so each lands on a skip
  connection an output block consumes), the standard 8-conv hint block (pixels -> 1/8) and
  ``middle_block_out``. Zero convs are random, not zero, so the control visibly reaches the UNet.

Weights are seeded random (each tensor from its own generator, seeded by the file's seed and
the key), std ~1/sqrt(fan_in), norm weights ~1, so activations stay finite; but the UNet and the
VAEs are near-identity rather than fully random. Their residual branches write through small
(x0.1 UNet, x0.05 VAE) random convs and their shortcuts/resamplers carry an identity (2x2 mean
down, nearest up), and the GroupNorm -> SiLU -> conv at each output is set up to pass channels
through (nearly linearly, then recentred):

- UNet: eps ~ its normalised input, i.e. a model of an all-zero data set; sampling ends on
  small latents (std ~2-6 after 4-10 steps, ~100 with a fully random UNet) made of what the
  branches, the prompt (cross-attention) and the ControlNet added on the way. img2img does not
  preserve the input: every denoise ends near that floor.
- VAE: the encoder maps RGB (and its mean) onto latent channels 0-3 at SD-like scale (std ~5
  before SD15's 0.18215), the decoder shows latent channels 0-2 as RGB. decode(encode(x)) is an
  8x-blurred, contrast-normalised copy of x (per-channel correlation ~0.95 on a face photo; the
  GroupNorm before each ``conv_out`` drops absolute level and contrast; a slight colour cast,
  different per VAE), and decoding any latent gives a finite image following channels 0-2.
- The ControlNet is fully random (its zero convs x0.1); text encoder too.

Storage: UNet and ControlNet weights fp16 (the stored dtype steers ComfyUI's compute dtype:
float8 weights make ``unet_dtype`` keep float8 for the ControlNet, loaded with model_params -1,
always, and for the UNet whenever fp8 compute is supported or memory is short), CLIP and VAE
weights float8_e4m3fn (the loaders copy them into their own fp16/fp32 parameters, so only
storage shrinks), every bias/norm vector fp16. The set is 372 MB instead of 663 MB in fp16.

Files are built once into a cache (``tests/.cache/sd15-tiny/v<BUILDER_VERSION>``, or
``$SWAPLINE_SD_CACHE``) and hard-linked (copied across file systems) into each models folder;
do not write to the linked files in place. The builds are byte-for-byte reproducible with the
pinned torch/safetensors. Building needs torch and safetensors only (no ComfyUI import).

``python -m devtools.synthetic_sd MODELS_DIR`` populates a folder by hand.
"""
from __future__ import annotations

import math
import os
import sys
import time
import zlib
from pathlib import Path

import torch

from .build_cache import build_cached, link_all

BUILDER_VERSION = 1  # bump whenever a builder changes: the cache is keyed by it alone
REPO = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = REPO / "tests" / ".cache" / "sd15-tiny" / f"v{BUILDER_VERSION}"

SD_FILES = {
    "checkpoint": "checkpoints/v1-5-pruned-emaonly-fp16.safetensors",
    "vae": "vae/vae-ft-mse-840000-ema-pruned.safetensors",
    "controlnet": "controlnet/control_v11p_sd15_openpose_fp16.safetensors",
}

# The UNet config ComfyUI's detect_unet_config reads back from the checkpoint (plus SD15's
# unet_extra_config num_heads 8 / num_head_channels -1): kept here for tests and docs.
UNET_CONFIG = {
    "in_channels": 4, "out_channels": 4, "model_channels": 320, "channel_mult": [1, 1],
    "num_res_blocks": [1, 1], "transformer_depth": [1, 0], "transformer_depth_output": [0, 0, 0, 0],
    "transformer_depth_middle": -1, "context_dim": 768, "use_linear_in_transformer": False,
    "adm_in_channels": None,
}
CH, EMB, CTX = 320, 1280, 768
VAE_CH, VAE_MULT, VAE_RES_BLOCKS = 128, (1, 2, 4, 4), 2
CLIP_VOCAB, CLIP_POS, CLIP_DIM, CLIP_FF, CLIP_LAYERS = 49408, 77, 768, 3072, 12
HINT_CHANNELS = (3, 16, 16, 32, 32, 96, 96, 256)  # ControlNet hint block convs (stride 2 into 32, 96, 256)

# Output stages (UNet out, VAE encoder/decoder ends): GroupNorm -> SiLU -> conv. Norm weight 0.3
# and bias 3 keep SiLU in its nearly linear range (slope 0.93-1.1 for inputs 1..5); the conv
# undoes the scale and is recentred.
OUT_NORM_W, OUT_NORM_B = 0.3, 3.0

SEEDS = {"unet": 11, "clip": 12, "ckpt_vae": 13, "vae": 14, "controlnet": 15}
VAE_BRANCH = 0.05  # gain of the VAE's residual-branch outputs and of the noise on its identity paths


# Storage: UNet and ControlNet in fp16 (see the module docstring for why not float8), the
# weights of CLIP and the VAEs in float8_e4m3fn; every 1-D tensor (bias, norm) in fp16.
SMALL, BULK = torch.float16, torch.float8_e4m3fn


# --------------------------------------------------------------------------- key/shape specs
# A spec maps key -> (shape, init); init is ("w", gain): randn * gain / sqrt(fan_in),
# ("norm",): 1 + 0.1 randn, ("bias",): 0.02 randn, ("std", s): randn * s, ("const", v).

def _conv(spec, key, cout, cin, k=3, gain=1.0, bias=True):
    spec[f"{key}.weight"] = ((cout, cin, k, k), ("w", gain))
    if bias:
        spec[f"{key}.bias"] = ((cout,), ("bias",))


def _linear(spec, key, cout, cin, gain=1.0, bias=True):
    spec[f"{key}.weight"] = ((cout, cin), ("w", gain))
    if bias:
        spec[f"{key}.bias"] = ((cout,), ("bias",))


def _norm(spec, key, ch, weight=("norm",), bias=("bias",)):
    spec[f"{key}.weight"] = ((ch,), weight)
    spec[f"{key}.bias"] = ((ch,), bias)


def _unet_resblock(spec, p, cin, cout, branch=1.0):
    _norm(spec, f"{p}.in_layers.0", cin)
    _conv(spec, f"{p}.in_layers.2", cout, cin)
    _linear(spec, f"{p}.emb_layers.1", cout, EMB)
    _norm(spec, f"{p}.out_layers.0", cout)
    _conv(spec, f"{p}.out_layers.3", cout, cout, gain=branch)
    if cin != cout:
        _conv(spec, f"{p}.skip_connection", cout, cin, 1, gain=branch)


def _unet_transformer(spec, p, ch, branch=1.0):
    _norm(spec, f"{p}.norm", ch)
    _conv(spec, f"{p}.proj_in", ch, ch, 1)
    b = f"{p}.transformer_blocks.0"
    for attn, kv in (("attn1", ch), ("attn2", CTX)):
        _linear(spec, f"{b}.{attn}.to_q", ch, ch, bias=False)
        _linear(spec, f"{b}.{attn}.to_k", ch, kv, bias=False)
        _linear(spec, f"{b}.{attn}.to_v", ch, kv, bias=False)
        _linear(spec, f"{b}.{attn}.to_out.0", ch, ch)
    _linear(spec, f"{b}.ff.net.0.proj", ch * 8, ch)  # GEGLU: 2 x 4ch
    _linear(spec, f"{b}.ff.net.2", ch, ch * 4)
    for n in ("norm1", "norm2", "norm3"):
        _norm(spec, f"{b}.{n}", ch)
    _conv(spec, f"{p}.proj_out", ch, ch, 1, gain=branch)


def _unet_encoder_half(spec, p, branch=1.0):
    """time_embed, input_blocks 0-3 and middle_block: shared by the UNet and the ControlNet."""
    _linear(spec, f"{p}time_embed.0", EMB, CH)
    _linear(spec, f"{p}time_embed.2", EMB, EMB)
    _conv(spec, f"{p}input_blocks.0.0", CH, 4, gain=branch)
    _unet_resblock(spec, f"{p}input_blocks.1.0", CH, CH, branch)
    _unet_transformer(spec, f"{p}input_blocks.1.1", CH, branch)
    _conv(spec, f"{p}input_blocks.2.0.op", CH, CH, gain=branch)
    _unet_resblock(spec, f"{p}input_blocks.3.0", CH, CH, branch)
    _unet_resblock(spec, f"{p}middle_block.0", CH, CH, branch)


# The UNet is near-identity too, so that it predicts "all of the input is noise": eps ~ its
# input, normalised by the final GroupNorm (which is exactly the ideal eps of an all-zero data
# set, x / sigma, when std(x) ~ sigma). Sampling follows that model's ODE towards 0, and what is
# left is what the random residual branches (gain UNET_BRANCH), the cross-attention (prompt) and
# the ControlNet add on the way: final latents of std ~2-6 at 4-10 steps instead of ~100 for a
# fully random UNet. Nothing is "preserved" in img2img: every denoise ends near that noise floor.
UNET_BRANCH = 0.1
UNET_EPS_GAIN = 0.6  # eps std ~1 for a unit-variance input


def unet_spec(p="model.diffusion_model."):
    spec = {}
    _unet_encoder_half(spec, p, UNET_BRANCH)
    for i in range(4):  # every output block: cat(h, skip) = 640 -> 320
        _unet_resblock(spec, f"{p}output_blocks.{i}.0", 2 * CH, CH, UNET_BRANCH)
    _conv(spec, f"{p}output_blocks.1.1.conv", CH, CH, gain=UNET_BRANCH)  # upsample 16 -> 32
    _norm(spec, f"{p}out.0", CH, ("const", OUT_NORM_W), ("const", OUT_NORM_B))
    _conv(spec, f"{p}out.2", 4, CH, gain=UNET_BRANCH)
    return spec


def _eye(w, scale=1.0, taps=((1, 1),), n=None, in_offset=0):
    for c in range(n if n is not None else min(w.shape[0], w.shape[1] - in_offset)):
        for ky, kx in taps:
            w[c, c + in_offset, ky, kx] += scale


def _recentre(t, key, dtype):
    """Bias so that a normalised input of 0 (SiLU(OUT_NORM_B) everywhere after GroupNorm(weight
    OUT_NORM_W, bias OUT_NORM_B) and SiLU) maps to ~0, through the random part too. Computed from
    the weight as stored (float8 rounds 10 to 10 +- 0.5: recentring the unrounded weight left
    latent offsets of ~1 and colour casts of ~0.15)."""
    silu_b = OUT_NORM_B * torch.sigmoid(torch.tensor(OUT_NORM_B)).item()
    w = t[f"{key}.weight"] = t[f"{key}.weight"].to(dtype).float()
    t[f"{key}.bias"] -= silu_b * w.sum(dim=(1, 2, 3))


def _unet_identity(t: dict, p: str, dtype) -> None:
    _eye(t[f"{p}input_blocks.0.0.weight"], n=4)
    # stride-2, padding-1 conv: taps 1-2 cover input rows/cols 2i, 2i+1 (a 2x2 mean)
    _eye(t[f"{p}input_blocks.2.0.op.weight"], 0.25, ((1, 1), (1, 2), (2, 1), (2, 2)))
    _eye(t[f"{p}output_blocks.1.1.conv.weight"])  # after nearest x2
    for i in range(4):  # half the deep path, half the skip (where the ControlNet adds its signal)
        w = t[f"{p}output_blocks.{i}.0.skip_connection.weight"]
        _eye(w, 0.5, ((0, 0),))
        _eye(w, 0.5, ((0, 0),), in_offset=CH)
    _eye(t[f"{p}out.2.weight"], UNET_EPS_GAIN / OUT_NORM_W, n=4)
    _recentre(t, f"{p}out.2", dtype)


ZERO_CONV_GAIN = 0.1  # real ControlNets start these at 0; random here so the control is visible


def controlnet_spec(p="control_model."):
    spec = {}
    _unet_encoder_half(spec, p)
    chans = HINT_CHANNELS + (CH,)
    for i in range(len(chans) - 1):
        _conv(spec, f"{p}input_hint_block.{2 * i}", chans[i + 1], chans[i])
    for i in range(4):
        _conv(spec, f"{p}zero_convs.{i}.0", CH, CH, 1, gain=ZERO_CONV_GAIN)
    _conv(spec, f"{p}middle_block_out.0", CH, CH, 1, gain=ZERO_CONV_GAIN)
    return spec


def clip_spec(p="cond_stage_model.transformer.text_model."):
    spec = {f"{p}embeddings.token_embedding.weight": ((CLIP_VOCAB, CLIP_DIM), ("std", 1.0)),
            f"{p}embeddings.position_embedding.weight": ((CLIP_POS, CLIP_DIM), ("std", 0.3))}
    for i in range(CLIP_LAYERS):
        lp = f"{p}encoder.layers.{i}"
        _norm(spec, f"{lp}.layer_norm1", CLIP_DIM)
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            _linear(spec, f"{lp}.self_attn.{n}", CLIP_DIM, CLIP_DIM)
        _norm(spec, f"{lp}.layer_norm2", CLIP_DIM)
        _linear(spec, f"{lp}.mlp.fc1", CLIP_FF, CLIP_DIM)
        _linear(spec, f"{lp}.mlp.fc2", CLIP_DIM, CLIP_FF)
    _norm(spec, f"{p}final_layer_norm", CLIP_DIM)
    return spec


def _vae_resblock(spec, p, cin, cout):
    _norm(spec, f"{p}.norm1", cin)
    _conv(spec, f"{p}.conv1", cout, cin)
    _norm(spec, f"{p}.norm2", cout)
    _conv(spec, f"{p}.conv2", cout, cout, gain=VAE_BRANCH)
    if cin != cout:
        _conv(spec, f"{p}.nin_shortcut", cout, cin, 1, gain=VAE_BRANCH)


def _vae_mid(spec, p, ch):
    _vae_resblock(spec, f"{p}.block_1", ch, ch)
    _norm(spec, f"{p}.attn_1.norm", ch)
    for n in ("q", "k", "v"):
        _conv(spec, f"{p}.attn_1.{n}", ch, ch, 1)
    _conv(spec, f"{p}.attn_1.proj_out", ch, ch, 1, gain=VAE_BRANCH)
    _vae_resblock(spec, f"{p}.block_2", ch, ch)


ENC_GAIN = 3.0   # latent std ~5 (SD-like: SD15's latent scale is 0.18215)
DEC_GAIN = 0.5   # decoded std ~0.5 in -1..1


def vae_spec(p=""):
    spec = {}
    n = len(VAE_MULT)
    _conv(spec, f"{p}encoder.conv_in", VAE_CH, 3, gain=VAE_BRANCH)
    block_in = VAE_CH
    for i, mult in enumerate(VAE_MULT):
        block_out = VAE_CH * mult
        for j in range(VAE_RES_BLOCKS):
            _vae_resblock(spec, f"{p}encoder.down.{i}.block.{j}", block_in, block_out)
            block_in = block_out
        if i != n - 1:
            _conv(spec, f"{p}encoder.down.{i}.downsample.conv", block_in, block_in, gain=VAE_BRANCH)
    _vae_mid(spec, f"{p}encoder.mid", block_in)
    _norm(spec, f"{p}encoder.norm_out", block_in, ("const", OUT_NORM_W), ("const", OUT_NORM_B))
    _conv(spec, f"{p}encoder.conv_out", 8, block_in, gain=VAE_BRANCH)
    _conv(spec, f"{p}quant_conv", 8, 8, 1, gain=VAE_BRANCH)
    _conv(spec, f"{p}post_quant_conv", 4, 4, 1, gain=VAE_BRANCH)
    block_in = VAE_CH * VAE_MULT[-1]
    _conv(spec, f"{p}decoder.conv_in", block_in, 4, gain=VAE_BRANCH)
    _vae_mid(spec, f"{p}decoder.mid", block_in)
    for i in reversed(range(n)):
        block_out = VAE_CH * VAE_MULT[i]
        for j in range(VAE_RES_BLOCKS + 1):
            _vae_resblock(spec, f"{p}decoder.up.{i}.block.{j}", block_in, block_out)
            block_in = block_out
        if i != 0:
            _conv(spec, f"{p}decoder.up.{i}.upsample.conv", block_in, block_in, gain=VAE_BRANCH)
    _norm(spec, f"{p}decoder.norm_out", block_in, ("const", OUT_NORM_W), ("const", OUT_NORM_B))
    _conv(spec, f"{p}decoder.conv_out", 3, block_in, gain=VAE_BRANCH)
    return spec


def _vae_identity(t: dict, p: str, dtype) -> None:
    """Add the identity paths to the VAE's (fp32) random tensors, in place."""
    _eye(t[f"{p}encoder.conv_in.weight"], n=3)
    for key in [k for k in t if k.startswith(p)]:
        if key.endswith("nin_shortcut.weight") or key[len(p):] in ("quant_conv.weight", "post_quant_conv.weight"):
            _eye(t[key], taps=((0, 0),))
        elif key.endswith("downsample.conv.weight"):  # taps 0-1 of the (0,1,0,1)-padded stride-2 conv: 2x2 mean
            _eye(t[key], 0.25, ((0, 0), (0, 1), (1, 0), (1, 1)))
        elif key.endswith("upsample.conv.weight"):   # after nearest x2
            _eye(t[key])
    # encoder: RGB -> latent 0-2, their mean -> latent 3 (4-7, the log-variance, stay random)
    _eye(t[f"{p}encoder.conv_out.weight"], ENC_GAIN / OUT_NORM_W, n=3)
    t[f"{p}encoder.conv_out.weight"][3, :3, 1, 1] += ENC_GAIN / OUT_NORM_W / 3
    _eye(t[f"{p}decoder.conv_in.weight"], n=4)
    _eye(t[f"{p}decoder.conv_out.weight"], DEC_GAIN / OUT_NORM_W, n=3)
    _recentre(t, f"{p}encoder.conv_out", dtype)  # else a latent offset / colour cast
    _recentre(t, f"{p}decoder.conv_out", dtype)


# --------------------------------------------------------------------------- filling and saving

def _fill(spec: dict, seed: int) -> dict:
    """fp32 tensors for a spec; each key gets its own generator, so values do not depend on
    which other keys exist or on their order."""
    out = {}
    for key, (shape, init) in spec.items():
        # torch's CPU generator keeps only the low 32 bits of a seed: hash seed and key together
        g = torch.Generator().manual_seed(zlib.crc32(f"{seed}/{key}".encode()))
        kind = init[0]
        if kind == "const":
            t = torch.full(shape, float(init[1]))
        elif kind == "norm":
            t = 1 + 0.1 * torch.randn(shape, generator=g)
        elif kind == "bias":
            t = 0.02 * torch.randn(shape, generator=g)
        elif kind == "std":
            t = init[1] * torch.randn(shape, generator=g)
        elif kind == "w":
            t = torch.randn(shape, generator=g) * (init[1] / math.sqrt(math.prod(shape[1:])))
        else:
            raise ValueError(f"unknown init {init!r} for {key}")
        out[key] = t
    return out


def _cast(tensors: dict, dtype) -> dict:
    """Weights (2-D and up) to ``dtype``; biases and norms always fp16 (few bytes, and float8
    would round a recentring bias of -28.6 to -28 or -30)."""
    out = {}
    for key, t in tensors.items():
        c = t.to(dtype if t.ndim > 1 else torch.float16)
        if not torch.isfinite(c.float()).all():  # float8_e4m3fn turns |x| > 448 into NaN
            raise ValueError(f"{key}: not finite in {c.dtype}")
        out[key] = c.contiguous()
    return out


def _save(tensors: dict, path: Path) -> None:
    from safetensors.torch import save_file

    # One metadata key only: safetensors keeps metadata in a Rust HashMap, so the header's key
    # order (and the file's bytes) would change from call to call with two or more.
    save_file(tensors, str(path), metadata={"format": "pt"})
    path.chmod(0o644)  # safetensors writes 0600


def vae_tensors(seed: int, prefix: str = "") -> dict:
    """The VAE as stored (BULK dtype weights, fp16 vectors)."""
    t = _fill(vae_spec(prefix), seed)
    _vae_identity(t, prefix, BULK)
    return _cast(t, BULK)


def unet_tensors(seed: int, prefix: str = "model.diffusion_model.") -> dict:
    """The UNet as stored (fp16)."""
    t = _fill(unet_spec(prefix), seed)
    _unet_identity(t, prefix, SMALL)
    return _cast(t, SMALL)


def _build_checkpoint(path: Path) -> None:
    sd = unet_tensors(SEEDS["unet"])
    sd.update(_cast(_fill(clip_spec(), SEEDS["clip"]), BULK))
    sd.update(vae_tensors(SEEDS["ckpt_vae"], "first_stage_model."))
    _save(sd, path)


def _build_vae(path: Path) -> None:
    _save(vae_tensors(SEEDS["vae"]), path)


def _build_controlnet(path: Path) -> None:
    _save(_cast(_fill(controlnet_spec(), SEEDS["controlnet"]), SMALL), path)


_BUILDERS = {"checkpoint": _build_checkpoint, "vae": _build_vae, "controlnet": _build_controlnet}


# --------------------------------------------------------------------------- cache and linking

def ensure_cache(cache_dir: Path | None = None) -> Path:
    """Build the three files into the cache unless a complete, unmodified build is there."""
    return build_cached(Path(cache_dir or os.environ.get("SWAPLINE_SD_CACHE") or DEFAULT_CACHE), SD_FILES, _BUILDERS)


def build_sd_models(models_dir: Path, cache_dir: Path | None = None) -> dict[str, Path]:
    """Place the SD1.5 stand-ins under ``models_dir`` (ComfyUI models layout).

    Returns {"checkpoint", "vae", "controlnet"} -> path (see SD_FILES).
    """
    return link_all(ensure_cache(cache_dir), SD_FILES, models_dir)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: synthetic_sd.py MODELS_DIR", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    for role, path in build_sd_models(Path(argv[0])).items():
        print(f"{role:10s} {path} ({path.stat().st_size / 1e6:.1f} MB)")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
