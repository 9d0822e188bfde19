"""68-point landmarks from an InsightFace pack's 1k3d68.onnx, through insightface's own router
and Landmark class (the synthetic stand-in of devtools/synthetic_models.py: a fixed mean face plus a
small image-dependent term, so only geometry is checked, not landmark accuracy)."""
from __future__ import annotations

import json
import logging
import os
import shutil

import numpy as np
import pytest

from devtools.media import SAMPLES, rgb
from devtools.synthetic_models import MODEL_FILES, build_models
from swapline_core.backends.insightface_pack import LANDMARK_TASK, InsightFaceAnalyzer
from swapline_core.errors import MissingModelError

CPU = ["CPUExecutionProvider"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory.mktemp("synthetic-models"))


@pytest.fixture(scope="module")
def buffalo_l(models):
    return InsightFaceAnalyzer(str(models["detector"].parent), "CPU")


@pytest.fixture(scope="module")
def frames():
    import cv2

    cap = cv2.VideoCapture(str(SAMPLES / "kling_avatar_clip.mp4"))
    ok, bgr = cap.read()
    cap.release()
    assert ok
    return [rgb(SAMPLES / "target_reference.png"), np.ascontiguousarray(bgr[:, :, ::-1])]


def pack_of(tmp_path, models, roles, name="pack"):
    """A pack folder holding (links to) the given stand-ins."""
    pack = tmp_path / name
    pack.mkdir()
    for role in roles:
        os.link(models[role], pack / models[role].name)
    return pack


def test_buffalo_l_routes_1k3d68_to_the_landmark_model(buffalo_l, models):
    assert buffalo_l.supports_landmarks is True
    assert type(buffalo_l.landmarker).__name__ == "Landmark" and buffalo_l.landmarker.taskname == LANDMARK_TASK
    assert buffalo_l.landmarker.require_pose is False       # pose is unused, so not computed
    assert buffalo_l.providers["landmarks:1k3d68.onnx"] == CPU
    assert ("landmarks", str(models["landmark"])) in buffalo_l.model_files()
    assert [r for r, _ in buffalo_l.model_files()] == ["detector", "recognizer", "landmarks"]


def test_landmarks68_land_on_real_faces(buffalo_l, frames):
    faces = buffalo_l.detect(frames)
    assert all(len(fs) >= 1 for fs in faces)
    buffalo_l.landmarks68(frames, faces)
    for fs in faces:
        for f in fs:
            pts = f.landmarks
            assert pts.shape == (68, 2) and pts.dtype == np.float32 and np.isfinite(pts).all()
            x1, y1, x2, y2 = f.bbox
            tol = 0.15 * max(x2 - x1, y2 - y1)
            assert np.all((pts >= [x1 - tol, y1 - tol]) & (pts <= [x2 + tol, y2 + tol])), (f.bbox, pts)
            assert pts[36:48, 1].max() < pts[48:68, 1].min()          # eyes above the mouth
            assert pts[36:42, 0].mean() < pts[42:48, 0].mean()        # image-left eye first
            assert pts[17:27, 1].mean() < pts[36:48, 1].mean() < pts[30, 1] < pts[8, 1]  # brows, eyes, nose, chin
            eyes = np.stack([pts[36:42].mean(0), pts[42:48].mean(0)])
            err = np.linalg.norm(eyes - f.kps[:2], axis=1) / f.inter_ocular
            assert err.max() < 0.5, err                              # near the detector's own eyes


