"""dlib's face recognition ResNet (``dlib_face_recognition_resnet_model_v1.dat``) run by torch.

dlib's Python wheel runs this network single-threaded without BLAS (~0.1 s per face on one
core), which made the embeddings the largest cost of the QA gate. The same network in torch
uses the machine's threads and its convolution kernels. Architecture and file format from dlib's
own sources (Boost Software License): ``tools/python/src/face_recognition.cpp`` (``anet_type``),
``dlib/dnn/layers.h`` and ``input.h`` (each layer's serialisation), ``dlib/serialize.h`` (integer
and float encodings) and ``dlib/cuda/tensor.h`` (tensors: little-endian float32).

The input is dlib's own 150 px face chip (``dlib.get_face_chip``, padding 0.25), so only the
network changes: descriptors match dlib's to float rounding (tests/unit/backends/test_dlib_resnet.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

# anet_type, input side first: (channels, blocks, first block downsamples)
LEVELS = ((32, 3, False), (64, 4, True), (128, 3, True), (256, 3, True), (256, 1, True))
CHIP_SIZE = 150
CHIP_PADDING = 0.25


class _Reader:
    """dlib's serialisation primitives over a byte buffer."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def int(self) -> int:
        head = self.data[self.pos]
        size, neg = head & 0x0F, head & 0x80
        value = int.from_bytes(self.data[self.pos + 1:self.pos + 1 + size], "little")
        self.pos += 1 + size
        return -value if neg else value

    def float(self) -> float:                      # float_details: mantissa * 2**exponent
        mantissa = self.int()
        return float(np.ldexp(float(mantissa), self.int()))

    def tensor(self) -> np.ndarray:
        if self.int() != 2:
            raise ValueError("unexpected dlib tensor version")
        shape = [self.int() for _ in range(4)]
        count = int(np.prod(shape))
        out = np.frombuffer(self.data, "<f4", count, self.pos).reshape(shape)
        self.pos += 4 * count
        return out

    def find(self, name: str) -> None:
        """Move past the next serialised string ``name`` (a layer's version tag): the containers
        between layers (tags, skips, cached outputs) carry no weights."""
        key = bytes([1, len(name)]) + name.encode("ascii")
        at = self.data.find(key, self.pos)
        if at < 0:
            raise ValueError(f"{name!r} not found in the dlib model")
        self.pos = at + len(key)


def load_weights(path: str | Path) -> dict:
    """{"mean": (3,), "convs": [(weight OIHW, bias)], "affines": [(gamma, beta)], "fc": (128, 256)}
    in forward order (dlib writes the input side first)."""
    r = _Reader(Path(path).read_bytes())
    r.find("input_rgb_image_sized")
    mean = np.array([r.float() for _ in range(3)], np.float32)
    convs, affines = [], []
    in_ch = 3
    for _ in range(1 + 2 * sum(n for _, n, _ in LEVELS)):
        r.find("con_4")
        params = r.tensor().reshape(-1)
        filters, kh, kw = r.int(), r.int(), r.int()
        w = params[:filters * in_ch * kh * kw].reshape(filters, in_ch, kh, kw)
        convs.append((w, params[w.size:w.size + filters]))
        r.find("affine_")
        params = r.tensor().reshape(-1)
        affines.append((params[:filters], params[filters:2 * filters]))
        in_ch = filters
    r.find("fc_2")
    outputs, inputs = r.int(), r.int()
    fc = r.tensor().reshape(-1)[:inputs * outputs].reshape(inputs, outputs).T
    return {"mean": mean, "convs": convs, "affines": affines, "fc": np.ascontiguousarray(fc)}


class DlibResNet(torch.nn.Module):
    """The network of ``anet_type``: 29 convolutions with affine (frozen batch norm) layers."""

    def __init__(self, weights: dict):
        super().__init__()
        t = lambda a: torch.from_numpy(np.array(a, np.float32))  # noqa: E731
        # buffers, so .to(device) moves them all
        self.register_buffer("mean", t(weights["mean"]).view(1, 3, 1, 1))
        for i, ((w, b), (g, beta)) in enumerate(zip(weights["convs"], weights["affines"])):
            self.register_buffer(f"conv{i}_w", t(w))
            self.register_buffer(f"conv{i}_b", t(b))
            self.register_buffer(f"affine{i}_g", t(g).view(1, -1, 1, 1))
            self.register_buffer(f"affine{i}_b", t(beta).view(1, -1, 1, 1))
        self.register_buffer("fc", t(weights["fc"]))

    def _unit(self, x: torch.Tensor, i: int, stride: int = 1, relu: bool = True) -> torch.Tensor:
        w = getattr(self, f"conv{i}_w")
        # dlib pads a 3x3 convolution by 1 only at stride 1 (con_'s default padding)
        x = F.conv2d(x, w, getattr(self, f"conv{i}_b"), stride=stride,
                     padding=w.shape[-1] // 2 if stride == 1 else 0)
        x = x * getattr(self, f"affine{i}_g") + getattr(self, f"affine{i}_b")
        return F.relu(x) if relu else x

    def forward(self, chips: torch.Tensor) -> torch.Tensor:
        """(N, 150, 150, 3) uint8 RGB face chips -> (N, 128) descriptors, as dlib's net gives them."""
        x = (chips.permute(0, 3, 1, 2).float() - self.mean) / 256.0
        x = self._unit(x, 0, stride=2)
        x = F.max_pool2d(x, 3, 2)
        i = 1
        for _, blocks, down in LEVELS:
            for k in range(blocks):
                stride = 2 if down and k == 0 else 1
                y = self._unit(self._unit(x, i, stride), i + 1, relu=False)
                i += 2
                short = F.avg_pool2d(x, 2, 2) if stride == 2 else x
                x = F.relu(_add_padded(short, y))
        return x.mean(dim=(2, 3)) @ self.fc.T


def _add_padded(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """dlib's add_prev: the larger shape of the two, missing channels/rows/columns taken as zero
    (a downsampling block's 3x3 convolution can give one row and column fewer than its shortcut)."""
    shape = [max(p, q) for p, q in zip(a.shape, b.shape)]

    def grow(t):
        pad = []
        for dim in (3, 2, 1):
            pad += [0, shape[dim] - t.shape[dim]]
        return F.pad(t, pad) if any(pad) else t
    return grow(a) + grow(b)


def descriptors(net: DlibResNet, chips: list[np.ndarray], batch: int = 16) -> np.ndarray:
    """(N, 128) float32 descriptors of 150x150 RGB uint8 chips."""
    out = []
    with torch.inference_mode():
        for s in range(0, len(chips), batch):
            x = torch.from_numpy(np.stack(chips[s:s + batch])).to(net.mean.device)
            out.append(net(x).cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 128), np.float32)
