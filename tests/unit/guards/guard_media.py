"""Real faces for the guard tests: the sample clips' frames with tracked faces (one track each)."""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

CLIPS = REPO / "tests" / ".cache" / "media"
KLING = CLIPS / "api_kling_avatar2-1.webp"
TALK = CLIPS / "video_wan2_1_infinitetalk-1.webp"


@functools.cache
def analyzer():
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

    return BuiltinAnalyzer()


@functools.cache
def clip_faces(path: Path, count: int):
    """(frames, faces) of the first ``count`` frames; the largest face of each frame gets track 0
    (both clips hold one person until the second appears near their end)."""
    from swapline_core.video.read import iter_frames

    if not path.is_file():
        pytest.fail(f"{path} missing: run scripts/setup.sh (it fetches the sample clips into tests/.cache/media)")
    frames = [f for _, f in iter_frames(path, 0, count)]
    faces = analyzer().detect(frames)
    analyzer().landmarks68(frames, faces)
    for fs in faces:
        fs.sort(key=lambda f: -f.area)
        for k, f in enumerate(fs):
            f.track_id = k
    return frames, faces
