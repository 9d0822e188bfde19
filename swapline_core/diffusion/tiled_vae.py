"""Exact tiled VAE encoding for SD-class (AutoencoderKL) encoders, in bounded memory.

Why not core tiling: ComfyUI's VAEEncodeTiled encodes every tile as if it were a whole image,
but the encoder has whole-image operations. Every GroupNorm normalises with the statistics of
its whole input, and the mid block's attention looks at the whole 1/8-resolution grid. Per tile
both follow the tile's content, so the latent shifts with it. Measured with an SD1.5-architecture
VAE at 720p, tile 512/64: core 23.8 dB PSNR from the full encode; with whole-image GroupNorm
statistics 33.4 dB; with those and the attention run once on the stitched grid 44.9 dB; the rest
is the convolution halos. Averaging three layouts, as core does, only blurs the seams.

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
half precision is alive (0.5 GB at 1080p for SD's 128 channels, a sixth of a full encode).

This module imports torch only; the node layer hands in the encoder and quant_conv modules of
ComfyUI's loaded VAE and does pixel preprocessing, device placement and the latent's
regulariser itself.
"""
from __future__ import annotations

import gc
import itertools
import math
import mmap
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..errors import SwaplineError

MIN_TILE = 64                 # smallest tile (input pixels) an out-of-memory retry goes down to
CHUNK_ROWS = 16               # rows per stored chunk: the granularity at which planes are freed
HALF_MAX = 60000.0            # float16 holds up to 65504; above this a chunk is kept in float32
# ComfyUI's memory_used_encode for AutoencoderKL is 1.7-4.6x the measured peak of the encode
# (ComfyUI 0.3.75, SD1.5 architecture, CPU fp32). Dividing by the low end never under-predicts.
ESTIMATE_OVER_PEAK = 1.7
# Tile-sized tensors alive at once inside a pass (source region, normalised copy, conv outputs,
# the shortcut, the stored copy), as a multiple of the largest one.
LIVE_TILE_TENSORS = 6

KNOWN_MODULE = "comfy.ldm.modules.diffusionmodules.model"


class UnsupportedArchitecture(SwaplineError):
    """The encoder is not one whose operations this module reproduces exactly."""


class TileProgress(NamedTuple):
    done: int           # tiles finished (all passes, all frames of this call)
    total: int
    tile: int           # the tile size in use (input pixels)


Box = tuple[int, int, int, int]          # y0, y1, x0, x1 (end exclusive), in a node's own pixels


# -- architecture ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Geom:
    """A convolution's geometry along one axis: kernel, stride, zeros before and after."""
    k: int
    s: int
    pb: int
    pe: int

    def out_size(self, n: int) -> int:
        return (n + self.pb + self.pe - self.k) // self.s + 1

    def need(self, o0: int, o1: int) -> tuple[int, int]:
        """Input rows [i0, i1) that output rows [o0, o1) read (may reach into the padding)."""
        return o0 * self.s - self.pb, (o1 - 1) * self.s - self.pb + self.k


SAME3 = Geom(3, 1, 1, 1)
POINT = Geom(1, 1, 0, 0)
DOWN = Geom(3, 2, 0, 1)       # comfy's Downsample: pad (0, 1, 0, 1), then 3x3 stride 2


@dataclass(frozen=True)
class EncoderSpec:
    """The encoder as a flat list of operations, checked against what this module reproduces."""
    ops: tuple                # ("conv_in", conv) ("res", block) ("down", ds) ("attn", attn) ("out", (norm, conv)) ("quant", conv)
    base_channels: int        # channels after conv_in: the unit of the tile budget
    scale: int                # input pixels per latent pixel

    def plane_dtypes(self, compute_dtype: torch.dtype) -> tuple[torch.dtype, ...]:
        # float16 storage only saves memory when computing in float32; half-precision compute
        # stores in its own dtype.
        return (torch.float32, torch.float16) if compute_dtype == torch.float32 else (compute_dtype,)


def _kind(m) -> str:
    t = type(m)
    return f"{t.__module__}.{t.__qualname__}"


def _is_known(m, name: str) -> bool:
    # The class *and* its forward must be comfy's: a subclass with another forward (or another
    # repository's ResnetBlock with the same attribute names) computes something else.
    t = type(m)
    fwd = getattr(t, "forward", None)
    return (t.__name__ == name and t.__module__ == KNOWN_MODULE and fwd is not None
            and fwd.__qualname__ == f"{name}.forward" and fwd.__module__ == KNOWN_MODULE)


