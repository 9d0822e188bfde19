"""Blending steps of the mesh swap (``mesh_swap.py``): the boundary membrane that takes the
colour at the paste's edge from the target. Float RGB 0..255 patches around one face."""
from __future__ import annotations

import cv2
import numpy as np

# Width of the band inside the paste's edge whose colour difference the membrane carries inward,
# as a share of the face size, and the robust clip of that difference (MADs about its median):
# a hair strand or a glasses frame on the edge would otherwise spread inward as a smear.
BAND = 0.03
CLIP_MADS = 2.5

# Source skin (``source_skin``): Lab spread floor (L, a, b) and how many spreads darker (L) or off
# chroma (a, b) a pixel may be and still count as skin.
SKIN_SPREAD_FLOOR = (6.0, 3.0, 3.0)
SKIN_Z = (3.0, 3.5)


def push_pull(values: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Fill ``values`` (h, w, c) everywhere from the pixels where ``weight`` (h, w) > 0: a smooth
    interpolant (weighted pyramid down, then each level's holes filled from the coarser one), a
    fast stand-in for solving Laplace's equation with the known pixels as boundary."""
    levels = [(values * weight[..., None], weight)]
    while min(levels[-1][1].shape) > 2:
        v, w = levels[-1]
        size = (max(1, w.shape[1] // 2), max(1, w.shape[0] // 2))
        levels.append((cv2.resize(v, size, interpolation=cv2.INTER_AREA).reshape(size[1], size[0], -1),
                       cv2.resize(w, size, interpolation=cv2.INTER_AREA)))
    v, w = levels[-1]
    filled = v / np.maximum(w, 1e-6)[..., None]
    for v, w in reversed(levels[:-1]):
        up = cv2.resize(filled, (w.shape[1], w.shape[0]), interpolation=cv2.INTER_LINEAR).reshape(v.shape)
        alpha = np.clip(w * 4.0, 0.0, 1.0)[..., None]
        filled = alpha * (v / np.maximum(w, 1e-6)[..., None]) + (1 - alpha) * up
    return filled


def membrane(warped: np.ndarray, patch: np.ndarray, paste: np.ndarray, size: float) -> np.ndarray:
    """``warped`` plus the smooth field that makes it meet the target at the paste's edge: the
    target minus the warp, averaged over a band just inside the edge (every edge: the face's
    outline and the kept eyes and mouth), clipped robustly and interpolated over the inside.

    Why: a texture matched to the target's skin in the mean still differs from it along the jaw
    and the hairline (the target's shading, a beard's shadow, the source's own light), and a
    feather only hides a step of a few pixels: the labelled mesh faces showed a hard colour edge
    at the jaw (``seam``), the largest defect class after blotches."""
    inside = (paste > 0).astype(np.uint8)
    if inside.sum() < 16:
        return warped
    dist = cv2.distanceTransform(inside, cv2.DIST_L2, 3)
    band = (dist > 0) & (dist <= max(1.5, BAND * size))
    if band.sum() < 8:
        return warped
    diff = cv2.GaussianBlur(patch - warped, (0, 0), max(0.8, 0.25 * BAND * size))
    d = diff[band]
    med = np.median(d, axis=0)
    mad = np.median(np.abs(d - med), axis=0) * 1.4826 + 1.0
    diff = np.clip(diff, med - CLIP_MADS * mad, med + CLIP_MADS * mad)
    field = push_pull(diff.astype(np.float32), band.astype(np.float32))
    return np.clip(warped + field * inside[..., None], 0, 255)


def source_skin(img: np.ndarray, label: np.ndarray, skin: np.ndarray) -> np.ndarray:
    """(h, w) float32 in 0..1 over the source photo (``label``: its mesh rasterised, ``skin``: which
    triangles are plain skin): how much each pixel inside its mesh looks like the source's own
    skin, 1 on the other triangles (brows, eyes, lips, nostrils: features never judged by colour).

    Why: a source's hair across the temple or cheek, a hand at the jaw, a shadow cast by a curl
    all lie inside the mesh, and were pasted onto the target as dark or golden blotches (the
    f_blonde_smile source on the three-quarter targets of the labelled set). Skin is read robustly
    from the source's own skin triangles (median, MAD in Lab); much darker than that or far off
    its chroma is not skin. Brighter is allowed (highlights), chroma only loosely (blush)."""
    inside = label >= 0
    is_skin = inside & skin[np.maximum(label, 0)]
    if is_skin.sum() < 64:
        return inside.astype(np.float32)
    lab = cv2.cvtColor(img.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    ref = np.median(lab[is_skin], axis=0)
    spread = np.maximum(np.median(np.abs(lab[is_skin] - ref), axis=0) * 1.4826, SKIN_SPREAD_FLOOR)
    z = (lab - ref) / spread
    far = np.sqrt(np.minimum(z[..., 0], 0.0) ** 2 / SKIN_Z[0] ** 2 + (z[..., 1] ** 2 + z[..., 2] ** 2) / SKIN_Z[1] ** 2)
    w = np.clip(2.0 - far, 0.0, 1.0)
    w[inside & ~is_skin] = 1.0
    w[~inside] = 0.0
    return w.astype(np.float32)


# Skin detail: the source's fine texture (below ``DETAIL_SCALE`` of the face size) on plain skin is
# scaled down where it is stronger than ``DETAIL_GAIN`` x the target's own at the same place.
DETAIL_SCALE = 0.05
DETAIL_GAIN = 1.0


def match_detail(warped: np.ndarray, patch: np.ndarray, skin: np.ndarray, size: float) -> np.ndarray:
    """``warped`` with its fine texture on plain skin (``skin``: bool map) no stronger than the
    target's: local RMS of the detail band, source over target, capped at ``DETAIL_GAIN``.

    Why: the source's stubble, pores and the shadow of its nose side, pasted onto a smooth or soft
    target, read as dirt: "blotch" was the first defect of the labelled mesh faces (251 of 488 on
    round mixed-2), mostly stubble on young faces and on low-resolution frames."""
    if not skin.any():
        return warped
    s = max(0.8, DETAIL_SCALE * size)
    base_w = cv2.GaussianBlur(warped, (0, 0), s)
    det_w = warped - base_w
    det_t = patch - cv2.GaussianBlur(patch, (0, 0), s)
    win = 3.0 * s
    e_w = cv2.GaussianBlur((det_w ** 2).mean(axis=2), (0, 0), win)
    e_t = cv2.GaussianBlur((det_t ** 2).mean(axis=2), (0, 0), win)
    gain = np.minimum(1.0, DETAIL_GAIN * np.sqrt(e_t / np.maximum(e_w, 1e-3)))
    gain = np.where(skin, gain, 1.0).astype(np.float32)
    return base_w + det_w * gain[..., None]
