"""The synthetic stand-ins go through the same loaders as users' real model files.

If these fail, every pipeline test built on the stand-ins tests the wrong thing: insightface must
route each ONNX by its signature to the class the real file gets, and spandrel must recognise the
GFPGAN checkpoint by its keys.
"""
from __future__ import annotations

import os

import cv2
import numpy as np
import onnx
import pytest

from devtools.media import HANKS, T1, insightface_image
from devtools.synthetic_models import (
    BAD_FILES,
    MODEL_FILES,
    build_bad_models,
    build_models,
    ensure_cache,
)

CPU = ["CPUExecutionProvider"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory.mktemp("synthetic-models"))


@pytest.fixture(scope="module")
def analysis(models):
    from insightface.app import FaceAnalysis

    # FaceAnalysis looks for root/models/<name>; with our layout root is models/insightface.
    root = models["detector"].parents[2]
    app = FaceAnalysis(name="buffalo_l", root=str(root), allowed_modules=["detection", "recognition"],
                       providers=CPU)
    app.prepare(ctx_id=0, det_size=(640, 640))
    return app


def bgr(name: str) -> np.ndarray:
    return cv2.imread(str(insightface_image(name)))


def route(path):
    from insightface.model_zoo import model_zoo

    return model_zoo.get_model(str(path), providers=CPU)


def test_files_have_the_real_names_and_come_from_the_cache(models, tmp_path):
    cache = ensure_cache()
    for role, rel in MODEL_FILES.items():
        assert models[role].is_file() and models[role].as_posix().endswith(rel)
    assert 330e6 < models["restorer"].stat().st_size < 360e6  # the real file is 348,632,874 bytes
    again = build_models(tmp_path)  # second call: links or copies only
    for role, rel in MODEL_FILES.items():
        a, b = again[role].stat(), (cache / rel).stat()
        assert a.st_ino == b.st_ino or a.st_size == b.st_size


@pytest.mark.parametrize("role, cls, task", [
    ("detector", "SCRFD", "detection"),
    ("recognizer", "ArcFaceONNX", "recognition"),
    ("landmark", "Landmark", "landmark_3d_68"),
    ("swapper", "INSwapper", None),
])
def test_insightface_routes_each_file_like_the_real_one(models, role, cls, task):
    model = route(models[role])
    assert type(model).__name__ == cls
    if task:
        assert model.taskname == task


