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
from swapline_core.qa.metrics_image import image_metrics  # noqa: E402

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


@pytest.fixture(scope="module")
def cheek():
    """``cheek(shape, lm, radius)``: a bool disc on one cheek of the face with 68 points ``lm``,
    between the jaw and the nose's side, ``radius`` inter-ocular distances wide, in a frame of
    ``shape``."""
    def disc(shape, lm: np.ndarray, radius: float) -> np.ndarray:
        iod = float(np.linalg.norm(lm[42:48].mean(0) - lm[36:42].mean(0)))
        centre = lm[2] * 0.5 + lm[31] * 0.5
        yy, xx = np.mgrid[:shape[0], :shape[1]]
        return (xx - centre[0]) ** 2 + (yy - centre[1]) ** 2 <= (radius * iod) ** 2
    return disc


@pytest.fixture(scope="module")
def reading():
    """``reading(key)(target, result, lm)``: the image metrics of one face, failing the test when
    ``key`` was not measured on it."""
    def of(key: str):
        def read(o, s, lm) -> dict:
            m = image_metrics(o, s, lm)
            assert m[key] is not None, f"{key} not measured on a frontal face"
            return m
        return read
    return of
