from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from devtools.inprocess import import_pack, setup_comfy  # noqa: E402
from swapline_core.diffusion import tiled_vae as tv  # noqa: E402

setup_comfy()

import comfy.ops  # noqa: E402
from comfy.ldm.models.autoencoder import AutoencoderKL  # noqa: E402
from comfy.ldm.modules.diffusionmodules import model as comfy_model  # noqa: E402

SD15 = {"double_z": True, "z_channels": 4, "resolution": 256, "in_channels": 3, "out_ch": 3, "ch": 128,
        "ch_mult": [1, 2, 4, 4], "num_res_blocks": 2, "attn_resolutions": [], "dropout": 0.0}
NARROW = {**SD15, "ch": 64}          # 64/128/256/256 channels: GroupNorm groups still hold 2-8 channels


def init_random(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """ComfyUI's ops skip weight init; give every parameter seeded values of a sensible scale."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.ndim > 1:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p[0].numel()))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
    return module.eval()


def make_vae(ddconfig=NARROW, seed=0) -> AutoencoderKL:
    return init_random(AutoencoderKL(ddconfig=dict(ddconfig), embed_dim=4), seed)


def sample_image(h: int, w: int, seed: int = 0) -> torch.Tensor:
    """(1, 3, h, w) in -1..1 with structure at every scale: gradients, flat blocks, smoothed noise."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    img = torch.stack([torch.sin(3 * xx + yy), torch.cos(5 * yy) * xx, xx * yy])
    img = img + 0.3 * torch.nn.functional.avg_pool2d(torch.randn(3, h, w, generator=g)[None], 5, 1, 2)[0]
    img[:, h // 5:h // 2, w // 4:3 * w // 4] = torch.tensor([0.9, -0.2, 0.4])[:, None, None]
    return img.clamp(-1, 1)[None]


def full_moments(vae: AutoencoderKL, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return vae.quant_conv(vae.encoder(x))


def psnr(a: torch.Tensor, ref: torch.Tensor) -> float:
    """PSNR with the reference's range as peak (as the benchmark reports it)."""
    mse = float(((a.float() - ref.float()) ** 2).mean())
    rng = float(ref.max() - ref.min())
    return 10 * math.log10(rng * rng / max(mse, 1e-30))


@pytest.fixture(scope="module")
def narrow():
    return make_vae(NARROW)


@pytest.fixture(scope="module")
def narrow_case(narrow):
    x = sample_image(256, 384)
    return narrow, x, full_moments(narrow, x)


# -- exactness --------------------------------------------------------------------------------
def naive_tiled(vae, x, tile, overlap):
    """One layout of per-tile full encodes, feather-blended (core tiling without its 3 layouts)."""
    import comfy.utils

    return comfy.utils.tiled_scale(x, lambda t: full_moments(vae, t), tile, tile, overlap, upscale_amount=1 / 8,
                                   out_channels=8, output_device="cpu")


def test_exact_tiles_match_full_encode(narrow_case):
    vae, x, ref = narrow_case
    out = tv.encode_tiled_exact(vae.encoder, vae.quant_conv, x, tile=96, overlap=16)
    assert out.shape == ref.shape
    exact = psnr(out, ref)
    naive = psnr(naive_tiled(vae, x, 96, 16), ref)
    print(f"\nexact tiled {exact:.1f} dB, per-tile encode {naive:.1f} dB")
    assert exact >= 40, exact
    # the check is sensitive: encoding tiles as whole images (per-tile GroupNorm and attention)
    # lands far below
    assert exact > naive + 15, (exact, naive)


def test_overlapping_latent_tiles_cross_fade_exactly(narrow_case):
    vae, x, _ = narrow_case
    x = x.transpose(-1, -2).contiguous()            # 384 rows: 48 latent rows, two rows of tiles
    ref = full_moments(vae, x)
    # a wide overlap against small tiles: the second row of latent tiles reads 8 rows above its
    # own, while the stored plane under them is freed row chunk by row chunk
    out = tv.encode_tiled_exact(vae.encoder, vae.quant_conv, x, tile=64, overlap=64)
    assert psnr(out, ref) >= 40


def test_float32_planes_are_exact_and_lean_planes_recompute(narrow_case):
    vae, x, ref = narrow_case
    spec = tv.check_architecture(vae.encoder, vae.quant_conv)
    big = tv.encode_tiled_exact(vae.encoder, vae.quant_conv, x, 128, 0, plane_budget=1 << 40)
    assert psnr(big, ref) >= 100, psnr(big, ref)          # float32 everywhere: rounding only
    # a quarter of the default budget: block outputs are recomputed from the last stored plane
    small = tv.default_plane_budget(spec, 256, 384) // 4
    lean = tv.encode_tiled_exact(vae.encoder, vae.quant_conv, x, 128, 0, plane_budget=small)
    assert psnr(lean, ref) >= 40, psnr(lean, ref)
    ctx = tv.Ctx(torch.device("cpu"), torch.float32, torch.device("cpu"))
    plan = tv.build_plan(spec, 256, 384, 128, ctx, small)
    assert any(n.keep is None for n in plan.nodes if isinstance(n, tv.ResNode))
    forced = sum(n.nbytes(n.keep) for n in plan.nodes if isinstance(n, tv.AttnNode) or
                 any(isinstance(m, tv.AttnNode) and m.x is n for m in plan.nodes))
    assert plan.peak_plane_bytes() <= small + forced


def test_default_plan_stays_within_one_half_precision_map(narrow):
    spec = tv.check_architecture(narrow.encoder, narrow.quant_conv)
    h, w = 1080, 1920
    peak = tv.plane_bytes(spec, h, w, torch.float32)
    assert peak <= tv.default_plane_budget(spec, h, w) * 1.01
    # a full-resolution float32 map would be four times that budget's worth... it is never stored
    ctx = tv.Ctx(torch.device("cpu"), torch.float32, torch.device("cpu"))
    plan = tv.build_plan(spec, h, w, 256, ctx)
    assert all(n.nbytes(n.keep) <= tv.default_plane_budget(spec, h, w) for n in plan.nodes if n.keep is not None)


def test_odd_sizes_match_full_encode(narrow):
    x = sample_image(100, 142, seed=3)      # not multiples of 8: the downsample's asymmetric padding matters
    ref = full_moments(narrow, x)
    out = tv.encode_tiled_exact(narrow.encoder, narrow.quant_conv, x, 64, 8)
    assert out.shape == ref.shape
    assert psnr(out, ref) >= 40


@pytest.mark.slow
def test_sd15_widths_at_small_resolution():
    vae = make_vae(SD15, seed=1)
    x = sample_image(256, 384, seed=1)
    ref = full_moments(vae, x)
    out = tv.encode_tiled_exact(vae.encoder, vae.quant_conv, x, 128, 32)
    assert psnr(out, ref) >= 40, psnr(out, ref)


def test_progress_and_interrupt(narrow_case):
    vae, x, _ = narrow_case
    seen = []
    tv.encode_tiled_exact(vae.encoder, vae.quant_conv, x[:, :, :128, :128], 64, 0, on_tile=seen.append)
    assert seen and seen[-1].done == seen[-1].total == len(seen)
    assert [p.done for p in seen] == list(range(1, len(seen) + 1))

    class Stop(Exception):
        pass

    calls = []

    def interrupt():
        calls.append(1)
        if len(calls) > 3:
            raise Stop()

    with pytest.raises(Stop):               # not swallowed by the out-of-memory retry
        tv.encode_with_retry(vae.encoder, vae.quant_conv, x[:, :, :128, :128], 64, 0, check_interrupt=interrupt)


# -- architecture check -----------------------------------------------------------------------
def test_unknown_architectures_raise():
    with pytest.raises(tv.UnsupportedArchitecture, match="Encoder"):
        tv.check_architecture(torch.nn.Sequential(comfy.ops.disable_weight_init.Conv2d(3, 8, 3, padding=1)))

    with_attn = init_random(comfy_model.Encoder(**{**NARROW, "ch": 32, "attn_resolutions": [256]}))
    with pytest.raises(tv.UnsupportedArchitecture, match="attention"):
        tv.check_architecture(with_attn)

    class OtherBlock(comfy_model.ResnetBlock):
        def forward(self, x, temb=None):
            return super().forward(x, temb) * 2

    enc = init_random(comfy_model.Encoder(**{**NARROW, "ch": 32}))
    old = enc.down[1].block[0]
    swapped = OtherBlock(in_channels=old.in_channels, out_channels=old.out_channels, temb_channels=0)
    enc.down[1].block[0] = swapped
    with pytest.raises(tv.UnsupportedArchitecture, match=r"down\.1\.block\.0"):
        tv.check_architecture(enc)

    conv3d = comfy_model.Encoder(**{**NARROW, "ch": 32, "conv3d": True, "time_compress": 4})
    with pytest.raises(tv.UnsupportedArchitecture):
        tv.check_architecture(conv3d)


# -- out of memory ----------------------------------------------------------------------------
@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                                   RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
                                                "not enough memory: you tried to allocate 4294967296 bytes.")])
