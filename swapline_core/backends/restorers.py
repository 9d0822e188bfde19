"""Face restoration (GFPGAN, RestoreFormer, CodeFormer) of the faces a swap produced.

Only the faces handed in are restored: the swap stage already knows where they are, so there
is no second detector. Each face is aligned onto the 512 FFHQ template those models were
trained on, the crops go through the network in batches, and the result is blended with the
original crop and pasted back through the same feathered-patch path the swappers use, so pixels
outside the mask stay bit-identical.

Loading goes through spandrel (a ComfyUI dependency) because the ``gfpgan`` package no longer
imports on current torchvision. This module never imports ComfyUI: the node layer injects the
device and a ``prepare`` hook through which ComfyUI's model management owns the weights' VRAM.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..errors import BadModelError, MissingModelError
from ..faces.paste import crop_mask
from ..types import Face, SwapPatch
from .aligned_restore import restore_aligned

SIZE = 512
ACCEPTED = ("GFPGAN", "RestoreFormer", "CodeFormer")


def _registry():
    """spandrel's registry plus the non-commercial extra arches (CodeFormer) when installed.

    A private copy, so we neither depend on nor disturb whether ComfyUI's upscale nodes already
    added the extra arches to the global registry.
    """
    from spandrel import MAIN_REGISTRY

    reg = MAIN_REGISTRY.copy()
    try:
        from spandrel_extra_arches import EXTRA_REGISTRY
    except ImportError:
        return reg, False
    reg.add(*EXTRA_REGISTRY, ignore_duplicates=True)
    return reg, True


def supported_architectures() -> list[str]:
    reg, _ = _registry()
    return [a for a in ACCEPTED if a in reg]


def _detected(reg, state_dict) -> str | None:
    for arch in reg.architectures("detection"):
        try:
            if arch.detect(state_dict):
                return str(arch.architecture.id)
        except Exception:  # a detector tripping over foreign keys just means "not this one"
            continue
    return None


def _supported_text(reg) -> str:
    names = {"GFPGAN": "GFPGAN v1.3/v1.4", "RestoreFormer": "RestoreFormer", "CodeFormer": "CodeFormer"}
    return ", ".join(names[a] for a in ACCEPTED if a in reg)


def load_restorer(path: str, device: str | torch.device | None = None, dtype: torch.dtype | None = None,
                  *, fidelity: float = 0.5, mask_blur: float = 0.1) -> FaceRestorer:
    """Load a face restorer file, or raise an error that names the file and what is wrong."""
    from spandrel import ModelLoader, UnsupportedModelError

    if not os.path.isfile(path):
        raise MissingModelError(os.path.basename(path), [os.path.dirname(os.path.abspath(path))])
    reg, extra = _registry()
    loader = ModelLoader(device="cpu", registry=reg)
    try:
        state_dict = loader.load_state_dict_from_file(path)
    except ValueError as exc:  # spandrel's "unsupported extension"
        raise BadModelError(path, str(exc)) from exc
    except Exception as exc:
        # torch's zip reader and the unpickler fail in many ways on a broken download
        raise BadModelError(path, f"the file is truncated or corrupt ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0][:200] if str(exc) else 'no detail'}); "
                                  "download it again") from exc
    if not isinstance(state_dict, dict) or not state_dict:
        raise BadModelError(path, "it holds no model weights")
    detected = _detected(reg, state_dict)
    if detected is None:
        hint = ""
        if not extra and "position_emb" in state_dict and "idx_pred_layer.1.weight" in state_dict:
            hint = " It looks like CodeFormer, which needs the 'spandrel_extra_arches' package."
        raise BadModelError(path, f"it is not a face restorer: no known architecture was detected "
                                  f"(detected architecture: none). Supported: {_supported_text(reg)}.{hint}")
    if detected not in ACCEPTED:
        raise BadModelError(path, f"it is not a face restorer: spandrel detected architecture '{detected}' "
                                  f"(e.g. an upscaler; use ComfyUI's Load Upscale Model for it). "
                                  f"Supported: {_supported_text(reg)}.")
    try:
        descriptor = reg.load(state_dict)
    except UnsupportedModelError as exc:
        raise BadModelError(path, f"detected architecture '{detected}' but spandrel cannot load it") from exc
    except Exception as exc:  # e.g. size mismatches: a variant with other hyperparameters
        raise BadModelError(path, f"detected architecture '{detected}' but its weights do not fit "
                                  f"({type(exc).__name__}: {str(exc)[:300]})") from exc
    return FaceRestorer(descriptor.model, detected, path, device=device, dtype=dtype,
                        supports_half=descriptor.supports_half, supports_bfloat16=descriptor.supports_bfloat16,
                        fidelity=fidelity, mask_blur=mask_blur)


class FaceRestorer:
    """A loaded face restoration network plus the crop/blend/paste logic around it.

    ``module`` is the bare torch network (not spandrel's descriptor: its call wrapper expects
    [0,1] input for some arches and [-1,1] for GFPGAN, so we call the network ourselves with the
    [-1,1] input every one of these models was trained on).
    """

    def __init__(self, module: torch.nn.Module, arch: str, path: str, *,
                 device: str | torch.device | None = None, dtype: torch.dtype | None = None,
                 supports_half: bool = False, supports_bfloat16: bool = False,
                 fidelity: float = 0.5, mask_blur: float = 0.1):
        self.arch = arch
        self.path = path
        self.name = f"{arch}:{os.path.basename(path)}"
        # Fall back to float32 rather than fail: a dtype the arch cannot run gives black faces.
        wanted = dtype or torch.float32
        ok = {torch.float16: supports_half, torch.bfloat16: supports_bfloat16}.get(wanted, True)
        self.dtype = wanted if ok else torch.float32
        self.module = module.eval().to(self.dtype)
        self.module.requires_grad_(False)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.prepare: Callable[[int], None] | None = None
        self.fidelity = float(fidelity)
        self.mask_blur = float(mask_blur)
        self.mask = crop_mask(SIZE, "ellipse", blur=mask_blur)

    @property
    def settings(self) -> tuple:
        """What changes the pixels (not the device): part of the chunk-store keys."""
        return (self.arch, round(self.fidelity, 4), round(self.mask_blur, 4), str(self.dtype))

    def model_files(self) -> list[tuple[str, str]]:
        return [("restorer", self.path)]

    def use_device(self, device: str | torch.device, prepare: Callable[[int], None] | None = None) -> None:
        """Run on ``device``. With ``prepare`` (called with the batch size before each batch), the
        caller's memory manager moves the weights; without it we move them ourselves."""
        self.device = torch.device(device)
        self.prepare = prepare

    def _ready(self, n: int) -> None:
        if self.prepare is not None:
            self.prepare(n)
        else:
            self.module.to(self.device)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.arch == "GFPGAN":
            # Fixed (trained) StyleGAN noise instead of fresh noise per call: the same face in
            # consecutive video frames must not shimmer.
            return self.module(x, return_rgb=False, randomize_noise=False)[0]
        if self.arch == "CodeFormer":
            return self.module(x, w=self.fidelity, adain=True)[0]
        return self.module(x)[0]

    def run_crops(self, crops: np.ndarray, batch: int = 4,
                  check_interrupt: Callable[[], None] | None = None) -> np.ndarray:
        """(N, 512, 512, 3) uint8 aligned crops -> restored crops, float32 in 0..255."""
        out = np.empty(crops.shape, np.float32)
        step = max(1, int(batch))
        for s in range(0, len(crops), step):
            if check_interrupt is not None:
                check_interrupt()
            part = crops[s:s + step]
            self._ready(len(part))
            x = torch.from_numpy(np.ascontiguousarray(part.transpose(0, 3, 1, 2))).to(self.device)
            x = (x.to(self.dtype) / 127.5 - 1.0)
            with torch.inference_mode():
                y = self._forward(x)
            y = (y.float().clamp(-1.0, 1.0) + 1.0) * 127.5
            out[s:s + step] = y.permute(0, 2, 3, 1).cpu().numpy()
        return out

    def restore(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]], weight: float = 1.0,
                batch: int = 4, check_interrupt: Callable[[], None] | None = None) -> list[list[SwapPatch]]:
        """One patch per given face (inside the frame), per image; crops batched across images."""
        return restore_aligned(self, images, faces, weight, batch, check_interrupt, SIZE, "ffhq")
