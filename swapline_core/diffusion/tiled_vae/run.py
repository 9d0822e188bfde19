"""Running a plan: pass by pass, tile by tile, cross-fading the latent's tiles."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch

from .arch import check_architecture
from .plan import Pass, build_plan, min_row
from .planes import Ctx, GroupStats, grow_box, splits, trim_heap


class TileProgress(NamedTuple):
    done: int           # tiles finished (all passes, all frames of this call)
    total: int
    tile: int           # the tile size in use (input pixels)




# -- execution ----------------------------------------------------------------------------------
def _feather(e0: int, e1: int, c0: int, c1: int, device) -> torch.Tensor:
    """Weights along one axis of an extended tile [e0, e1) whose own part is [c0, c1): 1 inside,
    ramping towards the extension's far edge, so overlapping tiles cross-fade."""
    i = torch.arange(e0, e1, device=device, dtype=torch.float32)
    w = torch.ones_like(i)
    if c0 > e0:
        w = torch.minimum(w, (i - e0 + 1) / (2 * (c0 - e0) + 1))
    if c1 < e1:
        w = torch.minimum(w, (e1 - i) / (2 * (e1 - c1) + 1))
    return w


def _run_pass(p: Pass, overlap: int, out_device, tick: Callable[[], None]) -> torch.Tensor | None:
    t = p.target
    trim = t.ctx.device.type == "cpu" or t.ctx.store_device.type == "cpu"
    if t.keep is not None:
        t.allocate()
    stats = GroupStats() if p.stats else None
    result = wsum = None
    ov = 0
    if p.assemble:
        result = torch.zeros((1, t.c, t.h, t.w), dtype=torch.float32, device=out_device)
        wsum = torch.zeros((1, 1, t.h, t.w), dtype=torch.float32, device=out_device)
        ov = math.ceil(overlap / t.scale) if overlap > 0 else 0
    rows, cols = splits(t.h, p.tile), splits(t.w, p.tile)
    for y0, y1 in rows:
        for x0, x1 in cols:
            box = (y0, y1, x0, x1)
            if p.assemble and ov:
                ebox = grow_box(box, ov, t.h, t.w)
                patch = t.compute(ebox).t.to(device=out_device, dtype=torch.float32)
                wy = _feather(ebox[0], ebox[1], y0, y1, out_device)
                wx = _feather(ebox[2], ebox[3], x0, x1, out_device)
                wgt = (wy[:, None] * wx[None, :])[None, None]
                result[:, :, ebox[0]:ebox[1], ebox[2]:ebox[3]] += patch * wgt
                wsum[:, :, ebox[0]:ebox[1], ebox[2]:ebox[3]] += wgt
            else:
                patch = t.compute(box).t
                if stats is not None:
                    stats.add(patch)
                if t.keep is not None:
                    t.write(patch, box)
                if p.assemble:
                    result[:, :, y0:y1, x0:x1] = patch.to(device=out_device, dtype=torch.float32)
                    wsum[:, :, y0:y1, x0:x1] = 1.0
            del patch
            tick()
        for n in p.frees:                       # rows no later tile of this pass reads
            r = min_row(t, max(0, y1 - ov), n)  # (the next row of tiles starts ov rows higher)
            if r is not None:
                n.release_below(r)
        if trim:
            trim_heap()
    for n in p.frees:
        n.release()
    for n in p.reads:
        n.drop_cache()
    t.drop_cache()
    t.stats = stats
    return None if result is None else result / wsum


def _device_dtype(module: torch.nn.Module):
    p = next(module.parameters())
    return p.device, p.dtype


def encode_tiled_exact(encoder, quant_conv, pixels_bchw: torch.Tensor, tile: int, overlap: int,
                       on_tile: Callable[[TileProgress], None] | None = None,
                       check_interrupt: Callable[[], None] | None = None, *,
                       plane_budget: int | None = None, store_device=None, out_device=None) -> torch.Tensor:
    """quant_conv(encoder(pixels)) computed tile by tile, equal to the full encode up to rounding.

    pixels_bchw: preprocessed (-1..1), 3 channels, any device; tiles move to the encoder's device
    and dtype. tile: bounds every tile-sized tensor, halo included, to tile x tile pixels at the
    first level's channel count (a tile edge in input pixels there; deeper levels, with more
    channels and fewer pixels, get tiles of about the same memory).
    overlap: input pixels by which latent tiles overlap and cross-fade (their values agree up to
    rounding; the fade hides rounding-level seams, e.g. from per-shape GPU kernels).
    plane_budget: bytes for stored feature maps (default: one full-resolution map in float16).
    Returns (B, C, H/8, W/8) float32 on out_device (default: the pixels' device).
    """
    spec = check_architecture(encoder, quant_conv)
    if pixels_bchw.ndim != 4 or pixels_bchw.shape[1] != 3:
        raise ValueError(f"expected pixels (B, 3, H, W), got {tuple(pixels_bchw.shape)}")
    device, dtype = _device_dtype(encoder)
    ctx = Ctx(device, dtype, store_device if store_device is not None else device)
    out_device = pixels_bchw.device if out_device is None else out_device
    b, _, h, w = pixels_bchw.shape
    tile = max(8, int(tile))
    per_frame = build_plan(spec, h, w, tile, ctx, plane_budget).total_tiles()
    done = [0]

    def tick():
        done[0] += 1
        if on_tile is not None:
            on_tile(TileProgress(done[0], per_frame * b, tile))

    out = []
    with torch.no_grad():
        for i in range(b):
            plan = build_plan(spec, h, w, tile, ctx, plane_budget, pixels_bchw[i:i + 1])
            latent = None
            for p in plan.passes:
                if check_interrupt is not None:
                    check_interrupt()
                step = tick if check_interrupt is None else _checked(tick, check_interrupt)
                r = _run_pass(p, overlap, out_device, step)
                if r is not None:
                    latent = r
            del plan
            out.append(latent)
    return torch.cat(out) if len(out) > 1 else out[0]


def _checked(tick, check_interrupt):
    def f():
        check_interrupt()
        tick()
    return f