def test_oom_retry_shrinks_tiles(narrow_case, error):
    vae, x, ref = narrow_case
    x = x[:, :, :128, :192]
    ref = full_moments(vae, x)
    first = 128
    failures, retries = [], []

    def on_tile(p):
        if p.tile == first:
            failures.append(p.tile)
            raise error

    out, used = tv.encode_with_retry(vae.encoder, vae.quant_conv, x, first, 0, on_tile=on_tile,
                                     on_oom=lambda t, msg: retries.append((t, msg)))
    assert failures == [first] and retries[0][0] == first
    assert used < first and used == tv.shrink_tile(first)
    assert psnr(out, ref) >= 40


def test_other_errors_are_not_retried(narrow_case):
    vae, x, _ = narrow_case

    def on_tile(p):
        raise ValueError("a bug, not memory")

    with pytest.raises(ValueError):
        tv.encode_with_retry(vae.encoder, vae.quant_conv, x[:, :, :64, :64], 64, 0, on_tile=on_tile)


def test_is_oom():
    assert tv.is_oom(torch.OutOfMemoryError("x"))
    assert tv.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 10 bytes. "
                                  "Error code 12 (Cannot allocate memory)"))
    assert tv.is_oom(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))
    assert tv.is_oom(MemoryError())
    assert not tv.is_oom(RuntimeError("Expected all tensors to be on the same device"))
    assert not tv.is_oom(ValueError("out of memory"))


