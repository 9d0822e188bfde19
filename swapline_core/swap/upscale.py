"""Small faces through upscaled crops.

A face whose eyes are closer than the swapper's declared minimum (``Competence.min_inter_ocular_px``,
e.g. 12 px for the classical swap, whose 68-point landmarks need that much) is not refused outright
while it is still a face (eyes >= ``MIN_EYES_PX`` apart, a ~10 px face): the region around it is
upscaled so its eyes sit at twice the swapper's minimum, landmarks, guards, swapper and mask stack
run there, and the result is scaled back into one frame-space patch. Full-body shots keep their
20-30 px faces swapped instead of untouched.
"""
from __future__ import annotations

import cv2
import numpy as np

from ..types import Face, SwapPatch

MIN_EYES_PX = 4.0       # below this there is no face left to swap, only a few pixels
MAX_SCALE = 8.0


def eyes_px(face: Face) -> float:
    return float(np.linalg.norm(np.asarray(face.kps[1], np.float64) - np.asarray(face.kps[0], np.float64)))


def wants_upscale(face: Face, min_eyes: float) -> bool:
    return min_eyes > 0 and MIN_EYES_PX <= eyes_px(face) < min_eyes


def crop_for(frame: np.ndarray, face: Face, min_eyes: float):
    """(upscaled crop, the face in crop coordinates, (x0, y0, x1, y1) in the frame, scale)."""
    scale = float(min(MAX_SCALE, 2.0 * min_eyes / max(eyes_px(face), 1e-6)))
    x1f, y1f, x2f, y2f = (float(v) for v in face.bbox)
    size = max(x2f - x1f, y2f - y1f)
    h, w = frame.shape[:2]
    # one face size of margin each side: forehead band, feathering and colour statistics fit
    x0, y0 = max(0, int(np.floor(x1f - size))), max(0, int(np.floor(y1f - size)))
    x1, y1 = min(w, int(np.ceil(x2f + size))), min(h, int(np.ceil(y2f + size)))
    crop = cv2.resize(frame[y0:y1, x0:x1], (round((x1 - x0) * scale), round((y1 - y0) * scale)),
                      interpolation=cv2.INTER_CUBIC)
    sx, sy = crop.shape[1] / (x1 - x0), crop.shape[0] / (y1 - y0)
    off = np.array([x0, y0], np.float32)
    f = face.copy(bbox=((face.bbox.reshape(2, 2) - off) * [sx, sy]).reshape(4).astype(np.float32),
                  kps=((face.kps - off) * [sx, sy]).astype(np.float32), landmarks=None)
    return crop, f, (x0, y0, x1, y1), (sx, sy)


def patch_to_frame(patch: SwapPatch, crop_shape, region) -> SwapPatch | None:
    """A crop-space patch as a frame-space patch over ``region`` (area-downscaled)."""
    x0, y0, x1, y1 = region
    ch, cw = crop_shape[:2]
    px = np.zeros((ch, cw, 3), np.float32)
    mk = np.zeros((ch, cw), np.float32)
    a0, b0, a1, b1 = patch.region
    if a1 <= a0 or b1 <= b0 or patch.mask.size == 0:
        return None
    px[b0:b1, a0:a1] = patch.pixels
    mk[b0:b1, a0:a1] = patch.mask
    size = (x1 - x0, y1 - y0)
    # premultiplied, so pixels outside the mask do not bleed into the downscaled colour
    num = cv2.resize(px * mk[..., None], size, interpolation=cv2.INTER_AREA)
    m = cv2.resize(mk, size, interpolation=cv2.INTER_AREA)
    pixels = num / np.maximum(m, 1e-6)[..., None]
    m[m < 1.5 / 255.0] = 0.0
    info = dict(patch.info)
    return SwapPatch((x0, y0, x1, y1), pixels.astype(np.float32), m.astype(np.float32), info)
