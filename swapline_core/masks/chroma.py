"""Colours skin never has: a pixel whose Lab hue angle lies far from the skin's own.

Why: the skin model (``occlusion.SkinModel``) is a Gaussian in Lab, and skin's colour varies
mostly along its chroma axis (from a saturated lit cheek to a paler shadow), so a grey or bluish
pixel reads as "a desaturated skin tone" only ~4.5 sigma away, right at the occluder threshold.
That is how the sky beside a turned face (the ltx clip: sky Lab (56, -4, -5) against skin
(54, 16, 19), 4.5 sigma) stayed "skin" where the swapper's hull reaches past the cheek, and the
swap painted a square jaw over the sky. Skin's hue angle stays within a narrow fan whatever the
light (its samples' own spread, measured per track window), while sky, foliage, blue or green
objects sit on the far side of the colour wheel: their distance is set here from the angle, not
from the Gaussian.

What it cannot see: an occluder of skin's hue (a tan hand, a brown sleeve), and colourless ones
(grey, white, black: chroma below ``MIN_CHROMA``), which the lightness term of the skin model
has to find.
"""
from __future__ import annotations

import numpy as np

MIN_CHROMA = 4.0        # Lab chroma below which hue angle is noise (weighted in over 4..8)
ANGLE_MARGIN = 45.0     # degrees past the skin's own spread at which a pixel reaches the threshold
MIN_SAMPLES = 30


def skin_angle(samples: np.ndarray) -> tuple[float, float] | None:
    """(mean hue angle, spread) in degrees of Lab skin samples with usable chroma; the spread is
    the 95th percentile of their deviation from the mean. None with too few samples."""
    x = np.asarray(samples, np.float64).reshape(-1, 3)
    a, b = x[:, 1], x[:, 2]
    sel = np.hypot(a, b) >= 2.0 * MIN_CHROMA
    if int(sel.sum()) < MIN_SAMPLES:
        return None
    ang = np.arctan2(b[sel], a[sel])
    ref = float(np.arctan2(np.sin(ang).mean(), np.cos(ang).mean()))     # circular mean
    dev = np.abs(np.angle(np.exp(1j * (ang - ref))))
    return float(np.degrees(ref)), float(np.degrees(np.percentile(dev, 95)))


def off_hue(lab: np.ndarray, ref: float, spread: float, judge: np.ndarray | None = None) -> np.ndarray:
    """Squared pseudo skin distance of each pixel from its hue angle: 4.5 (the occluder
    threshold) at ``ANGLE_MARGIN`` degrees past the skin's spread, weighted in by chroma.
    ``judge``: where to judge at all (False on the lips, as for ``occlusion.redder_than_skin``)."""
    a = lab[..., 1].astype(np.float32, copy=False)
    b = lab[..., 2].astype(np.float32, copy=False)
    w = np.clip((np.hypot(a, b) - np.float32(MIN_CHROMA)) / np.float32(MIN_CHROMA), 0.0, 1.0)
    if judge is not None:
        w *= judge
    dev = np.degrees(np.arctan2(b, a)) - np.float32(ref)
    dev = np.abs(_wrap180(dev))
    d = w * np.clip(np.float32(4.5 / ANGLE_MARGIN) * (dev - np.float32(spread)), 0.0, None)
    return np.square(d).astype(np.float32, copy=False)


def _wrap180(x: np.ndarray) -> np.ndarray:
    """``(x + 180) % 360 - 180`` in place, the same values: C's fmod and one correction where it
    is negative cost a third of numpy's floored ``%`` (which differs only in the sign of a zero
    remainder, gone after the subtraction)."""
    x += np.float32(180.0)
    np.fmod(x, np.float32(360.0), out=x)
    x[x < 0] += np.float32(360.0)
    x -= np.float32(180.0)
    return x

