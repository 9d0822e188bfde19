"""Tiled VAE encode: Swapline's exact tiling against core VAEEncode and core VAEEncodeTiled.

    .venv/bin/python -m bench.tiled_vae [--smoke] [--doc] [--set 'size=[1920,1080]']
    # writes out/bench/tiled_vae.json (and with --doc docs/measurements/tiled_vae.md)

What is compared, on one 1920x1080 frame (the sample's target_reference.png fitted into the
canvas as bench/media.py does), with an SD1.5-architecture VAE with random weights (seeded,
std 1/sqrt(fan_in)), built by comfy.sd.VAE from a state dict exactly as core VAELoader does,
on the CPU in float32:

- full: core VAEEncode (vae.encode), the reference latent;
- core_tiled: core VAEEncodeTiled, tile 512, overlap 64 (three layouts averaged);
- ours: the SwaplineTiledVAEEncode node itself, mode tiled, tile 256, overlap 64.

Attention: ComfyUI picks the VAE's attention when the model is built; on a CPU it defaults to
split attention. The child processes set ComfyUI's `--use-pytorch-cross-attention` option
(comfy.cli_args.args.use_pytorch_cross_attention = True before comfy.model_management is
imported), so every AttnBlock uses pytorch_attention (SDPA); the result records which one ran.

Memory: every method runs in a fresh child process (model built, input ready, a 64x64 warm-up
of the same method done, the heap trimmed with malloc_trim). The peak is VmHWM read after the
call, having reset it through /proc/self/clear_refs just before, minus the RSS just before: the
exact high-water mark of the process, not a sample. A 20 ms RSS sampler runs alongside as a
cross-check (and is the measure where clear_refs is not writable).

Time: wall and CPU seconds of the call, the methods one after another, never in parallel; the
load average is recorded, since on a shared machine other jobs stretch wall time.

Ablation (input ``ablation_size``, 1280x720 by default, tile 512/64, one layout): what each step of the
exact method buys, in PSNR from the full encode: per-tile encodes; + whole-image GroupNorm
statistics in every tile (captured from the full encode); + the mid block (attention included)
once on the stitched 1/8 grid; + receptive-field halos and no blending (this node).
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from .paths import OUT, REPO, TARGET_REFERENCE
from .section import Section, Target, cli, f, table

COMFY = REPO / ".comfy" / "ComfyUI"
WORK = OUT / "tiled_vae_work"     # not under out/bench/work: bench/run.py wipes that at its start
OURS = {"mode": "tiled", "tile_size": 256, "overlap": 64}
CORE_TILED = {"tile_size": 512, "overlap": 64}
SEED = 0
MB = 1024 * 1024


# -- parent ---------------------------------------------------------------------------------------
def run(size=(1920, 1080), ablation_size=(1280, 720), log=print, work: Path = WORK) -> dict:
    """The `tiled_vae` results dict (see the module docstring); every measurement in a child."""
    from .machine import load_average

    work.mkdir(parents=True, exist_ok=True)
    w, h = size
    res: dict = {"size": [w, h], "load_average_at_start": load_average(),
                 "vae": "SD1.5 architecture (ch 128, mult 1-2-4-4, 2 res blocks), random weights seed 0, "
                        "comfy.sd.VAE from a state dict as VAELoader, CPU float32",
                 "settings": {"ours": OURS, "core_tiled": CORE_TILED},
                 "runs": {}, "errors": {}}
    latents = {}
    for method in ("full", "core_tiled", "ours"):
        log(f"tiled_vae: {method} at {w}x{h} (child process)")
        try:
            res["runs"][method] = _child(method, size, work)
        except Exception as exc:  # noqa: BLE001 - one failed method must not cost the others
            res["errors"][method] = f"{type(exc).__name__}: {exc}"[-3000:]
            log(f"tiled_vae: {method} failed: {res['errors'][method]}")
            continue
        r = res["runs"][method]
        latents[method] = r.pop("latent")
        log(f"tiled_vae: {method}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s cpu, "
            f"peak +{r['peak_mb']:.0f} MB ({r['memory_method']})")
    runs = res["runs"]
    if "full" in latents:
        for m in ("core_tiled", "ours"):
            if m in latents:
                runs[m]["psnr_vs_full_db"] = round(psnr(latents[m], latents["full"]), 2)
    ours, full, core = runs.get("ours"), runs.get("full"), runs.get("core_tiled")
    res["psnr_vs_full_db"] = ours and full and ours["psnr_vs_full_db"]
    res["core_tiled_psnr_db"] = core and full and core["psnr_vs_full_db"]
    res["peak_mem_ratio_vs_full"] = ours and full and round(ours["peak_mb"] / full["peak_mb"], 3)
    res["peak_mem_ratio_vs_full_sampled"] = (ours and full
                                             and round(ours["sampled_peak_mb"] / full["sampled_peak_mb"], 3))
    res["time_ratio_vs_core_tiled"] = ours and core and round(ours["wall_s"] / core["wall_s"], 3)
    res["cpu_time_ratio_vs_core_tiled"] = ours and core and round(ours["cpu_s"] / core["cpu_s"], 3)
    res["time_ratio_vs_full"] = ours and full and round(ours["wall_s"] / full["wall_s"], 3)
    res["core_tiled_peak_mem_ratio_vs_full"] = core and full and round(core["peak_mb"] / full["peak_mb"], 3)
    if ablation_size:
        log(f"tiled_vae: ablation at {ablation_size[0]}x{ablation_size[1]} (child process)")
        try:
            res["ablation"] = _child("ablation", ablation_size, work)
        except Exception as exc:  # noqa: BLE001
            res["errors"]["ablation"] = f"{type(exc).__name__}: {exc}"[-3000:]
    res["load_average_at_end"] = load_average()
    return res


def _child(method: str, size: tuple[int, int], work: Path, timeout: float = 6 * 3600) -> dict:
    out = work / f"{method}_{size[0]}x{size[1]}.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", DO_NOT_TRACK="1")
    cmd = [sys.executable, "-m", "bench.tiled_vae", "--child", method, "--size", f"{size[0]}x{size[1]}",
           "--result", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"child {method} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    res = json.loads(out.read_text())
    if "latent_path" in res:                  # small (0.5 MB at 1080p): read it now, not at the end
        import torch

        res["latent"] = torch.load(res.pop("latent_path"), weights_only=True)
    return res


def psnr(a, ref) -> float:
    """PSNR of a latent against the full encode's, the peak being the full latent's range."""
    mse = float(((a.float() - ref.float()) ** 2).mean())
    rng = float(ref.max() - ref.min())
    return 10 * math.log10(rng * rng / max(mse, 1e-30))


# -- child: one method in a fresh process ---------------------------------------------------------
def _setup_comfy():
    """ComfyUI on the CPU with SDPA attention for the VAE (= --cpu --use-pytorch-cross-attention)."""
    sys.path.insert(0, str(COMFY))          # before the repo: `nodes` is ComfyUI's nodes.py here
    from comfy.cli_args import args

    args.cpu = True
    args.use_pytorch_cross_attention = True
    import comfy.model_management  # noqa: F401 - reads the args now


def _swapline():
    """The pack as the package ComfyUI imports (its modules use relative imports)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("swapline", REPO / "__init__.py",
                                                  submodule_search_locations=[str(REPO)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["swapline"] = mod
    spec.loader.exec_module(mod)
    import swapline.nodes.vae as node_mod

    return node_mod


def random_sd15_vae(seed: int = SEED):
    """comfy.sd.VAE from a random state dict under vae-ft-mse-840000's keys (as VAELoader builds it)."""
    import comfy.sd
    import torch
    from comfy.ldm.models.autoencoder import AutoencoderKL

    dd = {"double_z": True, "z_channels": 4, "resolution": 256, "in_channels": 3, "out_ch": 3, "ch": 128,
          "ch_mult": [1, 2, 4, 4], "num_res_blocks": 2, "attn_resolutions": [], "dropout": 0.0}
    shapes = AutoencoderKL(ddconfig=dd, embed_dim=4).state_dict()
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for name, p in shapes.items():
        if p.ndim > 1:
            sd[name] = torch.randn(p.shape, generator=g) / math.sqrt(p[0].numel())
        elif "norm" in name and name.endswith("weight"):
            sd[name] = 1 + 0.1 * torch.randn(p.shape, generator=g)
        else:
            sd[name] = 0.05 * torch.randn(p.shape, generator=g)
    del shapes
    return comfy.sd.VAE(sd=sd)


def bench_image(w: int, h: int):
    """(1, h, w, 3) float IMAGE: the sample reference face fitted into a w x h canvas."""
    import numpy as np
    import torch
    from PIL import Image

    from .media import fit_to_canvas

    rgb = np.array(Image.open(TARGET_REFERENCE).convert("RGB"))
    return torch.from_numpy(fit_to_canvas(rgb, w, h).astype(np.float32) / 255.0)[None]


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _hwm() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _trim() -> None:
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure(fn) -> tuple[object, dict]:
    """fn() with wall/CPU time and the process's peak RSS above its RSS at the start."""
    from .rss import RssSampler

    _trim()
    before = _rss()
    exact = _reset_hwm()
    sampler = RssSampler(os.getpid(), interval=0.02)
    sampler.start()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        out = fn()
    finally:
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        sampler.stop()
    hwm = _hwm() if exact else None
    peak = (hwm if hwm is not None else sampler.peak) - before
    return out, {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_mb": round(peak / MB, 1),
                 "sampled_peak_mb": round((sampler.peak - before) / MB, 1), "rss_before_mb": round(before / MB, 1),
                 "memory_method": "VmHWM (reset via clear_refs) - RSS before" if hwm is not None
                 else "RSS sampled every 20 ms - RSS before"}


def _methods(vae, node_mod):
    import nodes  # ComfyUI's nodes.py (COMFY is first on sys.path)

    def full(img):
        return nodes.VAEEncode().encode(vae, img)[0]["samples"]

    def core_tiled(img):
        return nodes.VAEEncodeTiled().encode(vae, img, CORE_TILED["tile_size"], CORE_TILED["overlap"])[0]["samples"]

    def ours(img):
        out = node_mod.TiledVAEEncode.execute(vae=vae, images=img, frames_per_chunk=1, **OURS)
        return out.args[0]["samples"]

    return {"full": full, "core_tiled": core_tiled, "ours": ours}


def _attention_name(vae) -> str:
    from comfy.ldm.modules.diffusionmodules.model import AttnBlock

    names = {m.optimized_attention.__name__ for m in vae.first_stage_model.modules() if isinstance(m, AttnBlock)}
    return ",".join(sorted(names))


def child_main(method: str, size: tuple[int, int], result: Path) -> None:
    _setup_comfy()
    import torch

    torch.manual_seed(SEED)
    vae = random_sd15_vae()
    node_mod = _swapline()
    w, h = size
    img = bench_image(w, h)
    info = {"method": method, "size": [w, h], "attention": _attention_name(vae),
            "torch_threads": torch.get_num_threads()}
    with torch.inference_mode():                   # as ComfyUI's executor runs nodes
        if method == "ablation":
            info.update(ablation(vae, node_mod, img))
        else:
            fn = _methods(vae, node_mod)[method]
            fn(bench_image(64, 64))                    # warm-up: kernels, lazy imports
            latent, stats = measure(lambda: fn(img))
            info.update(stats)
            path = result.with_suffix(".pt")
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(latent.clone().cpu(), path)
            info["latent_path"] = str(path)
            info["latent_shape"] = list(latent.shape)
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(json.dumps(info, indent=1))


# -- ablation ---------------------------------------------------------------------------------------
def ablation(vae, node_mod, img, tile: int = 512, overlap: int = 64) -> dict:
    """PSNR from the full encode of each step from per-tile encoding to exact tiling."""
    import comfy.utils
    import torch
    from torch.nn import GroupNorm

    model = vae.first_stage_model
    enc = model.encoder
    x = vae.process_input(vae.vae_encode_crop_pixels(img).movedim(-1, 1))

    def latent(moments):            # quant_conv output -> what model.encode returns
        return model.regularization(moments)[0]

    def tiled(fn, out_channels):
        return comfy.utils.tiled_scale(x, fn, tile, tile, overlap, upscale_amount=1 / 8,
                                       out_channels=out_channels, output_device="cpu")

    norms = [m for m in enc.modules() if isinstance(m, GroupNorm)]
    captured: dict = {}

    def capture(mod, args):
        t = args[0]
        var, mean = torch.var_mean(t.float().reshape(t.shape[0], mod.num_groups, -1), dim=2, correction=0)
        captured[mod] = (mean, var)

    hooks = [m.register_forward_pre_hook(capture) for m in norms]
    t0 = time.perf_counter()
    # the full encode (its latent), recording every GroupNorm's statistics
    ref = model.encode(x)
    full_s = time.perf_counter() - t0
    for hk in hooks:
        hk.remove()

    def fixed(mod):
        def forward(t):
            mean, var = captured[mod]
            g = t.reshape(t.shape[0], mod.num_groups, -1)
            y = ((g - mean[..., None]) * torch.rsqrt(var[..., None] + mod.eps)).reshape(t.shape)
            return y * mod.weight[None, :, None, None] + mod.bias[None, :, None, None]
        return forward

    steps = []

    def step(name, fn):
        t = time.perf_counter()
        out = fn()
        steps.append({"step": name, "psnr_db": round(psnr(out, ref), 2), "seconds": round(time.perf_counter() - t, 1)})

    step("core VAEEncodeTiled 512/64 (three layouts averaged)",
         lambda: vae.encode_tiled(img, tile_x=tile, tile_y=tile, overlap=overlap))
    step("one layout: every tile encoded as a whole image, feathered blend",
         lambda: tiled(model.encode, 4))
    for m in norms:
        m.forward = fixed(m)
    try:
        step("+ whole-image GroupNorm statistics in every tile (attention still per tile)",
             lambda: tiled(model.encode, 4))

        def down(t):
            h = enc.conv_in(t)
            for i, level in enumerate(enc.down):
                for b in level.block:
                    h = b(h, None)
                if i != len(enc.down) - 1:
                    h = level.downsample(h)
            return h

        grid = None

        def mid_once():
            nonlocal grid
            grid = tiled(down, enc.mid.block_1.in_channels)
            return grid

        def with_mid():
            g = mid_once()
            for m in norms:            # the rest runs on the whole grid: its own statistics
                del m.forward
            h = enc.mid.block_2(enc.mid.attn_1(enc.mid.block_1(g, None)), None)
            h = enc.conv_out(torch.nn.functional.silu(enc.norm_out(h)))
            return latent(model.quant_conv(h))

        step("+ mid block (attention included) once on the stitched 1/8 grid", with_mid)
    finally:
        for m in norms:
            m.__dict__.pop("forward", None)
    step("+ halos as wide as the receptive field, one layout, no blending (SwaplineTiledVAEEncode)",
         lambda: node_mod.TiledVAEEncode.execute(vae=vae, images=img, mode="tiled", tile_size=tile,
                                                 overlap=overlap, frames_per_chunk=1).args[0]["samples"])
    prev = None
    for s in steps[1:]:
        s["gain_db"] = None if prev is None else round(s["psnr_db"] - prev, 2)
        prev = s["psnr_db"]
    return {"tile": tile, "overlap": overlap, "full_encode_s": round(full_s, 1), "steps": steps}


def body(tv: dict) -> list[str]:
    rows = [[k, f(r.get("wall_s"), 1), f(r.get("cpu_s"), 1), f(r.get("peak_mb"), 0), f(r.get("psnr_vs_full_db"), 2)]
            for k, r in tv["runs"].items()]
    out = [f"VAE: {tv.get('vae')}; core tiled PSNR vs full {f(tv.get('core_tiled_psnr_db'), 1)} dB.", "",
           "## Per method", "", *table(["method", "wall s", "cpu s", "peak MB (above idle)", "PSNR vs full dB"], rows)]
    abl = tv.get("ablation") or {}
    if abl.get("steps"):
        out += ["", f"## Ablation (tile {abl.get('tile')}, overlap {abl.get('overlap')})", "",
                "What each step of exact tiling buys, PSNR vs the full encode:", ""]
        out += table(["step", "PSNR dB", "gain dB"], [[a["step"], f(a["psnr_db"], 2), f(a.get("gain_db"), 2)]
                                                     for a in abl["steps"]])
    return out + ["", f"Load average {tv.get('load_average_at_start')} at start, {tv.get('load_average_at_end')} "
                  "at end."]


SECTION = Section(
    name="tiled_vae", title="Tiled VAE encode: measurements",
    about="Exact tiled encode (`swapline_core/diffusion/tiled_vae/`, node `SwaplineTiledVAEEncode`) against core "
          "`VAEEncode` and `VAEEncodeTiled` on one 1920x1080 frame, each method in a fresh child process. Method "
          "and setup: `bench/tiled_vae.py` (module docstring) and `bench/README.md`.",
    run=run, body=body,
    targets=(Target("psnr_vs_full_db", ">=", 40.0, "latent PSNR of ours vs core VAEEncode"),
             Target("peak_mem_ratio_vs_full", "<=", 0.35, "peak memory of ours / core VAEEncode (SDPA)"),
             Target("time_ratio_vs_core_tiled", "<=", 0.5, "wall time of ours / core VAEEncodeTiled 512/64")),
    full={"size": [1920, 1080], "ablation_size": [1280, 720]},
    # the children's warm-up size: each child's start-up (torch, ComfyUI, the VAE) is most of the time
    smoke={"size": [64, 64], "ablation_size": [64, 64]},
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--child")
    ap.add_argument("--size")
    ap.add_argument("--result", type=Path)
    args, rest = ap.parse_known_args(argv)
    if args.child:      # one method in this fresh process (_child)
        w, h = args.size.lower().split("x")
        child_main(args.child, (int(w), int(h)), args.result)
        return 0
    if args.size or args.result:
        raise SystemExit("--size/--result are the child's: give the frame size as --set 'size=[1920,1080]'")
    return cli(SECTION, rest, module="bench.tiled_vae")


if __name__ == "__main__":
    raise SystemExit(main())
