"""Tiled VAE encode: exact tiling for SD-class VAEs, so large frames and long clips encode in
bounded memory without core tiling's content-following latent shift (swapline_core.diffusion.tiled_vae)."""
from __future__ import annotations

import logging
import math

import torch
from comfy_api.latest import io
from typing_extensions import override

from ..swapline_core.diffusion import tiled_vae
from ..swapline_core.errors import SwaplineError
from .convert import check_interrupt, preview_ui, progress, to_image
from .memory import available_memory
from .types import CATEGORY, Frames

log = logging.getLogger("swapline")

MODES = ("auto", "tiled")
# Share of the free memory an encode may plan for: the rest is headroom for the allocator's
# fragmentation, the latent being assembled and whatever else the process holds.
BUDGET_FRACTION = 0.75
STEPS = 100                    # progress-bar units per frame
# On CPU, glibc hands tensors of 32 MiB or more straight to mmap and back on free, so each one is
# page-faulted in again: tiles stay below that (the tile size bounds every tile tensor).
CPU_MAX_TENSOR = 32 * 1024 ** 2


class TiledVAEEncode(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineTiledVAEEncode",
            display_name="VAE Encode (Tiled, exact) (Swapline)",
            category=f"{CATEGORY}/latent",
            description="Encodes images or a frame sequence to a latent in bounded memory. auto: a plain encode "
                        "when it fits the free memory, tiled when not. Tiling here is exact for SD-class VAEs "
                        "(SD1.x/2.x, SDXL, SD3, Flux): every GroupNorm uses whole-image statistics, the mid-block "
                        "attention runs once on the whole 1/8 grid and convolution tiles carry their full "
                        "receptive-field halo, so the latent matches a plain encode (core VAE Encode (Tiled) "
                        "drifts with the content; measured in docs/measurements/tiled_vae.md). Out of memory on any "
                        "device: retried with "
                        "smaller tiles. Other VAEs fall back to core tiling.",
            inputs=[
                io.Vae.Input("vae", tooltip="The VAE to encode with (e.g. from Load VAE or a checkpoint loader)."),
                io.Image.Input("images", optional=True,
                               tooltip="Images to encode. Connect this or 'frames', not both."),
                Frames.Input("frames", optional=True,
                             tooltip="Or a frame sequence (Load Video Frames); it is read chunk by chunk."),
                io.Combo.Input("mode", options=list(MODES), default="auto",
                               tooltip="auto: plain encode when it fits the free memory, else tiled with a tile size "
                                       "chosen from the free memory. tiled: always tiled, with the tile size and "
                                       "overlap below."),
                io.Int.Input("tile_size", default=256, min=64, max=4096, step=32,
                             tooltip="tiled mode: tile edge in pixels. It bounds every tile tensor (halo included) to "
                                     "tile_size x tile_size at the first level's width; deeper levels use tiles of "
                                     "similar memory. 256 keeps CPU tensors under 32 MiB (faster allocation)."),
                io.Int.Input("overlap", default=64, min=0, max=1024, step=8,
                             tooltip="tiled mode: pixels by which latent tiles overlap and cross-fade. Exact tiling "
                                     "needs "
                                     "no overlap (tiles agree up to rounding); it only hides rounding-level seams. "
                                     "Also the blend width of the core-tiling fallback."),
                io.Int.Input("frames_per_chunk", default=8, min=1, max=256,
                             tooltip="Frames converted and encoded together: bounds the memory of the float copies "
                                     "and of one plain-encode batch."),
            ],
            outputs=[io.Latent.Output(display_name="latent")],
        )

    @classmethod
    @override
    def execute(cls, vae, mode, tile_size, overlap, frames_per_chunk, images=None, frames=None) -> io.NodeOutput:
        if (images is None) == (frames is None):
            raise SwaplineError("connect exactly one of 'images' or 'frames'")
        vae.throw_exception_if_invalid()
        enc = VaeEncoder(vae)
        total = (images.shape[0] if images is not None else frames.count)
        pbar = progress(total * STEPS)
        latents, done = [], 0
        for batch in _batches(images, frames, frames_per_chunk):
            check_interrupt()
            base = done

            def report(frame_done: float, base=base):
                pbar.update_absolute(min(total * STEPS, int((base + frame_done) * STEPS)), total * STEPS)

            latents.append(enc.encode(batch, mode, tile_size, overlap, report))
            done += batch.shape[0]
            pbar.update_absolute(done * STEPS, total * STEPS)
        samples = torch.cat(latents) if len(latents) > 1 else latents[0]
        return io.NodeOutput({"samples": samples}, ui=preview_ui(cls, vae_encode=enc.summary()))


