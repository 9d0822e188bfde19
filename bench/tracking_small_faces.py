"""Measure small-face tracking and the cost of the new per-frame steps (issue 13.6/13.7).

The kling sample face scaled to 20-30 px tall, drifting over a textured 1280x720 frame; prints
the detector's ms/frame, the cut detector's and the tracker's per-frame overhead, and the share
of frames with the face tracked. Run: PYTHONPATH=.:tests python bench/tracking_small_faces.py
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devtools.tracking_clips import KLING, frames_of, texture, write_clip  # noqa: E402
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer  # noqa: E402
from swapline_core.video import stages as pipeline  # noqa: E402
from swapline_core.video.cuts import CutDetector  # noqa: E402
from swapline_core.video.frames import FrameSequence  # noqa: E402

N = 24
kling = frames_of(KLING, N)
bg = texture(1280, 720, seed=3)
frames, tiles = [], []
for i, f in enumerate(kling):
    n = int(round(350 * (20 + 10 * i / (N - 1)) / 165.0))
    x, y = 400 + 4 * i, 300 + i
    out = bg.copy()
    out[y:y + n, x:x + n] = cv2.resize(f, (n, n), interpolation=cv2.INTER_AREA)
    frames.append(out)
    tiles.append((x, y, x + n, y + n))

print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
analyzer = BuiltinAnalyzer()
analyzer.detect(frames[:1])                 # model load
t0 = time.perf_counter()
found = analyzer.detect(frames[:8])
det_ms = (time.perf_counter() - t0) / 8 * 1000
raw = sum(1 for fs in found if fs)
print(f"MTCNN (min_face_size 20) 1280x720: {det_ms:.0f} ms/frame; faces kept on {raw}/8 frames")
t0 = time.perf_counter()
CutDetector().feed(frames)
print(f"cut detector: {(time.perf_counter() - t0) / N * 1000:.2f} ms/frame")
with tempfile.TemporaryDirectory() as d:
    seq = FrameSequence.open(write_clip(Path(d) / "clip", frames), chunk=8)
    t0 = time.perf_counter()
    faces, report = pipeline.track_faces(seq, analyzer, str(Path(d) / "store"), pipeline.Hooks(),
                                         mode="largest", detect_every=8)
    total = time.perf_counter() - t0
hits = sum(1 for fr, (x1, y1, x2, y2) in zip(faces.frames, tiles)
           if any(x1 <= (f.bbox[0] + f.bbox[2]) / 2 <= x2 and y1 <= (f.bbox[1] + f.bbox[3]) / 2 <= y2
                  for f in fr.faces))
st = report.extra["tracker"]
print(f"tracked on {hits}/{N} frames; track_faces {total / N * 1000:.0f} ms/frame incl. decode; "
      f"seconds {report.to_json()['seconds']}; tracker {st}")
