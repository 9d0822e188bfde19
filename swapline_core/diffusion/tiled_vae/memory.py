"""Memory: out-of-memory detection and retry with smaller tiles, and tile sizing from a budget."""
from __future__ import annotations

import gc
from collections.abc import Callable

import torch

from .arch import EncoderSpec, check_architecture
from .plan import build_plan, default_plane_budget
from .planes import Ctx
from .run import encode_tiled_exact

MIN_TILE = 64                 # smallest tile (input pixels) an out-of-memory retry goes down to
# ComfyUI's memory_used_encode for AutoencoderKL over-predicts the encode's peak; this is the low
# end of the measured ratio (docs/measurements/tiled_vae.md), so dividing by it never under-predicts.
ESTIMATE_OVER_PEAK = 1.7
# Tile-sized tensors alive at once inside a pass (source region, normalised copy, conv outputs,
# the shortcut, the stored copy), as a multiple of the largest one.
LIVE_TILE_TENSORS = 6


# -- memory: out-of-memory detection, retry, tile sizing --------------------------------------
_OOM_TEXT = ("out of memory", "not enough memory", "defaultcpuallocator", "can't allocate memory",
             "cannot allocate memory")


def is_oom(exc: BaseException) -> bool:
    """An allocation failure on any device: CUDA/XPU/MPS OutOfMemoryError, the CPU allocator's
    RuntimeError ("DefaultCPUAllocator: not enough memory" / "can't allocate memory"), MemoryError."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and any(s in str(exc).lower() for s in _OOM_TEXT)


def shrink_tile(tile: int, min_tile: int = MIN_TILE) -> int:
    """Next smaller tile after an out-of-memory: about half the area, a multiple of 8."""
    return max(min_tile, int(tile * 0.7) // 8 * 8)


def encode_with_retry(encoder, quant_conv, pixels_bchw, tile: int, overlap: int, on_tile=None,
                      check_interrupt=None, *, min_tile: int = MIN_TILE,
                      on_oom: Callable[[int, str], None] | None = None,
                      plane_budget: int | None = None, **kw) -> tuple[torch.Tensor, int]:
    """encode_tiled_exact, retried from scratch with smaller tiles after an allocation failure on
    any device (the plane budget halves too, down to a quarter of the default, below which the
    recomputation grows quadratically). Returns (latent, tile used)."""
    spec = check_architecture(encoder, quant_conv)
    floor = default_plane_budget(spec, *pixels_bchw.shape[-2:]) // 4
    while True:
        try:
            return encode_tiled_exact(encoder, quant_conv, pixels_bchw, tile, overlap, on_tile, check_interrupt,
                                      plane_budget=plane_budget, **kw), tile
        except Exception as exc:
            if not is_oom(exc) or tile <= min_tile:
                raise
            failed, message = tile, f"{type(exc).__name__}: {exc}"
        # Outside the except block: the traceback, and the tensors its frames hold, are gone now.
        gc.collect()
        if on_oom is not None:
            on_oom(failed, message)
        tile = shrink_tile(failed, min_tile)
        if plane_budget is None:
            plane_budget = default_plane_budget(spec, *pixels_bchw.shape[-2:])
        plane_budget = max(floor, plane_budget // 2)


def tile_bytes(spec: EncoderSpec, tile: int, dtype: torch.dtype) -> int:
    """Our own estimate of one tile's working memory: LIVE_TILE_TENSORS tensors of the largest
    tile size (tile x tile at the first level's channel count, halo included)."""
    return LIVE_TILE_TENSORS * tile * tile * spec.base_channels * torch.empty((), dtype=dtype).element_size()


def plane_bytes(spec: EncoderSpec, h: int, w: int, dtype: torch.dtype, plane_budget: int | None = None,
                tile: int = 512) -> int:
    """Peak bytes of the stored planes for an h x w frame under a plane budget."""
    ctx = Ctx(torch.device("cpu"), dtype, torch.device("cpu"))
    return build_plan(spec, h, w, tile, ctx, plane_budget).peak_plane_bytes()


def choose_tile(budget: int, tile_cost: Callable[[int], float], fixed: int = 0, *, max_tile: int = 2048,
                min_tile: int = MIN_TILE, step: int = 64) -> int:
    """The largest tile (multiple of `step`, within [min_tile, max_tile]) whose working memory plus
    `fixed` bytes fits `budget`; min_tile when none does (the out-of-memory retry is the net)."""
    t = max(min_tile, max_tile // step * step)
    while t > min_tile:
        if fixed + tile_cost(t) <= budget:
            return t
        t -= step
    return min_tile
