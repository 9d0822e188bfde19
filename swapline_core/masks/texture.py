"""Texture above the brows: hats, headbands, jewellery and hair are busy, a forehead is smooth.

Why: on the ltx clip (a woman in an ornamented headdress) the brim's beige ornament is close to
the skin's colour, so neither the skin model nor the hue test (``chroma``) sees it, and the
classical swapper's forehead band painted skin over the brim's lower edge on every frame. Skin,
even sunlit or shaded, varies slowly at the occluder's work scale (about 128 px a face); an
ornament, a knit or a fringe of hair changes lightness from pixel to pixel. Measured at work
scale (local RMS of lightness above a 1.5 px blur, pooled over 2.5 px): the headdress' brim and
the sample clips' hairlines 3-10, their foreheads (sunlit, shaded, red-lit) under 2.

Only above the brows, where occluders are hats and hair: below them the face's own features,
beard, stubble and folds are as busy and must be swapped. Only on faces at least ``MIN_FACE`` px
tall at work scale (fully from ``FULL_FACE``): on a 40 px face the brows' and hairline's edges
fill the whole forehead at these widths, and the rule cut the forehead of the quality bench's
small faces (28 % of their paste area cut instead of 19 %). The busy map is voted along the
track and cut in a pass of its own (``builtin.apply``), not merged into the skin distance, where
a busy brim joined the brows and the eye make-up below them into one blob and the target's eyes
were cut with it. What it cannot see: a smooth
occluder of skin's colour (a plain skin-toned band; the colour tests have to), and it keeps a
deeply wrinkled forehead as the target's (its lines are busy too).
"""
from __future__ import annotations

import cv2
import numpy as np

TEXTURE_AT = 2.5        # RMS lightness detail (Lab L, work scale) that reaches the occluder threshold
DETAIL_SIGMA = 1.5      # px at work scale: what is finer than this blur counts as detail
POOL_SIGMA = 2.5        # px at work scale: the detail's energy is pooled this wide (an area, not an edge)
BROW_MARGIN = 0.1       # eye distances above the highest brow point where the rule starts (ramps in)
MIN_FACE, FULL_FACE = 48.0, 64.0     # face size (px at work scale) where the rule starts / is full
THRESHOLD_D2 = 4.5 ** 2     # the occluder threshold on the pseudo skin distance ``busy`` returns


def detail(lightness: np.ndarray) -> np.ndarray:
    """Local RMS of the lightness' fine detail (Lab L units) at each pixel of a work-scale map."""
    L = np.asarray(lightness, np.float32)
    hp = L - cv2.GaussianBlur(L, (0, 0), DETAIL_SIGMA)
    np.multiply(hp, hp, out=hp)
    return np.sqrt(cv2.GaussianBlur(hp, (0, 0), POOL_SIGMA))


def above_brows(shape, lm68: np.ndarray | None, kps: np.ndarray) -> np.ndarray:
    """0..1 per pixel: 1 a margin above the highest brow point along the face's own vertical
    (eyes minus chin, or minus the mouth with five points), 0 at and below the brows."""
    kps = np.asarray(kps, np.float32)
    iod = max(float(np.linalg.norm(kps[1] - kps[0])), 1.0)
    if lm68 is not None:
        up = lm68[36:48].mean(axis=0) - lm68[8]
        up = up / max(float(np.linalg.norm(up)), 1e-6)
        brow = float((lm68[17:27] @ up).max())
    else:
        up = (kps[0] + kps[1]) / 2 - (kps[3] + kps[4]) / 2
        up = up / max(float(np.linalg.norm(up)), 1e-6)
        brow = float(((kps[0] + kps[1]) / 2) @ up) + 0.45 * iod      # brows sit ~0.3-0.45 iod above the eyes
    h, w = shape
    proj = (np.arange(w, dtype=np.float32)[None, :] * np.float32(up[0])
            + np.arange(h, dtype=np.float32)[:, None] * np.float32(up[1]))
    return np.clip((proj - np.float32(brow)) / np.float32(BROW_MARGIN * iod), 0.0, 1.0)


def busy(lightness: np.ndarray, lm68: np.ndarray | None, kps: np.ndarray, face_px: float) -> np.ndarray:
    """Squared pseudo skin distance of busy pixels above the brows: 4.5 (the occluder threshold)
    at ``TEXTURE_AT``, rising with the detail; 0 at and below the brows. ``face_px``: the face's
    size on this map (small faces get no texture rule)."""
    weight = float(np.clip((face_px - MIN_FACE) / (FULL_FACE - MIN_FACE), 0.0, 1.0))
    if weight == 0.0:
        return np.zeros(np.shape(lightness), np.float32)
    d = detail(lightness)
    d *= np.float32(4.5 / TEXTURE_AT * weight)
    d *= above_brows(d.shape, lm68, kps)
    return np.square(d, out=d)
