"""Thin lines over the eyes are kept: wire and rimless glasses frames, their bridge and temples.

Why: the colour tests (``occlusion``, ``chroma``, ``glasses``) judge a pixel by its colour against
the skin's, and the eye sockets are exempt from them (eyes, lids and make-up are not skin-coloured
and must be swapped). A metal frame one or two pixels wide is not a colour the skin model can
learn apart at work scale (128 px: the line is a fraction of a pixel there), so gold, silver and
black wire frames were painted over with the source's eyes and skin.

What a wire is, independent of its colour: a line a few pixels wide whose pixels differ from the
pixels on *both* sides of it, while the two sides agree with each other (a ridge, not an edge),
long enough to be an object rather than a pore or a lash. It is measured at frame resolution in
the band around the eyes, in Lab, for eight directions. What is not judged: the eye openings and
a margin around them (lashes, lids and creases are lines too, and belong to the eye the swap
replaces). Nor are the brows: a thin brow is a line too, and one that lies mostly on a brow
(``brows``) is the face's own (issue 49: a synthetic 2 px brow 0.33 eye distances above the eyes
was kept as 122 px of "wire frame"); a frame's upper rim there is one line with the rest of its
rim, so the frame stays. A line found elsewhere in the band (a frame's rim, its bridge over the nose, a temple
toward the ear, a strand of hair) keeps the target's pixels exactly: a one-pixel line blended at
half strength is still painted over.
"""
from __future__ import annotations

import cv2
import numpy as np

ANGLES = 8              # directions a line is looked for in
SIDE = 2.0              # px from the line to its sides: lines up to 3 px wide
MIN_CONTRAST = 10.0     # Lab delta E the line must differ from both sides by (a clearly visible line)
MIN_LENGTH = 0.35       # a line's extent, in eye distances: longer than a pore, a lash or a wrinkle's fold
THICK = 5               # px: a line is thinner; what survives an opening this wide is a blob
MAX_THICK_SHARE = 0.25  # a line's pixels that may lie in such blobs (where it crosses a lash, a brow)
EYE_MARGIN = 0.12       # eye distances around each eye opening that are not judged (lashes, lids)
BROW_REACH = 0.1        # eye distances either side of a brow's line (68 points) that count as the brow
BROW_SHARE = 0.6        # a line with this share of its pixels on the brows is a brow, not a frame
# Larger faces are judged shrunk to this eye distance (px): the cost stays that of a ~180 px face
# (a 720p close-up's band at full size took 0.37 s per face), and a frame drawn to the face's
# scale (1.5-3 % of the eye distance) is still 1-2 px wide there.
WORK_IOD = 64.0


def ridge(lab: np.ndarray, side: float = SIDE) -> np.ndarray:
    """Per pixel, how far (delta E) it stands out from both sides of a line through it, less how
    much the sides differ, best over the directions; 0 where it is no ridge."""
    h, w = lab.shape[:2]
    best = np.zeros((h, w), np.float32)
    for k in range(ANGLES):
        t = np.pi * k / ANGLES
        dx, dy = -np.sin(t) * side, np.cos(t) * side
        s1 = _shift(lab, dx, dy)
        s2 = _shift(lab, -dx, -dy)
        np.maximum(best, np.minimum(_delta_e(lab, s1), _delta_e(lab, s2)) - _delta_e(s1, s2), out=best)
    return best


_SUM3 = np.ones((1, 3), np.float32)


