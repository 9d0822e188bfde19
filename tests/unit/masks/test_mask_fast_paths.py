"""The mask stack's faster code paths give the very values of the plain formulas they replace
(issue 13, mask_overhead): a speed-up must not change what the masks decide. The last two (block
fits, the skin view's shrink) are not exact: they state what they keep and their tolerance."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import cv2
import numpy as np

from swapline_core.masks import builtin, occlusion, temporal


def _reference_median(own, others):
    """The NaN-aware median as first written: sort every pixel's votes, a NaN votes with own."""
    maps = [own] + [np.where(np.isnan(o), own, o) for o in others]
    return np.median(np.stack(maps).astype(np.float32), axis=0).astype(np.float32)


def test_median_by_selection_equals_the_sorted_median():
    rng = np.random.default_rng(3)
    for n in range(1, 8):
        for ties in (False, True):
            own = rng.random((23, 31)).astype(np.float32)
            others = []
            for _ in range(n - 1):
                o = rng.random(own.shape).astype(np.float32)
                if ties:
                    o = np.round(o * 3) / 3
                o[rng.random(own.shape) < 0.2] = np.nan
                others.append(o.astype(np.float32))
            want = _reference_median(own, others)
            assert np.array_equal(temporal.median(own, [o.copy() for o in others]), want), n
            assert np.array_equal(temporal.median(own, [o.copy() for o in others], scratch=True), want), n


def test_median_leaves_its_inputs_alone_unless_told():
    own = np.zeros((4, 4), np.float32)
    others = [np.full((4, 4), np.nan, np.float32), np.ones((4, 4), np.float32)]
    temporal.median(own, others)
    assert np.isnan(others[0]).all()


def test_lab_and_hue_share_one_blur_and_match_the_plain_formulas():
    rng = np.random.default_rng(4)
    img = cv2.GaussianBlur(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8), (0, 0), 2)
    lab, hue, sat = occlusion.lab_hue_sat(img)
    f = cv2.GaussianBlur(img.astype(np.float32) / 255.0, (0, 0), 1.0)
    hsv = cv2.cvtColor(f, cv2.COLOR_RGB2HSV)
    assert np.array_equal(lab, cv2.cvtColor(f, cv2.COLOR_RGB2Lab))
    assert np.array_equal(hue, (hsv[..., 0] + 180.0) % 360.0 - 180.0)
    assert np.array_equal(sat, hsv[..., 1])
    assert np.array_equal(occlusion.lab(img), lab)
    assert all(np.array_equal(a, b) for a, b in zip(occlusion.hue_sat(img), (hue, sat)))


def test_nearest_centre_equals_the_broadcast_argmin():
    rng = np.random.default_rng(5)
    x = np.round(rng.normal(50, 10, (500, 3)))          # rounded: ties must go to the first centre
    centres = np.array([[50.0, 50, 50], [52.0, 48, 50], [40.0, 60, 55]])
    w = np.array([0.5, 1.0, 1.0])
    want = np.argmin((((x[:, None, :] - centres[None]) * w) ** 2).sum(-1), axis=1)
    assert np.array_equal(occlusion._nearest([np.ascontiguousarray(x[:, i]) for i in range(3)], centres, w), want)


def test_dilation_near_the_mask_equals_the_full_dilation():
    rng = np.random.default_rng(6)
    for _ in range(50):
        m = np.zeros((int(rng.integers(5, 80)), int(rng.integers(5, 80))), np.uint8)
        y, x = rng.integers(0, m.shape[0]), rng.integers(0, m.shape[1])
        m[y:y + 6, x:x + 9] = 1
        g = int(rng.integers(1, 12))
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * g + 1, 2 * g + 1))
        assert np.array_equal(occlusion._dilate_near(m, k, g), cv2.dilate(m, k))


def test_roll_reaches_every_window_a_median_needs():
    """A median reads views <= r away, and each of their fits reads <= r around them."""
    for r in (1, 2, 3):
        assert builtin.roll_radius(r) >= 2 * r
    assert builtin.roll_radius(0) == 0

