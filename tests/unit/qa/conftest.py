"""A real face for the QA readings' tests: assets/samples/target_reference.png with the built-in
analyzer's box and 68 points."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer  # noqa: E402

TARGET = ROOT / "assets" / "samples" / "target_reference.png"


@pytest.fixture(scope="module")
def analyzer():
    return BuiltinAnalyzer()


@pytest.fixture(scope="module")
def face(analyzer):
    """(the frame, its face with 68 points)."""
    im = np.array(Image.open(TARGET).convert("RGB"))
    found = analyzer.detect([im])
    assert found[0], "the built-in analyzer finds no face in target_reference.png"
    analyzer.landmarks68([im], found)
    f = found[0][0]
    assert f.landmarks is not None
    return im, f


@pytest.fixture(scope="module")
def face_lm(face):
    """(the target frame, its face's 68 points)."""
    im, f = face
    return im, f.landmarks
