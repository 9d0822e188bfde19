"""Batched inference gives what one-at-a-time inference gives (issue 33), on CPU, with the
exact-size stand-ins (devtools/standins; random weights, real architectures):

- ``BatchRun``: batch 1, batch N and IO binding give identical outputs, in item order;
- the recogniser's batched embeddings equal insightface's own ``get_feat`` face by face;
- SCRFD on a frame batch (a detector exported with a batch axis) finds exactly what insightface's
  per-frame ``SCRFD.detect`` finds on the same frames;
- the swapper family runner: a chunk's faces in one batch equal the faces run one by one;
- provider choices: TensorRT asks for an engine cache, and a missing provider is a clear error.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from devtools.media import HANKS, T1, insightface_image, rgb
from devtools.standins.export import build as build_standins
from swapline_core.backends.onnx_batch import BatchRun
from swapline_core.backends.onnx_sessions import create_session, providers_for, split_choice, with_engine_cache


@pytest.fixture(scope="module")
def standins():
    return build_standins(("arcface_r50", "scrfd_10g_kps", "inswapper_128"))


def test_batch_run_is_order_preserving_and_binding_changes_nothing(standins):
    sess = create_session(str(standins["arcface_r50"]), "CPU")
    x = np.random.default_rng(1).random((5, 3, 112, 112)).astype(np.float32)
    one = BatchRun(sess, max_batch=1)({"input": x})[0]
    many = BatchRun(sess, max_batch=4)({"input": x})[0]          # 4 + 1: a ragged last batch
    bound_run = BatchRun(sess, max_batch=5, io_binding=True)
    bound = bound_run({"input": x})[0]
    assert one.shape == (5, 512)
    assert np.abs(many - one).max() <= 1e-4 * np.abs(one).max()
    assert np.abs(bound - one).max() <= 1e-4 * np.abs(one).max()
    # rows stay with their items: each row equals that item run alone
    alone = sess.run(None, {"input": x[3:4]})[0]
    np.testing.assert_allclose(many[3:4], alone, rtol=0, atol=1e-4 * np.abs(one).max())
    rep = bound_run.report()
    assert rep == {"max_batch": 5, "largest_batch_run": 5, "mean_batch": 5.0, "batch_fixed_by_graph": False,
                   "io_binding": True}


def _pack(tmp_path: Path, standins, exact_detector: bool) -> Path:
    """The suite's buffalo_l stand-ins with the exact-size recogniser (and SCRFD-10G) put in."""
    from devtools.synthetic_models import build_models

    files = build_models(tmp_path / "models")
    swaps = {"recognizer": "arcface_r50", **({"detector": "scrfd_10g_kps"} if exact_detector else {})}
    for role, name in swaps.items():
        files[role].unlink()              # a hard link into the synthetic cache: replace, never write
        try:
            os.link(standins[name], files[role])
        except OSError:                   # tmp_path on another file system than the cache
            shutil.copy(standins[name], files[role])
    return files["detector"].parent


def test_batched_embeddings_equal_insightface_get_feat(tmp_path, standins):
    from swapline_core.backends.insightface_pack import InsightFaceAnalyzer
    from swapline_core.faces.align import warp_crops

    an = InsightFaceAnalyzer(str(_pack(tmp_path, standins, exact_detector=False)), "CPU", 640, 0.5)
    img = rgb(insightface_image(T1))
    faces = an.detect([img])
    assert len(faces[0]) >= 4
    an.embed([img], faces)
    crops, _ = warp_crops(img, faces[0], 112, "arcface")
    for f, c in zip(faces[0], crops):
        ref = an.recognizer.get_feat([np.ascontiguousarray(c[:, :, ::-1])])[0]
        np.testing.assert_allclose(f.embedding, ref / np.linalg.norm(ref), atol=1e-5)
    assert an.batching["recognizer:w600k_r50.onnx"].largest == len(faces[0])


