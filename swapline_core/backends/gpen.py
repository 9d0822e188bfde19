"""GPEN-BFR face restorers (ONNX, 256/512/1024 px) beside the spandrel ones.

Same public face as restorers.FaceRestorer (``restore``, ``run_crops``, ``settings``,
``model_files``), so the image and video restore stages use either unchanged. Facts from
FaceFusion's face enhancer model set (docs/swappers.md, "GPEN-BFR"): gpen_bfr_256 is aligned to
arcface_128 at 256 px, 512/1024 to ffhq_512; input ``input`` [1,3,S,S] = (RGB/255 - 0.5)/0.5;
output clipped to [-1,1], then (y + 1)/2.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import BadModelError
from ..types import Face, SwapPatch
from .aligned_restore import restore_aligned
from .onnx_batch import BatchRun
from .onnx_sessions import create_session
from .swappers.runner import family_mask
from .trt_profile import RESTORER

GPEN_SIZES = (256, 512, 1024)


def is_onnx_restorer(path: str) -> bool:
    return path.lower().endswith(".onnx")


class GpenRestorer:
    arch = "GPEN-BFR"

    def __init__(self, path: str, provider: str = "auto", mask_blur: float = 0.1):
        self.path = path
        self.name = f"{self.arch}:{os.path.basename(path)}"
        self.session = create_session(path, provider, RESTORER)   # run_crops sends the node's 'batch' at once
        ins, outs = self.session.get_inputs(), self.session.get_outputs()
        shape = tuple(ins[0].shape) if len(ins) == 1 else ()
        if (len(ins) != 1 or len(outs) != 1 or len(shape) != 4 or shape[1] != 3 or shape[2] != shape[3]
                or shape[2] not in GPEN_SIZES):
            sig = ", ".join(f"{i.name}{i.shape}" for i in ins) + " -> " + ", ".join(f"{o.name}{o.shape}" for o in outs)
            raise BadModelError(path, f"it is not a GPEN-BFR restorer (expected one input [1,3,S,S] with S in "
                                      f"{GPEN_SIZES} and one output of the same shape; got {sig})")
        self.size = int(shape[2])
        self.template = "arcface_128" if self.size == 256 else "ffhq_512"
        self.runner = BatchRun(self.session)
        self.input_name = ins[0].name
        self.mask_blur = float(mask_blur)
        self.mask = family_mask(self.size, self.template, "ellipse", 0.0, mask_blur)
        self.providers = {f"restorer:{os.path.basename(path)}": list(self.session.get_providers())}
        self.batching = {f"restorer:{os.path.basename(path)}": self.runner}

    @property
    def settings(self) -> tuple:
        return (self.arch, self.size, round(self.mask_blur, 4))

    def model_files(self) -> list[tuple[str, str]]:
        return [("restorer", self.path)]

    def use_device(self, device, prepare=None) -> None:
        """ONNX Runtime picks its own device (the provider); nothing to move."""

    def run_crops(self, crops: np.ndarray, batch: int = 4,
                  check_interrupt: Callable[[], None] | None = None) -> np.ndarray:
        """(N, S, S, 3) uint8 aligned crops -> restored crops, float32 in 0..255."""
        out = np.empty(crops.shape, np.float32)
        step = max(1, int(batch))
        for s in range(0, len(crops), step):
            if check_interrupt is not None:
                check_interrupt()
            x = (crops[s:s + step].astype(np.float32) / 127.5 - 1.0).transpose(0, 3, 1, 2)
            y = self.runner({self.input_name: x}, max_batch=step)[0]
            out[s:s + step] = ((np.clip(y, -1.0, 1.0) + 1.0) * 127.5).transpose(0, 2, 3, 1)
        return out

    def restore(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]], weight: float = 1.0,
                batch: int = 4, check_interrupt: Callable[[], None] | None = None) -> list[list[SwapPatch]]:
        """One patch per given face (inside the frame), per image; crops batched across images."""
        return restore_aligned(self, images, faces, weight, batch, check_interrupt, self.size, self.template)
