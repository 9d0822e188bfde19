"""Known-truth occluders over the eyes, composited on a development clip (issue 30).

Each shape is drawn from the scorer's 68 points of the clean frame (bench/quality/score.py, not the
pipeline's landmarks), so its exact pixel mask is known; frames where the scorer finds no face get
no occluder. What the swap should do with every one of them: leave its pixels as they were.
The shapes are the kinds the issue saw painted over, none of them a chromatic ring or a dark lens
the built-in occluder was tuned on, plus one coloured lens.
"""
from __future__ import annotations

import cv2
import numpy as np


def _eyes(l68):
    le, re = l68[36:42].mean(0), l68[42:48].mean(0)
    d = float(np.linalg.norm(re - le))
    ang = float(np.degrees(np.arctan2(re[1] - le[1], re[0] - le[0])))
    return le, re, d, ang


def _pt(p) -> tuple[int, int]:
    return int(round(float(p[0]))), int(round(float(p[1])))


def goggles(shape, l68):
    """A bright cyan-white visor band over both eyes with a white rim (ski goggles, a visor)."""
    le, re, d, ang = _eyes(l68)
    c = (le + re) / 2
    m = np.zeros(shape[:2], np.uint8)
    box = cv2.boxPoints(((float(c[0]), float(c[1])), (2.3 * d, 0.75 * d), ang))
    cv2.fillConvexPoly(m, np.round(box).astype(np.int32), 1)
    colour = np.zeros(shape, np.uint8)
    colour[:] = (150, 225, 245)
    rim = np.zeros(shape[:2], np.uint8)
    cv2.polylines(rim, [np.round(box).astype(np.int32)], True, 1, max(2, int(0.06 * d)))
    colour[rim.astype(bool)] = (240, 248, 252)
    return (m | rim).astype(bool), colour


def wire_frame(shape, l68):
    """Thin gold metal glasses: 1-2 px rims, a bridge and the temples toward the ears."""
    le, re, d, ang = _eyes(l68)
    t = 1 if d < 60 else 2
    m = np.zeros(shape[:2], np.uint8)
    ax = (int(0.45 * d), int(0.32 * d))
    for e in (le, re):
        cv2.ellipse(m, _pt(e), ax, ang, 0, 360, 1, t, cv2.LINE_8)
    u = (re - le) / max(d, 1e-6)
    cv2.line(m, _pt(le + u * 0.45 * d), _pt(re - u * 0.45 * d), 1, t)
    for e, ear, s in ((le, l68[0], -1), (re, l68[16], 1)):
        cv2.line(m, _pt(e + s * u * 0.45 * d), _pt((ear[0], e[1] + 0.1 * d)), 1, t)
    colour = np.zeros(shape, np.uint8)
    colour[:] = (205, 170, 70)
    return m.astype(bool), colour


def sunglasses(colour_rgb):
    def draw(shape, l68):
        le, re, d, ang = _eyes(l68)
        m = np.zeros(shape[:2], np.uint8)
        for e in (le, re):
            cv2.ellipse(m, _pt(e), (int(0.46 * d), int(0.34 * d)), ang, 0, 360, 1, -1)
        cv2.line(m, _pt(le), _pt(re), 1, max(2, int(0.06 * d)))
        colour = np.zeros(shape, np.uint8)
        colour[:] = colour_rgb
        return m.astype(bool), colour
    return draw


SHAPES = {"goggles_bright": goggles, "wire_frame_gold": wire_frame,
          "sunglasses_blue": sunglasses((40, 90, 175))}


def composite(frames: list[np.ndarray], faces: list[list], draw) -> tuple[list[np.ndarray], list]:
    """(frames with the occluder drawn over every scorer face's eyes, exact masks; None: no face)."""
    out, masks = [], []
    for f, fs in zip(frames, faces):
        if not fs:
            out.append(f.copy())
            masks.append(None)
            continue
        g, mask = f.copy(), np.zeros(f.shape[:2], bool)
        for _, l68 in fs:
            m, colour = draw(f.shape, l68)
            g[m] = colour[m]
            mask |= m
        out.append(g)
        masks.append(mask)
    return out, masks


def kept(inputs, delivered, masks, frames: set[int] | None = None) -> float | None:
    """Share of occluder pixels left unchanged (<= 8/255 in every channel, bench/quality's rule),
    over all frames or only ``frames``."""
    from ..quality import score

    tot = keep = 0
    for i, (a, b, m) in enumerate(zip(inputs, delivered, masks)):
        if m is None or (frames is not None and i not in frames):
            continue
        tot += int(m.sum())
        keep += int((m & ~score.changed(a, b)).sum())
    return keep / tot if tot else None