def test_landmarks68_is_deterministic_and_depends_on_the_image(buffalo_l, frames):
    faces = buffalo_l.detect(frames[:1])
    buffalo_l.landmarks68(frames[:1], faces)
    first = faces[0][0].landmarks.copy()
    buffalo_l.landmarks68(frames[:1], faces)
    assert np.array_equal(first, faces[0][0].landmarks)
    dark = [(frames[0] // 4).astype(np.uint8)]
    buffalo_l.landmarks68(dark, faces)                               # same box, other pixels
    moved = np.abs(faces[0][0].landmarks - first).max()
    assert 0 < moved < 0.05 * (faces[0][0].bbox[2] - faces[0][0].bbox[0])


def test_pack_without_1k3d68_has_no_landmarks(tmp_path, models, frames):
    analyzer = InsightFaceAnalyzer(str(pack_of(tmp_path, models, ["detector", "recognizer"])), "CPU")
    assert analyzer.supports_landmarks is False and analyzer.landmarker is None
    assert not any(k.startswith("landmarks:") for k in analyzer.providers)
    assert [r for r, _ in analyzer.model_files()] == ["detector", "recognizer"]
    faces = analyzer.detect(frames[:1])
    # callers (Detect Faces, Build Face Model, the classical swapper) check supports_landmarks
    # first; a direct call is a clear error naming the file
    with pytest.raises(MissingModelError, match="1k3d68.onnx"):
        analyzer.landmarks68(frames[:1], faces)
    assert all(f.landmarks is None for f in faces[0])


def _build_2d106(path):
    """2d106det.onnx's signature: 192x192 in, 212 = 106 x 2 out."""
    import torch

    from devtools.lib.nets import landmark_2d106_module
    from devtools.synthetic_models import _rename_values, export_onnx

    export_onnx(landmark_2d106_module(), (torch.zeros(1, 3, 192, 192),), path, input_names=["data"],
                output_names=["fc1"], dynamic_axes={"data": {0: "None"}, "fc1": {0: "None"}})
    _rename_values(path, {}, [212])


def test_2d106det_is_routed_but_not_used(tmp_path, models):
    pack = pack_of(tmp_path, models, ["detector", "recognizer"])
    _build_2d106(pack / "2d106det.onnx")
    from insightface.model_zoo import model_zoo

    assert model_zoo.get_model(str(pack / "2d106det.onnx"), providers=CPU).taskname == "landmark_2d_106"
    assert InsightFaceAnalyzer(str(pack), "CPU").supports_landmarks is False
    os.link(models["landmark"], pack / "1k3d68.onnx")
    analyzer = InsightFaceAnalyzer(str(pack), "CPU")
    assert analyzer.supports_landmarks and analyzer.landmarker.model_file.endswith("1k3d68.onnx")
    assert [r for r, _ in analyzer.model_files()] == ["detector", "recognizer", "landmarks"]


def manifest_pack(tmp_path, models, tasks: dict, name="manifest_pack"):
    pack = pack_of(tmp_path, models, ["detector", "recognizer", "landmark"], name)
    (pack / "MODEL.LICENSE").write_text("test stand-ins\n")
    (pack / "manifest.json").write_text(json.dumps(
        {"manifest_version": 2, "model_id": name, "license": "MODEL.LICENSE", "tasks": tasks}))
    return pack


BASE_TASKS = {"detection": {"file": "det_10g.onnx"}, "recognition": {"file": "w600k_r50.onnx"}}


def test_manifest_pack_with_a_landmark_task(tmp_path, models, frames):
    pack = manifest_pack(tmp_path, models, {**BASE_TASKS, LANDMARK_TASK: {"file": "1k3d68.onnx"}})
    analyzer = InsightFaceAnalyzer(str(pack), "CPU")
    assert analyzer.supports_landmarks and analyzer.providers["landmarks:1k3d68.onnx"] == CPU
    assert ("landmarks", str(pack / "1k3d68.onnx")) in analyzer.model_files()
    faces = analyzer.detect(frames[:1])
    analyzer.landmarks68(frames[:1], faces)
    assert faces[0][0].landmarks.shape == (68, 2)


@pytest.mark.parametrize("entry", [None, {"file": "missing.onnx"}, {"file": "w600k_r50.onnx"},
                                   {"file": "../1k3d68.onnx"}, {"file": "1k3d68.onnx", "sha256": "0" * 64}])
def test_manifest_pack_without_a_usable_landmark_task_still_loads(tmp_path, models, entry, caplog):
    tasks = dict(BASE_TASKS, **({LANDMARK_TASK: entry} if entry else {}))
    pack = manifest_pack(tmp_path, models, tasks)
    shutil.copy(models["landmark"], tmp_path / "1k3d68.onnx")   # outside the pack: never used
    with caplog.at_level(logging.WARNING, logger="swapline"):
        analyzer = InsightFaceAnalyzer(str(pack), "CPU")
    assert analyzer.detector is not None and analyzer.recognizer is not None
    assert analyzer.supports_landmarks is False
    assert ("no 68-point landmarks" in caplog.text) == (entry is not None)


def test_synthetic_pack_layout_is_the_documented_one():
    assert MODEL_FILES["landmark"] == "insightface/models/buffalo_l/1k3d68.onnx"
