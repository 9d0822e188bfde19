"""Is this detection a face at all, and the same face its track had a moment ago?

Per-face checks that need no history: the five points in face order (eyes level above the nose,
nose above the mouth, left/right consistent), points inside their box, inter-ocular distance in
proportion to the box, the 68-point shape close to a mean face after similarity alignment, and
skin-coloured pixels where the paste would go. With a clip's tracks (``ClipContext``), a face
whose box size or position jumps against its own track in the neighbouring frames of the same
shot is refused too: that is how a detector glitch (a body, a poster, a mis-assigned track)
gets a giant face pasted for one frame.
"""
from __future__ import annotations

import cv2
import numpy as np

from ..faces.align import umeyama
from ..faces.shape import MEAN68


def geometry(face, frame_shape) -> str | None:
    """None, or why the five points / box cannot belong to one upright-ish face."""
    box = np.asarray(face.bbox, np.float64)
    kps = np.asarray(face.kps, np.float64)
    if not (np.all(np.isfinite(box)) and np.all(np.isfinite(kps))):
        return "implausible landmarks: non-finite coordinates"
    w, h = box[2] - box[0], box[3] - box[1]
    if w <= 1 or h <= 1:
        return f"implausible landmarks: empty box {w:.0f}x{h:.0f}"
    if not 0.5 <= h / w <= 2.5:
        return f"implausible landmarks: box aspect {h / w:.2f} (height/width)"
    size = max(w, h)
    grown = np.array([box[0] - 0.25 * size, box[1] - 0.25 * size, box[2] + 0.25 * size, box[3] + 0.25 * size])
    if np.any(kps[:, 0] < grown[0]) or np.any(kps[:, 0] > grown[2]) or np.any(kps[:, 1] < grown[1]) \
            or np.any(kps[:, 1] > grown[3]):
        return "implausible landmarks: five points outside the face box"
    io = float(np.linalg.norm(kps[1] - kps[0]))
    if not 0.12 <= io / w <= 0.85:
        return f"implausible landmarks: eye distance {io / w:.2f} of the box width"
    # Face frame: u along the eyes, v down the face (image y grows downward).
    u = (kps[1] - kps[0]) / max(io, 1e-6)
    v = np.array([-u[1], u[0]])
    eyes_v = float(np.dot((kps[0] + kps[1]) / 2, v))
    nose_v = float(np.dot(kps[2], v)) - eyes_v
    mouth_v = float(np.dot((kps[3] + kps[4]) / 2, v)) - eyes_v
    if not (0.05 * io < nose_v < mouth_v + 0.1 * io and mouth_v < 3.0 * io):
        return "implausible landmarks: eyes, nose and mouth out of order"
    if np.dot(kps[4] - kps[3], u) <= 0:
        return "implausible landmarks: mouth corners swapped against the eyes"
    if face.landmarks is not None:
        pts = np.asarray(face.landmarks, np.float64)
        if pts.shape != (68, 2) or not np.all(np.isfinite(pts)):
            return "implausible landmarks: 68 points missing or non-finite"
        grown = (box[0] - 0.5 * size, box[1] - 0.5 * size, box[2] + 0.5 * size, box[3] + 0.5 * size)
        if pts[:, 0].min() < grown[0] or pts[:, 0].max() > grown[2] or pts[:, 1].min() < grown[1] \
                or pts[:, 1].max() > grown[3]:
            return "implausible landmarks: 68 points far outside the face box"
    return None


def shape_residual(pts68: np.ndarray) -> float:
    """RMS distance, in mean-face inter-ocular units, between the 68 points and the mean shape
    after the best similarity alignment."""
    pts = np.asarray(pts68, np.float64)
    m = umeyama(pts, MEAN68).astype(np.float64)
    aligned = pts @ m[:, :2].T + m[:, 2]
    return float(np.sqrt(((aligned - MEAN68) ** 2).sum(axis=1).mean()))


def shape(face, max_residual: float) -> str | None:
    if face.landmarks is None or max_residual <= 0:
        return None
    r = shape_residual(face.landmarks)
    if r > max_residual:
        return f"implausible landmarks: shape residual {r:.2f} against the mean face (limit {max_residual:.2f})"
    return None


def paste_region(face, frame_shape) -> np.ndarray:
    """uint8 mask of where a swap would paste: the 68-point hull, else an ellipse on the box."""
    m, (x0, y0) = _paste_region_local(face, frame_shape)
    full = np.zeros(frame_shape[:2], np.uint8)
    full[y0:y0 + m.shape[0], x0:x0 + m.shape[1]] = m
    return full


