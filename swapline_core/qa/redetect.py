"""Re-detection for the QA gate: the faces near each tracked face, found again by the analyzer's
own detector on windows around it, on the original frames (the reference geometry every pixel
metric is read on) and on the result (is the swapped face still a face, where the tracker put it).
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..faces.tracking import iou
from ..parallel import map_frames
from ..types import Face


def match(tracked: Sequence[Face], found: Sequence[Face], min_iou: float) -> list[Face | None]:
    """Greedy best-IoU assignment; each detection is used at most once."""
    pairs = sorted(((iou(t.bbox, f.bbox), i, j) for i, t in enumerate(tracked) for j, f in enumerate(found)),
                   reverse=True)
    out: list[Face | None] = [None] * len(tracked)
    used: set[int] = set()
    for v, i, j in pairs:
        if v < min_iou or out[i] is not None or j in used:
            continue
        out[i] = found[j]
        used.add(j)
    return out


DETECT_WINDOW = 320        # px: the window around a tracked face that QA re-detects in
WINDOW_SCALE = 2.5         # window side, in face sizes (room for tracker lag and pose)
# A miss on the swapped frame is confirmed at a second window scale and on the mirrored window
# before it fails the frame: MTCNN's image pyramid is coarse and its score is not symmetric, so
# one view can miss a face another finds (known-good swaps of the sample scored 0.85-0.88 against
# the 0.9 threshold on one machine and 0.98-0.999 mirrored). A mirrored face is still a face, so
# this confirms misses without lowering the threshold.
RETRY_WINDOW_SCALE = 1.6
# The smallest face the windows are searched for: half the tracked face's size in the window.
# The search pyramid's finer levels (faces of 20-56 px in a 320 px window, most of MTCNN's work)
# only find faces that are not the tracked one; the tracked face's detection is the same without
# them (every development clip, original frames: identical matched boxes).
WINDOW_MIN_FACE = DETECT_WINDOW / WINDOW_SCALE / 2


# MTCNN's five points after a horizontal flip: the left eye/mouth corner becomes the right one.
_MIRROR_KPS = [1, 0, 2, 4, 3]


def detect_around(analyzer, images: Sequence[np.ndarray], tracked: Sequence[Sequence[Face]],
                   window_scale: float | Sequence[tuple[float, bool]] = WINDOW_SCALE) -> list[list[Face]]:
    """Detections near each tracked face, in frame coordinates, from same-size windows (one batch).

    ``window_scale`` is one scale, or several ``(scale, mirrored)`` views that all go in the batch."""
    views = [(float(window_scale), False)] if isinstance(window_scale, (int, float)) else list(window_scale)
    boxes, owners = [], []
    for i, (img, fs) in enumerate(zip(images, tracked)):
        h, w = img.shape[:2]
        for (window_scale, mirrored), f in ((v, f) for v in views for f in fs):
            cx, cy = (f.bbox[0] + f.bbox[2]) / 2, (f.bbox[1] + f.bbox[3]) / 2
            side = max(float(f.bbox[2] - f.bbox[0]), float(f.bbox[3] - f.bbox[1]), 8.0) * window_scale
            x0, y0 = int(max(cx - side / 2, 0)), int(max(cy - side / 2, 0))
            x1, y1 = int(min(cx + side / 2, w)), int(min(cy + side / 2, h))
            if x1 - x0 < 8 or y1 - y0 < 8:
                continue
            boxes.append((x0, y0, x1, y1))
            owners.append((i, x0, y0, DETECT_WINDOW / max(x1 - x0, y1 - y0), mirrored))

    def window(n: int) -> np.ndarray:
        (x0, y0, x1, y1), (i, _, _, scale, mirrored) = boxes[n], owners[n]
        crop = cv2.resize(images[i][y0:y1, x0:x1], (max(1, round((x1 - x0) * scale)), max(1, round((y1 - y0) * scale))),
                          interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
        canvas = np.zeros((DETECT_WINDOW, DETECT_WINDOW, 3), np.uint8)  # same size: one batch
        canvas[:crop.shape[0], :crop.shape[1]] = crop
        return np.ascontiguousarray(canvas[:, ::-1]) if mirrored else canvas

    # the downscales (an area resize of a 720p face's window: ~3 ms each) on threads
    windows = map_frames(window, range(len(boxes)))
    out: list[list[Face]] = [[] for _ in images]
    found_all = analyzer.detect(windows, min_face=WINDOW_MIN_FACE) if windows else []
    for (i, x0, y0, scale, mirrored), found in zip(owners, found_all):
        for f in found:
            bbox, kps = f.bbox.astype(np.float32), f.kps.astype(np.float32)
            if mirrored:
                bbox = np.array([DETECT_WINDOW - bbox[2], bbox[1], DETECT_WINDOW - bbox[0], bbox[3]], np.float32)
                kps = np.stack([DETECT_WINDOW - kps[:, 0], kps[:, 1]], 1)[_MIRROR_KPS].astype(np.float32)
            out[i].append(f.copy(bbox=(bbox / scale + np.array([x0, y0, x0, y0], np.float32)).astype(np.float32),
                                 kps=(kps / scale + np.array([x0, y0], np.float32)).astype(np.float32)))
    return out


def redetect(analyzer, originals: Sequence[np.ndarray], swapped: Sequence[np.ndarray],
              tracked: Sequence[Sequence[Face]], match_iou: float) -> tuple[list[list[Face]], list[list[Face]]]:
    """Detections near each tracked face on both versions of the frames: (original, swapped).

    The originals get the full window search (:func:`detect_around`): their geometry is the
    reference every pixel metric is read on, and the limits were calibrated on it. On the result,
    where the analyzer can refine a known face (``supports_refine``: the built-in MTCNN's last
    stage at the tracked box, ~2 ms against ~11 ms for a window's search), that comes first; a
    frame where it found no face, or one off the tracked box, gets the window search too, in the
    same batch as the originals: a miss is never decided by the cheap pass."""
    n = len(originals)
    if not n:
        return [], []
    if getattr(analyzer, "supports_refine", False):
        found_swap = [[f for f in row if f is not None] for row in analyzer.refine(list(swapped), list(tracked))]
        again = [j for j in range(n) if any(m is None for m in match(tracked[j], found_swap[j], match_iou))]
    else:
        found_swap, again = [[] for _ in range(n)], list(range(n))
    found = detect_around(analyzer, list(originals) + [swapped[j] for j in again],
                           list(tracked) + [tracked[j] for j in again])
    for j, extra in zip(again, found[n:]):
        found_swap[j] = extra
    return found[:n], found_swap
