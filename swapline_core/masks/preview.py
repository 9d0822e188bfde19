"""A picture of the mask stack on the target: what each part keeps, and the final paste mask.

Colours: occlusion red, face-parser regions blue, landmark area yellow, mouth green; the swapped
area keeps its brightness and everything the final mask leaves alone is dimmed.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..types import SwapPatch

COLOURS = {"occlusion": (235, 40, 40), "region": (40, 90, 240), "area": (240, 220, 40), "mouth": (40, 220, 80)}


def draw_stack(frame: np.ndarray, patches: Sequence[SwapPatch], dim: float = 0.45) -> np.ndarray:
    out = frame.astype(np.float32) * dim
    final = np.zeros(frame.shape[:2], np.float32)
    for p in patches:
        x0, y0, x1, y1 = p.region
        np.maximum(final[y0:y1, x0:x1], p.mask, out=final[y0:y1, x0:x1])
    out += frame.astype(np.float32) * (1.0 - dim) * final[..., None]
    for p in patches:
        x0, y0, x1, y1 = p.region
        sub = out[y0:y1, x0:x1]
        for name, keep in p.layers.items():
            a = (0.6 * (1.0 - keep))[..., None]
            sub[:] = sub * (1.0 - a) + np.asarray(COLOURS.get(name, (255, 255, 255)), np.float32) * a
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)
