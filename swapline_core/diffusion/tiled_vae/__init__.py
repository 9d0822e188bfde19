"""Exact tiled VAE encoding for SD-class (AutoencoderKL) encoders, in bounded memory.

Why not core tiling: ComfyUI's VAEEncodeTiled encodes every tile as if it were a whole image,
but the encoder has whole-image operations. Every GroupNorm normalises with the statistics of
its whole input, and the mid block's attention looks at the whole 1/8-resolution grid. Per tile
both follow the tile's content, so the latent shifts with it. What each of the steps below buys
(whole-image statistics, attention on the stitched grid, halos), and how this compares with core
tiling in accuracy, time and memory, is measured by bench/tiled_vae.py: see
docs/measurements/tiled_vae.md. Averaging three layouts, as core does, only blurs the seams.

So the encoder runs here operation by operation, each over tiles:

- every GroupNorm uses the statistics of its whole input: one pass over all tiles of that input
  gathers them (per-channel mean/M2 merged with Chan's formula in float64) before anything is
  normalised with them;
- every convolution tile gets a halo as wide as its receptive field, with zeros only at the
  image border, so a tile's output equals the full encode's output at those pixels: one layout,
  nothing to average;
- the mid-block attention runs once over the whole 1/8 grid (keys and values of the whole grid,
  queries tile by tile).

Between two GroupNorms a feature map is a *plane*: stored in row chunks (float32, or float16
where memory is tight and the values fit), or, when not even that fits the plane budget,
recomputed on demand from the last stored plane. A stored plane is released row chunk by row
chunk during the last pass that reads it, so at most about one full-resolution feature map in
half precision is alive (128 channels x 1920 x 1080 x 2 bytes = 0.5 GB at 1080p for SD).

This package imports torch only; the node layer hands in the encoder and quant_conv modules of
ComfyUI's loaded VAE and does pixel preprocessing, device placement and the latent's
regulariser itself.
"""
from __future__ import annotations

from .arch import KNOWN_MODULE, EncoderSpec, UnsupportedArchitecture, check_architecture
from .blocks import AttnNode, ConvNode, PoolNode, ResNode
from .memory import (
                     ESTIMATE_OVER_PEAK,
                     LIVE_TILE_TENSORS,
                     MIN_TILE,
                     choose_tile,
                     encode_with_retry,
                     is_oom,
                     plane_bytes,
                     shrink_tile,
                     tile_bytes,
)
from .plan import Pass, Plan, build_plan, default_plane_budget
from .planes import CHUNK_ROWS, HALF_MAX, Ctx, GroupStats, Node, Source
from .run import TileProgress, encode_tiled_exact

__all__ = ["AttnNode", "CHUNK_ROWS", "ConvNode", "Ctx", "ESTIMATE_OVER_PEAK", "EncoderSpec", "GroupStats", "HALF_MAX",
           "KNOWN_MODULE", "LIVE_TILE_TENSORS", "MIN_TILE", "Node", "Pass", "Plan", "PoolNode", "ResNode", "Source",
           "TileProgress", "UnsupportedArchitecture", "build_plan", "check_architecture", "choose_tile",
           "default_plane_budget", "encode_tiled_exact", "encode_with_retry", "is_oom", "plane_bytes", "shrink_tile",
           "tile_bytes"]