def _paste_region_local(face, frame_shape) -> tuple[np.ndarray, tuple[int, int]]:
    """``paste_region`` drawn on a canvas covering only its bounding box (clipped to the frame)
    and that canvas's frame origin: the same pixels, shifted by whole pixels, without a
    frame-sized mask per face (a 1280x720 frame made the skin guard cost as much as the rest)."""
    h, w = frame_shape[:2]
    if face.landmarks is not None:
        pts = cv2.convexHull(np.rint(np.asarray(face.landmarks)).astype(np.int32)).reshape(-1, 2)
        lo, hi = pts.min(0), pts.max(0)
    else:
        x1, y1, x2, y2 = (float(v) for v in face.bbox)
        centre = np.array([round((x1 + x2) / 2), round((y1 + y2) / 2)], np.int64)
        axes = np.array([max(1, round((x2 - x1) * 0.4)), max(1, round((y2 - y1) * 0.45))], np.int64)
        lo, hi = centre - axes, centre + axes
    # Integer shifts keep the rasterisation; a pixel of margin on each side for rounding.
    x0, y0 = int(min(max(lo[0] - 2, 0), w)), int(min(max(lo[1] - 2, 0), h))
    x1_, y1_ = int(max(min(hi[0] + 3, w), x0)), int(max(min(hi[1] + 3, h), y0))
    m = np.zeros((y1_ - y0, x1_ - x0), np.uint8)
    if m.size:
        if face.landmarks is not None:
            cv2.fillConvexPoly(m, (pts - (x0, y0)).astype(np.int32).reshape(-1, 1, 2), 1)
        else:
            cv2.ellipse(m, (int(centre[0] - x0), int(centre[1] - y0)), (int(axes[0]), int(axes[1])),
                        0, 0, 360, 1, -1)
    return m, (x0, y0)


def skin_fraction(frame: np.ndarray, face) -> float:
    """Share of the paste region whose colour passes a wide YCrCb skin test (all skin tones,
    warm and cool light); clothing, walls, sky and most backgrounds fail it."""
    m, (ox, oy) = _paste_region_local(face, frame.shape)
    ys, xs = np.nonzero(m)
    if len(ys) == 0:
        return 0.0
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    crop = np.ascontiguousarray(frame[oy + y0:oy + y1, ox + x0:ox + x1])
    ycc = cv2.cvtColor(crop, cv2.COLOR_RGB2YCrCb)
    # Y >= 30, 133 <= Cr <= 180, 70 <= Cb <= 135 as one inRange on the uint8 channels, counted
    # inside the region (the same share as the boolean mean, without five crop-sized temporaries)
    skin = cv2.inRange(ycc, (30, 133, 70), (255, 180, 135))
    sel = m[y0:y1, x0:x1]
    return cv2.countNonZero(cv2.bitwise_and(skin, skin, mask=sel)) / cv2.countNonZero(sel)


def skin(frame, face, min_fraction: float) -> str | None:
    if min_fraction <= 0:
        return None
    f = skin_fraction(frame, face)
    if f < min_fraction:
        return f"no skin: {f:.0%} of the paste region looks like skin (limit {min_fraction:.0%})"
    return None


def _shot(index: int, cuts, count: int) -> tuple[int, int]:
    start = max([c for c in cuts if c <= index], default=0)
    end = min([c for c in cuts if c > index], default=count)
    return start, end


def _centre_size(face) -> tuple[np.ndarray, float]:
    b = np.asarray(face.bbox, np.float64)
    return (b[:2] + b[2:]) / 2, float(np.sqrt(max(b[2] - b[0], 1e-6) * max(b[3] - b[1], 1e-6)))


def track_jump(face, index: int | None, context, window: int, max_size_ratio: float,
               max_shift: float) -> str | None:
    """Compare the face with the same track in up to ``window`` frames on each side (same shot
    only; the current frame is never its own reference). The clip's tracks are fixed before the
    swap runs, so the verdict does not depend on chunking or on resuming."""
    if context is None or context.faces is None or index is None or face.track_id is None \
            or face.track_id < 0 or window <= 0:
        return None
    frames = context.faces.frames
    start, end = _shot(index, context.cuts, len(frames))
    before, after = [], []
    for j in range(max(start, index - window), min(end, index + window + 1)):
        if j == index:
            continue
        for g in frames[j].faces:
            if g.track_id == face.track_id:
                (before if j < index else after).append((j, *_centre_size(g)))
    refs = before + after
    if len(refs) < 2:
        return None                       # too little history to judge
    centre, size = _centre_size(face)
    ref_size = float(np.median([s for _, _, s in refs]))
    ratio = size / max(ref_size, 1e-6)
    if ratio > max_size_ratio or ratio < 1.0 / max_size_ratio:
        return (f"track jump: face size {ratio:.2f}x its track's in the neighbouring frames "
                f"(limit {max_size_ratio:.2f}x)")
    # Expected position: linear between the nearest neighbours on each side, else the nearest.
    if before and after:
        (ja, ca, _), (jb, cb, _) = before[-1], after[0]
        expected = ca + (cb - ca) * (index - ja) / (jb - ja)
    else:
        expected = (before[-1] if before else after[0])[1]
    shift = float(np.linalg.norm(centre - expected)) / ref_size
    if shift > max_shift:
        return (f"track jump: face centre {shift:.2f} face sizes away from where its track puts it "
                f"(limit {max_shift:.2f})")
    return None
