"""The passes of one frame's encode: which planes are stored (and in which dtype), which are
recomputed, which pass frees what, and each pass's tile size."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .arch import DOWN, POINT, SAME3, EncoderSpec
from .blocks import AttnNode, ConvNode, PoolNode, ResNode
from .planes import Box, Ctx, Node, Source, splits


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
        return sum(len(splits(p.target.h, p.tile)) * len(splits(p.target.w, p.tile)) for p in self.passes)

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


def stored_leaves(node: Node, out: dict) -> dict:
    if isinstance(node, Source):
        return out
    if node.keep is not None:
        out[id(node)] = node
        return out
    for s in node.sources:
        stored_leaves(s, out)
    return out


def min_row(node: Node, y: int, leaf: Node) -> int | None:
    """First row of `leaf` that rows >= y of `node` still read (None: not through this node)."""
    best = None
    for s in node.sources:
        sy = node.src_row(s, y)
        r = sy if s is leaf else (None if s.keep is not None or isinstance(s, Source) else min_row(s, sy, leaf))
        if r is not None:
            best = r if best is None else min(best, r)
    return best


def default_plane_budget(spec: EncoderSpec, h: int, w: int) -> int:
    """One full-resolution feature map in float16: what streaming needs without recomputing long chains."""
    return spec.base_channels * h * w * 2


def build_plan(spec: EncoderSpec, h: int, w: int, tile: int, ctx: Ctx, plane_budget: int | None = None,
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
        return sum(n.nbytes(n.keep) for n in stored_leaves(node, {}).values())

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
            stored_leaves(s, leaves)
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
