"""INSwapper-128 (insightface ``inswapper_128.onnx``): random-weight stand-in for timing.

insightface never released the training code; the graph is known from the ONNX file itself.
The layer layout here follows ReSwapper's re-implementation (github somanchiu/ReSwapper,
``StyleTransferModel_128.py``, AGPL-3.0: read for the layer shapes only, no code taken) and
the node-level description of the ONNX graph in cool-japan/oxionnx's end-to-end test of its
``fuse_instance_norm`` pass on inswapper-128 (238 nodes, twelve AdaIN chains
``ReduceMean -> Sub -> Mul -> ReduceMean -> Add(1e-8) -> Sqrt -> Div(1, .) -> Mul``, no
``InstanceNormalization`` node, each followed by a Mul/Add pair fed by a Gemm on the latent).

Shape of the network, per face:
  target (3x128x128, [0, 1]) -> encoder 128x128 -> 32x32 x 1024 channels
  -> 6 residual style blocks (two 3x3 convs 1024->1024, each with AdaIN from the 512-d latent)
  -> decoder (bilinear x2 twice) -> 3x128x128, tanh mapped to [0, 1].
The latent input is already ``normed_embedding @ emap`` (the caller applies the 512x512 emap
stored as the ONNX file's last initializer); emap is therefore NOT part of this module, and the
published 138.3 M parameters are reached without it (138,292,739 here; with emap it would be
138,554,883 = 138.6 M).
"""
from __future__ import annotations

import torch
from torch import nn

from ...standins import StandIn

SPEC = StandIn(
    name="inswapper_128",
    role="swapper",
    published_params=138_300_000,
    published_gflops=174.7,
    flops_convention="MACs",
    source=(
        "deepinsight/inswapper-512-live README.md, 'Evaluation' table, row INSwapper_128: "
        "Params 138.3M, GFLOPs 174.7G (per 128x128 face; the figure equals the multiply-add count "
        "of the graph, so insightface's 'GFLOPs' are MACs)"
    ),
    inputs=(("target", (3, 128, 128)), ("source", (512,))),
    outputs=("output",),
    approximated=(
        "Layer shapes, strides, activations, the decomposed eps=1e-8 instance norm and the "
        "Gemm-driven AdaIN follow the published graph as documented, but were not checked "
        "against the file, so small differences are possible: the padding of the style-block "
        "3x3 convs (zero padding inside Conv here; the ONNX may use separate Pad nodes), the "
        "exact AdaIN affine form (gamma * x + beta here, from one 512->2048 Gemm reshaped to "
        "2 x 1024) and the bilinear Resize settings. The 512x512 emap initializer is left out "
        "(it is not used in the forward). Weights are random."
    ),
    notes=(
        "Parameters: 138,292,739 without emap (published 138.3 M, -0.005 %); emap excluded "
        "because including it (+262,144) would give 138.6 M.",
        "FLOPs: torch FlopCounterMode gives 349.15 GFLOPs = 174.58 GMACs, matching the published "
        "174.7 'GFLOPs' (MACs, -0.07 %); 66 % of it is the twelve 1024->1024 3x3 convs at 32x32.",
        "fp32 ONNX export 553.2 MB (the published fp16 file is 277 MB per oxionnx, ~554 MB at fp32 "
        "with the 1 MB emap); the export has 240 non-Constant nodes against the 238 documented for the "
        "published graph.",
    ),
)

_LATENT = 512
_WIDTH = 1024
_EPS = 1e-8  # the constant in the published graph's Add before Sqrt


def _lrelu() -> nn.Module:
    return nn.LeakyReLU(0.2)


class _StyledConv(nn.Module):
    """3x3 conv -> instance norm (written out as in the ONNX graph) -> affine from the latent."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        # One Gemm on the latent gives both the per-channel scale and shift.
        self.style = nn.Linear(_LATENT, 2 * channels)
        self.channels = channels

    def forward(self, x: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        # Decomposed instance norm, same op chain as the published graph: mean, centre,
        # square, mean, +eps, sqrt, reciprocal, scale.
        centred = x - x.mean(dim=(2, 3), keepdim=True)
        var = (centred * centred).mean(dim=(2, 3), keepdim=True)
        x = centred * (1.0 / torch.sqrt(var + _EPS))
        # Reshape with a constant shape (not chunk) keeps the exported graph free of Shape ops.
        style = self.style(latent).view(-1, 2, self.channels, 1, 1)
        return x * style[:, 0] + style[:, 1]


class _StyleBlock(nn.Module):
    """Residual block: styled conv, ReLU, styled conv, plus the input."""

    def __init__(self, channels: int):
        super().__init__()
        self.first = _StyledConv(channels)
        self.second = _StyledConv(channels)

    def forward(self, x: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.first(x, latent))
        return x + self.second(y, latent)


class INSwapper128(nn.Module):
    def __init__(self, blocks: int = 6):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.ReflectionPad2d(3), nn.Conv2d(3, 128, 7), _lrelu(),       # 128x128
            nn.Conv2d(128, 256, 3, padding=1), _lrelu(),                 # 128x128 (stride 1)
            nn.Conv2d(256, 512, 3, stride=2, padding=1), _lrelu(),       # 64x64
            nn.Conv2d(512, _WIDTH, 3, stride=2, padding=1), _lrelu(),    # 32x32
        )
        self.blocks = nn.ModuleList(_StyleBlock(_WIDTH) for _ in range(blocks))
        self.decoder = nn.Sequential(
            nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),  # 64x64
            nn.Conv2d(_WIDTH, 512, 3, padding=1), _lrelu(),
            nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),  # 128x128
            nn.Conv2d(512, 256, 3, padding=1), _lrelu(),
            nn.Conv2d(256, 128, 3, padding=1), _lrelu(),
            nn.ReflectionPad2d(3), nn.Conv2d(128, 3, 7), nn.Tanh(),
        )

    def forward(self, target: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        x = self.encoder(target)
        for block in self.blocks:
            x = block(x, source)
        # The published output is in [0, 1] (insightface multiplies it by 255).
        return (self.decoder(x) + 1.0) / 2.0


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return INSwapper128().eval()
