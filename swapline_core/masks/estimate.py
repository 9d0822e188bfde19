"""One face's built-in occluder in one frame, as a full-frame mask: what the QA gate checks the
swap left alone. The same skin model and blob rules as the mask stack's occlusion part (two skin
tones and the shading between them, feature zones, rim-or-large blobs), without track smoothing:
the QA gate judges each frame on its own pixels.
"""
from __future__ import annotations

import cv2
import numpy as np

from ..types import Face
from . import builtin
from . import occlusion as occ

FOREHEAD = 0.3      # brow line raised by this share of brow-to-chin: the classical paste's forehead band


def _pts(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    p = np.asarray(p, np.float64)
    return p @ m[:, :2].T + m[:, 2]


def face_area(shape, lm: np.ndarray | None, kps: np.ndarray) -> np.ndarray:
    """The area a swap may change, in map space: the jaw and brow hull raised by a forehead band,
    or (five points only) an ellipse around eyes and mouth."""
    inside = np.zeros(shape, np.uint8)
    if lm is not None:
        brows, chin = lm[17:27], lm[8]
        up = (brows.mean(axis=0) - chin) * FOREHEAD
        pts = np.concatenate([lm[:27], brows + up])
        cv2.fillConvexPoly(inside, cv2.convexHull(np.rint(pts).astype(np.int32)), 1)
    else:
        eyes, mouth = kps[:2].mean(axis=0), kps[3:].mean(axis=0)
        io = max(float(np.linalg.norm(kps[1] - kps[0])), 1.0)
        centre = (eyes + mouth) / 2
        cv2.ellipse(inside, (int(centre[0]), int(centre[1])), (int(1.1 * io), int(1.5 * io)), 0, 0, 360, 1, -1)
    return inside.astype(bool)


def estimate_occluder(frame: np.ndarray, face: Face, sensitivity: float = 1.0) -> np.ndarray | None:
    """Full-frame bool mask of what covers ``face`` in ``frame``; None if too little skin shows."""
    view = builtin.skin_view(frame, face.bbox, face.kps, 0, None, face.landmarks)
    if view.lab is None:
        return None
    builtin.fit_views([view], [view], 0, lambda _i: 0)
    if view.d2 is None:
        return None
    shape = view.lab.shape[:2]
    lm = None if face.landmarks is None else _pts(face.landmarks, view.m)
    kps = _pts(face.kps, view.m)
    hard = occ.occluder_mask(view.d2, face_area(shape, lm, kps), occ.feature_zones(shape, lm, kps), sensitivity)
    inv = cv2.invertAffineTransform(view.m.astype(np.float64))
    h, w = frame.shape[:2]
    return cv2.warpAffine(hard.astype(np.uint8), inv, (w, h), flags=cv2.INTER_NEAREST, borderValue=0) > 0


def qa_occluders(_index: int, frame: np.ndarray, face: Face) -> np.ndarray | None:
    """The QA gate's ``occluders`` callable (``qa.gate.run_qa``): this estimate on the target
    frame, so a shadowed cheek the swap may change is not counted as an occluder painted over."""
    return estimate_occluder(frame, face)


qa_occluders.key = "masks.estimate v1"      # what the masks depend on: part of the QA resume key
