"""MediaPipe's palm detector and hand landmark model (backends/hands.py) on real frames, real models.

The model files ship in models/mediapipe/ (taken from the mediapipe 0.10.21 wheel;
scripts/fetch_mesh_models.py restores them): a missing file FAILS these tests with what to do, it
does not skip them. The hand clip is the development set's woman in a coat (video_bernini_r_video_editing-1,
a before/after pair side by side, her hand touching her chin on frames 7-13, then lower at her
neck); the sample clip's talking head has no hand near the face.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from swapline_core.backends import hands as H
from swapline_core.backends import mesh_models as mm
from swapline_core.backends.mesh_analyzer import MeshAnalyzer
from swapline_core.video.read import iter_frames

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "assets" / "samples" / "kling_avatar_clip.mp4"
HAND_CLIP = "video_bernini_r_video_editing-1"
HAND_FRAMES = (8, 10, 12)         # the hand touching her chin, in both halves of the frame


def bernini_frames() -> list[np.ndarray]:
    from bench.generalization import devset

    path = devset.fetch_clips([devset.Clip(HAND_CLIP, "woman in a coat")])[0]
    return [f for _, f in iter_frames(path)]


@pytest.fixture(scope="module")
def detector():
    if mm.missing_or_changed(names=mm.HANDS):
        pytest.fail(mm.describe_missing(mm.missing_or_changed(names=mm.HANDS)))
    return H.HandDetector()


@pytest.fixture(scope="module")
def analyzer():
    return MeshAnalyzer()


@pytest.fixture(scope="module")
def bernini(analyzer):
    frames = bernini_frames()
    return frames, analyzer.detect(frames)


def test_model_files_present_and_checked():
    bad = mm.missing_or_changed(names=mm.HANDS)
    assert not bad, mm.describe_missing(bad)
    mm.check_hands()
    assert {mm.FILES[n].role for n in mm.HANDS} == {"palm_detection_full", "hand_landmark_lite"}


def test_missing_model_files_name_files_folder_and_command(tmp_path):
    with pytest.raises(mm.MeshModelsMissing) as err:
        H.HandDetector(model_dir=tmp_path)
    msg = str(err.value)
    assert mm.PALM in msg and mm.HAND in msg and str(tmp_path) in msg
    assert "scripts/fetch_mesh_models.py" in msg and "mediapipe==0.10.21" in msg
    assert "mediapipe/modules/palm_detection/palm_detection_full.tflite" in msg


def test_altered_model_file_is_refused(tmp_path):
    for name in mm.HANDS:
        shutil.copy(mm.DEFAULT_DIR / name, tmp_path / name)
    data = bytearray((tmp_path / mm.HAND).read_bytes())
    data[5000] ^= 0xFF
    (tmp_path / mm.HAND).write_bytes(bytes(data))
    with pytest.raises(mm.MeshModelsMissing, match=mm.HAND):
        H.HandDetector(model_dir=tmp_path)


def test_fetch_is_idempotent_when_every_file_is_there(tmp_path):
    """With every file present and checked, the fetch script neither downloads nor rewrites."""
    sys.path.insert(0, str(REPO / "scripts"))
    import fetch_mesh_models

    for name in mm.FILES:
        shutil.copy(mm.DEFAULT_DIR / name, tmp_path / name)
    before = {n: (tmp_path / n).stat().st_mtime_ns for n in mm.FILES}
    out = fetch_mesh_models.fetch(tmp_path, python="/nonexistent/python")    # a download would fail
    assert {p.name for p in out} == set(mm.FILES) and {mm.PALM, mm.HAND} <= set(before)
    assert {n: (tmp_path / n).stat().st_mtime_ns for n in mm.FILES} == before


def test_anchor_layout_matches_the_model_output():
    assert H.PALM_ANCHORS.shape == (2016, 2)
    it, _ = mm.interpreter(mm.PALM)
    assert tuple(it.get_output_details()[0]["shape"]) == (1, 2016, 18)
    # stride 8 first (24 x 24 cells, 2 anchors each), then 12 x 12 cells with 6 each
    assert np.allclose(H.PALM_ANCHORS[:2], [[0.5 / 24, 0.5 / 24]] * 2)
    assert np.allclose(H.PALM_ANCHORS[1152], [0.5 / 12, 0.5 / 12])


def test_batched_palm_detection_equals_one_by_one(bernini, detector):
    """The palm graph flattens a batch into its anchor axis; split_batch restores each item."""
    frames, faces = bernini
    f = frames[HAND_FRAMES[0]]
    batch = np.stack([H.region_input(f, H.region(x.bbox)) for x in faces[HAND_FRAMES[0]]])
    assert len(batch) >= 2
    raw, logits = mm.run(mm.PALM, batch)
    raw, logits = H.split_batch(raw, len(batch)), H.split_batch(logits, len(batch))
    for n in range(len(batch)):
        one_raw, one_logits = mm.run(mm.PALM, batch[n:n + 1])
        assert np.allclose(raw[n], one_raw[0], atol=1e-4) and np.allclose(logits[n], one_logits[0], atol=1e-4)


def test_hands_of_several_frames_batched_equal_one_frame_at_a_time(bernini, detector):
    """hands_in runs every frame's squares and hand crops in shared batches (the mask stack's
    per-chunk call): the same hands as frame by frame, to the batch's float rounding."""
    frames, faces = bernini
    picks = [i for i in range(len(frames)) if faces[i]][:6] + list(HAND_FRAMES)
    together = detector.hands_in([frames[i] for i in picks], [[x.bbox for x in faces[i]] for i in picks])
    assert sum(len(h) for h in together) > 0
    for i, got in zip(picks, together):
        alone = detector.hands(frames[i], [x.bbox for x in faces[i]])
        assert len(got) == len(alone), i
        for a, b in zip(got, alone):
            assert np.allclose(a.points, b.points, atol=0.05) and abs(a.presence - b.presence) < 1e-3, i
    assert detector.hands_in([], []) == []


