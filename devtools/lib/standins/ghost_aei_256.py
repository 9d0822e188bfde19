"""GHOST's AEI-Net face swapper at 256 px (U-Net attribute encoder + AAD generator), random weights.

Architecture written after ai-forever/ghost (formerly sberbank-ai/sber-swap), Apache-2.0:
``network/AEI_Net.py`` (MLAttrEncoder, AADGenerator, AEI_Net) and ``network/AADLayer.py``
(AADLayer, AAD_ResBlk), as built by ``inference.py``: ``AEI_Net('unet', num_blocks=N, c_id=512)``.
Module names follow that code's state-dict keys (``encoder.conv1.0.weight``,
``generator.AADBlk1.add_blocks.0.fc1.weight``, ...), so the published ``G_unet_*.pth`` would load.

FaceFusion ships the published checkpoints as ``ghost_1_256.onnx`` / ``ghost_2_256.onnx`` /
``ghost_3_256.onnx`` (earlier ``ghost_unet_{1,2,3}_block.onnx``): inputs ``target`` (the aligned face,
[-1, 1]) and ``source`` (a 512-d ArcFace embedding), output ``output`` (the swapped face, [-1, 1]).
``build()`` returns the 2-block model, GHOST's main one; ``build_blocks(1|3)`` give the others.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...standins import StandIn

C_ID = 512  # GHOST's inference.py builds AEI_Net with c_id=512 (its ArcFace embedding size)

SPEC = StandIn(
    name="ghost_aei_256",
    role="swapper",
    published_params=184_750_000,
    published_gflops=None,
    flops_convention="FLOPs (2 x MACs)",
    source=(
        "No parameter count is published (GHOST README / IEEE Access 2022 paper 'GHOST - A New Face Swap "
        "Approach for Image and Video Domains' give none; FaceFusion's model listings give none). Derived "
        "from the published ONNX file size: ghost_unet_2_block.onnx, listed as 739 MB on the Hugging Face "
        "repo facefusion/models (https://huggingface.co/facefusion/models/tree/main; FaceFusion 3.x "
        "re-publishes it as facefusion/models-3.0.0 ghost_2_256.onnx); 739e6 B / 4 B per fp32 weight = "
        "184.75 M. Only the rounded size (3 significant figures, +-0.5 MB = +-0.07 %) is published. "
        "Architecture: ai-forever/ghost network/AEI_Net.py + network/AADLayer.py, AEI_Net('unet', "
        "num_blocks=2, c_id=512) as in inference.py / download_models.sh (G_unet_2blocks.pth)."
    ),
    inputs=(("target", (3, 256, 256)), ("source", (C_ID,))),
    outputs=("output",),
    approximated="",
    notes=(
        "Parameters: 184,343,381 = 67,087,744 encoder + 117,255,637 generator (BatchNorm affine "
        "included, running stats not) = 737.4 MB fp32, 0.22 % under the 739 MB ONNX (ONNX also holds "
        "BN running stats, InstanceNorm scale/bias constants and graph protobuf; this build exported at "
        "opset 17 is 737,484,897 B, 0.2 % under the published file).",
        "Same check for 1 block: 128,469,133 params = 513.9 MB vs ghost_unet_1_block.onnx 515 MB (-0.22 %). "
        "The 3-block build (240,217,629 = 960.9 MB) does NOT match the listed ghost_unet_3_block.onnx "
        "(856 MB); the cause is unknown, so build_blocks(3) is the published code's architecture only.",
        "FLOPs: none published. count.flops on build(): 62.04 GFLOPs (31.02 GMACs) per face, convolutions "
        "and matmuls only (InstanceNorm, the AAD blend and bilinear upsampling are not counted); the "
        "U-Net encoder is 4.35 of it, the AAD generator the rest (1 block: 32.6, 3 blocks: 91.4 GFLOPs).",
        "Weights are random but scaled like GHOST's weight_init (xavier-normal convs, N(0, 1e-3) linears) "
        "so activations stay in a normal float range (no denormals skewing CPU timing).",
    ),
)


class AADLayer(nn.Module):
    """Adaptive attentional denormalisation: blends an attribute- and an identity-modulated copy of
    the instance-normalised activation with a learned per-pixel mask."""

    def __init__(self, c_x: int, c_attr: int, c_id: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_attr, c_x, 1)    # attribute gamma
        self.conv2 = nn.Conv2d(c_attr, c_x, 1)    # attribute beta
        self.fc1 = nn.Linear(c_id, c_x)           # identity gamma
        self.fc2 = nn.Linear(c_id, c_x)           # identity beta
        self.norm = nn.InstanceNorm2d(c_x, affine=False)
        self.conv_h = nn.Conv2d(c_x, 1, 1)        # attention mask

    def forward(self, h_in, z_attr, z_id):
        h = self.norm(h_in)
        a = self.conv1(z_attr) * h + self.conv2(z_attr)
        i = self.fc1(z_id)[:, :, None, None] * h + self.fc2(z_id)[:, :, None, None]
        m = torch.sigmoid(self.conv_h(h))
        return (1 - m) * a + m * i


def _add_block(cin: int, cout: int, c_attr: int, c_id: int) -> list[nn.Module]:
    # GHOST keeps (AAD, ReLU, conv3x3) triples in one Sequential; the ReLU slot keeps its key numbering.
    return [AADLayer(cin, c_attr, c_id), nn.ReLU(), nn.Conv2d(cin, cout, 3, padding=1, bias=False)]


def _run(blocks: nn.ModuleList, x, z_attr, z_id):
    for k in range(0, len(blocks), 3):
        x = blocks[k + 2](blocks[k + 1](blocks[k](x, z_attr, z_id)))
    return x


class AADResBlk(nn.Module):
    """``num_blocks`` AAD add-blocks (the last changes cin -> cout), plus an AAD shortcut when cin != cout."""

    def __init__(self, cin: int, cout: int, c_attr: int, c_id: int, num_blocks: int):
        super().__init__()
        layers = []
        for i in range(num_blocks):
            layers += _add_block(cin, cout if i == num_blocks - 1 else cin, c_attr, c_id)
        self.add_blocks = nn.ModuleList(layers)
        self.last_add_block = nn.ModuleList(_add_block(cin, cout, c_attr, c_id)) if cin != cout else None

    def forward(self, h, z_attr, z_id):
        x = _run(self.add_blocks, h, z_attr, z_id)
        if self.last_add_block is not None:
            h = _run(self.last_add_block, h, z_attr, z_id)
        return x + h


def _down(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.1))


class _Up(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.lrelu = nn.LeakyReLU(0.1)

    def forward(self, x, skip):
        return torch.cat((self.lrelu(self.bn(self.deconv(x))), skip), dim=1)   # U-Net skip (concat)


class MLAttrEncoder(nn.Module):
    """U-Net multi-level attribute encoder: 256 px down to 2x2, back up to 128 px, 8 attribute maps."""

    DOWN = (3, 32, 64, 128, 256, 512, 1024, 1024)
    UP = ((1024, 1024), (2048, 512), (1024, 256), (512, 128), (256, 64), (128, 32))

    def __init__(self):
        super().__init__()
        for k, (a, b) in enumerate(zip(self.DOWN, self.DOWN[1:]), 1):
            self.add_module(f"conv{k}", _down(a, b))
        for k, (a, b) in enumerate(self.UP, 1):
            self.add_module(f"deconv{k}", _Up(a, b))

    def forward(self, x):
        feats = []
        for k in range(1, 7):
            x = getattr(self, f"conv{k}")(x)
            feats.append(x)                           # 32x128^2 ... 1024x4^2
        z = [self.conv7(x)]                           # 1024x2^2
        for k in range(1, 7):
            z.append(getattr(self, f"deconv{k}")(z[-1], feats[-k]))
        z.append(F.interpolate(z[-1], scale_factor=2, mode="bilinear", align_corners=True))  # 64x256^2
        return z


class AADGenerator(nn.Module):
    # (cin, cout, c_attr) of AADBlk1..8 for the U-Net encoder (attribute channels double from the concat).
    BLOCKS = ((1024, 1024, 1024), (1024, 1024, 2048), (1024, 1024, 1024), (1024, 512, 512),
              (512, 256, 256), (256, 128, 128), (128, 64, 64), (64, 3, 64))

    def __init__(self, c_id: int, num_blocks: int):
        super().__init__()
        self.up1 = nn.ConvTranspose2d(c_id, 1024, kernel_size=2)      # identity -> 1024x2x2 seed
        for k, (cin, cout, ca) in enumerate(self.BLOCKS, 1):
            self.add_module(f"AADBlk{k}", AADResBlk(cin, cout, ca, c_id, num_blocks))

    def forward(self, z_attr, z_id):
        m = self.up1(z_id[:, :, None, None])
        for k in range(1, 8):
            m = getattr(self, f"AADBlk{k}")(m, z_attr[k - 1], z_id)
            m = F.interpolate(m, scale_factor=2, mode="bilinear", align_corners=True)
        return torch.tanh(self.AADBlk8(m, z_attr[7], z_id))


class AEINet(nn.Module):
    """forward(target [-1,1] Bx3x256x256, source Bx512 embedding) -> swapped face [-1,1] Bx3x256x256.
    GHOST's forward also returns the attribute maps (for its training losses); the ONNX does not."""

    def __init__(self, num_blocks: int = 2, c_id: int = C_ID):
        super().__init__()
        self.encoder = MLAttrEncoder()
        self.generator = AADGenerator(c_id, num_blocks)

    def forward(self, target, source):
        return self.generator(self.encoder(target), source)


def _init(m: nn.Module) -> None:
    # GHOST's weight_init: keeps activation magnitudes sane with random weights.
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0.0, 0.001)
        nn.init.zeros_(m.bias)
    elif isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.xavier_normal_(m.weight)


def build_blocks(num_blocks: int) -> nn.Module:
    """AEI-Net with 1, 2 or 3 AAD add-blocks per AAD ResBlk (ghost_1/2/3_256)."""
    torch.manual_seed(0)
    model = AEINet(num_blocks=num_blocks)
    model.apply(_init)
    return model.eval()


def build() -> nn.Module:
    return build_blocks(2)
