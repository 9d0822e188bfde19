"""A glasses rim closed round an eye keeps the target's pixels with its lens (``masks/rims.py``).

A thin gold rim on a tinted lens is no more chromatic than the skin (``glasses`` misses it) and,
the lens being tinted, no ridge between like sides (``wires`` misses it): the mesh path painted the
lens' tint and the lower rim over with the source's skin (a development still of the MIT image
wheel; a man's wire glasses on the second held-out set). Drawn here on real frames of the ltx clip
from their own landmarks, the rule must find the rim, keep it and the lens outside the eye
openings, leave the eye openings to the swapper, and find nothing on the same face without glasses,
on lids drawn round the eye, or on skin texture.
"""
import sys
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from ltx_swap import LTX, swap_composited  # noqa: E402
from occluders import wire_frame  # noqa: E402

from swapline_core.masks import builtin, rims  # noqa: E402

GOLD = (205, 170, 70)
TINT = (230, 120, 30)
TOL = 8


def tinted_glasses(frame, lm, tint=0.45):
    """Round glasses: ``wire_frame``'s 1 px gold rims, bridge and temples, with orange-tinted
    lenses inside the rims. Returns (frame, the rims' mask (not the bridge or temples: ``wires``'),
    lens mask)."""
    frame_px = wire_frame(frame.shape[:2], lm)
    lens = np.zeros(frame.shape[:2], np.uint8)
    ring = np.zeros(frame.shape[:2], np.uint8)
    le, re = lm[36:42].mean(0), lm[42:48].mean(0)
    iod = float(np.linalg.norm(re - le))
    ang = float(np.degrees(np.arctan2(re[1] - le[1], re[0] - le[0])))
    for e in (le, re):
        c = tuple(int(round(v)) for v in e)
        cv2.ellipse(lens, c, (int(0.44 * iod) - 1, int(0.3 * iod) - 1), ang, 0, 360, 1, -1)
        cv2.ellipse(ring, c, (int(0.44 * iod), int(0.3 * iod)), ang, 0, 360, 1, 1)
    lens = lens.astype(bool) & ~frame_px
    out = frame.astype(np.float32)
    out[lens] = (1 - tint) * out[lens] + tint * np.asarray(TINT, np.float32)
    out[frame_px] = GOLD
    return np.clip(out, 0, 255).astype(np.uint8), ring.astype(bool) & frame_px, lens


def openings(shape, lm):
    m = np.zeros(shape[:2], np.uint8)
    for sl in (slice(36, 42), slice(42, 48)):
        cv2.fillConvexPoly(m, cv2.convexHull(np.rint(lm[sl]).astype(np.int32)), 1)
    return m.astype(bool)


@pytest.fixture(scope="module")
def ltx_faces():
    """ltx frames 20, 28, 36 with their faces' five points and 68 landmarks."""
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.video.frames import FrameSequence

    if not LTX.is_file():
        pytest.fail(f"{LTX} missing: run scripts/setup.sh (it fetches the sample clips into tests/.cache/media)")
    an = BuiltinAnalyzer()
    frames = [f for _, ch in FrameSequence.open(str(LTX), start=20, count=17, chunk=17).iter_chunks() for f in ch][::8]
    faces = [fs[:1] for fs in an.detect(frames)]
    assert all(faces), "ltx frames 20, 28 and 36 should each show a face"
    an.landmarks68(frames, faces)
    return [(f, fs[0].kps, fs[0].landmarks) for f, fs in zip(frames, faces)]


def test_rims_and_tinted_lenses_are_kept_not_the_eyes(ltx_faces):
    for k, (frame, kps, lm) in enumerate(ltx_faces):
        img, rim, lens = tinted_glasses(frame, lm)
        kept, info = rims.rims(img, kps, lm)
        print(f"\n[rims] frame {20 + 8 * k}: {info}")
        assert info["rims"] == 2, f"frame {20 + 8 * k}: {info}"
        eyes = openings(img.shape, lm)
        assert kept[rim].mean() >= 0.95, f"only {kept[rim].mean():.0%} of the rim kept"
        assert kept[lens & ~eyes].mean() >= 0.95, f"only {kept[lens & ~eyes].mean():.0%} of the lens kept"
        assert not kept[eyes].any(), "the eye openings are the swapper's"


