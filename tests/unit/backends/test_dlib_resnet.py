"""dlib's recognition network run by torch (swapline_core/backends/dlib_resnet.py) gives dlib's own
descriptors, on real faces (the kling clip, the shipped source photos), one face or a batch."""
import time

import numpy as np
import pytest

from swapline_core.backends import builtin_models as bm
from swapline_core.backends import dlib_resnet
from swapline_core.types import l2_normalise


def _dlib_reference(frames, faces) -> np.ndarray:
    dlib = bm.import_dlib()
    out = []
    for img, face in zip(frames, faces):
        shape = dlib.full_object_detection(
            dlib.rectangle(0, 0, img.shape[1] - 1, img.shape[0] - 1),
            [dlib.point(int(round(x)), int(round(y))) for x, y in face.landmarks])
        out.append(np.asarray(bm.face_recognizer().compute_face_descriptor(img, shape), np.float32))
    return np.stack(out)


def test_the_weights_read_are_dlibs_network():
    w = dlib_resnet.load_weights(bm.dlib_model_path("recognition"))
    assert len(w["convs"]) == len(w["affines"]) == 29 and w["fc"].shape == (128, 256)
    # dlib's defaults for input_rgb_image, stored in the file
    np.testing.assert_allclose(w["mean"], [122.782, 117.001, 104.298], atol=1e-3)
    assert [c[0].shape for c in w["convs"][:2]] == [(32, 3, 7, 7), (32, 32, 3, 3)]
    assert all(np.isfinite(c[0]).all() and np.abs(c[0]).max() > 0 for c in w["convs"])


def test_embeddings_equal_dlibs_own_on_real_faces(builtin_analyzer, kling_target, sample_source):
    frames, faces = kling_target
    src = sample_source("source_face_colour.png")
    frames, faces = [*frames, src.image], [*faces, src.face]
    ref = np.stack([l2_normalise(v) for v in _dlib_reference(frames, faces)])
    fresh = [f.copy(embedding=None) for f in faces]
    t0 = time.perf_counter()
    builtin_analyzer.embed(frames, [[f] for f in fresh])
    took = time.perf_counter() - t0
    got = np.stack([f.embedding for f in fresh])
    np.testing.assert_allclose(got, ref, atol=2e-5)
    assert builtin_analyzer.providers["dlib_recognition"] == ["torch:cpu"]   # what really ran
    print(f"{len(fresh)} faces in {took:.3f} s")


def test_a_batch_gives_what_single_faces_give(kling_target):
    dlib = bm.import_dlib()
    frames, faces = kling_target
    chips = []
    for img, face in zip(frames, faces):
        pts = [dlib.point(int(round(x)), int(round(y))) for x, y in face.landmarks]
        shape = dlib.full_object_detection(dlib.rectangle(0, 0, img.shape[1] - 1, img.shape[0] - 1), pts)
        chips.append(dlib.get_face_chip(img, shape, dlib_resnet.CHIP_SIZE, dlib_resnet.CHIP_PADDING))
    net = bm.face_recognizer_torch()
    together = dlib_resnet.descriptors(net, chips)
    alone = np.concatenate([dlib_resnet.descriptors(net, [c]) for c in chips])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert dlib_resnet.descriptors(net, []).shape == (0, 128)


def test_a_file_that_is_not_dlibs_network_is_refused(tmp_path):
    bad = tmp_path / "not_a_model.dat"
    bad.write_bytes(b"\x01\x01" + bytes(64))
    with pytest.raises(ValueError, match="not found in the dlib model"):
        dlib_resnet.load_weights(bad)
