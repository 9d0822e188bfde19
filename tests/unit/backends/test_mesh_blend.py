"""The mesh swap's blending steps: the boundary membrane and the source's skin map."""
from __future__ import annotations

import cv2
import numpy as np

from swapline_core.backends.mesh_blend import membrane, push_pull, source_skin


def _disc(size=120, r=45):
    m = np.zeros((size, size), np.uint8)
    cv2.circle(m, (size // 2, size // 2), r, 1, -1)
    return m


def test_push_pull_reproduces_a_constant_and_stays_within_the_known_values():
    band = np.zeros((64, 64), np.float32)
    band[0, :] = band[-1, :] = 1.0
    vals = np.zeros((64, 64, 1), np.float32)
    vals[0, :], vals[-1, :] = 10.0, 30.0
    out = push_pull(vals, band)[..., 0]
    assert np.allclose(out[0], 10.0, atol=0.5) and np.allclose(out[-1], 30.0, atol=0.5)
    assert out.min() >= 10.0 - 1e-3 and out.max() <= 30.0 + 1e-3
    # in between it runs from one edge to the other, monotonically (a membrane, not a step)
    col = out[:, 32]
    assert np.all(np.diff(col) >= -1e-3) and 15.0 < col[32] < 25.0


def test_membrane_removes_a_colour_step_at_the_paste_edge_and_keeps_the_detail():
    rng = np.random.default_rng(0)
    patch = np.full((120, 120, 3), 150.0, np.float32)
    # the target darkens toward the jaw (bottom): a plain offset can not match both ends
    patch += np.linspace(-20, 20, 120)[:, None, None]
    detail = rng.normal(0, 6, (120, 120, 1)).astype(np.float32)
    warped = np.full_like(patch, 185.0) + detail
    paste = _disc()
    out = membrane(warped, patch, paste, size=90.0)
    edge = (paste > 0) & (cv2.distanceTransform(paste, cv2.DIST_L2, 3) <= 2)
    before = np.abs(warped - patch)[edge].mean()
    after = np.abs(out - patch)[edge].mean()
    assert before > 30.0 and after < 0.25 * before, (before, after)
    # the texture inside is the source's: the field is smooth, so the detail survives
    inner = cv2.distanceTransform(paste, cv2.DIST_L2, 3) > 10
    hp = out - cv2.GaussianBlur(out, (0, 0), 3)
    hp_detail = detail - cv2.GaussianBlur(detail, (0, 0), 3)[..., None]
    assert np.corrcoef(hp[inner][:, 0], hp_detail[inner][:, 0])[0, 1] > 0.9
    # nothing outside the paste changes
    assert np.array_equal(out[paste == 0], warped[paste == 0])


def test_membrane_is_not_dragged_by_a_dark_strand_on_the_edge():
    patch = np.full((120, 120, 3), 150.0, np.float32)
    cv2.line(patch, (60, 0), (60, 119), (20, 20, 20), 3)       # a hair strand crossing the edge
    warped = np.full_like(patch, 150.0)
    out = membrane(warped, patch, _disc(), size=90.0)
    inner = cv2.distanceTransform(_disc(), cv2.DIST_L2, 3) > 12
    assert np.abs(out - 150.0)[inner].max() < 10.0


def test_source_skin_marks_hair_across_the_face_and_spares_the_features():
    img = np.zeros((100, 100, 3), np.uint8)
    img[:] = (205, 160, 135)                                   # skin
    img += np.random.default_rng(1).integers(0, 6, img.shape, dtype=np.uint8)
    img[20:30, :] = (60, 40, 25)                               # a dark fringe across the forehead
    img[60:66, 40:60] = (70, 30, 30)                           # lips: a feature triangle, dark too
    label = np.zeros((100, 100), np.int32)
    label[60:66, 40:60] = 1
    label[:, :5] = -1                                          # outside the mesh
    w = source_skin(img, label, np.array([True, False]))
    assert w[40:55, 10:90].min() > 0.9                         # plain skin
    assert w[22:28, 10:90].max() < 0.1                         # the fringe
    assert np.all(w[60:66, 40:60] == 1.0)                      # the lips are never judged by colour
    assert np.all(w[:, :5] == 0.0)


def test_match_detail_tones_the_source_stubble_down_to_the_target_skin_and_spares_features():
    from swapline_core.backends.mesh_blend import DETAIL_GAIN, match_detail

    rng = np.random.default_rng(2)
    patch = np.full((160, 160, 3), 170.0, np.float32) + rng.normal(0, 1.5, (160, 160, 1)).astype(np.float32)
    stubble = rng.normal(0, 14, (160, 160, 1)).astype(np.float32)
    warped = np.full_like(patch, 165.0) + stubble
    skin = np.zeros((160, 160), bool)
    skin[20:140, 20:100] = True                          # plain skin; the rest stands for a brow
    out = match_detail(warped, patch, skin, size=150.0)

    def fine(img, sel):
        return float((img - cv2.GaussianBlur(img, (0, 0), 7.5))[sel].std())

    inner = np.zeros_like(skin)
    inner[50:110, 45:75] = True
    assert fine(warped, inner) > 5 * fine(patch, inner)
    assert fine(out, inner) < DETAIL_GAIN * fine(patch, inner) * 1.6       # down to the target's grain
    feature = np.zeros_like(skin)
    feature[50:110, 125:150] = True
    assert np.allclose(out[feature], warped[feature], atol=1e-3)           # features keep their detail
    assert abs(float(out[inner].mean()) - float(warped[inner].mean())) < 1.0  # the colour is untouched
