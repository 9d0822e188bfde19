"""Core pieces without models: alignment, paste-back, selection, face models, layers, tracking."""
from __future__ import annotations

import numpy as np
import pytest

from swapline_core.faces import align, paste, select
from swapline_core.faces.tracking import OneEuro, iou
from swapline_core.types import Face, SourceIdentity, SwapPatch, as_rgb_uint8, l2_normalise
from swapline_core.video.frames import apply_layer_chunk, encode_diff_chunk, encode_layer_chunk
from swapline_core.video.store import ChunkStore

KPS = np.array([[60, 70], [100, 68], [80, 90], [64, 112], [98, 110]], np.float32)


def face(x=40, y=40, s=80, kps=KPS, emb=None) -> Face:
    return Face(bbox=np.array([x, y, x + s, y + s], np.float32), kps=kps.copy(), score=0.99, embedding=emb)


def test_umeyama_matches_insightface_estimate_norm():
    from insightface.utils import face_align

    for size in (112, 128, 256, 512):
        ours = align.estimate_norm(KPS, size)
        theirs = face_align.estimate_norm(KPS, size)
        assert np.allclose(ours, theirs, atol=1e-3), size


def test_crops_land_keypoints_on_template():
    img = np.random.default_rng(0).integers(0, 255, (200, 200, 3), np.uint8)
    crops, mats = align.warp_crops(img, [face()], 112)
    assert crops.shape == (1, 112, 112, 3)
    assert np.abs(align.transform_points(KPS, mats[0]) - align.template(112)).max() < 3.0


def test_paste_leaves_pixels_outside_mask_bit_identical():
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 255, (160, 200, 3), np.uint8)
    _, mats = align.warp_crops(frame, [face()], 128)
    mask = paste.crop_mask(128, "ellipse", erode=0.02, blur=0.1)
    patch = paste.crop_to_patch(frame.shape[:2], np.full((128, 128, 3), 255.0, np.float32), mask, mats[0])
    out = paste.apply_patches(frame, [patch])
    full = paste.union_mask(frame.shape[:2], [patch])
    assert np.array_equal(out[full == 0], frame[full == 0])
    assert out[full > 0.99].min() >= 250
    assert full.max() == pytest.approx(1.0) and (full > 0).mean() < 0.5


def test_patch_clipped_at_frame_border():
    frame = np.zeros((60, 60, 3), np.uint8)
    f = face(x=-30, y=-30, kps=KPS - 70)
    _, mats = align.warp_crops(frame, [f], 128)
    p = paste.crop_to_patch(frame.shape[:2], np.ones((128, 128, 3), np.float32), paste.crop_mask(128), mats[0])
    assert p is None or (p.region[0] >= 0 and p.region[1] >= 0 and p.region[2] <= 60 and p.region[3] <= 60)


def test_selection_modes():
    ref = l2_normalise(np.array([1, 0, 0], np.float32))
    faces = [face(x=200, emb=l2_normalise(np.array([0, 1, 0], np.float32))),
             face(x=10, s=120, emb=l2_normalise(np.array([0.9, 0.1, 0], np.float32))),
             face(x=100, s=40, emb=l2_normalise(np.array([0.5, 0.5, 0.7], np.float32)))]
    chosen, sims = select.select(faces, "identity", ref, threshold=0.5)
    assert chosen == [1] and sims[1] > 0.9
    assert select.select(faces, "largest")[0] == [1]
    assert select.select(faces, "reading_order", indices="0,2")[0] == [1, 0]
    assert select.select(faces, "index", indices="1-2", max_faces=0)[0] == [1, 2]
    assert select.select(faces, "identity", ref, threshold=0.999)[0] == []
    with pytest.raises(ValueError):
        select.select(faces, "gender_female")


def test_face_model_roundtrip(tmp_path):
    from swapline_core.faces import identity as face_model

    img = np.zeros((50, 50, 3), np.uint8)
    f = face(emb=l2_normalise(np.ones(8, np.float32)))
    f.landmarks = np.zeros((68, 2), np.float32)
    fm = face_model.build([img, img], [f, f], "test-rec")
    face_model.save(fm, str(tmp_path / "a.safetensors"))
    back = face_model.load(str(tmp_path / "a.safetensors"))
    assert back.recognizer == "test-rec" and np.allclose(back.embedding, fm.embedding)
    assert back.face.landmarks.shape == (68, 2) and back.metadata["count"] == 2
    (tmp_path / "b.safetensors").write_bytes(b"junk")
    with pytest.raises(Exception, match="b.safetensors"):
        face_model.load(str(tmp_path / "b.safetensors"))


