"""GPEN-BFR-512 restorer stand-in: GPEN's FullGenerator at size 512, random weights.

Written after reading yangxy/GPEN face_model/gpen_model.py (FullGenerator / Generator; that repo is
"for academic and non-commercial use only", so nothing is copied from it) and the StyleGAN2 layers it
builds on, rosinality/stylegan2-pytorch model.py (MIT). Configuration as GPEN's face_gan.py builds
GPEN-BFR-512: FullGenerator(512, style_dim 512, n_mlp 8, channel_multiplier 2, narrow 1), blur kernel
[1, 3, 3, 1], lr_mlp 0.01, isconcat True.

Shape of the network: a conv encoder (1x1 conv, then seven blur + stride-2 3x3 convs, 512 -> 4 px)
whose flattened 4x4 output goes through a linear layer to the style code; the StyleGAN2 generator
(8-layer style MLP, constant 4x4 input, two modulated convs per resolution, toRGB skips) takes the
encoder's feature maps as its "noise" inputs, concatenated (isconcat) after each modulated conv, so
every StyledConv's activation sees twice its channels.

The CUDA ops are replaced by pure PyTorch: fused leaky ReLU = add bias, leaky_relu(0.2), x sqrt(2);
upfirdn2d = zero-insertion (for up=2) + F.pad + depthwise conv2d with the (symmetric) FIR kernel.
The modulated convs are computed in StyleGAN2's non-fused form (scale the input by the style,
shared-weight conv / transposed conv, scale the output by the demodulation factor) rather than as a
per-sample grouped conv, because ONNX Conv's ``group`` is static and the batch is dynamic.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ...standins import StandIn

SPEC = StandIn(
    name="gpen_bfr_512",
    role="restorer",
    published_params=71_061_122,
    published_gflops=None,
    flops_convention="FLOPs (2 x MACs)",
    source=(
        "No parameter or FLOP count is published for GPEN-BFR-512 (yangxy/GPEN README, CVPR 2021 paper "
        "arXiv:2105.06070 and supplementary give none). Derived from the fp32 ONNX of the published "
        "weights, GPEN-BFR-512.onnx as distributed by FaceFusion (facefusion/facefusion-assets "
        "releases 'models', huggingface.co/facefusion/models) and ReActor "
        "(huggingface.co/datasets/Gourieff/ReActor, models/facerestore_models): 284,244,491 bytes "
        "(284 MB, the size recorded for that file in downstream model manifests). Every parameter is "
        "live in this graph (no noise buffers: the encoder features are the noise), so "
        "284,244,491 / 4 = 71,061,122 floats, an upper bound that includes the ONNX graph's small "
        "overhead and blur-kernel constants."
    ),
    inputs=(("input", (3, 512, 512)),),
    outputs=("output",),
    approximated=(
        "Modulated convs use StyleGAN2's non-fused form (input scaled by style, shared-weight conv or "
        "transposed conv, output scaled by demodulation) instead of a per-sample grouped conv, "
        "because ONNX Conv's group count is static; same MACs and result. upfirdn2d and fused "
        "leaky ReLU are their pure-PyTorch equivalents."
    ),
    notes=(
        "Parameters 71,005,223, 0.08 % under the bytes/4 figure; this stand-in's own fp32 ONNX "
        "export is 284,399,629 bytes, 0.05 % over the published 284,244,491 (the difference is "
        "graph overhead and constants such as the per-channel blur kernels), which confirms the "
        "layer sizes.",
        "No published FLOPs. Measured (count.flops, one 512x512 face): 276.2 GFLOPs = 138.1 GMACs "
        "(convolutions and matmuls only; the depthwise blur convs are included).",
    ),
)

_BLUR = (1.0, 3.0, 3.0, 1.0)
_SQRT2 = math.sqrt(2.0)


def _channels(size: int, multiplier: int = 2) -> int:
    # StyleGAN2's channel table (narrow 1): 512 up to 32 px, then halving per octave
    return {4: 512, 8: 512, 16: 512, 32: 512, 64: 256 * multiplier, 128: 128 * multiplier,
            256: 64 * multiplier, 512: 32 * multiplier, 1024: 16 * multiplier}[size]


def _lrelu(x, bias=None):
    # "fused leaky ReLU" of StyleGAN2: bias, leaky ReLU 0.2, gain sqrt(2) to keep the variance
    if bias is not None:
        x = x + bias.view(1, -1, *([1] * (x.ndim - 2)))
    return F.leaky_relu(x, 0.2) * _SQRT2


class FIR(nn.Module):
    """upfirdn2d with down=1: optional x2 zero insertion, pad, depthwise FIR (the blur kernel)."""

    def __init__(self, channels: int, pad: tuple[int, int], up: int = 1, gain: float = 1.0):
        super().__init__()
        k = torch.tensor(_BLUR)
        k = torch.outer(k, k)
        k = k / k.sum() * (up * up) * gain        # up^2 keeps the mean after zero insertion
        self.register_buffer("kernel", k.expand(channels, 1, 4, 4).clone(), persistent=False)
        self.pad, self.up, self.channels = pad, up, channels

    def forward(self, x):
        if self.up == 2:
            _, c, h, w = x.shape
            x = F.pad(x.reshape(-1, c, h, 1, w, 1), (0, 1, 0, 0, 0, 1)).reshape(-1, c, 2 * h, 2 * w)
        x = F.pad(x, (self.pad[0], self.pad[1], self.pad[0], self.pad[1]))
        return F.conv2d(x, self.kernel, groups=self.channels)    # kernel symmetric: no flip needed


class EqualLinear(nn.Module):
    """Linear with equalised learning rate (runtime weight scale); optional fused leaky ReLU."""

    def __init__(self, n_in, n_out, bias_init=0.0, lr_mul=1.0, act=False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) / lr_mul)
        self.bias = nn.Parameter(torch.full((n_out,), float(bias_init)))
        self.scale, self.lr_mul, self.act = lr_mul / math.sqrt(n_in), lr_mul, act

    def forward(self, x):
        out = F.linear(x, self.weight * self.scale)
        bias = self.bias * self.lr_mul
        return _lrelu(out, bias) if self.act else out + bias


class DownConv(nn.Module):
    """Encoder layer: (blur + stride-2) 3x3 equalised conv, or a 1x1 conv; bias + fused leaky ReLU."""

    def __init__(self, c_in, c_out, k, down):
        super().__init__()
        self.blur = FIR(c_in, (2, 2)) if down else None
        self.weight = nn.Parameter(torch.randn(c_out, c_in, k, k))
        self.bias = nn.Parameter(torch.zeros(c_out))
        self.scale = 1 / math.sqrt(c_in * k * k)
        self.stride, self.padding = (2, 0) if down else (1, k // 2)

    def forward(self, x):
        if self.blur is not None:
            x = self.blur(x)
        x = F.conv2d(x, self.weight * self.scale, stride=self.stride, padding=self.padding)
        return _lrelu(x, self.bias)


class ModConv(nn.Module):
    """StyleGAN2 modulated conv, non-fused (see module docstring); optional x2 upsampling."""

    def __init__(self, c_in, c_out, k, style_dim, demodulate=True, up=False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1, c_out, c_in, k, k))
        self.modulation = EqualLinear(style_dim, c_in, bias_init=1.0)
        self.scale = 1 / math.sqrt(c_in * k * k)
        self.demodulate, self.up, self.padding = demodulate, up, k // 2
        # transposed conv (stride 2) then blur, as StyleGAN2 upsamples (pads for k=3, 4-tap kernel)
        # the stride-2 transposed conv already inserted the zeros: gain 4 (= Blur upsample_factor 2)
        self.blur = FIR(c_out, (1, 1), gain=4.0) if up else None

    def forward(self, x, style):
        s = self.modulation(style)                            # (b, c_in)
        x = x * s[:, :, None, None]
        # one weight tensor feeds both the conv and the demodulation, so ONNX constant folding
        # stores it once (a folded transpose next to the untransposed weight would double it)
        if self.up:
            w = self.weight[0].transpose(0, 1) * self.scale   # (c_in, c_out, k, k)
            out = F.conv_transpose2d(x, w, stride=2)
            w2 = w.pow(2).sum([2, 3])                         # (c_in, c_out)
        else:
            w = self.weight[0] * self.scale                   # (c_out, c_in, k, k)
            out = F.conv2d(x, w, padding=self.padding)
            w2 = w.pow(2).sum([2, 3]).t()
        if self.demodulate:                                   # 1/|w*s| per (sample, out channel)
            out = out * torch.rsqrt(s.pow(2) @ w2 + 1e-8)[:, :, None, None]
        return self.blur(out) if self.up else out


class StyledConv(nn.Module):
    """Modulated conv, concat the (weighted) encoder feature map as noise, bias + fused leaky ReLU."""

    def __init__(self, c_in, c_out, style_dim, up=False):
        super().__init__()
        self.conv = ModConv(c_in, c_out, 3, style_dim, up=up)
        self.noise_weight = nn.Parameter(torch.zeros(1))
        self.bias = nn.Parameter(torch.zeros(2 * c_out))     # activation covers the concat

    def forward(self, x, style, noise):
        out = self.conv(x, style)
        return _lrelu(torch.cat([out, self.noise_weight * noise], 1), self.bias)


class ToRGB(nn.Module):
    def __init__(self, c_in, style_dim, up=True):
        super().__init__()
        self.conv = ModConv(c_in, 3, 1, style_dim, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))
        self.upsample = FIR(3, (2, 1), up=2) if up else None  # upfirdn2d(up=2), pad (2, 1)

    def forward(self, x, style, skip=None):
        out = self.conv(x, style) + self.bias
        return out if skip is None else out + self.upsample(skip)


class GPEN(nn.Module):
    def __init__(self, size=512, style_dim=512, n_mlp=8, multiplier=2, lr_mlp=0.01):
        super().__init__()
        log = int(math.log2(size))
        # encoder: 1x1 conv at full size, then stride-2 convs down to 4x4
        enc = [DownConv(3, _channels(size, multiplier), 1, down=False)]
        for i in range(log, 2, -1):
            enc.append(DownConv(_channels(2 ** i, multiplier), _channels(2 ** (i - 1), multiplier), 3, down=True))
        self.encoder = nn.ModuleList(enc)
        self.final_linear = EqualLinear(_channels(4) * 16, style_dim, act=True)
        # generator
        self.style = nn.ModuleList(EqualLinear(style_dim, style_dim, lr_mul=lr_mlp, act=True) for _ in range(n_mlp))
        self.const = nn.Parameter(torch.randn(1, _channels(4), 4, 4))
        self.conv1 = StyledConv(_channels(4), _channels(4), style_dim)
        self.to_rgb1 = ToRGB(2 * _channels(4), style_dim, up=False)
        self.convs, self.to_rgbs = nn.ModuleList(), nn.ModuleList()
        c_in = _channels(4)
        for i in range(3, log + 1):
            c = _channels(2 ** i, multiplier)
            self.convs.append(StyledConv(2 * c_in, c, style_dim, up=True))
            self.convs.append(StyledConv(2 * c, c, style_dim))
            self.to_rgbs.append(ToRGB(2 * c, style_dim))
            c_in = c

    def forward(self, x):
        feats = []
        for layer in self.encoder:
            x = layer(x)
            feats.append(x)
        z = self.final_linear(x.flatten(1))
        # style MLP (GPEN feeds the code in as z, not w): pixel norm then 8 layers
        w = z * torch.rsqrt(z.pow(2).mean(1, keepdim=True) + 1e-8)
        for layer in self.style:
            w = layer(w)
        # noises, coarse to fine: the 4x4 map once, every other resolution twice
        feats = feats[::-1]
        out = self.conv1(self.const.repeat(x.shape[0], 1, 1, 1), w, feats[0])
        skip = self.to_rgb1(out, w)
        for j, rgb in enumerate(self.to_rgbs):
            out = self.convs[2 * j](out, w, feats[j + 1])
            out = self.convs[2 * j + 1](out, w, feats[j + 1])
            skip = rgb(out, w, skip)
        return skip


def build() -> nn.Module:
    torch.manual_seed(0)
    return GPEN().eval()
