"""Content-safety recheck (swapline_core/qa/safety.py) with the exact-signature stand-in from
devtools/synthetic_safety.py: scores per frame in the report and chart, a job decision that can
fail, and frames that are never changed for it."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from calibration import qa_cases  # noqa: E402
from devtools.synthetic_safety import build_safety_classifier  # noqa: E402
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer  # noqa: E402
from swapline_core.errors import BadModelError, SwaplineError  # noqa: E402
from swapline_core.qa import decide, gate  # noqa: E402
from swapline_core.qa.plot import plot_report  # noqa: E402
from swapline_core.qa.safety import SafetyClassifier  # noqa: E402

FRAMES = 4


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_safety_classifier(tmp_path_factory.mktemp("safety") / "green.onnx")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return qa_cases.load_clip(BuiltinAnalyzer(), str(tmp_path_factory.mktemp("safety_clip")), count=FRAMES,
                              chunk=FRAMES)


def _green(frame):
    out = frame.copy()
    out[..., 1] = np.maximum(out[..., 1], 230)      # a green wash over the whole frame
    return out


def test_stand_in_has_the_documented_signature(model):
    c = SafetyClassifier(str(model))
    assert c.size == (64, 64) and c.unsafe_class == 1 and c.describe()["unsafe_label"] == "unsafe"
    grey = np.full((90, 120, 3), 128, np.uint8)
    green = _green(grey)
    s = c.score([grey, green, grey])
    assert s[0] < 0.01 and s[1] > 0.95 and s[0] == s[2]            # depends on the image, deterministic
    assert SafetyClassifier(str(model)).score([green, grey]) == [s[1], s[0]]


def test_unsafe_class_is_a_setting_or_metadata(tmp_path):
    bare = build_safety_classifier(tmp_path / "bare.onnx", metadata=False)
    with pytest.raises(SwaplineError, match="unsafe_class"):
        SafetyClassifier(str(bare)).score([np.zeros((8, 8, 3), np.uint8)])
    green = _green(np.zeros((8, 8, 3), np.uint8))
    assert SafetyClassifier(str(bare), unsafe_class=1).score([green])[0] > 0.99
    assert SafetyClassifier(str(bare), unsafe_class=0).score([green])[0] < 0.01
    with pytest.raises(SwaplineError, match="out of range"):
        SafetyClassifier(str(bare), unsafe_class=5).score([green])


def test_wrong_signature_is_refused_with_what_was_expected(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "nhwc",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 64, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 64, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "nhwc.onnx"))
    with pytest.raises(BadModelError, match=r"NCHW float RGB input \[N, 3, H, W\]"):
        SafetyClassifier(str(tmp_path / "nhwc.onnx"))


def test_gate_reports_scores_and_fails_the_job_without_touching_frames(model, clip):
    analyzer = BuiltinAnalyzer()
    out = list(clip.classical)
    out[2] = _green(out[2])
    plain = gate.evaluate_frames(analyzer, clip.originals, out, clip.faces, clip.source)
    checked = gate.evaluate_frames(analyzer, clip.originals, out, clip.faces, clip.source,
                                   safety=SafetyClassifier(str(model)))
    scores = [r["safety"] for r in checked["frames"]]
    assert scores[2] > 0.9 and max(scores[:2] + scores[3:]) < 0.05
    s = checked["summary"]
    assert s["safety"]["flagged_frames"] == [2] and s["safety"]["model"] == "green.onnx"
    assert checked["decision"] == "fail"
    assert any(x.startswith("content safety: 1 frame(s)") for x in s["decision_reasons"])
    assert "safety" not in plain["summary"] or plain["summary"]["safety"] is None
    # the frame statuses (and so the frames "keep original" would revert) do not change
    assert [r["status"] for r in checked["frames"]] == [r["status"] for r in plain["frames"]]
    assert decide.apply_policy("keep original", checked) == decide.apply_policy("keep original", plain)
    with pytest.raises(decide.QAFailedError, match="content safety"):
        decide.apply_policy("fail job", checked)
    # chart: one load line, score over its limit
    rows = decide.compact_frames(checked)
    assert rows[2]["loads"]["content_safety"] == pytest.approx(scores[2] / 0.5, abs=1e-3)
    assert plot_report(checked).shape == (620, 1000, 3)


def test_no_flag_below_the_limit():
    recs = [{"frame": i, "status": "no_face", "faces": [], "safety": v} for i, v in enumerate((0.1, 0.49))]
    acc = decide.QAAccumulator()
    acc.add(recs)
    th = decide.QAThresholds(allow_no_face=True)
    s = acc.summary(th, safety_model={"model": "m.onnx"})
    assert s["decision"] == "pass" and s["safety"]["flagged_frames"] == [] and s["safety"]["max"] == 0.49
    s = acc.summary(decide.QAThresholds(allow_no_face=True, max_safety_score=0.3))
    assert s["decision"] == "fail" and s["safety"]["flagged_frames"] == [1]
