"""A glasses rim closed around an eye keeps the target's pixels, with the lens it holds.

Why: a thin metal rim on a tinted lens is neither a chromatic ring (``glasses``: gold, silver or
black frames are no more chromatic than the skin) nor a ridge between two like sides (``wires``:
the lens inside is tinted, so the rim's two sides differ, and the lower rim lies in the band around
the eye opening that ``wires`` leaves alone). So the mesh path painted the lens' tint and the lower
rim over with the source's skin (the MIT image wheel's man in gold round glasses, a development
still; a man's thin wire glasses removed on 37 of 88 faces of the second held-out set).

What a rim is, independent of its colour: an edge (any Lab step or line) that runs all the way
round the eye on one ellipse, and not on the ellipses just inside and outside it (skin texture,
wrinkles and stubble have edges at every radius; a brow or a lid crease covers only one side).
Ellipses are tried over a grid of centres near the eye, widths and heights, aligned with the eye
line, at a fixed work scale; the best one that passes both shares is the rim. What it keeps: the
lens inside the rim and the rim, so the paste's outer edge lies on the frame, where it is hidden,
and the lens' tint stays; not the eye openings inside (the swapper's: the mesh swap keeps the
target's eyes itself, the classical swap gives the source's, seen through a clear lens).

What it cannot see: a rimless lens with no visible edge, a rim that leaves the view over more than
a quarter of its ellipse (a face turned far enough that the far lens is cut by the nose), a rim
whose shape is far from an ellipse (a tall aviator's teardrop: the ellipse's share falls).
"""
from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np

from .wires import eye_band

WORK_IOD = 64.0     # px: eye distance the band is judged at (a rim 1.5-3 % of it is 1-2 px wide)
EDGE = 6.0          # Lab delta E per px a rim's edge passes (Sobel, normalised to one pixel's step)
MIN_SHARE = 0.8     # share of the ellipse's points on an edge: closed all round
MIN_LEAD = 0.4      # ... above the better of the ellipses 0.75x inside and 1.3x outside it
POINTS = 36         # points per ellipse
CLEAR = 0.7         # the eye opening lies inside the rim's ellipse shrunk to this
REACH = 2           # px (work scale) the rim's edge may stray from the ellipse
# grid, in eye distances: centre offsets along and across the eye line, half-width, half-height
STEP, OFFSET_STEP = 0.04, 0.06
OFFSETS = np.arange(-0.12, 0.121, OFFSET_STEP)
HALF_W = np.arange(0.22, 0.701, STEP)
HALF_H = np.arange(0.18, 0.561, STEP)


DIRECTIONS = 8      # edge normals are judged in this many orientations
ALONG = 1.5         # an edge's step across the rim passes its step along it by this much


def edges(lab: np.ndarray) -> np.ndarray:
    """Per normal orientation (DIRECTIONS x h x w, bool): where an edge runs across that normal
    (its Lab step along the normal passes :data:`EDGE` and :data:`ALONG` times its step
    across it), grown by :data:`REACH`. Skin texture, stubble and wrinkles have edges in every
    orientation; a rim, all along the ellipse, only across the ellipse's normal."""
    gx = [cv2.Sobel(lab[..., c], cv2.CV_32F, 1, 0, ksize=3) / 8.0 for c in range(3)]
    gy = [cv2.Sobel(lab[..., c], cv2.CV_32F, 0, 1, ksize=3) / 8.0 for c in range(3)]
    k = 2 * REACH + 1
    grow = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    out = np.zeros((DIRECTIONS,) + lab.shape[:2], bool)
    for d in range(DIRECTIONS):
        c, s = np.cos(np.pi * d / DIRECTIONS), np.sin(np.pi * d / DIRECTIONS)
        across = sum((x * c + y * s) ** 2 for x, y in zip(gx, gy))
        along = sum((y * c - x * s) ** 2 for x, y in zip(gx, gy))
        hit = (across > EDGE ** 2) & (across > ALONG ** 2 * along)
        out[d] = cv2.dilate(hit.astype(np.uint8), grow).astype(bool)
    return out


_T = np.linspace(0, 2 * np.pi, POINTS, endpoint=False)


