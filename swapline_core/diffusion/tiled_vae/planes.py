"""Feature maps ("planes") of one frame's encode: tile regions, whole-map GroupNorm statistics,
row-chunk storage that is released as soon as no later tile reads it."""
from __future__ import annotations

import itertools
import math
import mmap

import torch
import torch.nn.functional as F

CHUNK_ROWS = 16               # rows per stored chunk: the granularity at which planes are freed
HALF_MAX = 60000.0            # float16 holds up to 65504; above this a chunk is kept in float32

Box = tuple[int, int, int, int]          # y0, y1, x0, x1 (end exclusive), in a node's own pixels


# -- small tensor helpers -------------------------------------------------------------------
def run_conv(conv: torch.nn.Conv2d, x: torch.Tensor, padding: int = 0) -> torch.Tensor:
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


def clip_box(box: Box, h: int, w: int) -> Box:
    y0, y1, x0, x1 = box
    return max(y0, 0), min(y1, h), max(x0, 0), min(x1, w)


def grow_box(box: Box, n: int, h: int, w: int) -> Box:
    y0, y1, x0, x1 = box
    return clip_box((y0 - n, y1 + n, x0 - n, x1 + n), h, w)


def splits(n: int, tile: int) -> list[tuple[int, int]]:
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
        between = self.n * (mean_c - gmean).square().sum(1, keepdim=True)
        gvar = (m2_c.sum(1, keepdim=True) + between) / (self.n * (c // g))
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

    def __init__(self, name: str, c: int, h: int, w: int, scale: int, sources: list[Node], ctx: Ctx):
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


def trim_heap() -> None:
    """Give freed heap pages back to the OS (glibc only; a no-op elsewhere).

    Tile tensors stay under glibc's 32 MiB mmap threshold (see nodes/vae.py), so they come from
    the heap, in many sizes (edge tiles, levels, halos). glibc returns a heap's free pages only
    from its top, so without this the fragmented leftovers of earlier tiles stay resident: at
    1080p about 300 MB on top of the planes. Called once per row of tiles, it costs milliseconds.
    """
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class Ctx:
    """Where one frame's encode computes and stores."""

    def __init__(self, device, dtype, store_device):
        self.device, self.dtype, self.store_device = torch.device(device), dtype, torch.device(store_device)


class Source(Node):
    """The preprocessed image (-1..1); regions move to the compute device/dtype tile by tile."""

    def __init__(self, pixels: torch.Tensor | None, h: int, w: int, ctx: Ctx):
        super().__init__("image", 3, h, w, 1, [], ctx)
        self.pixels = pixels

    def compute(self, box: Box) -> Patch:
        y0, y1, x0, x1 = box
        t = self.pixels[:, :, y0:y1, x0:x1].to(device=self.ctx.device, dtype=self.ctx.dtype)
        return Patch(t, y0, x0)
