"""Preview images: numbered face boxes with the similarity to the reference identity."""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..types import Face

SELECTED = (40, 220, 90)
OTHER = (230, 180, 40)


def draw_faces(image: np.ndarray, faces: Sequence[Face], selected: Sequence[int] = (),
               sims: Sequence[float | None] = ()) -> np.ndarray:
    out = image.copy()
    scale = max(out.shape[:2]) / 640.0
    thick = max(1, int(round(2 * scale)))
    for i, f in enumerate(faces):
        color = SELECTED if i in selected else OTHER
        x1, y1, x2, y2 = (int(round(v)) for v in f.bbox)
        cv2.rectangle(out, (x1, y1), (x2, y2), color, thick)
        for x, y in f.kps:
            cv2.circle(out, (int(x), int(y)), thick, color, -1)
        label = f"#{i}"
        if i < len(sims) and sims[i] is not None:
            label += f" {sims[i]:.2f}"
        cv2.putText(out, label, (x1, max(y1 - 4, 12)), cv2.FONT_HERSHEY_SIMPLEX, 0.5 * scale,
                    color, thick, cv2.LINE_AA)
    return out