def _batches(images, frames, n: int):
    """IMAGE batches (B, H, W, C float 0..1) of at most n frames, from an IMAGE or a sequence."""
    if images is not None:
        for s in range(0, images.shape[0], n):
            yield images[s:s + n]
        return
    for _, chunk in frames.iter_chunks():
        for s in range(0, len(chunk), n):
            yield to_image(chunk[s:s + n])


class VaeEncoder:
    """ComfyUI's VAE object wired to the exact tiler: preprocessing, devices, memory budget."""

    def __init__(self, vae):
        self.vae = vae
        model = vae.first_stage_model
        self.unsupported: str | None = None
        self.spec = None
        try:
            if getattr(vae, "latent_dim", 2) != 2:
                raise tiled_vae.UnsupportedArchitecture("a video/audio VAE (latent is not 2-D)")
            if getattr(model, "bn", None) is not None:
                raise tiled_vae.UnsupportedArchitecture("the latent is batch-normalised after the encoder")
            self.spec = tiled_vae.check_architecture(getattr(model, "encoder", None),
                                                     getattr(model, "quant_conv", None))
        except tiled_vae.UnsupportedArchitecture as exc:
            self.unsupported = str(exc)
            log.warning("[Swapline] exact tiled VAE encode does not support this VAE (%s); using core tiling", exc)
        self.counts = {"frames": 0, "plain": 0, "tiled": 0, "core": 0}
        self.tiles: set[int] = set()
        self.oom_retries = 0

    def summary(self) -> dict:
        return {**self.counts, "tiles": sorted(self.tiles), "oom_retries": self.oom_retries,
                "fallback": self.unsupported}

    # -- preprocessing as VAE.encode does it -------------------------------------------------
    def _pixels(self, images: torch.Tensor) -> torch.Tensor:
        """IMAGE (B, H, W, C) -> (B, 3, H', W') in the VAE's input range, H'/W' cropped to its
        downscale ratio (centred), as VAE.encode does; 1-channel images are repeated, alpha dropped."""
        images = images[..., :3]
        if images.shape[-1] == 1:
            images = images.expand(*images.shape[:-1], 3)
        px = self.vae.vae_encode_crop_pixels(images).movedim(-1, 1)
        return self.vae.process_input(px)

    def _estimate(self, h: int, w: int, n: int = 1) -> float:
        """Peak bytes of a plain encode of n h x w frames: the VAE's own estimate, corrected."""
        return self.vae.memory_used_encode((n, 3, h, w), self.vae.vae_dtype) / tiled_vae.ESTIMATE_OVER_PEAK

    def _budget(self, need: float) -> float:
        import comfy.model_management as mm

        # loads (or keeps) the weights on the VAE's device and frees `need` there if it can; with
        # Dynamic VRAM (ComfyUI >= 0.16) what it would still evict on demand counts too, as in core's encode
        mm.load_models_gpu([self.vae.patcher], memory_required=need, force_full_load=self.vae.disable_offload)
        return available_memory(self.vae.device) * BUDGET_FRACTION

    # -- encode ------------------------------------------------------------------------------
    def encode(self, images: torch.Tensor, mode: str, tile: int, overlap: int, report) -> torch.Tensor:
        vae = self.vae
        n = images.shape[0]
        self.counts["frames"] += n
        if self.unsupported is not None:
            self.counts["core"] += n
            if mode == "tiled":
                return vae.encode_tiled(images[..., :3], tile_x=tile, tile_y=tile, overlap=overlap)
            return vae.encode(images[..., :3])
        px = self._pixels(images)
        h, w = px.shape[-2:]
        lean = tiled_vae.plane_bytes(self.spec, h, w, vae.vae_dtype)     # planes of the default plan
        if mode == "auto":
            plain = self._estimate(h, w)
            budget = self._budget(plain)
            if plain <= budget:
                out = self._plain(px, max(1, int(budget // plain)), report)
                if out is not None:
                    return out
                budget = self._budget(plain)          # again, now that the failed attempt is freed
            tile = None
        else:
            budget = self._budget(self._tile_cost(tile) + lean)
        tile, store, plane_budget = self._placement(h, w, tile, budget, lean)
        return self._tiled(px, tile, overlap, plane_budget, store, report)

    def _plain(self, px: torch.Tensor, batch: int, report) -> torch.Tensor | None:
        """The whole-frame encode, or None after an allocation failure on any device.

        Not VAE.encode(): on a GPU it turns an out-of-memory into core tiling (and on CPU it
        does not catch the allocator's error at all); here the fallback is the exact tiler.
        """
        vae, model = self.vae, self.vae.first_stage_model
        out = []
        try:
            for s in range(0, px.shape[0], batch):
                check_interrupt()
                x = px[s:s + batch].to(device=vae.device, dtype=vae.vae_dtype)
                out.append(model.encode(x).to(vae.output_device).float())
                report(s + x.shape[0])
        except Exception as exc:
            if not tiled_vae.is_oom(exc):
                raise
            log.warning("[Swapline] plain VAE encode ran out of memory (%s); encoding tiled instead", exc)
            failed = True
        else:
            failed = False
        if failed:
            import comfy.model_management as mm

            out.clear()
            mm.soft_empty_cache()
            return None
        self.counts["plain"] += px.shape[0]
        return torch.cat(out) if len(out) > 1 else out[0]

    def _tile_cost(self, t: int) -> float:
        # the VAE's own (corrected) estimate for encoding a t x t image bounds one tile's work
        return self._estimate(t, t)

    def _placement(self, h: int, w: int, tile: int | None, budget: float, lean: int):
        """(tile, where planes are stored, plane budget). auto (tile None): the largest tile whose
        working memory leaves room for the lean planes, and planes may use what the tile leaves
        (float32 where it fits). tiled: the given tile, planes no larger than the lean plan.
        Planes that do not fit next to the tiles in VRAM live in host RAM."""
        spec, dtype = self.spec, self.vae.vae_dtype
        device = torch.device(self.vae.device)
        auto = tile is None
        if auto:
            max_tile = 4096
            if device.type == "cpu":
                size = torch.empty((), dtype=dtype).element_size()
                max_tile = int(math.sqrt(CPU_MAX_TENSOR / (spec.base_channels * size)))
            tile = tiled_vae.choose_tile(budget, self._tile_cost, lean, max_tile=max_tile, step=32)
        left = budget - self._tile_cost(tile)
        store = device
        if device.type != "cpu" and lean > left:
            store = torch.device("cpu")
            left = available_memory(store) * BUDGET_FRACTION
        left = max(0.0, left)
        plane_budget = left if auto else min(tiled_vae.default_plane_budget(spec, h, w), left)
        return tile, store, int(plane_budget)

    def _tiled(self, px: torch.Tensor, tile: int, overlap: int, plane_budget: int, store, report) -> torch.Tensor:
        import comfy.model_management as mm

        vae, model = self.vae, self.vae.first_stage_model
        out = []

        def on_oom(failed: int, message: str):
            self.oom_retries += 1
            log.warning("[Swapline] tiled VAE encode ran out of memory at tile %d (%s); retrying smaller",
                        failed, message.splitlines()[0][:200])
            mm.soft_empty_cache()

        for i in range(px.shape[0]):
            moments, used = tiled_vae.encode_with_retry(
                model.encoder, getattr(model, "quant_conv", None), px[i:i + 1], tile, overlap,
                on_tile=lambda p, i=i: report(i + p.done / p.total), check_interrupt=check_interrupt,
                plane_budget=plane_budget, on_oom=on_oom, store_device=store,
                out_device=vae.output_device)
            self.tiles.add(used)
            out.append(self._latent(moments))
            report(i + 1)
        self.counts["tiled"] += px.shape[0]
        return torch.cat(out) if len(out) > 1 else out[0]

    def _latent(self, moments: torch.Tensor) -> torch.Tensor:
        """What AutoencoderKL.encode returns after quant_conv: the regulariser's output (the
        Gaussian's mean for SD-class VAEs)."""
        reg = getattr(self.vae.first_stage_model, "regularization", None)
        z = reg(moments)[0] if reg is not None else moments
        return z.to(self.vae.output_device).float()
