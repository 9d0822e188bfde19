"""Synthetic occluders with exact pixel masks, drawn onto real faces from their landmarks."""
from __future__ import annotations

import cv2
import numpy as np


def _pts(a) -> np.ndarray:
    return np.rint(np.asarray(a)).astype(np.int32)


def eye_bar(shape, lm):
    """An opaque dark bar over both eyes (a censor bar, a visor)."""
    m = np.zeros(shape, np.uint8)
    eyes = lm[36:48]
    iod = np.linalg.norm(lm[42:48].mean(0) - lm[36:42].mean(0))
    x0, x1 = eyes[:, 0].min() - 0.35 * iod, eyes[:, 0].max() + 0.35 * iod
    yc = eyes[:, 1].mean()
    cv2.rectangle(m, tuple(_pts([x0, yc - 0.28 * iod])), tuple(_pts([x1, yc + 0.28 * iod])), 1, -1)
    return m.astype(bool), (22, 22, 26)


def sunglasses(shape, lm):
    """Two dark lenses joined by a bridge."""
    m = np.zeros(shape, np.uint8)
    iod = np.linalg.norm(lm[42:48].mean(0) - lm[36:42].mean(0))
    for eye in (lm[36:42].mean(0), lm[42:48].mean(0)):
        cv2.ellipse(m, tuple(_pts(eye)), (int(0.36 * iod), int(0.26 * iod)), 0, 0, 360, 1, -1)
    cv2.line(m, tuple(_pts(lm[39])), tuple(_pts(lm[42])), 1, max(2, int(0.06 * iod)))
    return m.astype(bool), (35, 30, 30)


def hand(shape, lm, colour):
    """A palm with four fingers over the lower right cheek and mouth corner."""
    m = np.zeros(shape, np.uint8)
    iod = np.linalg.norm(lm[42:48].mean(0) - lm[36:42].mean(0))
    palm = lm[12] + np.array([0.25, 0.35]) * iod
    cv2.ellipse(m, tuple(_pts(palm)), (int(0.55 * iod), int(0.45 * iod)), -30, 0, 360, 1, -1)
    for k in range(4):
        tip = lm[54] + np.array([0.05 + 0.12 * k, -0.35 + 0.18 * k]) * iod
        cv2.line(m, tuple(_pts(palm)), tuple(_pts(tip)), 1, max(2, int(0.16 * iod)))
    return m.astype(bool), colour


def microphone(shape, lm):
    """A dark microphone coming up from below in front of the chin."""
    m = np.zeros(shape, np.uint8)
    iod = np.linalg.norm(lm[42:48].mean(0) - lm[36:42].mean(0))
    head = lm[57] + np.array([0.0, 0.35]) * iod
    cv2.circle(m, tuple(_pts(head)), int(0.3 * iod), 1, -1)
    cv2.line(m, tuple(_pts(head)), tuple(_pts(head + np.array([0.1, 2.0]) * iod)), 1, int(0.25 * iod))
    return m.astype(bool), (40, 40, 45)


def forehead_band(shape, lm):
    """A white bandage across the forehead above the brows (bright like sunlit skin, but with
    an object's sharp edges: what a glare rule must not swallow)."""
    m = np.zeros(shape, np.uint8)
    iod = np.linalg.norm(lm[42:48].mean(0) - lm[36:42].mean(0))
    brows = lm[17:27]
    y = brows[:, 1].min() - 0.45 * iod
    x0, x1 = lm[0, 0] - 0.2 * iod, lm[16, 0] + 0.2 * iod
    cv2.rectangle(m, tuple(_pts([x0, y - 0.2 * iod])), tuple(_pts([x1, y + 0.2 * iod])), 1, -1)
    return m.astype(bool), (240, 240, 236)


def composite(frame, mask, colour, texture: float = 4.0, seed: int = 0):
    """Paint ``colour`` with a little noise (real occluders are not flat) where ``mask``."""
    rng = np.random.default_rng(seed)
    out = frame.copy()
    noise = rng.normal(0, texture, (int(mask.sum()), 3))
    out[mask] = np.clip(np.asarray(colour, np.float32) + noise, 0, 255).astype(np.uint8)
    return out


def wire_frame(shape, lm, thickness: int = 1):
    """Thin metal glasses: two elliptic rims around the eyes, a bridge and the temples toward the
    ears, ``thickness`` px wide (drawn without anti-aliasing: every pixel is the frame's)."""
    m = np.zeros(shape, np.uint8)
    le, re = lm[36:42].mean(0), lm[42:48].mean(0)
    iod = float(np.linalg.norm(re - le))
    ang = float(np.degrees(np.arctan2(re[1] - le[1], re[0] - le[0])))
    for e in (le, re):
        cv2.ellipse(m, tuple(_pts(e)), (int(0.44 * iod), int(0.3 * iod)), ang, 0, 360, 1, thickness)
    u = (re - le) / max(iod, 1e-6)
    cv2.line(m, tuple(_pts(le + 0.44 * iod * u)), tuple(_pts(re - 0.44 * iod * u)), 1, thickness)
    cv2.line(m, tuple(_pts(le - 0.44 * iod * u)), tuple(_pts([lm[0, 0], le[1]])), 1, thickness)
    cv2.line(m, tuple(_pts(re + 0.44 * iod * u)), tuple(_pts([lm[16, 0], re[1]])), 1, thickness)
    return m.astype(bool)


def goggles(shape, lm, body=(150, 225, 245), rim=(240, 248, 252)):
    """Ski goggles: a light, even band over both eyes and the nose bridge with a brighter rim
    (its lightness rises from the skin in two steps). Returns (mask, colour image)."""
    le, re = lm[36:42].mean(0), lm[42:48].mean(0)
    iod = float(np.linalg.norm(re - le))
    ang = float(np.degrees(np.arctan2(re[1] - le[1], re[0] - le[0])))
    c = (le + re) / 2
    box = np.rint(cv2.boxPoints(((float(c[0]), float(c[1])), (2.3 * iod, 0.75 * iod), ang))).astype(np.int32)
    m = np.zeros(shape[:2], np.uint8)
    cv2.fillConvexPoly(m, box, 1)
    edge = np.zeros(shape[:2], np.uint8)
    cv2.polylines(edge, [box], True, 1, max(2, int(0.06 * iod)))
    colour = np.zeros((*shape[:2], 3), np.uint8)
    colour[:] = body
    colour[edge.astype(bool)] = rim
    return (m | edge).astype(bool), colour
