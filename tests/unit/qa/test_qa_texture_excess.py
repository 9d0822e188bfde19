"""The texture-excess reading (metrics_defects.texture_excess): pasted texture on part of the skin.

On a real face (assets/samples/target_reference.png) with the built-in analyzer's 68 points: the
same face reads 1; a patch of fine specks (what pasted stubble or a blotchy smear is to the eye) on
one cheek reads high although the face-wide detail ratio barely moves; a softened face does not
read high; the face's pixel size does not set the reading; and a limit set's limit fails a face on
it, naming it.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from swapline_core.qa import decide  # noqa: E402


def _specks(im: np.ndarray, disc: np.ndarray, strength: float = 18.0) -> np.ndarray:
    """Fine dark specks (1-2 px, seeded) on ``disc`` (bool map)."""
    out = im.astype(np.float32)
    noise = np.random.default_rng(7).normal(0, 1, im.shape[:2]).astype(np.float32)
    noise = cv2.GaussianBlur(noise, (0, 0), 0.7)
    out[disc] += (strength * noise / noise.std())[disc][:, None]
    return np.clip(out, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def read(reading):
    return reading("texture_excess")


@pytest.fixture(scope="module")
def specked(face_lm, cheek):
    """The face with specks on a disc on one cheek, a fifth of the face wide."""
    im, lm = face_lm
    return _specks(im, cheek(im.shape, lm, 0.35))


def test_unchanged_face_reads_one(face_lm, read):
    im, lm = face_lm
    assert read(im, im.copy(), lm)["texture_excess"] == pytest.approx(1.0, abs=1e-6)


def test_specks_on_one_cheek_read_high_where_the_face_wide_ratio_hardly_moves(face_lm, read, specked):
    im, lm = face_lm
    m = read(im, specked, lm)
    assert m["texture_excess"] > 1.5, m["texture_excess"]
    # the face-wide average dilutes the patch: the reason for a reading of where it is worst
    assert m["detail_ratio"] < 1.3, m["detail_ratio"]
    assert m["texture_excess"] - 1 > 2 * (m["detail_ratio"] - 1), (m["texture_excess"], m["detail_ratio"])


def test_softened_face_does_not_read_high(face_lm, read):
    im, lm = face_lm
    soft = cv2.GaussianBlur(im, (0, 0), 2.0)
    assert read(im, soft, lm)["texture_excess"] <= 1.0


def test_face_pixel_size_does_not_set_the_reading(face_lm, read, specked):
    # read at a fixed viewing size of the face: the same specked face at half the resolution reads
    # about the same
    im, lm = face_lm
    full = read(im, specked, lm)["texture_excess"]
    h, w = im.shape[:2]
    small = [cv2.resize(x, (w // 2, h // 2), interpolation=cv2.INTER_AREA) for x in (im, specked)]
    half = read(*small, lm * 0.5)["texture_excess"]
    assert full > 1.5 and half > 1.3 and abs(full - half) < 0.35 * (full - 1), (full, half)


def test_a_limit_fails_the_face_and_names_the_reading(face_lm, read, specked):
    im, lm = face_lm
    v = read(im, specked, lm)["texture_excess"]
    record = {"swapped": True, "redetected": True, "identity": 0.95, "texture_excess": v}
    strict = decide.QAThresholds(min_identity=0.0, max_texture_excess=v - 0.1)
    assert any("pasted texture on part of the skin" in r for r in decide.face_reasons(strict, record))
    loose = decide.QAThresholds(min_identity=0.0, max_texture_excess=v + 0.1)
    assert not any("part of the skin" in r for r in decide.face_reasons(loose, record))
    # a set that gives no limit never fails a face on it
    off = decide.QAThresholds(min_identity=0.0)
    if off.max_texture_excess >= decide.OFF:
        assert not any("part of the skin" in r for r in decide.face_reasons(off, record))
