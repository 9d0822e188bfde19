"""GFPGAN v1.4 restorer stand-in: GFPGANv1Clean at the published v1.4 configuration, random weights.

The architecture is spandrel's ``GFPGANv1Clean`` (spandrel/architectures/GFPGAN/__arch/
gfpganv1_clean_arch.py, MIT; itself the "clean" arch of TencentARC/GFPGAN, Apache-2.0), imported,
not rewritten, with the hyper-parameters that TencentARC/GFPGAN inference_gfpgan.py (version 1.4:
arch "clean", channel_multiplier 2) and spandrel's GFPGAN loader use: out_size 512, num_style_feat
512, num_mlp 8, input_is_latent True, different_w True, narrow 1, sft_half True.

Two things are changed so the graph exports to ONNX with a dynamic batch and is deterministic:

- StyleGAN2's modulated conv folds the per-sample style into the weights and runs one grouped conv
  with ``groups=batch``; ONNX's Conv ``group`` is a static attribute, so a batch-dynamic export
  cannot carry it. Here the same maths is written the StyleGAN2 "non-fused" way: scale the input
  channels by the style, convolve with the shared weight, scale the output channels by the
  demodulation factor. Same convolution MACs, same result up to rounding.
- The decoder's noise injection uses the module's stored noise buffers (``randomize_noise=False``)
  instead of fresh ``normal_()`` noise each call: same shapes and adds, no RandomNormal op, and
  batch rows that do not depend on each other.

The module returns only the restored image (``return_rgb=False``, as GFPGANer.enhance calls it).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ...standins import StandIn

# 348,632,874 bytes is GFPGANv1.4.pth (TencentARC/GFPGAN GitHub release asset) = one fp32 state dict
# ("params_ema") of this module: its parameters PLUS the decoder's 15 stored noise buffers
# (699,024 floats, 1x1xRxR for R = 4, 8, 8, ..., 512, 512), plus pickle/zip overhead.
_PTH_BYTES = 348_632_874
_NOISE_BUFFER_FLOATS = 699_024
_PUBLISHED_PARAMS = _PTH_BYTES // 4 - _NOISE_BUFFER_FLOATS   # 86,459,194

SPEC = StandIn(
    name="gfpgan_v1_4",
    role="restorer",
    published_params=_PUBLISHED_PARAMS,
    published_gflops=None,
    flops_convention="FLOPs (2 x MACs)",
    source=(
        "No parameter or FLOP count is published for GFPGAN v1.4 (TencentARC/GFPGAN README, paper "
        "arXiv:2101.04061 and model zoo give none). Derived from the weight file: GFPGANv1.4.pth, "
        "TencentARC/GFPGAN GitHub release (releases/download/v1.3.0/GFPGANv1.4.pth, also v1.3.4), "
        "348,632,874 bytes (332.5 MB; size listed in clibdev/GFPGAN-onnxruntime-demo README.md and "
        "used as the expected download size by downstream installers, sha256 e2cd4703...be5ad). "
        "It is an fp32 'params_ema' state dict: 348,632,874 / 4 = 87,158,218 floats, minus the "
        "699,024 floats of the StyleGAN2 decoder's noise buffers (not parameters) = 86,459,194."
    ),
    inputs=(("input", (3, 512, 512)),),
    outputs=("output",),
    approximated=(
        "Modulated convs use StyleGAN2's non-fused form (input scaled by style, shared-weight conv, "
        "output scaled by demodulation) instead of a per-sample grouped conv, because ONNX Conv's "
        "group count is static; same MACs and result. Noise injection adds the stored noise "
        "buffers instead of drawing fresh Gaussian noise per call (same shapes and adds)."
    ),
    notes=(
        "Parameter count compared: module parameters (86,444,252) against the file's floats less its "
        "noise buffers (86,459,194); the 14,942-float (~60 KB, 0.017 %) remainder is the .pth's "
        "pickle/zip overhead. The count includes the 8-layer style MLP (2,101,248) and the "
        "intermediate toRGB heads (3,765), which are in the published weights but unused at "
        "inference (input_is_latent=True, return_rgb=False), so an ONNX export drops them: this "
        "stand-in exports to 338,902,916 bytes (323.2 MiB) fp32, within 0.5 % of the 324.5 MB "
        "listed for the GFPGANv1.4 ONNX in clibdev/GFPGAN-onnxruntime-demo README.md.",
        "No published FLOPs. Measured (count.flops, one 512x512 face): 395.5 GFLOPs = 197.8 GMACs "
        "(convolutions and matmuls only; the bilinear resizes are not counted).",
    ),
)


def _arch():
    # spandrel's arch module (the same one its GFPGAN loader builds); the package name is private.
    from spandrel.architectures.GFPGAN import GFPGAN
    from spandrel.architectures.GFPGAN.__arch import stylegan2_clean_arch as sg2

    return GFPGAN, sg2.ModulatedConv2d


class _BatchDynamicModulatedConv2d(nn.Module):
    """Forward of spandrel's ModulatedConv2d without ``groups=batch`` (see the module docstring).

    Installed by swapping ``__class__`` on the built modules, so parameters and names are untouched.
    """

    def forward(self, x, style):
        style = self.modulation(style)                      # (b, c_in)
        weight = self.weight[0]                             # (c_out, c_in, k, k)
        if self.sample_mode == "upsample":                  # per-channel scaling commutes with resize
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        elif self.sample_mode == "downsample":
            x = F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=False)
        out = F.conv2d(x * style[:, :, None, None], weight, padding=self.padding)
        if self.demodulate:
            # sum over (c_in, k, k) of (w * s)^2 = s^2 @ sum_k(w^2)^T
            demod = torch.rsqrt(style.pow(2) @ weight.pow(2).sum([2, 3]).t() + self.eps)
            out = out * demod[:, :, None, None]
        return out


class _ImageOnly(nn.Module):
    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x):
        # GFPGANer.enhance calls it this way (no intermediate RGBs); stored noise, see docstring
        return self.net(x, return_rgb=False, randomize_noise=False)[0]


def build() -> nn.Module:
    torch.manual_seed(0)
    gfpgan_cls, modconv_cls = _arch()
    net = gfpgan_cls(
        out_size=512, num_style_feat=512, channel_multiplier=2, decoder_load_path=None,
        fix_decoder=False, num_mlp=8, input_is_latent=True, different_w=True, narrow=1, sft_half=True,
    )
    swapped = type("BatchDynamicModulatedConv2d", (_BatchDynamicModulatedConv2d, modconv_cls), {})
    for m in net.modules():
        if type(m) is modconv_cls:
            m.__class__ = swapped
    return _ImageOnly(net).eval()
