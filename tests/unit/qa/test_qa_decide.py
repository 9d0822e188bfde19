"""Decisions that mean what they say: nothing evaluated never passes, coverage fails a job,
policies keep the frame count. Pure record-level tests (no models)."""
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import json

import pytest

from swapline_core.qa import decide, gate
from swapline_core.qa.plot import plot_report


def face(track=0, changed=0.5, **m):
    base = {"track_id": track, "changed": changed, "redetected": True, "identity": 0.95, "leakage": 0.5,
            "landmark_drift": 0.05, "flicker_ratio": 1.0, "reasons": []}
    return {**base, **m}


def rec(i, faces, status="ok"):
    return {"frame": i, "status": status, "faces": faces}


def report_for(records, th=None, skipped=None):
    th = th or decide.QAThresholds()
    gate.finalize(records, th, skipped)
    acc = decide.QAAccumulator()
    acc.add(records)
    return acc.report(th, skipped=skipped)


def test_defaults_come_from_the_calibration_file():
    data = json.loads(decide.THRESHOLDS_FILE.read_text())
    assert data["generated_by"] == "calibration/calibrate_qa.py"
    th = decide.QAThresholds()
    for k, v in data["thresholds"].items():
        assert getattr(th, k) == v


def test_no_face_clip_never_passes_unless_allowed():
    records = [rec(i, [], "no_face") for i in range(5)]
    rep = report_for([dict(r) for r in records])
    assert rep["summary"]["evaluated"] == 0
    assert rep["decision"] == "fail"
    assert rep["summary"]["decision_reasons"][0].startswith("no face swapped")
    allowed = report_for([dict(r) for r in records], replace(decide.QAThresholds(), allow_no_face=True))
    assert allowed["decision"] == "pass"
    with pytest.raises(decide.QAFailedError, match="no face swapped"):
        decide.apply_policy("fail job", rep)
    assert decide.apply_policy("keep original", rep) == set()      # nothing to revert: frames stay


def test_low_coverage_fails_the_job():
    th = replace(decide.QAThresholds(), min_coverage=0.9)
    records = [rec(i, [face(changed=0.5 if i < 7 else 0.0)]) for i in range(10)]
    rep = report_for(records, th)
    cov = rep["summary"]["coverage"]["0"]
    assert (cov["frames"], cov["swapped"], cov["coverage"]) == (10, 7, 0.7)
    assert any("coverage below 0.9" in x and "track 0 0.70" in x for x in rep["summary"]["decision_reasons"])
    assert rep["summary"]["failing_frames"] == [7, 8, 9]        # the unswapped ones
    assert all(r["faces"][0]["reasons"][0].startswith("face not swapped") for r in rep["frames"][7:])


def test_every_metric_has_a_reason_and_a_chart_line():
    th = decide.QAThresholds()
    bad = face(mouth_delta=th.max_mouth_delta * 2, expression_corr=None, occluder_overwrite=0.99,
               colour_cast=th.max_colour_cast + 5, seam_ratio=th.max_seam_ratio + 1, bleed=0.9, offface=0.9)
    reasons = decide.face_reasons(th, bad)
    for word in ("mouth opening", "occluder painted over", "colour cast", "seam", "foreign colour", "off the face"):
        assert any(word in x for x in reasons), (word, reasons)
    rep = report_for([rec(0, [bad]), rec(1, [face()])], th)
    assert rep["frames"][0]["status"] == "fail" and rep["frames"][1]["status"] == "ok"
    compact = decide.compact_frames(rep)
    assert compact[0]["loads"]["occluder_overwrite"] > 1 > compact[1]["loads"].get("landmark_drift", 0)
    assert {m for m, _, _ in decide.LOAD_METRICS} >= {"mouth_delta", "occluder_overwrite", "colour_cast",
                                                       "seam_ratio", "bleed", "offface", "expression_corr"}
    img = plot_report(rep)
    assert img.shape == (620, 1000, 3)


def test_thresholds_for_recognizer_and_overrides():
    assert decide.thresholds_for("dlib_resnet_v1").max_leakage == decide.QAThresholds().max_leakage
    arc = decide.thresholds_for("arcface_r100", max_bleed=0.5, min_coverage=None)
    assert arc.min_identity == 0.2 and arc.max_bleed == 0.5
    assert arc.min_coverage == decide.QAThresholds().min_coverage
    with pytest.raises(ValueError, match="unknown QA threshold"):
        decide.thresholds_for("dlib_resnet_v1", max_sparkle=1.0)


def test_default_policy_is_keep_original_unless_few_fail():
    assert decide.DEFAULT_POLICY == decide.FEW_FAILING_POLICY == "keep original unless few fail"
    for name in ("video_swap", "video_swap_builtin", "video_swap_refine"):
        wf = json.loads((ROOT / "workflows" / "api" / f"{name}.json").read_text())
        qa = [n for n in wf.values() if n["class_type"] == "SwaplineQAGate"]
        assert qa and all(n["inputs"]["policy"] == decide.DEFAULT_POLICY for n in qa), name
        ui = json.loads((ROOT / "workflows" / f"{name}.json").read_text())
        node = next(n for n in ui["nodes"] if n["type"] == "SwaplineQAGate")
        assert decide.DEFAULT_POLICY in node["widgets_values"], name
