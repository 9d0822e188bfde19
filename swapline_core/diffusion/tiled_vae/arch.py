"""The encoder as a checked list of operations: what exact tiling reproduces, and each
convolution's geometry."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...errors import SwaplineError

KNOWN_MODULE = "comfy.ldm.modules.diffusionmodules.model"


class UnsupportedArchitecture(SwaplineError):
    """The encoder is not one whose operations this module reproduces exactly."""



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
    # ("conv_in", conv) ("res", block) ("down", ds) ("attn", attn) ("out", (norm, conv)) ("quant", conv)
    ops: tuple
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