def _delta_e(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = cv2.subtract(a, b)
    return cv2.sqrt(cv2.transform(cv2.multiply(d, d), _SUM3))


def _shift(img: np.ndarray, dx: float, dy: float) -> np.ndarray:
    m = np.float32([[1, 0, dx], [0, 1, dy]])
    return cv2.warpAffine(img, m, (img.shape[1], img.shape[0]), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)


def eye_band(shape, eyes: np.ndarray) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1): the box a pair of glasses occupies, from the two eye centres."""
    h, w = shape[:2]
    iod = float(np.linalg.norm(eyes[1] - eyes[0]))
    if iod < 8.0:
        return None
    x0, y0 = np.floor(eyes.min(0) - (1.1 * iod, 0.6 * iod)).astype(int)
    x1, y1 = np.ceil(eyes.max(0) + (1.1 * iod, 0.6 * iod)).astype(int)
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    return (x0, y0, x1, y1) if x1 - x0 >= 8 and y1 - y0 >= 8 else None


def eye_openings(shape, lm: np.ndarray | None, kps: np.ndarray, iod: float) -> np.ndarray:
    """The eye openings grown by :data:`EYE_MARGIN`: lids and lashes, not judged."""
    m = np.zeros(shape[:2], np.uint8)
    if lm is not None:
        for sl in (slice(36, 42), slice(42, 48)):
            cv2.fillConvexPoly(m, cv2.convexHull(np.rint(lm[sl]).astype(np.int32)), 1)
    else:
        for e in kps[:2]:
            cv2.ellipse(m, (int(round(e[0])), int(round(e[1]))), (int(0.25 * iod), int(0.12 * iod)), 0, 0, 360, 1, -1)
    r = max(1, int(round(EYE_MARGIN * iod)))
    return cv2.dilate(m, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))).astype(bool)


def brows(shape, lm: np.ndarray | None, kps: np.ndarray, iod: float) -> np.ndarray:
    """Where the brows lie: their landmark lines grown by :data:`BROW_REACH` (68 points), or with
    five points a band 0.2-0.5 eye distances above each eye (where brows sit, ``texture``)."""
    m = np.zeros(shape[:2], np.uint8)
    if lm is not None:
        t = max(1, int(round(2 * BROW_REACH * iod)))
        for sl in (slice(17, 22), slice(22, 27)):
            cv2.polylines(m, [np.rint(lm[sl]).astype(np.int32)], False, 1, t)
        return m.astype(bool)
    kps = np.asarray(kps, np.float64)
    up = (kps[0] + kps[1]) / 2 - kps[2]
    up = up / max(float(np.linalg.norm(up)), 1e-6)
    ang = float(np.degrees(np.arctan2(kps[1, 1] - kps[0, 1], kps[1, 0] - kps[0, 0])))
    for e in kps[:2]:
        c = e + 0.35 * iod * up
        cv2.ellipse(m, (int(round(c[0])), int(round(c[1]))), (int(0.4 * iod), int(0.15 * iod)), ang, 0, 360, 1, -1)
    return m.astype(bool)


def lines(rgb: np.ndarray, kps: np.ndarray, lm: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """(thin lines over the eye band, bool over ``rgb``; what was found). ``kps``/``lm`` in the
    coordinates of ``rgb``."""
    kps = np.asarray(kps, np.float64)
    eyes = kps[:2] if lm is None else np.stack([lm[36:42].mean(0), lm[42:48].mean(0)])
    out = np.zeros(rgb.shape[:2], bool)
    box = eye_band(rgb.shape, eyes)
    if box is None:
        return out, {"wires": 0}
    x0, y0, x1, y1 = box
    iod = float(np.linalg.norm(eyes[1] - eyes[0]))
    s = min(1.0, WORK_IOD / iod)
    crop = np.ascontiguousarray(rgb[y0:y1, x0:x1])
    if s < 1.0:
        crop = cv2.resize(crop, (max(1, round((x1 - x0) * s)), max(1, round((y1 - y0) * s))),
                          interpolation=cv2.INTER_AREA)
    lab = cv2.cvtColor(crop.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    cand = (ridge(lab) > MIN_CONTRAST).astype(np.uint8)
    shift = np.array([x0, y0], np.float64)
    lm_c = None if lm is None else (np.asarray(lm, np.float64) - shift) * s
    cand[eye_openings(cand.shape, lm_c, (kps - shift) * s, iod * s)] = 0
    n, labels, stats, _ = cv2.connectedComponentsWithStats(cand, connectivity=8)
    on_brow = np.bincount(labels[brows(cand.shape, lm_c, (kps - shift) * s, iod * s) & cand.astype(bool)],
                          minlength=n)
    thick = cv2.morphologyEx(cand, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (THICK, THICK)))
    thick_px = np.bincount(labels[thick.astype(bool)], minlength=n)
    extent = np.hypot(stats[:, cv2.CC_STAT_WIDTH], stats[:, cv2.CC_STAT_HEIGHT])
    keep = (extent >= MIN_LENGTH * iod * s) & (thick_px <= MAX_THICK_SHARE * stats[:, cv2.CC_STAT_AREA])
    keep &= on_brow < BROW_SHARE * stats[:, cv2.CC_STAT_AREA]
    keep[0] = False
    found = keep[labels]
    if s < 1.0:
        found = cv2.resize(found.astype(np.uint8), (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR) > 0
    out[y0:y1, x0:x1] = found
    return out, {"wires": int(keep.sum()), "wire_px": int(out.sum())}


def keep_part(hard: np.ndarray) -> np.ndarray:
    """"May swap" map that keeps ``hard`` lines and a pixel around them exactly (0), ramping to 1
    over two more pixels."""
    grown = cv2.dilate(hard.astype(np.uint8), np.ones((3, 3), np.uint8))
    soft = cv2.GaussianBlur(grown.astype(np.float32), (0, 0), 1.0)
    part = np.clip(1.0 - 2.0 * soft, 0.0, 1.0)
    part[grown.astype(bool)] = 0.0
    return part
