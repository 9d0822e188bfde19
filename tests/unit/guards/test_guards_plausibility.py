"""Plausibility guards on real faces: the dance clip's giant face made impossible, implausible
landmarks, no skin; verdicts independent of chunking; history reset at cuts."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from guard_media import KLING, analyzer, clip_faces

from swapline_core.backends.classical import ClassicalSwapper
from swapline_core.guards import GuardOptions, check_face, reason_category, screen
from swapline_core.guards.plausibility import shape_residual
from swapline_core.swap.chunk import SwapOptions, swap_chunk
from swapline_core.types import ClipContext, FaceSet, FrameFaces, SourceIdentity

N = 16


@pytest.fixture(scope="module")
def kling():
    frames, faces = clip_faces(KLING, N)
    assert all(len(fs) == 1 for fs in faces)
    return frames, faces


def _faceset(frames, faces) -> FaceSet:
    h, w = frames[0].shape[:2]
    return FaceSet([FrameFaces(i, list(fs), w, h) for i, fs in enumerate(faces)], analyzer())


def _scaled(face, factor: float, shift=(0.0, 0.0)):
    """The same detection blown up about its box centre (and moved): what a detector glitch or a
    mis-assigned track hands the swapper. Landmarks are dropped: the stage recomputes them."""
    b = np.asarray(face.bbox, np.float32)
    c = (b[:2] + b[2:]) / 2 + np.asarray(shift, np.float32)
    old_c = (b[:2] + b[2:]) / 2
    box = np.concatenate([c + (b[:2] - old_c) * factor, c + (b[2:] - old_c) * factor]).astype(np.float32)
    kps = (c + (face.kps - old_c) * factor).astype(np.float32)
    return face.copy(bbox=box, kps=kps, landmarks=None)


def _source(frames, faces):
    # Another frame of the clip as the source identity: the swap itself is real, and any face it
    # pastes changes pixels, so "untouched" below is a real check.
    f = faces[-1][0]
    return SourceIdentity(np.zeros(128, np.float32), "dlib_resnet_v1", frames[-1], f)


@pytest.mark.parametrize("factor,shift", [(4.0, (0.0, 60.0)), (1.0, (120.0, 0.0))], ids=["4x-larger", "displaced"])
def test_giant_or_jumping_face_is_refused_and_its_frame_untouched(kling, factor, shift):
    frames, faces = kling
    faces = [[f.copy() for f in fs] for fs in faces]
    k = 8
    faces[k] = [_scaled(faces[k][0], factor, shift)]
    fset = _faceset(frames, faces)
    chunk = list(range(4, 12))            # the chunk holding the glitch, with history around it
    res = swap_chunk(ClassicalSwapper(), analyzer(), [frames[i] for i in chunk], [faces[i] for i in chunk],
                     _source(frames, faces), SwapOptions(), context=ClipContext(fset, chunk[0]))
    rec = res.records[chunk.index(k)][0]
    assert rec["status"] == "skipped" and rec["reason"].startswith("track jump"), rec
    assert np.array_equal(res.frames[chunk.index(k)], frames[k])
    swapped = [i for i, row in zip(chunk, res.records) if row[0]["status"] == "swapped"]
    assert len(swapped) >= 5, res.records          # its neighbours are real faces and do get swapped
    for i in swapped:
        assert not np.array_equal(res.frames[chunk.index(i)], frames[i])


def test_verdicts_do_not_depend_on_chunking(kling):
    frames, faces = kling
    faces = [[f.copy() for f in fs] for fs in faces]
    faces[9] = [_scaled(faces[9][0], 3.0)]
    ctx = _faceset(frames, faces)
    whole = screen(ClassicalSwapper(), frames, faces, GuardOptions(), ClipContext(ctx, 0))
    tail = screen(ClassicalSwapper(), frames[8:], faces[8:], GuardOptions(), ClipContext(ctx, 8))
    assert whole[8:] == tail
    assert reason_category(whole[9][0]) == "track jump"
    assert all(v == [None] for i, v in enumerate(whole) if i not in (4, 9)), whole


def test_history_resets_at_a_cut(kling):
    frames, faces = kling
    # Frames 8-10 are a cut-in to a close-up: faces twice the size, then back to the wide shot.
    faces = [[_scaled(fs[0], 2.0)] if 8 <= i <= 10 else [f.copy() for f in fs] for i, fs in enumerate(faces)]
    opts = GuardOptions(min_skin=0.0, max_shape_residual=0.0)   # only geometry and history matter here
    sw = ClassicalSwapper()
    fset = _faceset(frames, faces)
    no_cut = check_face(sw, frames[9], faces[9][0], opts, ClipContext(fset, 0), 9)
    with_cut = check_face(sw, frames[9], faces[9][0], opts, ClipContext(fset, 0, cuts=(8, 11)), 9)
    assert no_cut is not None and reason_category(no_cut) == "track jump"
    assert with_cut is None


def test_implausible_landmarks_are_refused(kling):
    frames, faces = kling
    frame, face = frames[0], faces[0][0]
    sw, opts = ClassicalSwapper(), GuardOptions()
    assert check_face(sw, frame, face, opts) is None
    upside = face.copy(kps=face.kps[[3, 4, 2, 0, 1]])             # mouth where the eyes are
    assert reason_category(check_face(sw, frame, upside, opts)) == "implausible landmarks"
    rng = np.random.default_rng(0)
    shuffled = face.copy(landmarks=face.landmarks[rng.permutation(68)])
    why = check_face(sw, frame, shuffled, opts)
    assert reason_category(why) == "implausible landmarks" and "shape residual" in why
    far = face.copy(landmarks=face.landmarks + np.array([0.0, 3.0 * (face.bbox[3] - face.bbox[1])], np.float32))
    assert reason_category(check_face(sw, frame, far, opts)) == "implausible landmarks"
    tiny_box = face.copy(bbox=np.array([*face.kps[0], *(face.kps[0] + 2)], np.float32))
    assert reason_category(check_face(sw, frame, tiny_box, opts)) == "implausible landmarks"
    # Real faces of the clip sit well inside the residual limit.
    assert max(shape_residual(fs[0].landmarks) for fs in faces) < 0.3


def test_a_paste_region_without_skin_is_refused(kling):
    frames, faces = kling
    frame, face = frames[0], faces[0][0]
    h = float(face.bbox[3] - face.bbox[1])
    # The same face geometry moved down onto the white turtleneck / red jacket.
    moved = face.copy(bbox=face.bbox + np.array([0, 1.7 * h, 0, 1.7 * h], np.float32),
                      kps=face.kps + np.array([0, 1.7 * h], np.float32),
                      landmarks=face.landmarks + np.array([0, 1.7 * h], np.float32))
    why = check_face(ClassicalSwapper(), frame, moved, GuardOptions())
    assert why is not None and reason_category(why) == "no skin", why
    assert check_face(ClassicalSwapper(), frame, moved, GuardOptions(min_skin=0.0)) is None


def test_guards_off_let_everything_through(kling):
    frames, faces = kling
    bad = [[_scaled(faces[0][0], 4.0).copy(kps=faces[0][0].kps[[3, 4, 2, 0, 1]])]]
    assert screen(ClassicalSwapper(), frames[:1], bad, GuardOptions(enabled=False)) == [[None]]
    assert screen(ClassicalSwapper(), frames[:1], bad, GuardOptions()) != [[None]]


def test_skin_guard_on_the_face_box_equals_the_frame_sized_region():
    """The skin guard draws its region on a canvas the size of the face box (speed): the same
    pixels as the frame-sized ``paste_region``, faces at and past the frame edges included."""
    from swapline_core.guards.plausibility import paste_region, skin_fraction
    from swapline_core.types import Face

    rng = np.random.default_rng(8)
    frame = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    for t in range(200):
        c, s = rng.uniform(-30, 190, 2), rng.uniform(2, 120)
        lm = None if t % 2 else (c + rng.normal(0, s / 3, (68, 2))).astype(np.float32)
        face = Face(bbox=np.array([c[0] - s / 2, c[1] - s / 2, c[0] + s / 2, c[1] + 0.6 * s], np.float32),
                    kps=np.tile(c, (5, 1)).astype(np.float32), score=1.0, landmarks=lm)
        m = paste_region(face, frame.shape)
        ys, xs = np.nonzero(m)
        want = 0.0
        if len(ys):
            ycc = cv2.cvtColor(frame, cv2.COLOR_RGB2YCrCb).astype(np.int16)
            skin = (ycc[..., 1] >= 133) & (ycc[..., 1] <= 180) & (ycc[..., 2] >= 70) & (ycc[..., 2] <= 135) \
                & (ycc[..., 0] >= 30)
            want = float(skin[m > 0].mean())
        assert skin_fraction(frame, face) == pytest.approx(want, abs=1e-12)
