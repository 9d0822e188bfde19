"""IMAGE/MASK tensors <-> the core's uint8 RGB arrays, plus small shared node helpers."""
from __future__ import annotations

import numpy as np
import torch

from ..swapline_core.types import as_rgb_uint8


def to_arrays(images: torch.Tensor) -> list[np.ndarray]:
    """ComfyUI IMAGE (B,H,W,C float 0..1; C may be 1, 3 or 4) -> list of RGB uint8."""
    arr = images.detach().cpu().numpy()
    return [as_rgb_uint8(a) for a in arr]


def to_image(frames: list[np.ndarray]) -> torch.Tensor:
    return torch.from_numpy(np.stack(frames).astype(np.float32) / 255.0)


def to_mask(masks: list[np.ndarray]) -> torch.Tensor:
    return torch.from_numpy(np.stack(masks).astype(np.float32))


def check_interrupt() -> None:
    import comfy.model_management

    comfy.model_management.throw_exception_if_processing_interrupted()


def progress(total: int):
    import comfy.utils

    return comfy.utils.ProgressBar(total)


def preview_ui(cls, images: torch.Tensor | None = None, **extra) -> dict:
    """A node's ui dict: preview images for the editor plus JSON data for API users."""
    from comfy_api.latest import ui

    out = ui.PreviewImage(images, cls=cls).as_dict() if images is not None else {}
    out.update({f"swapline_{k}": [v] for k, v in extra.items()})
    return out
