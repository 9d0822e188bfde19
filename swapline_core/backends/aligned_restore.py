"""The restore stage's shared loop: aligned crops of every face, one batched model run, blend,
warp back as patches. Restorers (spandrel GFPGAN-class in ``restorers``, GPEN ONNX in ``gpen``)
only differ in how they run a batch of crops; this module imports neither torch nor onnxruntime.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..faces.align import warp_crops
from ..faces.paste import crop_to_patch
from ..types import Face, SwapPatch


def restore_aligned(restorer, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]], weight: float,
                    batch: int, check_interrupt: Callable[[], None] | None, size: int,
                    template: str) -> list[list[SwapPatch]]:
    """One patch per given face (inside the frame), per image; crops batched across images.
    ``restorer`` provides ``run_crops(crops, batch, check_interrupt)``, ``mask`` and ``name``."""
    out: list[list[SwapPatch]] = [[] for _ in images]
    weight = float(np.clip(weight, 0.0, 1.0))
    if weight == 0.0:  # nothing to blend in; skip the network and the resampling round trip
        return out
    crops, mats, owners = [], [], []
    for i, (img, fs) in enumerate(zip(images, faces)):
        if fs:
            c, m = warp_crops(img, fs, size, template)
            crops.append(c)
            mats.append(m)
            owners.extend((i, j) for j in range(len(fs)))
    if not owners:
        return out
    originals = np.concatenate(crops)
    mats_all = np.concatenate(mats)
    restored = restorer.run_crops(originals, batch, check_interrupt)
    for k, (i, _j) in enumerate(owners):
        px = restored[k] if weight == 1.0 else restored[k] * weight + originals[k] * (1.0 - weight)
        patch = crop_to_patch(images[i].shape[:2], px, restorer.mask, mats_all[k],
                              {"restorer": restorer.name, "weight": round(weight, 4)})
        if patch is not None:
            out[i].append(patch)
    return out
