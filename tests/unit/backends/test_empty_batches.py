"""Zero faces, zero frames and one frame give the same, correctly shaped answers on every path
(issue 50, item 3).

``BatchRun`` handed back shapeless ``(0,)`` arrays for an empty feed, so a caller that indexes
rows (the occluder's ``[..., 0]``, the parser's class axis, the swapper's transpose) failed or
misreported only when a chunk had no face; SCRFD on a frame batch crashed in ``blobFromImages``
on no frames, where insightface's per-frame path returns ``[]``. Tiny ONNX graphs with the real
signatures (built here, a few KB each) stand in for the models.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swapline_core.backends.onnx_batch import BatchRun
from swapline_core.backends.onnx_sessions import create_session


def _save(path: Path, nodes, inputs, outputs, inits=()) -> Path:
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, path.stem, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _embedder(path: Path, batch="N", half=False) -> Path:
    """[batch,3,8,8] -> [batch,16] (ArcFace-like: a declared row shape) and [batch,3,8,8] (Identity)."""
    from onnx import TensorProto, helper, numpy_helper

    t = TensorProto.FLOAT16 if half else TensorProto.FLOAT
    w = np.random.default_rng(0).standard_normal((192, 16)).astype(np.float16 if half else np.float32)
    nodes = [helper.make_node("Flatten", ["x"], ["flat"]), helper.make_node("MatMul", ["flat", "w"], ["emb"]),
             helper.make_node("Identity", ["x"], ["same"])]
    return _save(path, nodes, [helper.make_tensor_value_info("x", t, [batch, 3, 8, 8])],
                 [helper.make_tensor_value_info("emb", t, [batch, 16]),
                  helper.make_tensor_value_info("same", t, [batch, 3, 8, 8])], [numpy_helper.from_array(w, "w")])


def _parser(path: Path) -> Path:
    """BiSeNet signature [N,3,512,512] -> [N,19,?,?]: the exporter leaves interpolated dims symbolic."""
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(1).standard_normal((19, 3, 1, 1)).astype(np.float32)
    return _save(path, [helper.make_node("Conv", ["input", "w"], ["out"])],
                 [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 512, 512])],
                 [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 19, "h", "w"])],
                 [numpy_helper.from_array(w, "w")])


def _occluder(path: Path) -> Path:
    """XSeg signature [N,256,256,3] -> [N,256,256,1]."""
    from onnx import TensorProto, helper

    return _save(path, [helper.make_node("ReduceMean", ["input"], ["out"], axes=[3], keepdims=1)],
                 [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 256, 256, 3])],
                 [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 256, 256, 1])])


# ----------------------------------------------------------------------------- BatchRun

@pytest.mark.parametrize("batch", ["N", 1])
def test_an_empty_feed_gives_zero_rows_of_each_output_shape(tmp_path, batch):
    run = BatchRun(create_session(str(_embedder(tmp_path / "e.onnx", batch)), "CPU"))
    emb, same = run({"x": np.zeros((0, 3, 8, 8), np.float32)})
    assert emb.shape == (0, 16) and emb.dtype == np.float32
    assert same.shape == (0, 3, 8, 8)
    one = run({"x": np.ones((1, 3, 8, 8), np.float32)})
    assert [y.shape[1:] for y in one] == [emb.shape[1:], same.shape[1:]]
    assert run.report()["largest_batch_run"] == 1 and run.runs == 1     # the empty call ran nothing


def test_an_empty_feed_of_a_half_precision_graph_is_float32(tmp_path):
    run = BatchRun(create_session(str(_embedder(tmp_path / "h.onnx", half=True)), "CPU"))
    (emb,) = run({"x": np.zeros((0, 3, 8, 8), np.float32)}, ["emb"])
    assert emb.shape == (0, 16) and emb.dtype == np.float32


def test_symbolic_output_dims_are_found_from_one_row(tmp_path):
    from swapline_core.masks.onnx_models import Occluder, Parser

    parser = Parser(str(_parser(tmp_path / "bisenet_resnet_34.onnx")), "CPU")
    labels = parser(np.zeros((0, 512, 512, 3), np.uint8))     # was BadModelError "first output is [0]"
    assert labels.shape == (0, 512, 512)
    assert parser.runner.runs == 0
    assert parser(np.zeros((1, 512, 512, 3), np.uint8)).shape == (1, 512, 512)
    occ = Occluder(str(_occluder(tmp_path / "xseg_1.onnx")), "CPU")
    assert occ(np.zeros((0, 256, 256, 3), np.uint8)).shape == (0, 256, 256)   # was IndexError
    assert occ(np.zeros((1, 256, 256, 3), np.uint8)).shape == (1, 256, 256)


def test_swapper_runner_with_no_crops(tmp_path):
    from devtools.synthetic_models import build_models
    from swapline_core.backends.inswapper import InSwapper

    sw = InSwapper(str(build_models(tmp_path / "models")["swapper"]), "CPU")
    out = sw.run_crops(np.zeros((0, 128, 128, 3), np.uint8), np.zeros((0, 512), np.float32))
    assert out.shape == (0, 128, 128, 3)


# ----------------------------------------------------------------------------- SCRFD paths

STRIDES = (8, 16, 32)
DET_SIZE = 64


def _scrfd(path: Path, batched: bool) -> Path:
    """SCRFD's 9-output signature (2 anchors, keypoints), with 3-D [N, anchors, C] outputs and a
    dynamic batch (``batched``) or 2-D [anchors, C] outputs and batch 1 as buffalo_l's
    det_10g.onnx; the same random weights either way."""
    import torch

    from devtools.lib.nets import tiny_scrfd_module
    from devtools.synthetic_models import export_onnx

    names = [f"o{i}" for i in range(9)]
    axes = {"input.1": {2: "?", 3: "?"}}
    if batched:
        axes["input.1"][0] = "batch"
        axes.update({n: {0: "batch", 1: f"anchors{i % 3}"} for i, n in enumerate(names)})
    else:
        axes.update({n: {0: f"anchors{i % 3}"} for i, n in enumerate(names)})
    path.parent.mkdir(parents=True, exist_ok=True)
    export_onnx(tiny_scrfd_module(STRIDES, batched), (torch.zeros(1, 3, DET_SIZE, DET_SIZE),), path,
                input_names=["input.1"], output_names=names, dynamic_axes=axes)
    return path


@pytest.fixture(scope="module")
def analyzers(tmp_path_factory):
    """(batched, per-frame) InsightFaceAnalyzer on the same weights, and a threshold that keeps
    a few candidates of a noise frame."""
    from swapline_core.backends.insightface_pack import InsightFaceAnalyzer

    root = tmp_path_factory.mktemp("packs")
    out = []
    for batched in (True, False):
        _scrfd(root / ("batched" if batched else "single") / "det.onnx", batched)
        an = InsightFaceAnalyzer(str(root / ("batched" if batched else "single")), "CPU", DET_SIZE, 0.5)
        assert (an.det_runner is not None) == batched
        out.append(an)
    scores = out[0].det_runner({"input.1": np.zeros((1, 3, DET_SIZE, DET_SIZE), np.float32)},
                               out[0].detector.output_names[:1])[0]
    thresh = float(np.quantile(scores, 0.9))
    for an in out:
        an.det_thresh = an.detector.det_thresh = thresh
    return out


def _frame(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, (48, 80, 3), dtype=np.uint8)


def test_no_frames_is_an_empty_list_on_both_paths(analyzers):
    from swapline_core.backends.scrfd_batch import detect_batch

    batched, single = analyzers
    assert detect_batch(batched.detector, batched.det_runner, [], batched.det_thresh) == []   # was a cv2 error
    assert batched.detect([]) == [] == single.detect([])


def test_no_faces_gives_the_same_empty_shapes_on_both_paths(analyzers):
    from swapline_core.backends.scrfd_batch import detect_batch

    batched, _ = analyzers
    det = batched.detector
    frame = _frame(1)
    (b_det, b_kps), = detect_batch(det, batched.det_runner, [frame], 1.01)      # nothing can pass
    s_det, s_kps = det.detect(frame, max_num=0, det_thresh=1.01)
    assert b_det.shape == s_det.shape == (0, 5) and b_kps.shape == s_kps.shape == (0, 5, 2)
    assert b_det.dtype == s_det.dtype == np.float32


def test_one_frame_finds_the_same_faces_on_both_paths(analyzers):
    batched, single = analyzers
    frames = [_frame(2)]
    got_b, got_s = batched.detect(frames), single.detect(frames)
    assert len(got_b) == len(got_s) == 1 and len(got_b[0]) > 0
    assert len(got_b[0]) == len(got_s[0])
    for fb, fs in zip(got_b[0], got_s[0]):
        np.testing.assert_allclose(fb.bbox, fs.bbox, atol=1e-3)
        np.testing.assert_allclose(fb.kps, fs.kps, atol=1e-3)
