"""ArcFace IResNet-50 recogniser (buffalo_l ``w600k_r50.onnx``), random weights, for timing only.

Architecture written after ``recognition/arcface_torch/backbones/iresnet.py`` (``iresnet50``) of
github.com/deepinsight/insightface (MIT): a 3x3 stem, four stages of "improved" basic blocks
(BN -> conv3x3 -> BN -> PReLU -> conv3x3(stride) -> BN, plus a 1x1+BN shortcut where the shape
changes) with (3, 4, 14, 3) blocks of 64/128/256/512 channels, then the BN -> flatten -> dropout ->
FC(512*7*7 -> 512) -> BN1d embedding head. 112x112 in, 512-d embedding out (not L2-normalised,
as in the published ONNX).
"""
from __future__ import annotations

import torch
from torch import nn

from ...standins import StandIn, randomise_norms

SPEC = StandIn(
    name="arcface_r50",
    role="recogniser",
    # No parameter count is published for the buffalo_l recogniser; the published weight file is
    # w600k_r50.onnx, 174,383,860 bytes (fp32) -> 174,383,860 / 4 = 43,595,965 values.
    published_params=43_595_965,
    published_gflops=6.3,
    flops_convention="MACs",
    source=(
        "GFLOPs: deepinsight/insightface recognition/arcface_torch/README.md, 'ViT For Face "
        "Recognition' table, r50 = 6.3 (counted by recognition/arcface_torch/flops.py with ptflops "
        "get_model_complexity_info, i.e. multiply-adds). Params: none published; taken from the "
        "weight file size, w600k_r50.onnx = 174,383,860 bytes in buffalo_l.zip (insightface "
        "model-zoo release; the size is pinned in swapline_core/backends/catalog.py) / 4 bytes per "
        "fp32 value = 43,595,965."
    ),
    inputs=(("input", (3, 112, 112)),),
    outputs=("embedding",),
    approximated="",
    notes=(
        "build() has 43,590,848 parameters (-0.012 % of bytes/4); the fp32 ONNX it exports is "
        "174,380,091 bytes against the published 174,383,860 (3.8 kB apart: BN folded into convs, "
        "the pre-conv BNs kept with their running statistics, names and protobuf overhead).",
        "FlopCounterMode: 6.309 GMACs (12.62 GFLOPs) at 112x112, matching the published 6.3 "
        "(ptflops multiply-adds); ptflops' small elementwise extras (BN, PReLU) do not show at "
        "this precision.",
    ),
)

STAGES = ((64, 3), (128, 4), (256, 14), (512, 3))   # (channels, blocks) of iresnet50


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class IBlock(nn.Module):
    """Pre-BN basic block; the stride sits on the second conv, as in arcface_torch."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin, eps=1e-5)
        self.conv1 = _conv3x3(cin, cout)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-5)
        self.prelu = nn.PReLU(cout)
        self.conv2 = _conv3x3(cout, cout, stride)
        self.bn3 = nn.BatchNorm2d(cout, eps=1e-5)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout, eps=1e-5))

    def forward(self, x):
        out = self.bn3(self.conv2(self.prelu(self.bn2(self.conv1(self.bn1(x))))))
        identity = x if self.downsample is None else self.downsample(x)
        return out + identity


class IResNet50(nn.Module):
    def __init__(self, embedding: int = 512):
        super().__init__()
        self.conv1 = _conv3x3(3, 64)
        self.bn1 = nn.BatchNorm2d(64, eps=1e-5)
        self.prelu = nn.PReLU(64)
        layers, cin = [], 64
        for cout, blocks in STAGES:
            # every stage halves the resolution in its first block: 112 -> 56 -> 28 -> 14 -> 7
            stage = [IBlock(cin, cout, 2)] + [IBlock(cout, cout, 1) for _ in range(blocks - 1)]
            layers.append(nn.Sequential(*stage))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.bn2 = nn.BatchNorm2d(512, eps=1e-5)
        self.dropout = nn.Dropout(p=0.0)        # identity at inference; kept for graph fidelity
        self.fc = nn.Linear(512 * 7 * 7, embedding)
        self.features = nn.BatchNorm1d(embedding, eps=1e-5)

    def forward(self, x):
        x = self.prelu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.bn2(x), 1)
        return self.features(self.fc(self.dropout(x)))


def build() -> nn.Module:
    torch.manual_seed(0)
    model = IResNet50()
    randomise_norms(model)
    return model.eval()
