"""The expression window's reading (metrics_expression.mouth_profile / window_correlation).

Synthetic frames with known mouth openings: the reading must follow the mouth, ignore what a swap
does above it (forehead, eyes) and to the colour of the whole face, read a frozen mouth as not
following, and give no value where the target's mouth does not move. The reading on the real
sample clip's known cases is tested in test_qa_known_cases.py.
"""
import cv2
import numpy as np
import pytest

from swapline_core.qa.metrics_expression import (
    MIN_TARGET_STD,
    add_window_correlation,
    mouth_profile,
    window_correlation,
)

JAW = 120.0


def landmarks(opening: float) -> np.ndarray:
    """68 points of an upright face: eyes 60 px apart, mouth centred at (130, 175), inner lips
    ``opening`` px apart (jaw width 120 px)."""
    lm = np.zeros((68, 2), np.float32)
    lm[0:17, 0] = np.linspace(70, 190, 17)
    lm[0:17, 1] = 120 + 80 * np.sin(np.linspace(0, np.pi, 17))
    lm[17:27] = np.c_[np.linspace(80, 180, 10), np.full(10, 85)]
    for base, cx in ((36, 100), (42, 160)):
        lm[base:base + 6] = np.c_[cx + np.array([-10, -4, 4, 10, 4, -4]), 100 + np.array([0, -4, -4, 0, 4, 4])]
    lm[27:36] = np.c_[np.full(9, 130), np.linspace(105, 150, 9)]
    lm[48:60] = np.c_[130 + 25 * np.cos(np.linspace(0, 2 * np.pi, 12, endpoint=False)),
                      175 + (8 + opening / 2) * np.sin(np.linspace(0, 2 * np.pi, 12, endpoint=False))]
    ang = np.linspace(0, 2 * np.pi, 8, endpoint=False)
    lm[60:68] = np.c_[130 + 18 * np.cos(ang), 175 + (opening / 2 + 0.01) * np.sin(ang)]
    return lm


def frame(opening: float, forehead=(200, 170, 150), tint=(0, 0, 0)) -> np.ndarray:
    """Skin, red lips, a dark mouth opening ``opening`` px high; ``forehead`` paints above the brows."""
    img = np.zeros((260, 260, 3), np.uint8)
    img[:] = (225, 190, 170)
    cv2.ellipse(img, (130, 175), (26, int(8 + opening / 2)), 0, 0, 360, (200, 40, 50), -1)
    if opening > 0.5:
        cv2.ellipse(img, (130, 175), (18, max(1, int(round(opening / 2)))), 0, 0, 360, (30, 10, 15), -1)
    img[:95] = forehead
    return np.clip(img.astype(np.int16) + np.array(tint, np.int16), 0, 255).astype(np.uint8)


OPENINGS = [0, 6, 14, 20, 12, 4, 0, 8, 18, 22, 10, 2, 0, 16, 6]


def test_the_profile_follows_the_mouth_and_ignores_the_upper_face():
    lm = landmarks(10)
    closed, open_ = mouth_profile(frame(0), lm), mouth_profile(frame(20), lm)
    assert np.abs(np.subtract(open_, closed)).max() > 0.5          # an opening mouth changes it
    # a forehead or eyes painted differently (a swap's upper face) cannot move it
    assert mouth_profile(frame(20, forehead=(40, 200, 40)), lm) == open_
    # nor a colour or brightness change of the whole result (a colour-matching step)
    shifted = mouth_profile(frame(20, tint=(12, 6, -8)), lm)
    assert np.abs(np.subtract(shifted, open_)).max() < 0.1


def _window(result_openings, target_openings=OPENINGS):
    t_lm = [landmarks(o) for o in target_openings]
    t_prof = [mouth_profile(frame(o), lm) for o, lm in zip(target_openings, t_lm)]
    r_prof = [mouth_profile(frame(o, forehead=(60, 60, 200)), lm) for o, lm in zip(result_openings, t_lm)]
    opening = [o / JAW for o in target_openings]
    return window_correlation(opening, t_prof, r_prof)


def test_a_following_mouth_correlates_a_frozen_one_does_not():
    assert _window(OPENINGS) > 0.99
    assert _window([0] * len(OPENINGS)) == 0.0                    # frozen closed: nothing moves
    assert _window([14] * len(OPENINGS)) == 0.0                   # frozen open
    assert _window(OPENINGS[::-1]) < 0.3                          # moving, out of step


def test_a_still_target_mouth_is_no_evidence():
    still = [10.0] * len(OPENINGS)
    assert np.std(np.divide(still, JAW)) < MIN_TARGET_STD
    assert _window([0] * len(OPENINGS), still) is None
    assert _window(OPENINGS[:4], OPENINGS[:4]) is None           # too short a window


def _records(result_openings, redetected=True):
    recs = []
    for i, (t, r) in enumerate(zip(OPENINGS, result_openings)):
        lm = landmarks(t)
        recs.append({"frame": i, "faces": [{
            "track_id": 0, "mouth_target": t / JAW, "mouth_result": (r / JAW) if redetected else None,
            "mouth_profile_target": mouth_profile(frame(t), lm),
            "mouth_profile_result": mouth_profile(frame(r), lm), "expression_corr": None}]})
    return recs


@pytest.mark.parametrize("redetected", [True, False])
def test_window_values_on_records(redetected):
    """Every frame gets its window's value; a result that was not re-detected is still judged (the
    reading needs only the target's landmarks and the result's pixels)."""
    good, frozen = _records(OPENINGS, redetected), _records([0] * len(OPENINGS), redetected)
    add_window_correlation(good, 9)
    add_window_correlation(frozen, 9)
    assert all(r["faces"][0]["expression_corr"] > 0.99 for r in good)
    assert all(r["faces"][0]["expression_corr"] == 0.0 for r in frozen)


def test_records_without_profiles_keep_their_value():
    recs = _records(OPENINGS)
    for r in recs:
        f = r["faces"][0]
        f["mouth_profile_target"] = f["mouth_profile_result"] = None
        f["expression_corr"] = 0.5
    add_window_correlation(recs, 9)
    assert all(r["faces"][0]["expression_corr"] == 0.5 for r in recs)