def test_choose_tile():
    def cost(t):
        return t * t * 1000

    assert tv.choose_tile(10 ** 12, cost, max_tile=1024) == 1024
    assert tv.choose_tile(256 * 256 * 1000 + 5, cost, 0, max_tile=2048) == 256
    assert tv.choose_tile(256 * 256 * 1000 + 5, cost, 10 ** 9, max_tile=2048) == tv.MIN_TILE


# -- the node, with ComfyUI's VAE object ------------------------------------------------------
@pytest.fixture(scope="module")
def swapline():
    """The pack imported as a package (its modules use relative imports), as ComfyUI does."""
    import_pack()
    import swapline.nodes.vae as node_mod

    return node_mod


@pytest.fixture()
def comfy_vae(narrow):
    import comfy.sd

    return comfy.sd.VAE(sd=narrow.state_dict(), config={"params": {"ddconfig": dict(NARROW), "embed_dim": 4}})


def images_of(x: torch.Tensor) -> torch.Tensor:
    return ((x + 1) / 2).movedim(1, -1)              # back to a ComfyUI IMAGE (B, H, W, C 0..1)


def run_node(node_mod, vae, images=None, frames=None, mode="tiled", tile=96, overlap=16, chunk=4):
    with torch.inference_mode():                  # as ComfyUI's executor runs nodes
        out = node_mod.TiledVAEEncode.execute(vae=vae, mode=mode, tile_size=tile, overlap=overlap,
                                              frames_per_chunk=chunk, images=images, frames=frames)
    return out.args[0]["samples"], out.ui["swapline_vae_encode"][0]


