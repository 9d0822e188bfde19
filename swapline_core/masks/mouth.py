"""Keep the target's mouth interior (teeth, tongue): a warped or generated source mouth is
closed or shows the wrong teeth, while the target talks.

With 68 landmarks the interior is the inner-lip polygon (points 60-67, iBUG order); with only
five points it is the part of an ellipse between the mouth corners that is not skin (needs the
skin model of the occluder). ``size`` grows it, ``lower_lip`` moves its lower edge toward the
outer lower lip, ``feather`` softens it outwards (the interior itself stays fully the target's).
"""
from __future__ import annotations

import cv2
import numpy as np

MIN_OPENING = 0.06      # inner-lip gap / mouth width below which the mouth counts as closed
# inner lower lip -> outer lower lip, for the lower-lip option
_LOWER_INNER, _LOWER_OUTER = [65, 66, 67], [56, 57, 58]


def mouth_opening(lm68: np.ndarray) -> float:
    width = max(float(np.linalg.norm(lm68[54] - lm68[48])), 1.0)
    gap = float(np.linalg.norm(lm68[[61, 62, 63]].mean(0) - lm68[[67, 66, 65]].mean(0)))
    return gap / width


def inner_mouth(shape, lm68: np.ndarray | None, kps: np.ndarray, lower_lip: float = 0.0,
                nonskin: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Hard inner-mouth map (bool) and the mouth width in pixels."""
    m = np.zeros(shape, np.uint8)
    if lm68 is not None:
        width = max(float(np.linalg.norm(lm68[54] - lm68[48])), 1.0)
        if mouth_opening(lm68) < MIN_OPENING:
            return m.astype(bool), width
        pts = lm68[60:68].astype(np.float32).copy()
        lower = np.clip(lower_lip, 0.0, 1.0)
        pts[[i - 60 for i in _LOWER_INNER]] += lower * (lm68[_LOWER_OUTER] - lm68[_LOWER_INNER])
        cv2.fillPoly(m, [np.rint(pts).astype(np.int32)], 1)
        return m.astype(bool), width
    width = max(float(np.linalg.norm(kps[4] - kps[3])), 1.0)
    if nonskin is None:
        return m.astype(bool), width
    centre = (kps[3] + kps[4]) / 2
    angle = float(np.degrees(np.arctan2(*(kps[4] - kps[3])[::-1])))
    cv2.ellipse(m, tuple(int(v) for v in np.rint(centre)), (int(0.42 * width), int((0.22 + 0.2 * lower_lip) * width)),
                angle, 0, 360, 1, -1)
    inner = m.astype(bool) & nonskin
    # Lips are "not skin" too: keep only blobs darker or brighter than lips can be (teeth, cavity)
    return inner, width


def keep_mask(shape, lm68, kps, size: float, feather: float, lower_lip: float,
              nonskin: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """A "may swap" map: 0 on the (grown) interior, fading to 1 over ``feather``."""
    hard, width = inner_mouth(shape, lm68, kps, lower_lip, nonskin)
    info = {"mouth_open": bool(hard.any())}
    if lm68 is not None:
        info["mouth_opening"] = round(mouth_opening(lm68), 3)
    if not hard.any():
        return np.ones(shape, np.float32), info
    grow = round(max(size, 0.0) * width * 0.5)
    m = hard.astype(np.uint8)
    if grow > 0:
        m = cv2.dilate(m, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1)))
    sigma = max(feather * width / 2.0, 0.5)
    soft = cv2.GaussianBlur(m.astype(np.float32), (0, 0), sigma)
    np.maximum(soft, m, out=soft)            # in place: patch-sized temporaries cost page faults
    info["mouth_px"] = int(hard.sum())
    np.subtract(np.float32(1.0), soft, out=soft)
    return np.clip(soft, 0.0, 1.0, out=soft), info
