"""Small faces (issue 13.6): the kling face scaled to 20-30 px tall in a 1280x720 frame is
detected and tracked on >= 90% of frames by the built-in analyzer at its defaults."""
from __future__ import annotations

import cv2
import numpy as np

from devtools.tracking_clips import KLING, frames_of, texture, write_clip
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.video import stages as pipeline
from swapline_core.video.frames import FrameSequence

N = 24
FACE_H = 165.0          # the kling face is 160-190 px tall in its 350 px frames


def test_20_to_30_px_faces_in_720p_are_tracked(tmp_path):
    kling = frames_of(KLING, N)
    bg = texture(1280, 720, seed=3)
    frames, tiles = [], []
    for i, f in enumerate(kling):
        target = 20 + 10 * i / (N - 1)                     # face height sweeps 20 -> 30 px
        n = int(round(350 * target / FACE_H))
        x, y = 400 + 4 * i, 300 + i                        # drifting, like a dancer's head
        out = bg.copy()
        out[y:y + n, x:x + n] = cv2.resize(f, (n, n), interpolation=cv2.INTER_AREA)
        frames.append(out)
        tiles.append((x, y, x + n, y + n))
    seq = FrameSequence.open(write_clip(tmp_path / "small", frames), chunk=8)
    faces, report = pipeline.track_faces(seq, BuiltinAnalyzer(), str(tmp_path / "store"), pipeline.Hooks(),
                                         mode="largest", detect_every=8)
    hits = 0
    for fr, (x1, y1, x2, y2) in zip(faces.frames, tiles):
        for f in fr.faces:
            cx, cy = (f.bbox[:2] + f.bbox[2:]) / 2
            h = float(f.bbox[3] - f.bbox[1])
            if x1 <= cx <= x2 and y1 <= cy <= y2 and 12 <= h <= 40:
                hits += 1
                break
    assert hits >= 0.9 * N, (hits, report.extra["tracker"])
    assert all(len(fr.faces) <= 1 for fr in faces.frames)
    assert np.isfinite([f.kps for fr in faces.frames for f in fr.faces]).all()
