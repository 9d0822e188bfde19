"""Skin samples that are the background beside the face, not skin.

Why: the skin samples are polygons on the cheeks placed by the 68 landmarks, and on a turned or
small face the far cheek's jaw points land a few pixels past the silhouette. There the samples
are whatever is behind the head; when that has a colour skin can have (foliage, a warm wall,
wood), it becomes one of the model's skin tones, the background inside the paste area reads as
skin, and the swap is painted over it past the cheek (issue 30's guitarist against a sunlit
orchard: a tone of Lab (40, -2, 29) from the leaves).

The test needs no colour rule: a sample is dropped when it matches what lies just beside the
face (outside the landmark hull, at cheek height) closely and the nose ridge (the one place that
is skin on any pose) not at all. Skin that resembles its background stays: it matches the nose
as well. A shadowed cheek stays unless it matches the background nearly exactly and the lit
nose not at all.
"""
from __future__ import annotations

import cv2
import numpy as np
from scipy.spatial import cKDTree

from . import rules_off
from .occlusion import dilate_near

MATCH = 3.0           # delta E within which a sample "is" a pixel beside the face
FOREIGN = 8.0         # delta E from every nose pixel from which a sample is foreign to this skin
RATIO = 3.0           # ... and at least this many times its distance to the background
BAND = (0.06, 0.25)   # the band beside the face: from / to this share of the face size past the hull
MIN_REFERENCE = 10    # pixels each reference needs, else nothing is dropped
MIN_KEPT = 0.5        # never drop more than half of the samples (an unusual face, not a background)


def band(shape, lm68: np.ndarray) -> np.ndarray:
    """Pixels beside the face at cheek height: outside the landmark hull grown by BAND[0] of the
    face size, inside it grown by BAND[1], between the lowest eyelid point and the lowest lip point."""
    size = float(np.ptp(lm68, axis=0).max())
    near, far = (max(1, round(f * size)) for f in BAND)
    top = max(0, int(np.floor(lm68[36:48, 1].max())))
    bottom = max(0, int(np.ceil(lm68[48:60, 1].max())))
    out = np.zeros(shape, bool)
    if bottom <= top:
        return out
    hull = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.rint(lm68).astype(np.int32)), 1)
    # Hull rows farther than ``far`` from the band's rows cannot reach them: without them the two
    # elliptic dilations (``dilate_near``: only around the hull) cover a third of the map.
    hull[:max(0, top - far)] = 0
    hull[bottom + far:] = 0
    ring = (dilate_near(hull, _disc(far), far) > 0) & (dilate_near(hull, _disc(near), near) == 0)
    out[top:bottom] = ring[top:bottom]
    return out


def _disc(r: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))


def _nearest(x: np.ndarray, ref: np.ndarray, within: float) -> np.ndarray:
    """Delta E from each row of ``x`` (N, 3) to its nearest row of ``ref`` (M, 3), exact below
    ``within`` and inf from there on, by a k-d tree: the (N, M) distance matrix of a 330 px face
    (~3000 samples x 4000 background pixels, ~100 MB) took half of the mask stack's time, and the
    callers never read a distance past their thresholds (the bound lets the search stop early)."""
    if len(x) == 0:
        return np.zeros(0, np.float64)
    d, _ = cKDTree(ref, balanced_tree=False, compact_nodes=False).query(x, k=1, distance_upper_bound=within)
    return d


def not_background(lab: np.ndarray, samples: np.ndarray, nose: np.ndarray, lm68: np.ndarray) -> np.ndarray:
    """Which of the skin sample pixels (bool map ``samples``) to keep: (N,) bool in
    ``lab[samples]`` order. ``nose``: the nose-ridge sample pixels (bool map)."""
    x = lab[samples].astype(np.float64)
    keep = np.ones(len(x), bool)
    bg = lab[band(lab.shape[:2], lm68)].astype(np.float64)
    ref = lab[nose & samples].astype(np.float64)
    if len(x) == 0 or len(bg) < MIN_REFERENCE or len(ref) < MIN_REFERENCE:
        return keep
    if len(bg) > 4000:              # deterministic thinning: a nearest match needs no more
        bg = bg[np.linspace(0, len(bg) - 1, 4000).astype(np.int64)]
    d_bg = _nearest(x, bg, 2.0 * MATCH)
    near = np.flatnonzero(d_bg <= MATCH)            # only these can be dropped: the nose test is theirs
    drop = np.zeros(len(x), bool)
    # the threshold is at most max(FOREIGN, RATIO * MATCH): a farther nose reads inf and is dropped
    d_ref = _nearest(x[near], ref, 2.0 * max(FOREIGN, RATIO * MATCH))
    drop[near] = d_ref >= np.maximum(FOREIGN, RATIO * d_bg[near])
    if drop.mean() > 1.0 - MIN_KEPT:
        rules_off.note("beside.not_background", f"{100 * drop.mean():.0f} % of the skin samples match the background "
                                                "beside the face: none dropped (an unusual face, not a background?)")
        return keep
    return ~drop
