"""Shot-cut detection on the frames a stage already decodes: cheap, streaming, resumable.

A hard cut changes both the colour distribution and most pixels at once. Each frame is reduced
to a 64x36 thumbnail; two cues are compared with the previous frame:

- ``hist``: Bhattacharyya distance of HSV histograms (16x4x4 bins), 0 (same) .. 1;
- ``changed``: share of thumbnail pixels whose luma moved by more than 24 levels.

Measured on the sample clips (kling avatar, wan infinitetalk; 350x350): within a shot hist is
0.04-0.12 and changed at most 0.09 frame to frame; across a join of the two clips hist is 0.90
and changed 0.57-0.62. A face pasted into a quarter of a static frame gives hist 0.26, changed
0.14: a local change, not a cut. So a cut needs ``changed`` above :data:`MIN_CHANGED` (a global
change, unlike a face entering) *and* ``hist`` above an adaptive threshold: the larger of
:data:`MIN_HIST` and the recent mean + 4 standard deviations, so busy footage (flicker,
handheld) needs a bigger jump than a static shot. A fast pan moves pixels but keeps the
histogram, so it is not a cut. Cuts closer than ``min_gap`` frames to the last one are ignored
(flashes and strobes would otherwise cut every frame).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import cv2
import numpy as np

THUMB = (64, 36)
MIN_HIST = 0.3
MIN_CHANGED = 0.3
LUMA_STEP = 24
WINDOW = 30


def frame_features(frame: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(luma thumbnail float32, normalised HSV histogram) of an RGB uint8 frame."""
    small = cv2.resize(frame, THUMB, interpolation=cv2.INTER_AREA)
    hsv = cv2.cvtColor(small, cv2.COLOR_RGB2HSV)
    hist = cv2.calcHist([hsv], [0, 1, 2], None, [16, 4, 4], [0, 180, 0, 256, 0, 256]).ravel()
    hist /= max(float(hist.sum()), 1.0)
    return cv2.cvtColor(small, cv2.COLOR_RGB2GRAY).astype(np.float32), hist.astype(np.float32)


def frame_distance(a, b) -> tuple[float, float]:
    """(hist, changed) between two :func:`frame_features` results."""
    hist = float(cv2.compareHist(a[1], b[1], cv2.HISTCMP_BHATTACHARYYA))
    changed = float((np.abs(a[0] - b[0]) > LUMA_STEP).mean())
    return hist, changed


class CutDetector:
    """Feed frames in clip order; :meth:`feed` returns the clip indices where a new shot starts.

    ``state()``/``restore()`` carry the recent statistics across chunks; the previous frame's
    features are recomputed from that frame on restore, so a resumed run finds the same cuts.
    """

    def __init__(self, min_gap: int = 4):
        self.min_gap = max(1, int(min_gap))
        self.t = 0                      # clip index of the next frame
        self.last_cut = -10 ** 9
        self.recent: deque[float] = deque(maxlen=WINDOW)
        self.prev = None

    def threshold(self) -> float:
        if len(self.recent) < 3:
            return MIN_HIST
        r = np.array(self.recent, np.float64)
        return max(MIN_HIST, float(r.mean() + 4.0 * r.std()))

    def feed(self, frames: Sequence[np.ndarray]) -> list[int]:
        cuts = []
        for frame in frames:
            feat = frame_features(frame)
            if self.prev is not None:
                hist, changed = frame_distance(self.prev, feat)
                if changed > MIN_CHANGED and hist > self.threshold() and self.t - self.last_cut >= self.min_gap:
                    cuts.append(self.t)
                    self.last_cut = self.t
                    self.recent.clear()    # the new shot's own statistics from here on
                else:
                    self.recent.append(round(hist, 6))   # as stored, so resume is exact
            self.prev = feat
            self.t += 1
        return cuts

    def state(self) -> dict:
        return {"t": self.t, "last_cut": self.last_cut, "recent": list(self.recent)}

    def restore(self, state: dict, prev_frame: np.ndarray | None) -> None:
        self.t, self.last_cut = int(state["t"]), int(state["last_cut"])
        self.recent = deque((float(v) for v in state["recent"]), maxlen=WINDOW)
        self.prev = None if prev_frame is None else frame_features(prev_frame)
