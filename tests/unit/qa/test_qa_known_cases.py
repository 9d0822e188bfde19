"""The QA gate on known-good and known-bad outputs of the real sample clip (bench/qa_cases.py).

Each known-bad case carries one defect and must be caught by the metric made for it, with the
calibrated default thresholds; the known-good cases (the classical swap with occluders and mouth
put back) must pass. The cases are rebuilt from the sample clip at test time.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import pytest

from bench import qa_cases
from bench.calibrate_qa import OWN_REASON
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


def test_classical_today_fails_where_a_viewer_does(reports):
    """The README demo output: glasses painted over and the target's mouth replaced."""
    reasons = [x for f in _faces(reports["classical_today"]) for x in f["reasons"]]
    assert sum("occluder painted over" in x for x in reasons) >= FRAMES // 2
    assert any(x.startswith("mouth") for x in reasons)


def test_expression_values_follow_the_target(reports):
    good = _faces(reports["improved_swap"])
    frozen = _faces(reports["mouth_frozen_to_source"])
    corr_good = [f["expression_corr"] for f in good if f.get("expression_corr") is not None]
    corr_frozen = [f["expression_corr"] for f in frozen if f.get("expression_corr") is not None]
    assert corr_good and corr_frozen
    assert min(corr_good) > max(corr_frozen)


def test_skipped_faces_are_counted_separately(analyzer, clip, cases):
    """A face the swapper refused on purpose is untouched and safe: counted with its reason, not a
    failing frame; coverage still drops."""
    n = len(clip.originals)
    skipped = {i: {clip.faces[i][0].track_id: "profile beyond the swapper's range"} for i in range(n)}
    rep = gate.evaluate_frames(analyzer, clip.originals, cases["no_swap"], clip.faces, clip.source, skipped=skipped)
    s = rep["summary"]
    assert s["fail"] == 0 and s["faces_skipped"] == {"profile beyond the swapper's range": n}
    assert s["decision"] == "fail" and s["faces_swapped"] == 0