def test_layers_store_only_changed_pixels_and_replay_exactly(tmp_path):
    rng = np.random.default_rng(2)
    frames = [rng.integers(0, 255, (40, 50, 3), np.uint8) for _ in range(3)]
    results = [f.copy() for f in frames]
    results[1][10:20, 5:15] = 7
    patch = SwapPatch((5, 10, 15, 20), np.zeros((10, 10, 3), np.float32), np.ones((10, 10), np.float32))
    store = ChunkStore(tmp_path, "k")
    store.save(0, encode_layer_chunk(frames, results, [[], [patch], []]))
    replayed = apply_layer_chunk(frames, store.load(0))
    assert all(np.array_equal(a, b) for a, b in zip(replayed, results))
    diff = encode_diff_chunk(results, frames)
    assert all(np.array_equal(a, b) for a, b in zip(apply_layer_chunk(results, diff), frames))
    assert store.done_chunks() == [0] and not list(tmp_path.glob("k/.tmp-*"))


def test_layers_keep_only_changed_pixels_and_the_store_deflates(tmp_path):
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 255, (400, 400, 3), np.uint8)]
    result = frames[0].copy()
    result[150:250, 150:250] = rng.integers(0, 255, (100, 100, 3), np.uint8)   # a swapped face
    patch = SwapPatch((50, 50, 350, 350), np.zeros((300, 300, 3), np.float32), np.ones((300, 300), np.float32))
    arrays = encode_layer_chunk(frames, [result], [[patch]])
    layer = arrays["u0"]                 # row-filtered (PNG "Up"): the margin's zeros stay zeros
    assert layer.shape == (300, 300, 3) and not layer[:90].any()   # the unchanged margin is not kept
    assert np.array_equal(np.cumsum(layer, axis=0, dtype=np.uint8)[100:200, 100:200], result[150:250, 150:250])
    store = ChunkStore(tmp_path, "k")
    store.save(0, arrays)
    assert store.path(0).stat().st_size < 0.3 * layer.nbytes         # ~the changed 100x100 only
    assert np.array_equal(apply_layer_chunk(frames, store.load(0))[0], result)
    # a chunk an earlier version wrote uncompressed still loads
    np.savez(store.path(1), **arrays)
    assert np.array_equal(apply_layer_chunk(frames, store.load(1))[0], result)
    # and one written before the row filter (raw pixels under "p")
    raw = {k: v for k, v in arrays.items() if k != "u0"}
    raw["p0"] = np.cumsum(layer, axis=0, dtype=np.uint8)
    np.savez(store.path(2), **raw)
    assert np.array_equal(apply_layer_chunk(frames, store.load(2))[0], result)


def test_one_euro_smooths_jitter_but_follows_motion():
    rng = np.random.default_rng(3)
    f = OneEuro(min_cutoff=0.5, fps=30)
    still = [f(np.array([100.0]) + rng.normal(0, 2, 1), 80.0)[0] for _ in range(60)]
    assert np.std(still[20:]) < 1.0
    g = OneEuro(min_cutoff=0.5, fps=30)
    moving = [g(np.array([100.0 + 5 * t]), 80.0)[0] for t in range(60)]
    assert abs(moving[-1] - (100 + 5 * 59)) < 15


def test_iou_and_image_coercion():
    a = np.array([0, 0, 10, 10], np.float32)
    assert iou(a, a) == pytest.approx(1.0) and iou(a, a + 20) == 0.0
    assert as_rgb_uint8(np.zeros((4, 5), np.uint8)).shape == (4, 5, 3)
    assert as_rgb_uint8(np.ones((4, 5, 4), np.float32)).max() == 255
    with pytest.raises(ValueError):
        as_rgb_uint8(np.zeros((4, 5, 2)))


def test_inswapper_rejects_wrong_signature(tmp_path):
    from devtools.synthetic_models import build_bad_models
    from swapline_core.backends.inswapper import InSwapper
    from swapline_core.errors import BadModelError

    bad = build_bad_models(tmp_path)
    path = next(p for p in (bad.values() if isinstance(bad, dict) else bad) if str(p).endswith("not_a_swapper.onnx"))
    with pytest.raises(BadModelError, match="not_a_swapper.onnx"):
        InSwapper(str(path))


def test_inswapper_needs_arcface_identity(models_dir):
    from swapline_core.backends.inswapper import InSwapper
    from swapline_core.errors import SwaplineError

    sw = InSwapper(str(models_dir / "insightface" / "inswapper_128.onnx"), "CPU")
    dlib_like = SourceIdentity(embedding=l2_normalise(np.ones(128, np.float32)), recognizer="dlib_resnet_v1")
    with pytest.raises(SwaplineError, match="512-d"):
        sw.swap([np.zeros((200, 200, 3), np.uint8)], [[face()]], dlib_like)
    src = SourceIdentity(embedding=l2_normalise(np.ones(512, np.float32)), recognizer="x")
    frame = np.random.default_rng(4).integers(0, 255, (200, 200, 3), np.uint8)
    patches = sw.swap([frame, frame], [[face()], []], src)
    assert len(patches[0]) == 1 and patches[1] == []
