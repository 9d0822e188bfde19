"""TensorRT sessions get an optimisation profile from the batches they will see (issue 50, item 4).

Without ``trt_profile_min/opt/max_shapes`` onnxruntime's TensorRT EP builds its engine for the
first shape it meets and may build another (minutes) for each new batch size. Each session now
gets min 1, opt the usual batch, max the largest batch the code sends, in onnxruntime's format
(``"name:1x3x128x128,name2:1x512"``). No GPU needed: the provider options are checked as built,
with onnxruntime's provider list and session class stood in for.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from swapline_core.backends import onnx_sessions
from swapline_core.backends.onnx_batch import DEFAULT_MAX_BATCH

# What the code sends (checked against the module's constants below): the swapper and mask models
# a chunk's faces, 16 with one face per frame of a default chunk, at most BatchRun's 32 per run;
# the restore nodes' 'batch' widget, 4 by default, at most 64.
FACES_OPT, FACES_MAX, RESTORER_OPT, RESTORER_MAX = 16, DEFAULT_MAX_BATCH, 4, 64
KEYS = ("trt_profile_min_shapes", "trt_profile_opt_shapes", "trt_profile_max_shapes")


def _graph(path: Path, inputs: dict[str, list]) -> Path:
    """A graph with these inputs (each goes through Identity to an output of the same shape)."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Identity", [n], [f"{n}_out"]) for n in inputs]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()]
    vo = [helper.make_tensor_value_info(f"{n}_out", TensorProto.FLOAT, s) for n, s in inputs.items()]
    model = helper.make_model(helper.make_graph(nodes, path.stem, vi, vo), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_swapper_inputs_get_min_1_opt_usual_max_largest(tmp_path):
    from swapline_core.backends.trt_profile import Batches, graph_inputs, profile_options

    path = _graph(tmp_path / "inswapper_128.onnx", {"target": ["N", 3, 128, 128], "source": ["N", 512]})
    assert graph_inputs(str(path)) == [("target", ["N", 3, 128, 128]), ("source", ["N", 512])]
    opts = profile_options(graph_inputs(str(path)), Batches(opt=16, max=32))
    assert opts == {"trt_profile_min_shapes": "target:1x3x128x128,source:1x512",
                    "trt_profile_opt_shapes": "target:16x3x128x128,source:16x512",
                    "trt_profile_max_shapes": "target:32x3x128x128,source:32x512"}


def test_usual_batches_cover_what_the_code_sends():
    from swapline_core.backends.trt_profile import DETECTOR, FACES, RESTORER

    assert (FACES.opt, FACES.max) == (FACES_OPT, FACES_MAX)
    assert 1 <= DETECTOR.opt <= DETECTOR.max == DEFAULT_MAX_BATCH
    assert (RESTORER.opt, RESTORER.max) == (RESTORER_OPT, RESTORER_MAX)


def test_detector_spatial_axes_come_from_det_size():
    from swapline_core.backends.trt_profile import DETECTOR, Batches, profile_options

    inputs = [("input.1", [1, 3, "?", "?"])]                      # buffalo_l's det_10g.onnx
    assert profile_options(inputs, DETECTOR) == {}               # unknown size: no profile, TensorRT decides
    opts = profile_options(inputs, DETECTOR, {2: 640, 3: 640})
    assert opts == {k: "input.1:1x3x640x640" for k in KEYS}       # fixed batch 1: 1 everywhere
    batched = profile_options([("input.1", ["batch", 3, "?", "?"])], Batches(2, 32), {2: 320, 3: 320})
    assert batched["trt_profile_opt_shapes"] == "input.1:2x3x320x320"
    assert batched["trt_profile_max_shapes"] == "input.1:32x3x320x320"


def test_a_static_graph_needs_no_profile():
    from swapline_core.backends.trt_profile import FACES, profile_options

    assert profile_options([("data", [1, 3, 192, 192])], FACES) == {}


@pytest.fixture
def trt_available(monkeypatch):
    """onnxruntime as onnxruntime-gpu with TensorRT would report it; sessions recorded, not made."""
    import onnxruntime as ort

    made = []
    monkeypatch.setattr(ort, "get_available_providers",
                        lambda: ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(onnx_sessions, "_preload_cuda_libraries", lambda: None)
    monkeypatch.setattr(ort, "InferenceSession", lambda path, sess_options=None, providers=None: made.append(
        (Path(path).name, providers)) or object())
    return made


def _trt(providers) -> dict:
    name, opts = providers[0]
    assert name == "TensorrtExecutionProvider"
    return opts


def test_providers_for_carries_the_profile(tmp_path, trt_available):
    profile = {k: "x:1x2" for k in KEYS}
    opts = _trt(onnx_sessions.providers_for(f"TensorRT fp16:{tmp_path}", profile=profile))
    assert opts == {"trt_engine_cache_enable": True, "trt_engine_cache_path": str(tmp_path),
                    "trt_fp16_enable": True, **profile}
    assert onnx_sessions.providers_for("CUDA", profile=profile) == ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_create_session_gives_each_file_its_profile(tmp_path, trt_available):
    swapper = _graph(tmp_path / "inswapper_128.onnx", {"target": ["N", 3, 128, 128], "source": ["N", 512]})
    gpen = _graph(tmp_path / "GPEN-BFR-512.onnx", {"input": ["N", 3, 512, 512]})
    onnx_sessions.create_session(str(swapper), f"TensorRT:{tmp_path}")
    onnx_sessions.create_session(str(gpen), "CUDA")
    (_, p_swap), (_, p_cuda) = trt_available
    assert _trt(p_swap)["trt_profile_min_shapes"] == "target:1x3x128x128,source:1x512"
    assert _trt(p_swap)["trt_profile_opt_shapes"] == f"target:{FACES_OPT}x3x128x128,source:{FACES_OPT}x512"
    assert _trt(p_swap)["trt_profile_max_shapes"] == f"target:{FACES_MAX}x3x128x128,source:{FACES_MAX}x512"
    assert p_cuda == ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_loaders_ask_for_the_batches_they_send(tmp_path, trt_available, monkeypatch):
    """Each model's loader passes its own batches: restorer 4..64, mask models and swappers 16..32,
    an insightface pack's detector at det_size."""
    from swapline_core.backends import gpen, insightface_pack
    from swapline_core.backends.trt_profile import FACES, RESTORER
    from swapline_core.masks import onnx_models

    asked = []

    def spy(path, choice="auto", batches=FACES, dims=None):
        asked.append((Path(path).name, batches, dims))
        raise RuntimeError("recorded")

    for mod in (gpen, onnx_models):
        monkeypatch.setattr(mod, "create_session", spy)
    for make, name in ((lambda p: gpen.GpenRestorer(p, f"TensorRT:{tmp_path}"), "GPEN-BFR-512.onnx"),
                       (lambda p: onnx_models.Parser(p, f"TensorRT:{tmp_path}"), "bisenet_resnet_34.onnx")):
        with pytest.raises(RuntimeError, match="recorded"):
            make(str(tmp_path / name))
    assert asked == [("GPEN-BFR-512.onnx", RESTORER, None), ("bisenet_resnet_34.onnx", FACES, None)]

    pack = tmp_path / "pack"
    pack.mkdir()
    _graph(pack / "det_10g.onnx", {"input.1": [1, 3, "?", "?"]})
    _graph(pack / "w600k_r50.onnx", {"input.1": ["None", 3, 112, 112]})
    routed = []
    monkeypatch.setattr(insightface_pack, "_route", lambda path, providers: routed.append(
        (Path(path).name, providers)) or None)
    from swapline_core.errors import MissingModelError

    with pytest.raises(MissingModelError):  # nothing routed to a detector: the pack's own error
        insightface_pack.InsightFaceAnalyzer(str(pack), f"TensorRT:{tmp_path}", det_size=320)
    got = {name: _trt(p) for name, p in routed}
    assert got["det_10g.onnx"]["trt_profile_opt_shapes"] == "input.1:1x3x320x320"
    assert got["w600k_r50.onnx"]["trt_profile_max_shapes"] == f"input.1:{FACES_MAX}x3x112x112"
