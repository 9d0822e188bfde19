"""An independent scorer: dlib's HOG detector + 68-point predictor + ResNet embedding.

The pipeline finds faces with MTCNN and only then asks dlib for landmarks inside MTCNN's box;
this scorer finds faces itself (HOG), so a pipeline that loses or misplaces a face cannot make
its own score look good.
"""
from __future__ import annotations

import cv2
import numpy as np

CHANGED = 8           # a pixel counts as changed above this difference (of 255) in any channel


def _dlib():
    from swapline_core.backends import builtin_models as bm

    return bm.import_dlib(), bm.shape_predictor("shape68"), bm.face_recognizer()


_HOG = {}


def hog(image: np.ndarray, upsample: int = 1):
    dlib, _, _ = _dlib()
    det = _HOG.setdefault("hog", dlib.get_frontal_face_detector())
    return list(det(np.ascontiguousarray(image), upsample))


def landmarks(image: np.ndarray, rect) -> np.ndarray:
    _, sp, _ = _dlib()
    s = sp(np.ascontiguousarray(image), rect)
    return np.array([[p.x, p.y] for p in s.parts()], np.float32)


def largest_face(image: np.ndarray, upsample: int = 1):
    """(rect, 68 landmarks) of the largest HOG face, or (None, None)."""
    rects = hog(image, upsample)
    if not rects:
        return None, None
    r = max(rects, key=lambda r: r.width() * r.height())
    return r, landmarks(image, r)


def embedding(image: np.ndarray, rect) -> np.ndarray:
    dlib, sp, rec = _dlib()
    img = np.ascontiguousarray(image)
    return np.array(rec.compute_face_descriptor(img, sp(img, rect)), np.float32)


def mouth_open(l68: np.ndarray) -> float:
    """Inner-lip gap (points 61-67, 62-66, 63-65) in inter-ocular units."""
    gap = np.mean([np.linalg.norm(l68[a] - l68[b]) for a, b in ((61, 67), (62, 66), (63, 65))])
    eyes = np.linalg.norm(l68[36:42].mean(0) - l68[42:48].mean(0))
    return float(gap / max(eyes, 1e-6))


def yaw_ratio(l68: np.ndarray) -> float:
    """0 for a frontal face; the nose tip's offset from the eyes' midline in inter-ocular units."""
    le, re = l68[36:42].mean(0), l68[42:48].mean(0)
    mid = (le + re) / 2
    return float(abs(l68[30, 0] - mid[0]) / max(np.linalg.norm(re - le), 1e-6))


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2) > CHANGED


def hull_mask(shape, pts: np.ndarray) -> np.ndarray:
    m = np.zeros(shape[:2], np.uint8)
    cv2.fillConvexPoly(m, cv2.convexHull(np.round(pts).astype(np.int32)), 1)
    return m.astype(bool)


def mean_lab(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    lab = cv2.cvtColor(image, cv2.COLOR_RGB2LAB).astype(np.float32)
    # OpenCV's 8-bit Lab: L*255/100, a+128, b+128 -> CIE units
    lab[..., 0] *= 100.0 / 255.0
    lab[..., 1:] -= 128.0
    return lab[mask].mean(0)


def pearson(a, b) -> float | None:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 5 or a.std() < 1e-9 or b.std() < 1e-9:
        return None
    return float(np.corrcoef(a, b)[0, 1])
