"""The encoder's operations as plane nodes: convolution (with the GroupNorm before it),
downsampling, ResnetBlock and the mid-block attention."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .arch import POINT, SAME3, Geom
from .planes import Box, Node, Patch, clip_box, grow_box, run_conv


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
        return clip_box(self.src_boxes(box)[0][1], self.src.h, self.src.w)

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
        cy0, cy1, cx0, cx1 = clip_box((iy0, iy1, ix0, ix1), self.src.h, self.src.w)
        x = self.pre(sp.crop((cy0, cy1, cx0, cx1)))
        pad = (cx0 - ix0, ix1 - cx1, cy0 - iy0, iy1 - cy1)
        if not any(pad):
            y = run_conv(self.conv, x)
        elif g.s == 1 and g.pb == g.pe:
            # Zeros only where the full encode pads: let the convolution pad every side (no copy
            # of the input) and drop the outputs that the padding produced on the inner sides.
            y = run_conv(self.conv, x, g.pb)
            top, left = g.pb - pad[2], g.pb - pad[0]
            y = y[:, :, top:top + box[1] - box[0], left:left + box[3] - box[2]]
        else:
            y = run_conv(self.conv, F.pad(x, pad))
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
        hbox = grow_box(box, 1, h, w)
        if self.hid.keep is not None:
            hp = self.hid.region(hbox)
            xp = self.x.region(grow_box(box, self.sc_halo, h, w))
        else:
            # one region of x serves both the hidden conv (halo 2) and the shortcut
            xp = self.x.region(grow_box(box, 2, h, w))
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
        t = run_conv(conv, hn)
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
        out = run_conv(self.attn.proj_out, o)
        out += xp.t
        return Patch(out, box[0], box[2])

    def drop_cache(self):
        self._kv = None