def test_scrfd_on_a_frame_batch_equals_per_frame_detect(tmp_path, standins):
    from swapline_core.backends.insightface_pack import InsightFaceAnalyzer

    an = InsightFaceAnalyzer(str(_pack(tmp_path, standins, exact_detector=True)), "CPU", 640, 0.5)
    assert an.det_runner is not None, "a detector exported with a batch axis takes frame batches"
    frames = [rgb(insightface_image(T1)), rgb(insightface_image(HANKS)),
              np.full((360, 640, 3), 90, np.uint8)]
    scores = an.det_runner({an.detector.input_name: np.zeros((1, 3, 640, 640), np.float32)},
                           an.detector.output_names[:1])[0]
    an.det_thresh = float(np.quantile(scores, 0.999))   # random weights: keep a few dozen candidates
    batched = an.detect(frames)
    assert an.det_runner.largest == 3
    assert sum(len(f) for f in batched) > 0
    for img, got in zip(frames, batched):
        det, kps = an.detector.detect(np.ascontiguousarray(img[:, :, ::-1]), max_num=0, det_thresh=an.det_thresh)
        order = np.argsort(-det[:, 4], kind="stable")
        assert len(got) == len(det)
        np.testing.assert_allclose(np.array([f.bbox for f in got]).reshape(-1, 4), det[order, :4], atol=1e-3)
        np.testing.assert_allclose(np.array([f.kps for f in got]).reshape(-1, 5, 2), kps[order], atol=1e-3)


def test_swapper_chunk_in_one_batch_equals_face_by_face(standins):
    from swapline_core.backends.inswapper import InSwapper

    sw = InSwapper(str(standins["inswapper_128"]), "CPU")
    assert not sw.runner.fixed
    rng = np.random.default_rng(2)
    crops = rng.integers(0, 255, (3, 128, 128, 3), dtype=np.uint8)
    src = rng.standard_normal((3, 512)).astype(np.float32)
    together = sw.run_crops(crops, src)
    assert sw.runner.largest == 3
    sw.runner.max_batch = 1
    one_by_one = sw.run_crops(crops, src)
    assert np.abs(together - one_by_one).max() < 0.05      # 0..255 scale
    assert sw.runner.report()["largest_batch_run"] == 3 and sw.runner.runs >= 4


def test_provider_choices(tmp_path):
    import onnxruntime as ort

    assert split_choice("TensorRT fp16:/a/b") == ("TensorRT fp16", "/a/b")
    assert split_choice("CUDA") == ("CUDA", None)
    assert with_engine_cache("TensorRT", "/c") == "TensorRT:/c"
    assert with_engine_cache("CPU", "/c") == "CPU"
    assert providers_for("CPU") == ["CPUExecutionProvider"]
    if "TensorrtExecutionProvider" not in ort.get_available_providers():
        with pytest.raises(RuntimeError, match="TensorrtExecutionProvider.*onnxruntime-gpu"):
            providers_for(f"TensorRT fp16:{tmp_path}")
    else:
        name, opts = providers_for(f"TensorRT fp16:{tmp_path}")[0]
        assert opts == {"trt_engine_cache_enable": True, "trt_engine_cache_path": str(tmp_path),
                        "trt_fp16_enable": True}
    with pytest.raises(ValueError, match="unknown provider choice"):
        providers_for("ROCm")


def test_batched_68_point_landmarks_equal_insightface_landmark_get(tmp_path, standins):
    from swapline_core.backends.insightface_pack import InsightFaceAnalyzer

    an = InsightFaceAnalyzer(str(_pack(tmp_path, standins, exact_detector=False)), "CPU", 640, 0.5)
    frames = [rgb(insightface_image(T1)), rgb(insightface_image(HANKS))]
    faces = an.detect(frames)
    an.landmarks68(frames, faces)
    n = sum(len(f) for f in faces)
    assert n >= 5 and an.batching["landmarks:1k3d68.onnx"].largest == n
    for img, fs in zip(frames, faces):
        bgr = np.ascontiguousarray(img[:, :, ::-1])
        for f in fs:
            ref = an.landmarker.get(bgr, _Face(bbox=np.asarray(f.bbox, np.float32)))[-68:, :2]
            np.testing.assert_allclose(f.landmarks, ref, atol=1e-3)


class _Face(dict):
    """insightface's Face: a dict whose keys are also attributes (what Landmark.get reads and writes)."""
    __getattr__ = dict.__getitem__
