"""Real media shared by the classical swap's tests: four frames of the kling clip (red glasses,
lipstick, red light) with their faces and 68 points, and the shipped source photos."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

KLING = REPO / "tests" / ".cache" / "media" / "api_kling_avatar2-1.webp"
KLING_FRAMES = (3, 18, 33, 50)


@pytest.fixture(scope="session")
def builtin_analyzer():
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

    return BuiltinAnalyzer()


@pytest.fixture(scope="session")
def kling_target(builtin_analyzer):
    """(frames, their largest faces with 68 points) at KLING_FRAMES."""
    from swapline_core.video.read import iter_frames

    assert KLING.is_file(), f"{KLING} missing: run scripts/setup.sh (it unpacks the sample clips)"
    frames = [f for i, (_, f) in enumerate(iter_frames(KLING)) if i in KLING_FRAMES]
    faces = builtin_analyzer.detect(frames)
    builtin_analyzer.landmarks68(frames, faces)
    return frames, [fs[0] for fs in faces]


@pytest.fixture(scope="session")
def sample_source(builtin_analyzer):
    """name in assets/samples/ -> SourceIdentity with the image and its face's 68 points."""
    from swapline_core.types import SourceIdentity

    def load(name: str) -> SourceIdentity:
        img = np.asarray(Image.open(REPO / "assets" / "samples" / name).convert("RGB"))
        f = builtin_analyzer.detect([img])[0][0]
        builtin_analyzer.landmarks68([img], [[f]])
        return SourceIdentity(np.zeros(128, np.float32), builtin_analyzer.recognizer_name, img, f)

    return load