def core_encode(vae, images, **tiled):
    with torch.inference_mode():
        return vae.encode_tiled(images, **tiled) if tiled else vae.encode(images)


def test_node_tiled_matches_plain_encode(swapline, comfy_vae, narrow_case):
    _, x, _ = narrow_case
    x = x[:, :, :160, :192]
    imgs = images_of(torch.cat([x, x.flip(-1)]))
    ref = core_encode(comfy_vae, imgs)               # core VAE Encode
    tiled, info = run_node(swapline, comfy_vae, imgs, mode="tiled")
    assert tiled.shape == ref.shape == (2, 4, 20, 24)
    assert info["tiled"] == 2 and info["fallback"] is None and info["tiles"] == [96]
    assert psnr(tiled, ref) >= 40
    plain, info = run_node(swapline, comfy_vae, imgs, mode="auto")
    assert info["plain"] == 2
    assert psnr(plain, ref) >= 100


def test_node_auto_goes_tiled_when_plain_encode_runs_out_of_memory(swapline, comfy_vae, narrow_case, monkeypatch):
    _, x, _ = narrow_case
    imgs = images_of(x[:, :, :160, :192])
    ref = core_encode(comfy_vae, imgs)

    def no_memory(*a, **k):
        raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 123456789 bytes.")

    monkeypatch.setattr(comfy_vae.first_stage_model, "encode", no_memory)
    out, info = run_node(swapline, comfy_vae, imgs, mode="auto")
    assert info["plain"] == 0 and info["tiled"] == 1
    assert psnr(out, ref) >= 40


def test_node_falls_back_to_core_tiling_for_unknown_encoders(swapline, comfy_vae, narrow_case):
    _, x, _ = narrow_case
    x = x[:, :, :96, :128]
    imgs = images_of(x)

    class WrappedEncoder(torch.nn.Module):           # same function, a class the tiler does not know
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, t):
            return self.inner(t)

    comfy_vae.first_stage_model.encoder = WrappedEncoder(comfy_vae.first_stage_model.encoder)
    with pytest.raises(tv.UnsupportedArchitecture):
        tv.encode_tiled_exact(comfy_vae.first_stage_model.encoder, None, x, 96, 16)
    out, info = run_node(swapline, comfy_vae, imgs, mode="tiled", tile=64, overlap=16)
    core = core_encode(comfy_vae, imgs, tile_x=64, tile_y=64, overlap=16)
    assert info["core"] == 1 and info["tiled"] == 0 and "Encoder" in info["fallback"]
    assert torch.allclose(out, core)


def test_node_reads_frame_sequences_and_needs_one_input(swapline, comfy_vae, narrow_case):
    _, x, _ = narrow_case
    x = x[:, :, :128, :192]
    frames_u8 = [(images_of(x)[0].numpy() * 255).round().astype(np.uint8)] * 3

    class Seq:                                   # the FrameSequence interface the node uses
        count = 3

        def iter_chunks(self):
            yield 0, frames_u8[:2]
            yield 1, frames_u8[2:]

    out, info = run_node(swapline, comfy_vae, frames=Seq(), mode="tiled", chunk=1)
    assert out.shape == (3, 4, 16, 24) and info["frames"] == 3
    assert torch.allclose(out[0], out[2], atol=1e-4)
    with pytest.raises(swapline.SwaplineError, match="exactly one"):
        run_node(swapline, comfy_vae)
