"""Print the mean 68-point face shape used by ``swapline_core.faces.shape`` (guards, classical swap).

Shapes: dlib 68-point landmarks (the built-in analyzer) on every face of insightface's t1.jpg,
Tom_Hanks_54745.png and the near-frontal frames of the two sample clips in tests/.cache/media.
Each identity is averaged first (so a 56-frame clip counts as one face), shapes are aligned by
generalised Procrustes (similarity), the mean is made left/right symmetric and expressed with the
eye centres at (-0.5, 0) and (0.5, 0). Run: .venv/bin/python -m calibration.mean_shape68
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _align(src, dst):
    from swapline_core.faces.align import umeyama

    m = umeyama(src, dst).astype(np.float64)
    return src @ m[:, :2].T + m[:, 2]


def canonical(shape: np.ndarray) -> np.ndarray:
    le, re_ = shape[36:42].mean(0), shape[42:48].mean(0)
    return _to_eyes(shape, le, re_)


def _to_eyes(shape, le, re_):
    from swapline_core.faces.align import umeyama

    m = umeyama(np.stack([le, re_]), np.array([[-0.5, 0.0], [0.5, 0.0]])).astype(np.float64)
    return shape @ m[:, :2].T + m[:, 2]


def collect() -> list[np.ndarray]:
    from devtools.media import insightface_image, rgb
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import yaw
    from swapline_core.video.read import iter_frames

    an = BuiltinAnalyzer()
    groups = []
    for name in ("t1.jpg", "Tom_Hanks_54745.png"):
        im = rgb(insightface_image(name))
        fs = an.detect([im])
        an.landmarks68([im], fs)
        groups += [[f.landmarks.astype(np.float64)] for f in fs[0]]
    for clip in sorted((REPO / "tests" / ".cache" / "media").glob("*.webp")):
        frames = [f for _, f in iter_frames(clip)]
        fs = an.detect(frames)
        an.landmarks68(frames, fs)
        # one identity per clip: the largest face of each frame, near-frontal only
        shapes = [max(f, key=lambda x: x.area).landmarks.astype(np.float64) for f in fs if f]
        groups.append([s for s in shapes if abs(yaw(s)) < 0.15])
    return [np.mean([canonical(s) for s in g], axis=0) for g in groups if g]


def mean_shape(shapes: list[np.ndarray]) -> np.ndarray:
    from swapline_core.faces.shape import MIRROR68

    mean = shapes[0]
    for _ in range(5):
        mean = np.mean([_align(s, mean) for s in shapes], axis=0)
        mirrored = mean[MIRROR68] * np.array([-1.0, 1.0])
        mean = canonical((mean + _align(mirrored, mean)) / 2)
    return mean


if __name__ == "__main__":
    shapes = collect()
    mean = mean_shape(shapes)
    print(f"# {len(shapes)} identities")
    print("MEAN68 = np.array([")
    for i in range(0, 68, 4):
        print("    " + " ".join(f"[{x:.4f}, {y:.4f}]," for x, y in mean[i:i + 4]))
    print("], np.float32)")
