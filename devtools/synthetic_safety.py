"""A stand-in content-safety classifier with the exact signature the QA gate expects
(swapline_core/qa/safety.py): input ``image`` float32 NCHW [N, 3, 64, 64] RGB 0..1, output
``scores`` [N, 2] softmax probabilities (class 0 "safe", class 1 "unsafe"), metadata naming the
unsafe class.

Deterministic, no weights to train: the "unsafe" score is a fixed function of the image, so a
test can make it fire. It rises with the frame's mean green excess (G minus the mean of R and
B): a mostly green frame scores ~1, natural footage (faces, the red sample clip) ~0.
"""
from __future__ import annotations

from pathlib import Path

SAFETY_FILE = "swapline_safety/test_green_classifier.onnx"
SIZE = 64
# unsafe logit - safe logit = GAIN * (G - (R + B) / 2) - BIAS: 0.5 at a mean green excess of 0.25
GAIN, BIAS = 24.0, 6.0


def build_safety_classifier(path: Path, metadata: bool = True, size: int = SIZE) -> Path:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.array([[0.0, -GAIN / 2], [0.0, GAIN], [0.0, -GAIN / 2]], np.float32)   # rows R, G, B
    b = np.array([0.0, -BIAS], np.float32)
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["image"], ["mean"], axes=[2, 3], keepdims=0),
         helper.make_node("MatMul", ["mean", "w"], ["mm"]),
         helper.make_node("Add", ["mm", "b"], ["logits"]),
         helper.make_node("Softmax", ["logits"], ["scores"], axis=1)],
        "green_classifier",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    if metadata:
        helper.set_model_props(model, {"swapline.unsafe_class": "1", "swapline.labels": "safe,unsafe"})
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def build_safety_models(models_dir: Path) -> Path:
    """Place the stand-in under ``models_dir/swapline_safety`` (a few hundred bytes)."""
    return build_safety_classifier(Path(models_dir) / SAFETY_FILE)