def test_detector_signature_is_scrfd_10g(models):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(models["detector"]), providers=CPU)
    (inp,) = sess.get_inputs()
    assert inp.name == "input.1" and inp.shape[:2] == [1, 3] and not isinstance(inp.shape[2], int)
    assert len(sess.get_outputs()) == 9
    for h, w in ((640, 640), (256, 320)):  # dynamic, not only square
        outs = sess.run(None, {"input.1": np.zeros((1, 3, h, w), np.float32)})
        expected = [((h // s) * (w // s) * 2, c) for c in (1, 4, 10) for s in (8, 16, 32)]
        assert [o.shape for o in outs] == expected


def test_landmark_signature_is_1k3d68_and_draws_a_face_in_the_box(models, analysis):
    from devtools.synthetic_models import LANDMARK_LAYOUT

    lmk = route(models["landmark"])
    # the real file: ['None', 3, 192, 192] raw pixels (mean 0, std 1), one [*, 3309] output
    assert (lmk.input_name, lmk.input_shape, lmk.input_mean, lmk.input_std) == ("data", ["None", 3, 192, 192], 0.0, 1.0)
    assert lmk.session.get_outputs()[0].shape[1] == 3309 and lmk.require_pose  # pose: meanshape_68.pkl
    img = bgr(HANKS)
    face = analysis.get(img)[0]
    pts = lmk.get(img, face)                                  # insightface's own crop and inverse map
    assert pts.shape == (68, 3) and face["landmark_3d_68"] is pts and face["pose"].shape == (3,)
    x1, y1, x2, y2 = face.bbox
    centre, unit = np.array([x1 + x2, y1 + y2]) / 2, 0.75 * max(x2 - x1, y2 - y1)
    layout = np.array(LANDMARK_LAYOUT) * unit + centre
    assert np.abs(pts[:, :2] - layout).max() < 0.011 * unit  # the mean face, moved <= 1% by the image


def test_swapper_signature_and_emap_is_the_last_initializer(models):
    proto = onnx.load(str(models["swapper"]))
    last = proto.graph.initializer[-1]
    assert last.name == "emap" and tuple(last.dims) == (512, 512)
    assert last.data_type == onnx.TensorProto.FLOAT
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in proto.graph.input}
    assert shapes == {"target": [1, 3, 128, 128], "source": [1, 512]}
    assert len(proto.graph.output) == 1
    swapper = route(models["swapper"])
    assert swapper.emap.shape == (512, 512) and swapper.input_size == (128, 128)


def test_face_analysis_finds_faces_on_real_photos(analysis):
    assert {k: type(m).__name__ for k, m in analysis.models.items()} == {
        "detection": "SCRFD", "recognition": "ArcFaceONNX"}
    for name, count in ((T1, 6), (HANKS, 1)):
        img = bgr(name)
        h, w = img.shape[:2]
        faces = analysis.get(img)
        assert len(faces) == count, name  # the documented behaviour pipeline tests rely on
        for f in faces:
            x1, y1, x2, y2 = f.bbox
            assert f.det_score > 0.5
            assert -0.1 * w <= x1 < x2 <= 1.1 * w and -0.1 * h <= y1 < y2 <= 1.1 * h, (name, f.bbox)
            assert f.kps.shape == (5, 2)
            assert np.all((f.kps >= [x1, y1]) & (f.kps <= [x2, y2])), (name, f.kps)
            assert f.kps[0, 0] < f.kps[1, 0]  # left eye left of right eye
            assert f.embedding.shape == (512,)


def test_detector_finds_nothing_on_blank_frames(analysis):
    for img in (np.zeros((360, 640, 3), np.uint8), np.full((360, 640, 3), 128, np.uint8)):
        assert analysis.get(img) == []


def test_detector_is_deterministic(analysis):
    img = bgr(T1)
    a, b = analysis.det_model.detect(img), analysis.det_model.detect(img)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_recognizer_separates_crops_and_is_deterministic(analysis):
    faces = analysis.get(bgr(T1))
    emb = np.stack([f.normed_embedding for f in faces])
    sims = emb @ emb.T
    assert sims[~np.eye(len(faces), dtype=bool)].max() < 0.9  # different people differ
    rec = analysis.models["recognition"]
    crops = [cv2.resize(bgr(HANKS), (112, 112))] * 2
    feats = rec.get_feat(crops)  # batch of two: the batch axis is dynamic
    assert feats.shape == (2, 512) and np.array_equal(feats[0], feats[1])


def test_inswapper_swaps_through_insightface(models, analysis):
    swapper = route(models["swapper"])
    img = bgr(T1)
    target = analysis.get(img)[0]
    source_a, source_b = analysis.get(bgr(HANKS))[0], analysis.get(img)[1]
    fake_a, m = swapper.get(img, target, source_a, paste_back=False)
    fake_b, _ = swapper.get(img, target, source_b, paste_back=False)
    assert fake_a.shape == (128, 128, 3) and fake_a.dtype == np.uint8 and m.shape == (2, 3)
    assert np.abs(fake_a.astype(int) - fake_b).mean() > 1  # the source matters
    pasted = swapper.get(img, target, source_a, paste_back=True)
    assert pasted.shape == img.shape and not np.array_equal(pasted, img)
    raw = swapper.forward(np.random.default_rng(0).random((1, 3, 128, 128), np.float32) * 255,
                          np.full((1, 512), 512 ** -0.5, np.float32))
    assert raw.shape == (1, 3, 128, 128) and raw.min() >= 0 and raw.max() <= 1


@pytest.fixture(scope="module")
def gfpgan(models):
    import spandrel

    return spandrel.ModelLoader().load_from_file(str(models["restorer"]))  # ~90M parameters


def test_spandrel_loads_the_restorer_as_gfpgan(gfpgan):
    desc = gfpgan
    assert desc.architecture.id == "GFPGAN" and type(desc.model).__name__ == "GFPGANv1Clean"
    assert desc.purpose == "FaceSR" and desc.size_requirements.minimum == 512


@pytest.mark.slow
def test_gfpgan_forward_512(gfpgan):
    import torch

    with torch.inference_mode():
        out = gfpgan.model(torch.rand(1, 3, 512, 512) * 2 - 1)[0]  # GFPGAN works in [-1, 1]
    assert out.shape == (1, 3, 512, 512) and torch.isfinite(out).all()


def test_bad_models_are_rejected(tmp_path):
    import spandrel

    bad = build_bad_models(tmp_path)
    assert {p.name for p in bad.values()} == set(BAD_FILES.values())
    assert route(bad["not_a_swapper"]) is None  # 64x64 matches no insightface signature
    assert os.path.getsize(bad["truncated_restorer"]) == 1 << 20
    with pytest.raises((RuntimeError, EOFError, OSError)):  # torch: "failed reading zip archive"
        spandrel.ModelLoader().load_from_file(str(bad["truncated_restorer"]))
    with pytest.raises(spandrel.UnsupportedModelError):
        spandrel.ModelLoader().load_from_file(str(bad["not_a_restorer"]))
