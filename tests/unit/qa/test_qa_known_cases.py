"""The QA gate on known-good and known-bad outputs of the real sample clip (calibration/qa_cases.py).

Each known-bad case carries one defect and must be caught by the metric made for it, with the
calibrated default thresholds; the known-good cases (the pipeline's real output with the target's
occluders and lower face put back) must pass. The cases are rebuilt from the sample clip at test time.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import pytest

from calibration import qa_cases
from calibration.calibrate_qa import OWN_REASON
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.qa import gate

# Enough consecutive frames for the expression window; the clip's speaker moves the mouth in them.
FRAMES = 12


@pytest.fixture(scope="module")
def analyzer():
    return BuiltinAnalyzer()


@pytest.fixture(scope="module")
def clip(analyzer, tmp_path_factory):
    return qa_cases.load_clip(analyzer, str(tmp_path_factory.mktemp("qa_cases")), count=FRAMES, chunk=FRAMES)


@pytest.fixture(scope="module")
def cases(clip):
    return qa_cases.build_cases(clip)


@pytest.fixture(scope="module")
def reports(analyzer, clip, cases):
    return {name: gate.evaluate_frames(analyzer, clip.originals, frames, clip.faces, clip.source)
            for name, frames in cases.items()}


def _faces(report):
    return [f for r in report["frames"] for f in r["faces"]]


@pytest.mark.parametrize("case", qa_cases.GOOD_CASES)
def test_known_good_passes(reports, case):
    rep = reports[case]
    bad = {r["frame"]: r["faces"][0]["reasons"] for r in rep["frames"] if r["status"] == "fail"}
    assert rep["decision"] == "pass", (rep["summary"]["decision_reasons"], bad)
    assert rep["summary"]["coverage"]["0"]["coverage"] == 1.0 or all(
        t["coverage"] == 1.0 for t in rep["summary"]["coverage"].values())


@pytest.mark.parametrize("case", sorted(qa_cases.BAD_CASES))
def test_known_bad_caught_by_its_own_metric(reports, case):
    rep = reports[case]
    own = qa_cases.BAD_CASES[case]
    word = OWN_REASON[own]
    # where the metric can see the defect: a mouth frozen closed shows only while the target talks
    faces = [f for f in _faces(rep) if own != "expression" or f.get("expression_corr") is not None]
    caught = [any(word in x for x in f["reasons"]) for f in faces]
    assert rep["decision"] == "fail"
    # most frames, not a lucky one: a defect on every frame is seen on (nearly) every frame
    assert faces and sum(caught) >= 0.5 * len(faces), (case, [f["reasons"] for f in faces])


def test_no_swap_fails_on_coverage_not_quality(reports):
    rep = reports["no_swap"]
    s = rep["summary"]
    assert s["faces_swapped"] == 0
    assert any(x.startswith("no face swapped") for x in s["decision_reasons"])
    # unswapped faces are judged only on coverage: no quality reason would make sense for them
    assert all(f["reasons"] == [f["reasons"][0]] and f["reasons"][0].startswith("face not swapped")
               for f in _faces(rep))


def test_classical_today_keeps_the_glasses(reports):
    """The pipeline's real output on the sample (the README demo). It painted the glasses frames
    over on (nearly) every frame until the built-in occluder's hue test kept red frames (issue 13);
    the gate must now see them kept on most frames (3 of 48 fail in docs/measurements/qa_thresholds.md)."""
    reasons = [x for f in _faces(reports["classical_today"]) for x in f["reasons"]]
    assert sum("occluder painted over" in x for x in reasons) <= FRAMES // 4


def test_occluder_estimate_sees_glasses_not_shade(clip):
    """The gate's occluder estimate: a dark bar over the eyes is an occluder, the same face's
    skin put in shade (a third darker, as the sample's side light does) is not. With one median
    skin colour the shaded cheek of the sample clip was 20-35 % of the face "occluder"."""
    import cv2
    import numpy as np

    from swapline_core.qa.metrics_image import _crop_box, estimate_occluder, face_regions, lab

    frame, lm = clip.originals[0].copy(), clip.faces[0][0].landmarks
    hull = np.zeros(frame.shape[:2], np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.round(lm).astype(np.int32)), 1)
    shade = hull.astype(bool) & (np.arange(frame.shape[1])[None, :] > lm[30, 0])     # the face's far half
    frame[shade] = (frame[shade] * 0.66).astype(np.uint8)
    bar = np.zeros(frame.shape[:2], np.uint8)
    y = int(lm[28, 1])
    cv2.rectangle(bar, (int(lm[0, 0]), y - 4), (int(lm[16, 0]), y + 4), 1, -1)
    frame[bar > 0] = (20, 20, 25)
    x0, y0, x1, y1 = _crop_box(lm, frame.shape[:2])
    reg = face_regions((y1 - y0, x1 - x0), lm - np.array([x0, y0], np.float32))
    occ = estimate_occluder(lab(frame[y0:y1, x0:x1]), reg)
    cand = reg["hull"] & ~reg["features"]
    in_bar = (bar[y0:y1, x0:x1] > 0) & cand
    in_shade = shade[y0:y1, x0:x1] & cand & ~(bar[y0:y1, x0:x1] > 0)
    assert occ[in_bar].mean() > 0.8
    assert occ[in_shade].mean() < 0.1


def test_mouth_is_read_on_the_mouth(reports):
    """The known-good output keeps the target's lower face: its mouth reads as the target's even
    though eyes and nose are swapped (a whole-face landmark fit moved the mouth with them)."""
    import numpy as np

    deltas = [f["mouth_delta"] for f in _faces(reports["improved_swap"]) if f.get("mouth_delta") is not None]
    assert deltas and float(np.median(deltas)) < 0.015


def test_expression_values_follow_the_target(reports):
    good = _faces(reports["improved_swap"])
    frozen = _faces(reports["mouth_frozen_to_source"])
    corr_good = [f["expression_corr"] for f in good if f.get("expression_corr") is not None]
    corr_frozen = [f["expression_corr"] for f in frozen if f.get("expression_corr") is not None]
    assert corr_good and corr_frozen
    assert min(corr_good) > max(corr_frozen)


def test_frozen_mouth_caught_on_nearly_every_frame(reports):
    """Issue 13: the landmark reading caught the frozen mouth on 59 % of its frames (none where the
    result was not re-detected) and its known-good worst window moved with the forehead blend. The
    mouth-profile reading needs no re-detection: every frame of the frozen case is judged, and it
    fails on its expression window; no known-good frame does."""
    label = "mouth does not follow the target"
    frozen = _faces(reports["mouth_frozen_to_source"])
    assert sum(any(x.startswith(label) for x in f["reasons"]) for f in frozen) >= 0.9 * len(frozen)
    for case in qa_cases.GOOD_CASES:
        assert not any(x.startswith(label) for f in _faces(reports[case]) for x in f["reasons"]), case


def test_skipped_faces_are_counted_separately(analyzer, clip, cases):
    """A face the swapper refused on purpose is untouched and safe: counted with its reason, not a
    failing frame; coverage still drops."""
    n = len(clip.originals)
    skipped = {i: {clip.faces[i][0].track_id: "profile beyond the swapper's range"} for i in range(n)}
    rep = gate.evaluate_frames(analyzer, clip.originals, cases["no_swap"], clip.faces, clip.source, skipped=skipped)
    s = rep["summary"]
    assert s["fail"] == 0 and s["faces_skipped"] == {"profile beyond the swapper's range": n}
    assert s["decision"] == "fail" and s["faces_swapped"] == 0


def test_calibration_check_lists_each_limit_and_the_frame_it_rests_on(reports, monkeypatch, tmp_path):
    """``python -m calibration.calibrate_qa --check`` on these cases: with the shipped limits every case is
    as expected (exit 0); each calibrated limit is listed with what the script would choose now and
    the known-good frame holding the worst value it rests on. A limit no known-good frame passes
    makes the check fail."""
    import json
    from dataclasses import replace

    from calibration import calibrate_qa
    from swapline_core.qa import decide

    out = tmp_path / "check.json"
    monkeypatch.setattr(calibrate_qa, "CHECK_OUT", out)
    records = {name: rep["frames"] for name, rep in reports.items()}
    shipped = decide.QAThresholds()
    assert calibrate_qa.check(records, shipped, FRAMES) == 0
    data = json.loads(out.read_text())
    assert {d["field"] for d in data["limits"]} == set(calibrate_qa.CALIBRATED)
    for d in data["limits"]:
        metric, kind, _ = calibrate_qa.CALIBRATED[d["field"]]
        assert d["shipped"] == getattr(shipped, d["field"])
        case, frame = d["good_worst_at"].split(" frame ")
        held = [f[metric] for r in records[case] if r["frame"] == int(frame) for f in r["faces"]]
        assert case in qa_cases.GOOD_CASES and round(held[0], 4) == d["good_worst"], d
        # chosen on the even frames; the cases are judged on the odd ones
        assert int(frame) % 2 == 0
        good = [f[metric] for g in qa_cases.GOOD_CASES for r in records[g] for f in r["faces"]
                if f.get(metric) is not None and r["frame"] % 2 == 0]
        assert d["good_worst"] == round(max(good) if kind == "max" else min(good), 4)
    assert {c["case"] for c in data["cases"]} == set(records)
    assert calibrate_qa.check(records, replace(shipped, max_offface=0.0), FRAMES) == 1
