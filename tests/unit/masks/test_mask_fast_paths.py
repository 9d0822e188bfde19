"""The mask stack's faster code paths give the very values of the plain formulas they replace
(issue 13, mask_overhead): a speed-up must not change what the masks decide. The last two (block
fits, the skin view's shrink) are not exact: they state what they keep and their tolerance."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import cv2
import numpy as np

from swapline_core.masks import beside, builtin, occlusion, temporal


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
        assert np.array_equal(occlusion.dilate_near(m, k, g), cv2.dilate(m, k))


def test_roll_reaches_every_window_a_median_needs():
    """A median reads views <= r away, and each of their fits reads <= r around them."""
    for r in (1, 2, 3):
        assert builtin.roll_radius(r) >= 2 * r
    assert builtin.roll_radius(0) == 0


def _plain_band(shape, lm68):
    """``beside.band`` as first written: both dilations over the whole map."""
    size = float(np.ptp(lm68, axis=0).max())
    hull = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.rint(lm68).astype(np.int32)), 1)
    near, far = (max(1, round(f * size)) for f in beside.BAND)
    inner = cv2.dilate(hull, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * near + 1, 2 * near + 1)))
    outer = cv2.dilate(hull, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * far + 1, 2 * far + 1)))
    rows = np.zeros(shape[0], bool)
    rows[max(0, int(np.floor(lm68[36:48, 1].max()))):max(0, int(np.ceil(lm68[48:60, 1].max())))] = True
    return (outer > 0) & (inner == 0) & rows[:, None]


def test_band_on_the_hulls_box_equals_the_whole_map_band():
    """Faces inside the map and past its edges (landmarks off the map: the polygon is clipped)."""
    rng = np.random.default_rng(7)
    t = np.linspace(0, 2 * np.pi, 68, endpoint=False)
    for _ in range(400):
        h, w = (int(v) for v in rng.integers(20, 260, 2))
        c, r = rng.uniform(-20, [w + 20, h + 20]), rng.uniform(3, 120)
        a = t + rng.normal(0, 0.2, 68)
        lm = np.stack([c[0] + r * np.cos(a) * rng.uniform(0.5, 1.5), c[1] + r * np.sin(a)], 1).astype(np.float32)
        lm[36:48, 1], lm[48:60, 1] = c[1] + rng.uniform(-r, r), c[1] + rng.uniform(-r, r)
        assert np.array_equal(beside.band((h, w), lm), _plain_band((h, w), lm))


def test_bounded_nearest_search_keeps_every_decision():
    """The k-d tree search stops at the thresholds; the samples kept are those the unbounded
    distances keep (backgrounds near and far from the skin tone)."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(8)
    t = np.linspace(0, 2 * np.pi, 68, endpoint=False)
    lm = np.stack([60 + 38 * np.cos(t), 60 + 38 * np.sin(t)], 1).astype(np.float32)
    lm[36:48, 1], lm[48:60, 1] = 50.0, 80.0
    for spread in (1.0, 3.0, 8.0):
        lab = rng.normal([60, 15, 20], [spread, spread, spread], (120, 120, 3)).astype(np.float32)
        lab[:, :25] = rng.normal([40, -2, 29], [spread, spread, spread], (120, 25, 3))   # leaves beside
        samples = rng.random((120, 120)) < 0.3
        nose = np.zeros_like(samples)
        nose[50:80, 50:70] = True
        x = lab[samples].astype(np.float64)
        bg = lab[beside.band(lab.shape[:2], lm)].astype(np.float64)
        bg = bg[np.linspace(0, len(bg) - 1, min(len(bg), 4000)).astype(np.int64)]
        d_bg = cKDTree(bg).query(x)[0]
        near = d_bg <= beside.MATCH
        drop = np.zeros(len(x), bool)
        drop[near] = cKDTree(lab[nose & samples].astype(np.float64)).query(x[near])[0] \
            >= np.maximum(beside.FOREIGN, beside.RATIO * d_bg[near])
        want = np.ones(len(x), bool) if drop.mean() > 1.0 - beside.MIN_KEPT else ~drop
        assert near.any() and drop.any()
        assert np.array_equal(beside.not_background(lab, samples, nose, lm), want)


def test_hue_wrap_equals_the_floored_modulo():
    from swapline_core.masks import chroma

    rng = np.random.default_rng(9)
    x = np.concatenate([rng.uniform(-360, 360, 200000), np.arange(-360, 361, 0.5),
                        [-180.0, 180.0, -540.0 + 360, 0.0, -0.0]]).astype(np.float32)
    want = (x + np.float32(180.0)) % np.float32(360.0) - np.float32(180.0)
    assert np.array_equal(np.abs(chroma._wrap180(x.copy())), np.abs(want))