def _shape(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For hypotheses ``q`` (dx, dy, a, b), in eye distances: their points along and across the
    eye line (two hypotheses x POINTS arrays) and their normals' angle from the eye line."""
    along = q[:, 0, None] + q[:, 2, None] * np.cos(_T)
    across = q[:, 1, None] + q[:, 3, None] * np.sin(_T)
    return along, across, np.arctan2(q[:, 2, None] * np.sin(_T), q[:, 3, None] * np.cos(_T))


@lru_cache(maxsize=1)
def _grid() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The hypotheses' grid and its :func:`_shape` (the same for every eye: worked out once)."""
    dx, dy, a, b = np.meshgrid(OFFSETS, OFFSETS, HALF_W, HALF_H, indexing="ij")
    keep = b <= 1.2 * a
    q = np.stack([dx[keep], dy[keep], a[keep], b[keep]], 1)
    return (q, *_shape(q))


def _ellipses(centre: np.ndarray, u: np.ndarray, iod: float, near: np.ndarray | None = None, k: float = 0.5,
              opening: np.ndarray | None = None):
    """(hypotheses x POINTS x 2 points, their normals' orientation bins, hypothesis parameters
    (dx, dy, a, b) in px): the grid, or with ``near`` (one hypothesis, px) ``k`` grid steps round it;
    with ``opening`` (the eye opening's points) only the hypotheses clear of it (:func:`_clear_of`)."""
    if near is None:
        q, along, across, ang = _grid()
    else:
        half = np.array([-k, 0.0, k])
        steps = (OFFSET_STEP, OFFSET_STEP, STEP, STEP)
        dx, dy, a, b = np.meshgrid(*(near[i] / iod + st * half for i, st in enumerate(steps)), indexing="ij")
        keep = b <= 1.2 * a
        q = np.stack([dx[keep], dy[keep], a[keep], b[keep]], 1)
        along, across, ang = _shape(q)
    if opening is not None:
        clear = _clear_of(opening, q * iod, u, centre)
        q, along, across, ang = q[clear], along[clear], across[clear], ang[clear]
    v = np.array([-u[1], u[0]])
    pts = np.empty(along.shape + (2,))
    pts[..., 0] = centre[0] + iod * (along * u[0] + across * v[0])
    pts[..., 1] = centre[1] + iod * (along * u[1] + across * v[1])
    turn = np.arctan2(u[1], u[0])
    bins = np.rint(np.mod(ang + turn, np.pi) * (DIRECTIONS / np.pi)).astype(int) % DIRECTIONS
    return pts, bins, q * iod


def _share(on: np.ndarray, pts: np.ndarray, bins: np.ndarray) -> np.ndarray:
    _, h, w = on.shape
    xi, yi = np.rint(pts[..., 0]).astype(np.int64), np.rint(pts[..., 1]).astype(np.int64)
    inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
    flat = (bins * h + np.clip(yi, 0, h - 1)) * w + np.clip(xi, 0, w - 1)
    return (on.reshape(-1)[flat] & inside).mean(-1)


def _scaled(pts: np.ndarray, p: np.ndarray, u: np.ndarray, centre: np.ndarray, k: float) -> np.ndarray:
    v = np.array([-u[1], u[0]])
    c = centre + p[:, 0, None] * u + p[:, 1, None] * v       # hyps x 2
    return c[:, None, :] + (pts - c[:, None, :]) * k


def _clear_of(opening: np.ndarray, p: np.ndarray, u: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Per hypothesis: the eye opening's points lie inside its ellipse shrunk by :data:`CLEAR`
    (a lens is wider than the eye it covers; an ellipse on the lids is the eye's own outline:
    drawn or sculpted lids, a closed eye's lash line)."""
    v = np.array([-u[1], u[0]])
    c = centre + p[:, 0, None] * u + p[:, 1, None] * v
    d = opening[None, :, :] - c[:, None, :]
    x, y = d @ u, d @ v
    r = (x / (CLEAR * p[:, 2, None])) ** 2 + (y / (CLEAR * p[:, 3, None])) ** 2
    return (r <= 1.0).all(-1)


def _judged(on, centre, u, iod, opening, near=None, k=0.5):
    pts, bins, p = _ellipses(centre, u, iod, near, k, opening)
    if not len(p):
        return None, None, False, {"share": 0.0, "lead": 0.0}
    share = _share(on, pts, bins)
    # the shares inside and outside only where the ellipse's own passes (a fraction of the grid)
    lead = share.copy()
    c = np.flatnonzero(share >= MIN_SHARE)
    if len(c):
        lead[c] -= np.maximum(_share(on, _scaled(pts[c], p[c], u, centre, 0.75), bins[c]),
                              _share(on, _scaled(pts[c], p[c], u, centre, 1.3), bins[c]))
    ok = (share >= MIN_SHARE) & (lead >= MIN_LEAD)
    k = int(np.argmax(np.where(ok, share + lead, -1.0))) if ok.any() else int(np.argmax(share + lead))
    return pts[k], p[k], bool(ok[k]), {"share": round(float(share[k]), 3), "lead": round(float(lead[k]), 3)}


def rim(on: np.ndarray, centre: np.ndarray, u: np.ndarray, iod: float, opening: np.ndarray | None = None
        ) -> tuple[np.ndarray | None, dict]:
    """The best ellipse round one eye that passes both shares and clears the eye opening
    (``opening``: its outline's points, or None), found on the grid and then at half and
    quarter steps round the best: ((dx, dy, a, b) in ``iod`` units, or None; readings)."""
    pts, p, ok, info = _judged(on, centre, u, iod, opening)
    if not ok:
        return None, info
    for k in (0.5, 0.25):           # half, then quarter grid steps round the best so far
        pts2, p2, ok2, info2 = _judged(on, centre, u, iod, opening, p, k)
        if ok2:
            p, info = p2, info2
    return p / iod, info


def _openings(shape, lm: np.ndarray | None, kps: np.ndarray) -> np.ndarray:
    """The eye openings (68-point outlines, or with five points an ellipse a quarter of the eye
    distance wide): the swapper's, not the rule's (the mesh swap keeps the target's eyes itself;
    the classical one swaps them, and a clear lens shows them)."""
    m = np.zeros(shape, np.uint8)
    if lm is not None:
        for sl in (slice(36, 42), slice(42, 48)):
            cv2.fillConvexPoly(m, cv2.convexHull(np.rint(lm[sl]).astype(np.int32)), 1)
    else:
        iod = float(np.linalg.norm(kps[1] - kps[0]))
        for e in kps[:2]:
            cv2.ellipse(m, (int(round(e[0])), int(round(e[1]))), (int(0.25 * iod), int(0.1 * iod)), 0, 0, 360, 1, -1)
    return m.astype(bool)


def _band(shape, kps: np.ndarray, lm: np.ndarray | None):
    """Where and at what scale the rims are judged: (box in the image, scale to the work size,
    eye centres at work scale, unit eye line, landmarks at work scale), or None."""
    kps = np.asarray(kps, np.float64)
    eyes = kps[:2] if lm is None else np.stack([lm[36:42].mean(0), lm[42:48].mean(0)])
    box = eye_band(shape, eyes)
    if box is None:
        return None
    x0, y0 = box[:2]
    s = WORK_IOD / float(np.linalg.norm(eyes[1] - eyes[0]))
    e = (eyes - (x0, y0)) * s
    u = (e[1] - e[0]) / max(float(np.linalg.norm(e[1] - e[0])), 1e-6)
    return box, s, e, u, None if lm is None else (np.asarray(lm, np.float64) - (x0, y0)) * s


def find(rgb: np.ndarray, kps: np.ndarray, lm: np.ndarray | None = None) -> tuple[list, dict]:
    """Per eye the rim's ellipse ((dx, dy, a, b) in eye distances from the eye centre, along and
    across the eye line) or None, and what was read. ``kps``/``lm`` in the coordinates of ``rgb``."""
    band = _band(rgb.shape, kps, lm)
    if band is None:
        return [None, None], {"rims": 0}
    (x0, y0, x1, y1), s, e, u, lm_s = band
    crop = np.ascontiguousarray(rgb[y0:y1, x0:x1])
    size = (max(1, round((x1 - x0) * s)), max(1, round((y1 - y0) * s)))
    crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR)
    on = edges(cv2.cvtColor(crop.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab))
    params, info = [], {"rims": 0, "eyes": []}
    for c, sl in zip(e, (slice(36, 42), slice(42, 48))):
        q, read = rim(on, c, u, WORK_IOD, None if lm_s is None else lm_s[sl])
        params.append(q)
        info["eyes"].append(read)
        info["rims"] += q is not None
    return params, info


def draw(shape, kps: np.ndarray, lm: np.ndarray | None, params: list) -> np.ndarray:
    """The rims ``params`` (``find``'s, per eye) and the lenses inside them as a bool map of
    ``shape``, the eye openings left out."""
    out = np.zeros(shape[:2], bool)
    band = _band(shape, kps, lm)
    if band is None or all(q is None for q in params):
        return out
    (x0, y0, x1, y1), s, e, u, _ = band
    found = np.zeros((max(1, round((y1 - y0) * s)), max(1, round((x1 - x0) * s))), np.uint8)
    for c, q in zip(e, params):
        if q is not None:
            along, across, _ = _shape(np.asarray(q, np.float64)[None])
            v = np.array([-u[1], u[0]])
            pts = c + WORK_IOD * (along[0, :, None] * u + across[0, :, None] * v)
            cv2.fillPoly(found, [np.rint(pts).astype(np.int32)], 1)
    # the rim itself lies up to REACH px outside the ellipse (half a grid step more), and is a
    # pixel or two wide
    k = 2 * (REACH + 1) + 1
    found = cv2.dilate(found, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    out[y0:y1, x0:x1] = cv2.resize(found, (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR) > 0
    out[_openings(out.shape, lm, np.asarray(kps, np.float64))] = False
    return out


def vote(group: list[list]) -> list:
    """Per eye, the rim a track's frames within the window agree on: found on more than half of
    them (``group``: ``find``'s params of each, this frame's included), the median ellipse of
    those that found it; else none. Why: found frame by frame, a rim found on 11 of 12 frames
    (or brush strokes on 3 of 12) toggled the lens between the target's and the swap's, which the
    gate read as flicker (the sample clip's median flicker ratio 1.052 -> 1.084)."""
    if not group:
        return [None, None]
    out = []
    for k in range(2):
        found = [g[k] for g in group if g[k] is not None]
        out.append(np.median(np.stack(found), axis=0) if 2 * len(found) > len(group) else None)
    return out


def rims(rgb: np.ndarray, kps: np.ndarray, lm: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """(the rims and the lenses inside them on this image alone, bool over ``rgb``; per eye what
    was read). ``kps``/``lm`` in the coordinates of ``rgb``."""
    params, info = find(rgb, kps, lm)
    return draw(rgb.shape, kps, lm, params), info
