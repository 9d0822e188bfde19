"""ControlNet hint images drawn from face landmarks, in the styles existing ControlNets were trained on.

- ``openpose_face``: the OpenPose face annotator's look (ControlNet 1.1 openpose_face /
  openpose_full, DWPose): 68 iBUG points plus the two pupils as filled white dots on black.
  Dot radius is 3 px at the annotator's 512 px working size and scales with the canvas.
- ``5_point``: the InstantID / IP-Adapter-FaceID keypoint image: eyes, nose and mouth corners as
  coloured discs joined to the nose by coloured limbs (RGB order, limbs at 60 % intensity).
- ``68_point``: the iBUG 68 landmarks as contours (jaw, brows, nose, closed eyes and lips) in
  white, for landmark ControlNets trained on dlib-style face meshes.

Points are drawn with sub-pixel precision (cv2 shift) so that hints of a slowly moving face do not
jitter by whole pixels from frame to frame.
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..faces.align import transform_points

FORMATS = ("openpose_face", "5_point", "68_point")
NEEDS_68 = {"openpose_face", "68_point"}

# iBUG 68 contours: (first, last, closed)
CONTOURS_68 = ((0, 16, False), (17, 21, False), (22, 26, False), (27, 30, False), (31, 35, False),
               (36, 41, True), (42, 47, True), (48, 59, True), (60, 67, True))
# InstantID's keypoint colours (RGB): left eye, right eye, nose, left mouth, right mouth
KPS_COLORS = ((255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 0, 255))
KPS_LIMBS = ((0, 2), (1, 2), (3, 2), (4, 2))
_SHIFT = 4
_ONE = 1 << _SHIFT


class HintError(ValueError):
    pass


def _fixed(pts: np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(pts, np.float64) * _ONE).astype(np.int32)


def openpose_points(landmarks: np.ndarray) -> np.ndarray:
    """The 70 OpenPose face keypoints from 68 iBUG points: pupils are the eye-ring centroids."""
    lm = np.asarray(landmarks, np.float32)
    return np.concatenate([lm, lm[36:42].mean(0, keepdims=True), lm[42:48].mean(0, keepdims=True)])


def _draw_openpose(canvas: np.ndarray, landmarks: np.ndarray, scale: float) -> None:
    r = max(1.0, 3.0 * scale)
    for x, y in _fixed(openpose_points(landmarks)):
        cv2.circle(canvas, (int(x), int(y)), int(round(r * _ONE)), (255, 255, 255), -1, cv2.LINE_AA, _SHIFT)


def _draw_68(canvas: np.ndarray, landmarks: np.ndarray, scale: float) -> None:
    pts = _fixed(landmarks)
    width = max(1, int(round(2 * scale)))
    for a, b, closed in CONTOURS_68:
        cv2.polylines(canvas, [pts[a:b + 1].reshape(-1, 1, 2)], closed, (255, 255, 255), width, cv2.LINE_AA, _SHIFT)


def _draw_kps(canvas: np.ndarray, kps: np.ndarray, scale: float) -> None:
    # InstantID draws at ~1024 px with 4 px limbs and 10 px discs; keep those proportions
    s = scale / 2.0
    stick = max(1.0, 4.0 * s)
    limbs = np.zeros_like(canvas)
    for a, b in KPS_LIMBS:
        (xa, ya), (xb, yb) = kps[a], kps[b]
        length = float(np.hypot(xa - xb, ya - yb))
        angle = float(np.degrees(np.arctan2(ya - yb, xa - xb)))
        center = _fixed([(xa + xb) / 2, (ya + yb) / 2])
        axes = _fixed([length / 2, stick])
        cv2.ellipse(limbs, (int(center[0]), int(center[1])), (int(axes[0]), int(axes[1])), angle, 0, 360,
                    KPS_COLORS[a], -1, cv2.LINE_AA, _SHIFT)
    np.copyto(canvas, np.maximum(canvas, (limbs.astype(np.float32) * 0.6).astype(np.uint8)))
    r = max(1.0, 10.0 * s)
    for (x, y), color in zip(_fixed(kps), KPS_COLORS):
        cv2.circle(canvas, (int(x), int(y)), int(round(r * _ONE)), color, -1, cv2.LINE_AA, _SHIFT)


def draw_hint(size_hw: tuple[int, int], faces: Sequence[tuple[np.ndarray, np.ndarray | None]],
              fmt: str, scale: float | None = None) -> np.ndarray:
    """One hint image (H, W, 3) uint8 for the given faces.

    ``faces``: (kps (5, 2), landmarks (68, 2) or None) per face, in canvas pixels. ``scale``
    (dot/line size relative to a 512 px canvas) defaults to the canvas' short side / 512.
    """
    if fmt not in FORMATS:
        raise HintError(f"unknown hint format {fmt!r}; expected one of {', '.join(FORMATS)}")
    h, w = size_hw
    canvas = np.zeros((h, w, 3), np.uint8)
    scale = min(h, w) / 512.0 if scale is None else scale
    for kps, landmarks in faces:
        if fmt in NEEDS_68:
            if landmarks is None:
                raise HintError(f"the {fmt} hint needs 68-point landmarks but a face has only 5 keypoints: "
                                "use the built-in analyzer (dlib 68-point landmarks) or turn on "
                                "'landmarks' in Detect Faces, or pick the 5_point format")
            (_draw_openpose if fmt == "openpose_face" else _draw_68)(canvas, landmarks, scale)
        else:
            _draw_kps(canvas, np.asarray(kps, np.float32), scale)
    return canvas


def face_region_mask(size_hw: tuple[int, int], points: Sequence[np.ndarray], grow: float = 0.25,
                     feather: float = 0.1) -> np.ndarray:
    """Soft float32 mask (H, W) in 0..1 covering each face's point hull, grown about its centre.

    ``grow`` widens the hull by that fraction (forehead and cheeks lie outside the landmarks);
    ``feather`` blurs the edge by that fraction of the face size, inside the grown hull.
    """
    h, w = size_hw
    out = np.zeros((h, w), np.float32)
    for pts in points:
        pts = np.asarray(pts, np.float32)
        hull = cv2.convexHull(pts).reshape(-1, 2)
        center = hull.mean(0)
        hull = center + (hull - center) * (1.0 + grow)
        m = np.zeros((h, w), np.uint8)
        cv2.fillConvexPoly(m, _fixed(hull), 255, cv2.LINE_AA, _SHIFT)
        size = float(np.ptp(hull, axis=0).max())
        k = int(round(size * feather)) | 1
        soft = m.astype(np.float32) / 255.0
        if k > 1:
            shrunk = cv2.erode(m, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
            soft = cv2.GaussianBlur(shrunk.astype(np.float32) / 255.0, (0, 0), k / 4.0)
        np.maximum(out, soft, out=out)
    return out


def crop_hint(kps: np.ndarray, landmarks: np.ndarray | None, matrix: np.ndarray, size: int, fmt: str,
              grow: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """Hint and face-region mask of one face in its aligned crop (``matrix``: frame -> crop)."""
    k = transform_points(kps, matrix)
    lm = transform_points(landmarks, matrix) if landmarks is not None else None
    return (draw_hint((size, size), [(k, lm)], fmt),
            face_region_mask((size, size), [lm if lm is not None else k], grow))