def test_finds_the_hand_under_the_chin(bernini, detector):
    frames, faces = bernini
    for i in HAND_FRAMES:
        boxes = [x.bbox for x in faces[i]]
        hands = detector.hands(frames[i], boxes)
        for half in (0, 175):                       # the clip's before and after halves
            face = next(b for b in boxes if half <= b[0] < half + 175)
            size = max(face[2] - face[0], face[3] - face[1])
            near = [h for h in hands if half <= h.box[0] < half + 175]
            assert len(near) == 1, (i, half, [(h.box, h.presence) for h in hands])
            h = near[0]
            assert h.presence >= 0.9 and h.score >= 0.5, (i, h.presence, h.score)
            # under the chin: top of the hand within a fifth of a face of the box's bottom edge,
            # horizontally under the face, at the face's scale
            assert abs(h.box[1] - face[3]) < 0.2 * size, (i, h.box, face)
            assert face[0] - 0.3 * size < h.points[:, 0].mean() < face[2] + 0.3 * size
            assert 0.3 * size < h.size < 0.7 * size, (i, h.size, size)
            # MediaPipe's topology: the wrist is the lowest point of a hand held up to the chin
            assert h.points[0, 1] >= np.percentile(h.points[:, 1], 90)


def test_no_hand_near_the_sample_clips_face(analyzer, detector):
    assert SAMPLE.is_file(), SAMPLE
    frames = [f for i, (_, f) in enumerate(iter_frames(SAMPLE)) if i % 3 == 0]
    faces = analyzer.detect(frames)
    assert all(len(fs) == 1 for fs in faces)
    # the palm detector fires on the face itself (glasses, mouth) and the landmark model's presence
    # rejects nearly all of it; what passes is far smaller than a hand at the face's depth, which
    # masks.hands.MIN_SCALE drops
    found = []
    for f, fs in zip(frames, faces):
        size = max(fs[0].bbox[2] - fs[0].bbox[0], fs[0].bbox[3] - fs[0].bbox[1])
        found += [(h.box.round().tolist(), h.size / size) for h in detector.hands(f, [fs[0].bbox])]
    assert all(ratio < 0.2 for _, ratio in found), found


def test_no_faces_no_work(detector):
    frame = np.zeros((720, 1280, 3), np.uint8)
    assert detector.hands(frame, []) == []
    with pytest.raises(ValueError, match="uint8"):
        detector.hands(frame.astype(np.float32), [[0, 0, 10, 10]])


def test_region_reads_around_the_face():
    x0, y0, side = H.region([100, 100, 200, 220])
    assert side == pytest.approx(H.REGION * 120)
    assert x0 < 100 and y0 < 100 and x0 + side > 200 and y0 + side > 220 + 0.5 * 120


def test_region_input_places_the_window_outside_black():
    """An area-averaged large window lands where a plain warp would put it; outside the frame is
    black (MediaPipe's BORDER_ZERO)."""
    import cv2

    frames = bernini_frames()
    img = cv2.resize(frames[10], (1280, 1280), interpolation=cv2.INTER_CUBIC)[280:1000]     # 720p-sized
    for win in ((100.3, 50.7, 600.0), (-100.0, -50.0, 500.0), (1000.0, 500.0, 400.0), (10.0, 10.0, 150.0)):
        got = H.region_input(img, win)
        s = H.PALM_INPUT / win[2]
        warp = cv2.warpAffine(img, np.array([[s, 0, -win[0] * s], [0, s, -win[1] * s]]), (192, 192),
                              flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT) / 255.0
        assert got.shape == (192, 192, 3) and got.dtype == np.float32 and 0 <= got.min() and got.max() <= 1
        assert np.abs(got - warp).mean() < 0.02, win
    # fractional corners just inside the frame, every size: never off the 192 x 192 canvas
    for side in np.linspace(193.0, 1500.0, 40):
        assert H.region_input(img, (10.9, 5.9, float(side))).shape == (192, 192, 3)
    left = H.region_input(img, (-640.0, 0.0, 1280.0))
    assert not left[:, :90].any() and left[:, 100:].any()


def test_the_hand_models_are_in_the_catalog_as_commercially_usable():
    from swapline_core.backends import mesh_models as mm
    from swapline_core.backends.catalog import check_commercial, known

    for name in mm.HANDS:
        entry = known(name)
        assert entry is not None and entry.commercial == "yes" and "Apache-2.0" in entry.licence, name
        assert entry.sha256 == mm.FILES[name].sha256 and entry.size_bytes == mm.FILES[name].size, name
    check_commercial([(n, n) for n in mm.HANDS])          # raises if any is not commercially usable
