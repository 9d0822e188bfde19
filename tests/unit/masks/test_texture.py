"""Busy texture above the brows is an occluder (``masks/texture.py``): a headdress' brim.

On the ltx clip (a woman in an ornamented headdress, video_ltx2_3_i2v) the brim's beige ornament
is close to the skin's colour, and the classical swapper's forehead band painted skin over its
lower edge on every frame. Judged by texture above the brows, the brim is kept.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from ltx_swap import plain_and_stack  # noqa: E402
from PIL import Image  # noqa: E402

from swapline_core.masks import texture  # noqa: E402

TOL = 8


def _face_points(size=128):
    """Five points of an upright face filling a ``size`` map (eyes at 40 %, mouth at 75 %)."""
    s = size
    return np.array([[0.35 * s, 0.4 * s], [0.65 * s, 0.4 * s], [0.5 * s, 0.55 * s],
                     [0.38 * s, 0.75 * s], [0.62 * s, 0.75 * s]], np.float32)


def test_busy_only_above_the_brows_and_not_for_smooth_light():
    rng = np.random.default_rng(0)
    kps = _face_points()
    yy, xx = np.mgrid[0:128, 0:128].astype(np.float32)
    smooth = 40 + 0.3 * xx + 0.2 * yy + 15 * np.exp(-((xx - 50) ** 2 + (yy - 20) ** 2) / 300)   # a lit forehead
    smooth += rng.normal(0, 0.5, smooth.shape)               # codec noise
    knit = smooth + rng.normal(0, 12, smooth.shape)          # an ornament or knit: detail at every pixel
    thr = 4.5 ** 2
    assert texture.busy(smooth, None, kps, 128).max() < 0.3 * thr
    b = texture.busy(knit, None, kps, 128)
    brow_y = int(np.ceil(0.4 * 128 - 0.45 * 0.3 * 128))     # the five-point brow estimate (row)
    assert b[: brow_y - 8].min() > thr, "busy texture above the brows not flagged"
    assert b[brow_y + 1:].max() == 0.0, "busy texture judged at or below the brows"
    # a 40 px face: its brows' and hairline's edges would fill the forehead; no texture rule
    small = cv2.resize(knit, (40, 40), interpolation=cv2.INTER_AREA)
    assert texture.busy(small, None, kps * 40 / 128, 40).max() == 0.0


def test_headdress_brim_above_the_brows_is_not_painted(tmp_path):
    frames, faces, results = plain_and_stack(tmp_path, 20, 8, landmarks=True)
    brim_px = painted = eye_px = eyes_swapped = 0
    for k, (f, a, b) in enumerate(zip(frames, results["plain"], results["stack"])):
        fs = faces.frames[k].faces
        assert fs and fs[0].landmarks is not None, f"no face with landmarks on frame {20 + k}"
        lm = fs[0].landmarks
        # the headdress, by geometry alone (it shares nothing with the rule): on this clip the
        # brim's lower edge runs 0.1-0.3 eye distances above the highest brow point; rows 0.35
        # eye distances above it and higher are headdress, within the face's columns
        iod = float(np.linalg.norm(lm[36:42].mean(0) - lm[42:48].mean(0)))
        top = float(lm[17:27, 1].min()) - 0.35 * iod
        head = np.zeros(f.shape[:2], bool)
        head[: max(0, int(top)), int(lm[:, 0].min()):int(lm[:, 0].max()) + 1] = True
        near = np.abs(a.astype(np.int16) - f).max(-1) > TOL      # what the plain swap reaches
        sel = head & near
        brim_px += int(sel.sum())
        painted += int((np.abs(b.astype(np.int16) - f).max(-1)[sel] > TOL).sum())
        # and the eyes below the brim stay swapped: judged with the brim as one blob, the eye
        # make-up joined it through the brows and the target's eyes were kept (frames 24-26)
        eyes = np.zeros(f.shape[:2], np.uint8)
        for idx in (slice(36, 42), slice(42, 48)):
            cv2.fillConvexPoly(eyes, cv2.convexHull(np.rint(lm[idx]).astype(np.int32)), 1)
        sel = eyes.astype(bool) & near
        eye_px += int(sel.sum())
        eyes_swapped += int((np.abs(b.astype(np.int16) - f).max(-1)[sel] > TOL).sum())
        if k == 7:
            Image.fromarray(cv2.resize(np.concatenate([f, a, b], 1), None, fx=2, fy=2)).save(tmp_path / "brim.png")
    assert brim_px > 300, f"the plain swap reaches only {brim_px} headdress pixels: nothing to test"
    share = painted / brim_px
    print(f"\n[masks] headdress above the brows: {share:.1%} of {brim_px} pixels the plain swap paints are "
          "painted with the stack")
    assert share <= 0.1, f"{share:.1%} of the headdress the plain swap paints is still painted"
    eyes_share = eyes_swapped / max(eye_px, 1)
    print(f"[masks] eyes: {eyes_share:.1%} of {eye_px} eye pixels the plain swap changes are swapped with the stack")
    assert eye_px > 300 and eyes_share >= 0.8, f"only {eyes_share:.1%} of the eyes swapped: the target's eyes were kept"
