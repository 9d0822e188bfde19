"""Timings of the built-in mesh analyzer against the built-in MTCNN + dlib one, same frames, one run.

    .venv/bin/python -m bench.mesh_timings

Prints per-invoke times of each .tflite model (ai-edge-litert, XNNPACK, 2 threads, median of 100)
and per-frame / per-face times of both analyzers on t1.jpg (1280x886, six faces) and the sample
clip's frames (350x350, one face); docs/models.md quotes them with the date and machine.
"""
from __future__ import annotations

import os
import platform
import time
from functools import partial
from pathlib import Path

import numpy as np

from devtools.media import T1, insightface_image, rgb
from swapline_core.backends import mesh_models as mm
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.backends.mesh_analyzer import MeshAnalyzer
from swapline_core.video.read import iter_frames

CLIP = Path(__file__).resolve().parent.parent / "assets" / "samples" / "kling_avatar_clip.mp4"


def _median_ms(fn, n: int) -> float:
    fn()                                        # warm-up: model loading, first allocations
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


def main() -> int:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"Python {platform.python_version()}")
    rng = np.random.default_rng(0)
    for name in mm.RUNTIME:
        it, _ = mm.interpreter(name)
        shape = it.get_input_details()[0]["shape"]
        x = rng.random(tuple(shape), dtype=np.float32)
        ms = _median_ms(partial(mm.run, name, x), 100)
        print(f"| {name} invoke, 1x{shape[1]}x{shape[2]} | {ms:.2f} ms |")
    t1 = rgb(insightface_image(T1))
    clip = [f for i, (_, f) in enumerate(iter_frames(CLIP)) if i < 8]
    for label, analyzer in (("builtin mesh", MeshAnalyzer()), ("builtin MTCNN + dlib", BuiltinAnalyzer())):
        for what, frames in (("t1.jpg 1280x886, 6 faces", [t1]), ("sample clip 350x350, 8 frames", clip)):
            faces = analyzer.detect(frames)
            n = max(1, sum(len(f) for f in faces))
            det = _median_ms(partial(analyzer.detect, frames), 5) / len(frames)
            lm = _median_ms(partial(analyzer.landmarks68, frames, faces), 5) / n
            emb = _median_ms(partial(analyzer.embed, frames, faces), 5) / n
            print(f"| {label}, {what} | detect {det:.1f} ms/frame | landmarks68 {lm:.1f} ms/face "
                  f"| embed {emb:.1f} ms/face |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
