"""The mesh swap's blending steps: the boundary membrane, the source's skin map, the seam of the
mirrored texture and the shading read on skin only."""
from __future__ import annotations

import cv2
import numpy as np

from swapline_core.backends.mesh_blend import membrane, mirror_seam, push_pull, skin_shading, smooth, source_skin


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


def test_source_skin_marks_busy_texture_of_skin_colour_and_spares_stubble():
    # a striped helmet rim as grey as a dim face (m_astronaut's chin) is not skin; stubble, finer
    # and weaker, stays skin
    rng = np.random.default_rng(3)
    img = np.zeros((120, 100, 3), np.float32)
    img[:] = (150, 130, 120)
    img += rng.normal(0, 2.0, img.shape)
    img[50:80, 10:90] -= rng.random((30, 80, 1)) * 18.0          # stubble: dark specks
    img[95:115, 10:90] = (150, 130, 120)
    img[95:115:4, 10:90] = (90, 85, 85)                          # stripes, 1 px dark every 4 px
    img[96:115:4, 10:90] = (215, 210, 205)                       # ... beside 1 px light
    label = np.zeros((120, 100), np.int32)
    w = source_skin(np.clip(img, 0, 255).astype(np.uint8), label, np.array([True]))
    assert np.median(w[55:75, 15:85]) > 0.9 and w[55:75, 15:85].mean() > 0.85   # stubble stays skin
    assert w[98:112, 15:85].max() < 0.1                                         # the stripes do not


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


def _texture(shape, seed=0, amp=6.0):
    return cv2.GaussianBlur(np.random.default_rng(seed).normal(0, amp, shape).astype(np.float32), (0, 0), 0.8)


def test_mirror_seam_meets_the_texture_beside_it_and_keeps_the_mirrored_detail():
    """The other half of a side-lit source (mirrored texture) is 60 levels brighter: after the
    seam step the two meet at their shared edge, the mirrored half keeps its fine texture and the
    directly warped half is untouched."""
    h, w = 100, 120
    tex = _texture((h, w, 3))
    warped = np.full((h, w, 3), 100.0, np.float32) + tex
    mirrored = np.zeros((h, w), bool)
    mirrored[:, 70:] = True
    warped[mirrored] += 60.0
    valid = np.ones((h, w), np.uint8)
    out = mirror_seam(warped, valid, mirrored, size=100.0)
    before = warped[:, 70:73].mean() - warped[:, 67:70].mean()
    after = out[:, 70:73].mean() - out[:, 67:70].mean()
    assert before > 55 and abs(after) < 6, (before, after)
    assert np.array_equal(out[:, :70], warped[:, :70])
    hp = lambda a: a - cv2.GaussianBlur(a, (0, 0), 3)          # noqa: E731
    assert np.corrcoef(hp(out[:, 75:])[..., 0].ravel(), hp(warped[:, 75:])[..., 0].ravel())[0, 1] > 0.95
    # nothing mirrored: nothing changes
    assert np.array_equal(mirror_seam(warped, valid, np.zeros((h, w), bool), 100.0), warped)


def test_skin_shading_takes_the_target_shading_on_skin_and_keeps_the_features():
    """A shadow blob on the source's cheek (skin) goes, the target's shading comes, and a dark
    brow (not skin in the source's weights) keeps its contrast."""
    h, w = 120, 120
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    blob = 50.0 * np.exp(-((xx - 80) ** 2 + (yy - 70) ** 2) / (2 * 16.0 ** 2))     # wider than sigma: shading
    warped = np.repeat((170.0 - blob)[..., None], 3, axis=2) + _texture((h, w, 3), 1)
    brow = (yy > 30) & (yy < 36) & (xx > 25) & (xx < 55)
    warped[brow] = 60.0
    target = np.repeat((140.0 + 0.3 * (xx - 60))[..., None], 3, axis=2).astype(np.float32)   # lit from the right
    src_skin = (~brow).astype(np.float32)
    dst_skin = np.ones((h, w), np.float32)
    out = skin_shading(warped, target, src_skin, dst_skin, sigma=6.0)
    spot = (slice(62, 78), slice(72, 88))
    before, after = abs(warped[spot].mean() - target[spot].mean()), abs(out[spot].mean() - target[spot].mean())
    assert after < 0.35 * before, (before, after)             # most of the blob's depth is gone
    assert out[brow].mean() < out[40:46, 25:55].mean() - 60  # the brow stays dark against the skin below
    # a gradient of the target's shading across the face, not the source's flat light
    assert out[60:80, 95:110].mean() - out[60:80, 10:25].mean() > 15


def test_smooth_matches_a_full_size_blur_on_smooth_content():
    rng = np.random.default_rng(2)
    img = cv2.GaussianBlur(rng.uniform(0, 255, (200, 240)).astype(np.float32), (0, 0), 4)
    for sigma in (1.5, 6.0, 18.0):
        ref = cv2.GaussianBlur(img, (0, 0), sigma)
        got = smooth(img, sigma)
        assert got.shape == img.shape
        inner = (slice(40, -40), slice(40, -40))       # borders differ by the border rule only
        assert np.abs(got[inner] - ref[inner]).max() < 0.05 * (img.max() - img.min()), sigma


def test_match_sharpness_softens_a_sharp_paste_to_a_soft_target_and_leaves_a_sharp_one():
    from swapline_core.backends.mesh_blend import fine_rms, match_sharpness

    rng = np.random.default_rng(5)
    sharp = np.full((120, 120, 3), 150.0, np.float32) + rng.normal(0, 12, (120, 120, 1)).astype(np.float32)
    soft = cv2.GaussianBlur(sharp, (0, 0), 1.2)                  # the same texture out of focus
    where = np.zeros((120, 120), bool)
    where[10:110, 10:110] = True
    out, sigma = match_sharpness(sharp, soft, where)
    assert sigma > 0 and fine_rms(out, where) <= fine_rms(soft, where) < 0.5 * fine_rms(sharp, where)
    assert abs(float(out[where].mean()) - float(sharp[where].mean())) < 1.0      # the colour is untouched
    same, none = match_sharpness(sharp, sharp + 0.5, where)                      # a target as sharp
    assert none == 0.0 and same is sharp
