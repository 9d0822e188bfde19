"""The chroma-blotch reading (metrics_defects.chroma_blotch): a patch of foreign colour on the skin.

On a real face (assets/samples/target_reference.png) with the built-in analyzer's 68 points: the
same face reads 0; one even colour shift over the whole face (what a colour match does) reads
about 0; a yellow patch on one cheek, which leaves the lightness as it was, reads high while the
lightness blotch reading hardly moves; and a limit set's limit fails a face on it, naming it.
The face, its cheek and the reading: conftest.py's fixtures.
"""
import cv2
import numpy as np
import pytest

from swapline_core.qa import decide


def _shift_chroma(im: np.ndarray, where: np.ndarray | None, da: float, db: float) -> np.ndarray:
    """``im`` with a*, b* moved by (da, db) CIELAB units on ``where`` (bool map; None: everywhere),
    the lightness kept."""
    lab = cv2.cvtColor(im.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    w = np.ones(im.shape[:2], np.float32) if where is None else where.astype(np.float32)
    lab[..., 1] += da * w
    lab[..., 2] += db * w
    return np.clip(cv2.cvtColor(lab, cv2.COLOR_Lab2RGB) * 255.0 + 0.5, 0, 255).astype(np.uint8)


CHEEK = 0.4      # the yellow patch's radius, inter-ocular distances: about a fifth of the face wide


@pytest.fixture(scope="module")
def read(reading):
    return reading("chroma_blotch")


def test_unchanged_face_reads_zero(face_lm, read):
    im, lm = face_lm
    assert read(im, im.copy(), lm)["chroma_blotch"] == pytest.approx(0.0, abs=1e-6)


def test_an_even_colour_shift_reads_low(face_lm, read):
    im, lm = face_lm
    m = read(im, _shift_chroma(im, None, 6.0, 8.0), lm)
    assert m["chroma_blotch"] < 1.5, m["chroma_blotch"]
    assert m["colour_cast"] > 5.0, m["colour_cast"]    # the shift itself is colour_cast's to read


def test_a_yellow_patch_reads_high_where_the_lightness_blotch_does_not(face_lm, read, cheek):
    im, lm = face_lm
    m = read(im, _shift_chroma(im, cheek(im.shape, lm, CHEEK), 0.0, 14.0), lm)
    base = read(im, im.copy(), lm)
    assert m["chroma_blotch"] > 8.0, m["chroma_blotch"]
    assert m["blotch"] - base["blotch"] < 1.0, (m["blotch"], base["blotch"])


def test_a_limit_fails_the_face_and_names_the_reading(face_lm, read, cheek):
    im, lm = face_lm
    v = read(im, _shift_chroma(im, cheek(im.shape, lm, CHEEK), 0.0, 14.0), lm)["chroma_blotch"]
    record = {"swapped": True, "redetected": True, "identity": 0.95, "chroma_blotch": v}
    strict = decide.QAThresholds(min_identity=0.0, max_chroma_blotch=v - 0.5)
    assert any("uneven colour change" in r for r in decide.face_reasons(strict, record))
    loose = decide.QAThresholds(min_identity=0.0, max_chroma_blotch=v + 0.5)
    assert not any("uneven colour change" in r for r in decide.face_reasons(loose, record))