def test_no_rim_without_glasses_or_on_lids_or_texture(ltx_faces):
    rng = np.random.default_rng(0)
    for k, (frame, kps, lm) in enumerate(ltx_faces):
        kept, info = rims.rims(frame, kps, lm)
        assert info["rims"] == 0 and not kept.any(), f"frame {20 + 8 * k} has no glasses: {info}"
        # lids drawn round each eye (make-up, a sculpted or closed eye): the eye's own outline
        lids = frame.copy()
        for sl in (slice(36, 42), slice(42, 48)):
            hull = cv2.convexHull(np.rint(lm[sl]).astype(np.int32))
            cv2.polylines(lids, [hull], True, (60, 30, 30), 1)
        assert rims.rims(lids, kps, lm)[1]["rims"] == 0, "a line on the lids read as a rim"
        # busy skin (stubble, pores, wrinkles) has edges at every radius and orientation
        busy = np.clip(frame.astype(np.float32) + rng.normal(0, 14, frame.shape), 0, 255).astype(np.uint8)
        assert rims.rims(busy, kps, lm)[1]["rims"] == 0, "skin texture read as a rim"


@pytest.fixture(scope="module")
def ltx_rims(tmp_path_factory):
    """ltx frames 20-23 with tinted gold-rimmed glasses drawn on, swapped by the classical swapper
    with the mask stack, with and without the rims rule (``wires`` stays on in both)."""
    lens_masks = []

    def draw(k, f, lm):
        img, rim, lens = tinted_glasses(f, lm, tint=0.2)
        lens_masks.append(lens & ~openings(f.shape, lm))
        return img, rim | wire_frame(f.shape[:2], lm)

    @contextmanager
    def without():
        keep = builtin.keep_rims
        builtin.keep_rims = lambda *args: None
        try:
            yield
        finally:
            builtin.keep_rims = keep

    frames, rim_masks, found, out = swap_composited(tmp_path_factory.mktemp("rims"), draw, 20, 4, {"without": without})
    return frames, rim_masks, lens_masks, out


def _kept(frames, results, masks):
    same = [np.abs(r.astype(np.int16) - f).max(-1) <= TOL for r, f in zip(results, frames)]
    return sum(int((m & s).sum()) for m, s in zip(masks, same)) / sum(int(m.sum()) for m in masks)


def test_the_stack_keeps_the_tinted_lens_and_its_rim(ltx_rims):
    frames, rim_masks, lens_masks, out = ltx_rims
    lens, lens_without = _kept(frames, out["stack"], lens_masks), _kept(frames, out["without"], lens_masks)
    rim, rim_without = _kept(frames, out["stack"], rim_masks), _kept(frames, out["without"], rim_masks)
    print(f"\n[rims] tinted lens kept {lens:.1%} ({lens_without:.1%} without the rule); "
          f"rim kept {rim:.1%} ({rim_without:.1%})")
    assert lens_without < 0.6, f"the stack without the rule already keeps {lens_without:.1%}: the test shows nothing"
    assert lens >= 0.9 and rim >= 0.95


def test_the_vote_keeps_what_most_of_the_window_found():
    q = np.array([0.0, 0.02, 0.44, 0.3])
    held = rims.vote([[q, None], [None, None], [q + 0.02, q]])
    assert np.allclose(held[0], q + 0.01) and held[1] is None      # 2 of 3 found / 1 of 3
    assert rims.vote([[q, q]]) [0] is not None                       # alone: its own find


def test_a_track_keeps_its_rim_through_a_frame_that_misses_it(ltx_faces):
    """Frame by frame, a rim missed on one frame of a track toggled its lens between the target's
    and the swap's (read as flicker); voted over the track's window it is held."""
    from swapline_core.masks import _Item
    from swapline_core.types import Face, SwapPatch

    frames, items, views = [], [], []
    for k, (frame, kps, lm) in enumerate(ltx_faces):
        frames.append(frame if k == 1 else tinted_glasses(frame, lm)[0])
        box = np.array([0, 0, frame.shape[1], frame.shape[0]], np.float32)
        face = Face(box, kps, 1.0, landmarks=lm, track_id=7)
        h, w = frame.shape[:2]
        patch = SwapPatch((0, 0, w, h), np.zeros((h, w, 3), np.float32), np.ones((h, w), np.float32))
        items.append(_Item(k, face, patch))
        views.append(builtin.skin_view(frames[-1], face.bbox, kps, k, 7, lm))
    assert views[1].rims == [None, None] and all(q is not None for q in views[0].rims), "the bare frame has no rim"
    builtin.keep_rims(items, views, views, 2, lambda i: 0)
    assert [it.info["rims"] for it in items] == [2, 2, 2]
    assert (items[1].parts["occlusion"] == 0).sum() > 0.5 * (items[0].parts["occlusion"] == 0).sum()
    alone = [_Item(k, it.face, it.patch) for k, it in enumerate(items)]
    builtin.keep_rims(alone, views, views, 0, lambda i: 0)                  # no window: each its own
    assert [it.info["rims"] for it in alone] == [2, 0, 2]