def _check_conv(conv, where: str, kernel: int, stride: int = 1) -> None:
    if not isinstance(conv, torch.nn.Conv2d):
        raise UnsupportedArchitecture(f"{where} is {_kind(conv)}, expected a 2D convolution")
    ok = (conv.kernel_size == (kernel, kernel) and conv.stride == (stride, stride)
          and conv.dilation == (1, 1) and conv.groups == 1 and conv.padding_mode == "zeros")
    pad = conv.padding if isinstance(conv.padding, tuple) else None
    if stride == 1:
        ok = ok and pad == (kernel // 2, kernel // 2)
    else:
        ok = ok and pad == (0, 0)
    if not ok:
        raise UnsupportedArchitecture(
            f"{where}: kernel {conv.kernel_size}, stride {conv.stride}, padding {conv.padding}, "
            f"dilation {conv.dilation}, groups {conv.groups}, padding mode {conv.padding_mode}: expected "
            f"{kernel}x{kernel}, stride {stride}, {'same' if stride == 1 else 'no'} zero padding")


def _check_norm(norm, where: str) -> None:
    if not isinstance(norm, torch.nn.GroupNorm):
        raise UnsupportedArchitecture(f"{where} is {_kind(norm)}, expected GroupNorm")


def _check_block(block, where: str) -> None:
    if not _is_known(block, "ResnetBlock"):
        raise UnsupportedArchitecture(f"{where} is {_kind(block)}, expected {KNOWN_MODULE}.ResnetBlock")
    _check_norm(block.norm1, f"{where}.norm1")
    _check_norm(block.norm2, f"{where}.norm2")
    _check_conv(block.conv1, f"{where}.conv1", 3)
    _check_conv(block.conv2, f"{where}.conv2", 3)
    if block.in_channels != block.out_channels:
        if block.use_conv_shortcut:
            _check_conv(block.conv_shortcut, f"{where}.conv_shortcut", 3)
        else:
            _check_conv(block.nin_shortcut, f"{where}.nin_shortcut", 1)


def check_architecture(encoder, quant_conv=None) -> EncoderSpec:
    """The encoder's operations, or UnsupportedArchitecture saying what does not match.

    Known: ComfyUI's diffusionmodules Encoder as used by AutoencoderKL (SD1.x/2.x, SDXL, SD3,
    Flux): conv_in; levels of ResnetBlocks without attention, each but the last followed by a
    Downsample; mid block (ResnetBlock, AttnBlock, ResnetBlock); GroupNorm, SiLU, conv_out;
    then the AutoencoderKL's 1x1 quant_conv, if any. 2D convolutions only.
    """
    if not _is_known(encoder, "Encoder"):
        raise UnsupportedArchitecture(f"the VAE's encoder is {_kind(encoder)}; exact tiling knows "
                                      f"{KNOWN_MODULE}.Encoder (SD1.x/2.x/XL/3 and Flux VAEs)")
    _check_conv(encoder.conv_in, "encoder.conv_in", 3)
    ops: list = [("conv_in", encoder.conv_in)]
    levels = list(encoder.down)
    if not levels:
        raise UnsupportedArchitecture("the encoder has no levels")
    scale = 1
    for i, level in enumerate(levels):
        if len(getattr(level, "attn", ())) > 0:
            raise UnsupportedArchitecture(f"encoder.down.{i} has attention blocks (attn_resolutions); "
                                          "exact tiling supports attention only in the mid block")
        for j, block in enumerate(level.block):
            _check_block(block, f"encoder.down.{i}.block.{j}")
            ops.append(("res", block))
        if i != len(levels) - 1:
            ds = getattr(level, "downsample", None)
            if not _is_known(ds, "Downsample"):
                raise UnsupportedArchitecture(f"encoder.down.{i}.downsample is {_kind(ds)}, expected Downsample")
            if ds.with_conv:
                _check_conv(ds.conv, f"encoder.down.{i}.downsample.conv", 3, stride=2)
            ops.append(("down", ds))
            scale *= 2
    mid = encoder.mid
    _check_block(mid.block_1, "encoder.mid.block_1")
    attn = mid.attn_1
    if not _is_known(attn, "AttnBlock"):
        raise UnsupportedArchitecture(f"encoder.mid.attn_1 is {_kind(attn)}, expected AttnBlock")
    _check_norm(attn.norm, "encoder.mid.attn_1.norm")
    for name in ("q", "k", "v", "proj_out"):
        _check_conv(getattr(attn, name), f"encoder.mid.attn_1.{name}", 1)
    _check_block(mid.block_2, "encoder.mid.block_2")
    ops += [("res", mid.block_1), ("attn", attn), ("res", mid.block_2)]
    _check_norm(encoder.norm_out, "encoder.norm_out")
    _check_conv(encoder.conv_out, "encoder.conv_out", 3)
    ops.append(("out", (encoder.norm_out, encoder.conv_out)))
    if quant_conv is not None:
        _check_conv(quant_conv, "quant_conv", 1)
        ops.append(("quant", quant_conv))
    return EncoderSpec(tuple(ops), encoder.conv_in.out_channels, scale)


# -- small tensor helpers -------------------------------------------------------------------
def _run_conv(conv: torch.nn.Conv2d, x: torch.Tensor, padding: int = 0) -> torch.Tensor:
    """conv(x) with `padding` zeros on every side.

    Plain modules get F.conv2d. Modules ComfyUI casts or patches at call time (low-VRAM offload,
    weight patches) are called as modules so that machinery still runs; their own padding
    (`conv.padding`) is then compensated by cropping.
    """
    w = conv.weight
    if (not getattr(conv, "comfy_cast_weights", False) and not getattr(conv, "weight_function", None)
            and not getattr(conv, "bias_function", None) and w.device == x.device and w.dtype == x.dtype):
        return F.conv2d(x, w, conv.bias, conv.stride, padding)
    own = conv.padding[0]
    if padding > own:
        x = F.pad(x, (padding - own,) * 4)
    y = conv(x)
    cut = own - padding
    return y[:, :, cut:y.shape[2] - cut, cut:y.shape[3] - cut] if cut > 0 else y


def _clip(box: Box, h: int, w: int) -> Box:
    y0, y1, x0, x1 = box
    return max(y0, 0), min(y1, h), max(x0, 0), min(x1, w)


def _grow(box: Box, n: int, h: int, w: int) -> Box:
    y0, y1, x0, x1 = box
    return _clip((y0 - n, y1 + n, x0 - n, x1 + n), h, w)


def _splits(n: int, tile: int) -> list[tuple[int, int]]:
    """[0, n) cut into ceil(n / tile) nearly equal parts (no sliver at the end)."""
    k = max(1, math.ceil(n / max(1, tile)))
    edges = [round(i * n / k) for i in range(k + 1)]
    return [(a, b) for a, b in itertools.pairwise(edges) if b > a]


class Patch:
    """A region of a feature map: tensor (1, C, h, w) whose top-left is (y0, x0). Read-only."""
    __slots__ = ("t", "x0", "y0")

    def __init__(self, t: torch.Tensor, y0: int, x0: int):
        self.t, self.y0, self.x0 = t, y0, x0

    def crop(self, box: Box) -> torch.Tensor:
        y0, y1, x0, x1 = box
        assert y0 >= self.y0 and x0 >= self.x0 and y1 <= self.y0 + self.t.shape[2] and x1 <= self.x0 + self.t.shape[3]
        return self.t[:, :, y0 - self.y0:y1 - self.y0, x0 - self.x0:x1 - self.x0]


class GroupStats:
    """Mean and variance of a feature map gathered tile by tile, reduced to GroupNorm's groups.

    Each tile contributes per-channel (count, mean, M2); tiles are merged in float64 with Chan's
    parallel formula, so only the within-tile sums are float32 (cancellation there is bounded by
    one tile's mean/spread ratio, not the whole image's).
    """

    def __init__(self):
        self.n = 0
        self.mean: torch.Tensor | None = None
        self.m2: torch.Tensor | None = None

    def add(self, x: torch.Tensor) -> None:
        # sum and sum of squares in float32 over the tile (one read each, no temporaries; about
        # 3x faster than var_mean on CPU), turned into mean/M2 in float64 per tile and merged.
        dims = (0, 2, 3)
        s = x.sum(dim=dims, dtype=torch.float32).double().cpu()
        ss = torch.linalg.vector_norm(x, dim=dims, dtype=torch.float32).double().cpu().square()
        n = x.shape[0] * x.shape[2] * x.shape[3]
        mean = s / n
        m2 = (ss - s * mean).clamp_min(0)
        if self.n == 0:
            self.n, self.mean, self.m2 = n, mean, m2
            return
        total = self.n + n
        delta = mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + m2 + delta.square() * (self.n * n / total)
        self.n = total

    def affine(self, norm: torch.nn.GroupNorm, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(scale, shift) per channel so that norm(x) == x * scale + shift over the whole map."""
        c = self.mean.numel()
        g = norm.num_groups
        mean_c, m2_c = self.mean.view(g, c // g), self.m2.view(g, c // g)
        gmean = mean_c.mean(1, keepdim=True)                     # every channel has the same count
        gvar = (m2_c.sum(1, keepdim=True) + self.n * (mean_c - gmean).square().sum(1, keepdim=True)) / (self.n * (c // g))
        inv = (gvar + norm.eps).rsqrt()
        a = inv.expand(g, c // g).reshape(c)
        b = (-gmean * inv).expand(g, c // g).reshape(c)
        if norm.weight is not None:
            w = norm.weight.detach().double().cpu()
            a, b = a * w, b * w + norm.bias.detach().double().cpu()
        shape = (1, c, 1, 1)
        return a.to(device=device, dtype=dtype).view(shape), b.to(device=device, dtype=dtype).view(shape)


# -- planes -----------------------------------------------------------------------------------
class Node:
    """A feature map of one image: computed region by region, optionally stored in row chunks."""

    def __init__(self, name: str, c: int, h: int, w: int, scale: int, sources: list[Node], ctx: _Ctx):
        self.name, self.c, self.h, self.w, self.scale = name, c, h, w, scale
        self.sources = sources
        self.ctx = ctx
        self.keep: torch.dtype | None = None        # plan: store in this dtype; None = recompute
        self.stats: GroupStats | None = None
        self._chunks: list[torch.Tensor | None] | None = None
        self.released = False

    # geometry used for freeing: the first row of `src` that rows >= y of this node still read
    def src_row(self, src: Node, y: int) -> int:
        raise NotImplementedError

    def compute(self, box: Box) -> Patch:
        raise NotImplementedError

    def src_boxes(self, box: Box) -> list[tuple[Node, Box]]:
        """The region of each source that compute(box) reads (before clipping to the map)."""
        return []

    def nbytes(self, dtype: torch.dtype) -> int:
        return self.c * self.h * self.w * torch.empty((), dtype=dtype).element_size()

    @property
    def stored(self) -> bool:
        return self._chunks is not None

    def region(self, box: Box) -> Patch:
        if self.keep is not None:
            if self._chunks is None:
                raise RuntimeError(f"internal: plane {self.name} read before it was stored or after it was released")
            return self._read(box)
        return self.compute(box)

    # storage
    def allocate(self) -> None:
        self._chunks = [None] * math.ceil(self.h / CHUNK_ROWS)

    def write(self, t: torch.Tensor, box: Box) -> None:
        y0, y1, x0, x1 = box
        first, last = y0 // CHUNK_ROWS, (y1 - 1) // CHUNK_ROWS
        half = self.keep == torch.float16
        if half and t.dtype == torch.float32:
            lo, hi = torch.aminmax(t)
            half = max(-float(lo), float(hi)) < HALF_MAX
        for i in range(first, last + 1):
            cy0 = i * CHUNK_ROWS
            cy1 = min(cy0 + CHUNK_ROWS, self.h)
            chunk = self._chunks[i]
            if chunk is None:
                dtype = self.keep if (half or self.keep != torch.float16) else torch.float32
                chunk = self._chunks[i] = _empty((1, self.c, cy1 - cy0, self.w), dtype, self.ctx.store_device)
            elif chunk.dtype == torch.float16 and not half:
                wide = _empty(chunk.shape, torch.float32, chunk.device)   # these values do not fit float16
                chunk = self._chunks[i] = wide.copy_(chunk)
            a, b = max(y0, cy0), min(y1, cy1)
            chunk[:, :, a - cy0:b - cy0, x0:x1].copy_(t[:, :, a - y0:b - y0])

    def _read(self, box: Box) -> Patch:
        y0, y1, x0, x1 = box
        parts = []
        for i in range(y0 // CHUNK_ROWS, (y1 - 1) // CHUNK_ROWS + 1):
            chunk = self._chunk(i)
            cy0 = i * CHUNK_ROWS
            parts.append(chunk[:, :, max(y0, cy0) - cy0:min(y1, cy0 + chunk.shape[2]) - cy0, x0:x1])
        # cat in the stored dtype, then one contiguous conversion: copying strided 4-D slices
        # with a dtype change takes a slow per-element path on CPU (20x slower).
        t = torch.cat(parts, dim=2) if len(parts) > 1 else parts[0]
        ctx = self.ctx
        if t.dtype != ctx.dtype or t.device != ctx.device:
            t = t.to(device=ctx.device, dtype=ctx.dtype, memory_format=torch.contiguous_format)
        return Patch(t, y0, x0)

    def _chunk(self, i: int) -> torch.Tensor:
        chunk = self._chunks[i]
        if chunk is None:
            raise RuntimeError(f"internal: rows {i * CHUNK_ROWS}.. of plane {self.name} read after release")
        return chunk

    def release_below(self, row: int) -> None:
        """Free the chunks that lie entirely above `row`."""
        if self._chunks is None:
            return
        for i in range(min(row // CHUNK_ROWS, len(self._chunks))):
            self._chunks[i] = None

    def release(self) -> None:
        self._chunks = None
        self.released = True

    def drop_cache(self) -> None:
        pass


def _empty(shape: tuple, dtype: torch.dtype, device) -> torch.Tensor:
    """Storage for a plane chunk. In host memory it is an anonymous mmap of its own: released
    chunks go back to the OS at once. From the heap they could stay resident behind later
    allocations (glibc only trims the heap's top), and the peak would be the sum of the planes
    being freed and written rather than the larger of the two."""
    device = torch.device(device)
    if device.type != "cpu":
        return torch.empty(shape, dtype=dtype, device=device)
    size = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    return torch.frombuffer(mmap.mmap(-1, max(size, 1)), dtype=dtype, count=math.prod(shape)).view(shape)


def _libc():
    try:
        import ctypes
        import ctypes.util

        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return lib if hasattr(lib, "malloc_trim") else None
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


def _trim_heap() -> None:
    """Give freed heap pages back to the OS (glibc only; a no-op elsewhere).

    Tile tensors stay under glibc's 32 MiB mmap threshold (see nodes/vae.py), so they come from
    the heap, in many sizes (edge tiles, levels, halos). glibc returns a heap's free pages only
    from its top, so without this the fragmented leftovers of earlier tiles stay resident: at
    1080p about 300 MB on top of the planes. Called once per row of tiles, it costs milliseconds.
    """
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class _Ctx:
    """Where one frame's encode computes and stores."""

    def __init__(self, device, dtype, store_device):
        self.device, self.dtype, self.store_device = torch.device(device), dtype, torch.device(store_device)


class Source(Node):
    """The preprocessed image (-1..1); regions move to the compute device/dtype tile by tile."""

    def __init__(self, pixels: torch.Tensor | None, h: int, w: int, ctx: _Ctx):
        super().__init__("image", 3, h, w, 1, [], ctx)
        self.pixels = pixels

    def compute(self, box: Box) -> Patch:
        y0, y1, x0, x1 = box
        t = self.pixels[:, :, y0:y1, x0:x1].to(device=self.ctx.device, dtype=self.ctx.dtype)
        return Patch(t, y0, x0)


class ConvNode(Node):
    """conv(pre(src)) where pre is GroupNorm (whole-map statistics of src) + optional SiLU."""

    def __init__(self, name, src: Node, conv, geom: Geom, ctx, norm=None, silu=False):
        super().__init__(name, conv.out_channels, geom.out_size(src.h), geom.out_size(src.w),
                         src.scale * geom.s, [src], ctx)
        self.src, self.conv, self.geom, self.norm, self.silu = src, conv, geom, norm, silu
        self._affine = None

    def src_row(self, src, y):
        return y * self.geom.s - self.geom.pb

    def src_boxes(self, box):
        return [(self.src, self.geom.need(box[0], box[1]) + self.geom.need(box[2], box[3]))]

    def src_box(self, box: Box) -> Box:
        return _clip(self.src_boxes(box)[0][1], self.src.h, self.src.w)

    def compute(self, box):
        return self.apply(self.src.region(self.src_box(box)), box)

    def pre(self, x: torch.Tensor) -> torch.Tensor:
        """A new tensor: x normalised with whole-map statistics (+ SiLU); x is not modified."""
        if self.norm is None:
            return x
        if self._affine is None:
            if self.src.stats is None:
                raise RuntimeError(f"internal: statistics of {self.src.name} needed before its pass")
            self._affine = self.src.stats.affine(self.norm, x.device, x.dtype)
        a, b = self._affine
        y = torch.addcmul(b, x, a)
        return F.silu(y, inplace=True) if self.silu else y

    def apply(self, sp: Patch, box: Box) -> Patch:
        g = self.geom
        iy0, iy1 = g.need(box[0], box[1])
        ix0, ix1 = g.need(box[2], box[3])
        cy0, cy1, cx0, cx1 = _clip((iy0, iy1, ix0, ix1), self.src.h, self.src.w)
        x = self.pre(sp.crop((cy0, cy1, cx0, cx1)))
        pad = (cx0 - ix0, ix1 - cx1, cy0 - iy0, iy1 - cy1)
        if not any(pad):
            y = _run_conv(self.conv, x)
        elif g.s == 1 and g.pb == g.pe:
            # Zeros only where the full encode pads: let the convolution pad every side (no copy
            # of the input) and drop the outputs that the padding produced on the inner sides.
            y = _run_conv(self.conv, x, g.pb)
            top, left = g.pb - pad[2], g.pb - pad[0]
            y = y[:, :, top:top + box[1] - box[0], left:left + box[3] - box[2]]
        else:
            y = _run_conv(self.conv, F.pad(x, pad))
        return Patch(y, box[0], box[2])


class PoolNode(Node):
    """Downsample without conv: 2x2 average pooling."""

    def __init__(self, name, src: Node, ctx):
        super().__init__(name, src.c, src.h // 2, src.w // 2, src.scale * 2, [src], ctx)
        self.src = src

    def src_row(self, src, y):
        return 2 * y

    def src_boxes(self, box):
        return [(self.src, tuple(2 * v for v in box))]

    def compute(self, box):
        y0, y1, x0, x1 = box
        p = self.src.region((2 * y0, 2 * y1, 2 * x0, 2 * x1))
        return Patch(F.avg_pool2d(p.t, kernel_size=2, stride=2), y0, x0)


class ResNode(Node):
    """ResnetBlock: shortcut(x) + conv2(silu(norm2(h))), h = conv1(silu(norm1(x))) (node `hid`)."""

    def __init__(self, name, x: Node, block, ctx):
        self.hid = ConvNode(f"{name}.h", x, block.conv1, SAME3, ctx, norm=block.norm1, silu=True)
        super().__init__(name, block.out_channels, x.h, x.w, x.scale, [self.hid, x], ctx)
        self.x, self.block = x, block
        self.c2 = ConvNode(f"{name}.conv2", self.hid, block.conv2, SAME3, ctx, norm=block.norm2, silu=True)
        self.shortcut = None
        self.sc_halo = 0
        if block.in_channels != block.out_channels:
            if block.use_conv_shortcut:
                self.shortcut = ConvNode(f"{name}.sc", x, block.conv_shortcut, SAME3, ctx)
                self.sc_halo = 1
            else:
                self.shortcut = ConvNode(f"{name}.sc", x, block.nin_shortcut, POINT, ctx)

    def src_row(self, src, y):
        return y - 1 if src is self.hid else y - self.sc_halo

    def src_boxes(self, box):
        y0, y1, x0, x1 = box
        n = self.sc_halo if self.hid.keep is not None else 2
        return [(self.hid, (y0 - 1, y1 + 1, x0 - 1, x1 + 1)), (self.x, (y0 - n, y1 + n, x0 - n, x1 + n))]

    def compute(self, box):
        h, w = self.h, self.w
        hbox = _grow(box, 1, h, w)
        if self.hid.keep is not None:
            hp = self.hid.region(hbox)
            xp = self.x.region(_grow(box, self.sc_halo, h, w))
        else:
            # one region of x serves both the hidden conv (halo 2) and the shortcut
            xp = self.x.region(_grow(box, 2, h, w))
            hp = self.hid.apply(xp, hbox)
        out = self.c2.apply(hp, box).t
        del hp
        if self.shortcut is None:
            out += xp.crop(box)
        else:
            out += self.shortcut.apply(xp, box).t
        return Patch(out, box[0], box[2])


class AttnNode(Node):
    """x + proj_out(attention(q, k, v)) over the whole grid; keys/values computed once per pass."""

    def __init__(self, name, x: Node, attn, ctx):
        super().__init__(name, x.c, x.h, x.w, x.scale, [x], ctx)
        self.x, self.attn = x, attn
        self._kv = None
        self._affine = None

    def src_row(self, src, y):
        return 0          # keys and values read the whole grid until the pass ends

    def src_boxes(self, box):
        return [(self.x, box)]

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        if self._affine is None:
            self._affine = self.x.stats.affine(self.attn.norm, x.device, x.dtype)
        a, b = self._affine
        return torch.addcmul(b, x, a)

    def _tokens(self, conv, hn) -> torch.Tensor:
        t = _run_conv(conv, hn)
        return t.view(1, 1, t.shape[1], -1).transpose(2, 3).contiguous()     # (1, 1, N, C) like comfy

    def compute(self, box):
        if self._kv is None:
            hn = self._norm(self.x.region((0, self.h, 0, self.w)).t)
            self._kv = (self._tokens(self.attn.k, hn), self._tokens(self.attn.v, hn))
            del hn
        k, v = self._kv
        xp = self.x.region(box)
        q = self._tokens(self.attn.q, self._norm(xp.t))
        o = F.scaled_dot_product_attention(q, k, v)        # single head, scale C^-1/2, as comfy
        bh, bw = box[1] - box[0], box[3] - box[2]
        o = o.transpose(2, 3).reshape(1, self.c, bh, bw)
        out = _run_conv(self.attn.proj_out, o)
        out += xp.t
        return Patch(out, box[0], box[2])

    def drop_cache(self):
        self._kv = None


# -- plan ---------------------------------------------------------------------------------------
@dataclass
class Pass:
    target: Node
    stats: bool = True             # gather the target's statistics (input of a GroupNorm)
    assemble: bool = False         # the latent: blend tiles into the output
    reads: tuple = ()              # stored planes this pass reads
    frees: tuple = ()              # ... for the last time (released row by row)
    tile: int = 0                  # tile edge in the target's pixels


@dataclass
class Plan:
    source: Source
    passes: list[Pass]
    nodes: list[Node]

    def total_tiles(self) -> int:
        return sum(len(_splits(p.target.h, p.tile)) * len(_splits(p.target.w, p.tile)) for p in self.passes)

    def peak_plane_bytes(self) -> int:
        """Stored planes alive at once (approximately: a plane being written grows while the ones
        read for the last time shrink, so a pass costs the larger of the two plus the others)."""
        made = {id(p.target): i for i, p in enumerate(self.passes) if p.target.keep is not None}
        last = {}
        for i, p in enumerate(self.passes):
            for n in p.reads:
                last[id(n)] = i
        kept = [n for n in self.nodes if n.keep is not None]
        peak = 0
        for i, p in enumerate(self.passes):
            alive = [n for n in kept if made[id(n)] < i <= last.get(id(n), made[id(n)])]
            freed = sum(n.nbytes(n.keep) for n in alive if id(n) in {id(f) for f in p.frees})
            others = sum(n.nbytes(n.keep) for n in alive) - freed
            produced = p.target.nbytes(p.target.keep) if p.target.keep is not None else 0
            peak = max(peak, others + max(freed, produced))
        return peak


def _stored_leaves(node: Node, out: dict) -> dict:
    if isinstance(node, Source):
        return out
    if node.keep is not None:
        out[id(node)] = node
        return out
    for s in node.sources:
        _stored_leaves(s, out)
    return out


def _min_row(node: Node, y: int, leaf: Node) -> int | None:
    """First row of `leaf` that rows >= y of `node` still read (None: not through this node)."""
    best = None
    for s in node.sources:
        sy = node.src_row(s, y)
        r = sy if s is leaf else (None if s.keep is not None or isinstance(s, Source) else _min_row(s, sy, leaf))
        if r is not None:
            best = r if best is None else min(best, r)
    return best


def default_plane_budget(spec: EncoderSpec, h: int, w: int) -> int:
    """One full-resolution feature map in float16: what streaming needs without recomputing long chains."""
    return spec.base_channels * h * w * 2


def build_plan(spec: EncoderSpec, h: int, w: int, tile: int, ctx: _Ctx, plane_budget: int | None = None,
               pixels: torch.Tensor | None = None) -> Plan:
    """The passes of one frame's encode, and which planes are stored in which dtype.

    Greedy, block by block: a block's output is stored in the most precise dtype that fits the
    plane budget, else recomputed on demand; its hidden map (between its two GroupNorms) is stored
    only next to a stored output and when both it and the block's input fit together.
    """
    budget = default_plane_budget(spec, h, w) if plane_budget is None else plane_budget
    dtypes = spec.plane_dtypes(ctx.dtype)

    def choose(node: Node, limit: int, force: bool = False):
        for dt in dtypes:
            if node.nbytes(dt) <= limit:
                return dt
        return dtypes[-1] if force else None

    def alive(node: Node) -> int:
        return sum(n.nbytes(n.keep) for n in _stored_leaves(node, {}).values())

    src = Source(pixels, h, w, ctx)
    ops = list(spec.ops)
    x: Node = ConvNode("conv_in", src, ops[0][1], SAME3, ctx)
    nodes: list[Node] = [x]
    passes = [Pass(x)]
    i, level = 1, 0
    while i < len(ops):
        kind, m = ops[i]
        nxt = ops[i + 1][0] if i + 1 < len(ops) else None
        if kind == "res":
            out = ResNode(f"res{i}", x, m, ctx)
            target: Node = out
            if nxt == "down":
                ds = ops[i + 1][1]
                level += 1
                target = (ConvNode(f"down{level}", out, ds.conv, DOWN, ctx) if ds.with_conv
                          else PoolNode(f"down{level}", out, ctx))
                i += 1
                nxt = ops[i + 1][0] if i + 1 < len(ops) else None
            # attention reads its input whole, twice: always store it (1/64 of the image's area)
            target.keep = choose(target, budget, force=nxt == "attn")
            if target.keep is not None:
                out.hid.keep = choose(out.hid, budget - alive(x))
            nodes += [out.hid, out] + ([target] if target is not out else [])
            passes += [Pass(out.hid), Pass(target)]
            x = target
        elif kind == "attn":
            a = AttnNode(f"attn{i}", x, m, ctx)
            a.keep = choose(a, budget, force=True)
            nodes.append(a)
            passes.append(Pass(a))
            x = a
        elif kind == "out":
            norm, conv = m
            y: Node = ConvNode("conv_out", x, conv, SAME3, ctx, norm=norm, silu=True)
            nodes.append(y)
            if nxt == "quant":
                y = ConvNode("quant_conv", y, ops[i + 1][1], POINT, ctx)
                nodes.append(y)
                i += 1
            passes.append(Pass(y, stats=False, assemble=True))
        i += 1

    # which stored planes each pass reads, and the last pass that reads each one
    last: dict[int, int] = {}
    for k, p in enumerate(passes):
        leaves: dict = {}
        for s in p.target.sources:
            _stored_leaves(s, leaves)
        p.reads = tuple(leaves.values())
        for n in p.reads:
            last[id(n)] = k
    for k, p in enumerate(passes):
        p.frees = tuple(n for n in p.reads if last[id(n)] == k)
        p.tile = _pass_tile(p.target, tile * tile * spec.base_channels - 1)
    return Plan(src, passes, nodes)


def _regions(node: Node, box: Box, out: list) -> list:
    """(node, region size) of every tensor a tile computes, down to the stored planes it reads."""
    out.append((node, box))
    for src, b in node.src_boxes(box):
        if src.keep is not None or isinstance(src, Source):
            out.append((src, b))
        else:
            _regions(src, b, out)
    return out


def _pass_tile(target: Node, elems: int) -> int:
    """Largest tile edge (target pixels) such that no tensor of the pass, halo included, holds
    more than `elems` values. Deep levels have more channels and fewer pixels, so their tiles
    cover more of the image for about the same memory."""

    def fits(t: int) -> bool:
        return all((b[1] - b[0]) * (b[3] - b[2]) * n.c <= elems for n, b in _regions(target, (0, t, 0, t), []))

    lo, hi = 1, max(target.h, target.w)
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


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
    rows, cols = _splits(t.h, p.tile), _splits(t.w, p.tile)
    for y0, y1 in rows:
        for x0, x1 in cols:
            box = (y0, y1, x0, x1)
            if p.assemble and ov:
                ebox = _grow(box, ov, t.h, t.w)
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
            r = _min_row(t, max(0, y1 - ov), n)  # (the next row of tiles starts ov rows higher)
            if r is not None:
                n.release_below(r)
        if trim:
            _trim_heap()
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
    ctx = _Ctx(device, dtype, store_device if store_device is not None else device)
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
                r = _run_pass(p, overlap, out_device, tick if check_interrupt is None else _checked(tick, check_interrupt))
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
                      check_interrupt=None, *, min_tile: int = MIN_TILE, on_oom: Callable[[int, str], None] | None = None,
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
    ctx = _Ctx(torch.device("cpu"), dtype, torch.device("cpu"))
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
