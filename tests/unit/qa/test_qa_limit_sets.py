"""Named QA limit sets: the labelled set loads from its file, "auto" picks it only for the swap it
was measured on, and a widget value still overrides (swapline_core/qa/decide.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from swapline_core.qa import decide

STRICT, CAL = "viewer-labelled (strict)", "calibrated (sample clip)"


@pytest.mark.parametrize("name", [STRICT, "viewer-labelled (mesh swap)"])
def test_the_labelled_set_is_its_file_and_every_limit_it_did_not_choose_is_off(name):
    data = json.loads(decide.LIMIT_SETS[name].read_text())
    th = decide.limit_set(name)
    cal = decide.limit_set(CAL)
    assert data["thresholds"] and data["labelled_faces"] >= 400
    for field, value in data["thresholds"].items():
        assert getattr(th, field) == value, field
    # a per-face limit the rule did not choose fails no face (issue 48: a metric that does not
    # separate labelled faces must not fail them at the sample clip's value)
    unchosen = [f for _, f, *_ in decide._CHECKS if f not in data["thresholds"]]
    assert unchosen and all(decide.is_off(getattr(th, f)) for f in unchosen)
    # the job-level rules are not limits a rule chooses: they stay
    for f in ("min_changed", "min_coverage", "expression_window", "match_iou", "max_safety_score"):
        assert getattr(th, f) == getattr(cal, f), f
    # the calibrated set leaves the labelled-only metrics off: reported, never failing a face
    assert cal.max_blotch == decide.OFF and cal.max_detail_ratio == decide.OFF and cal.max_chroma_blotch == decide.OFF


def test_an_off_limit_fails_no_face_and_draws_no_load_or_line():
    th = decide.limit_set("viewer-labelled (mesh swap)")
    assert decide.is_off(th.max_seam_ratio) and decide.is_off(th.min_identity)
    face = {"swapped": True, "redetected": True, "identity": 0.01, "seam_ratio": 40.0, "occluder_overwrite": 0.99}
    assert decide.face_reasons(th, face) == []
    assert decide.face_reasons(decide.limit_set(CAL), face)           # the calibrated set fails it
    assert decide.metric_load(th, "seam_ratio", "max_seam_ratio", "max", 40.0) is None
    shown = th.shown()
    assert shown["max_seam_ratio"] is None and shown["min_identity"] is None
    assert shown["max_texture_excess"] == th.max_texture_excess and shown["min_coverage"] == th.min_coverage


def test_auto_is_the_labelled_set_only_for_the_swap_it_measured():
    classical = "classical landmark warp (no trained swap model)"
    assert decide.resolve_limit_set(decide.AUTO_LIMIT_SET, [classical]) == STRICT
    assert decide.resolve_limit_set(decide.AUTO_LIMIT_SET, [classical, classical]) == STRICT
    for methods in ([], ["trained face-swap model (inswapper family)"],
                    [classical, "trained face-swap model (inswapper family)"]):
        assert decide.resolve_limit_set(decide.AUTO_LIMIT_SET, methods) == CAL, methods
    assert decide.resolve_limit_set(CAL, [classical]) == CAL          # a named choice stands
    mesh = "dense mesh texture warp (no trained swap model)"
    assert decide.resolve_limit_set(decide.AUTO_LIMIT_SET, [mesh, mesh]) == "viewer-labelled (mesh swap)"
    assert decide.resolve_limit_set(decide.AUTO_LIMIT_SET, [mesh, classical]) == CAL   # mixed: no set measured it
    with pytest.raises(ValueError, match="unknown QA limit set"):
        decide.limit_set("loose")


def test_a_given_value_overrides_the_set_and_arcface_keeps_its_pair():
    th = decide.thresholds_for("dlib_resnet", STRICT, max_seam_ratio=5.0, max_offface=None)
    assert th.max_seam_ratio == 5.0 and th.max_offface == decide.limit_set(STRICT).max_offface
    arc = decide.thresholds_for("arcface", STRICT)
    assert (arc.min_identity, arc.max_leakage) == (0.2, 0.6)


def test_a_face_past_a_labelled_only_limit_fails_with_a_reason():
    th = decide.limit_set(STRICT)
    face = {"swapped": True, "redetected": True, "identity": 0.95, "detail_ratio": th.max_detail_ratio + 0.5}
    reasons = decide.face_reasons(th, face)
    if th.max_detail_ratio < decide.OFF:
        assert any(r.startswith("pasted texture") for r in reasons)
    assert decide.face_reasons(decide.limit_set(CAL), face) == []


def test_the_report_says_where_the_limits_hold_and_names_a_flagged_source():
    from swapline_core.faces.source_check import check_sources, warnings_of
    from swapline_core.types import Face, SourceIdentity

    cal = decide.limits_note(CAL)
    assert "not measured against faces labelled by eye" in cal
    scope = decide.limits_note("viewer-labelled (mesh swap)")
    assert "sharp, evenly lit source photos" in scope and "flagged" not in scope
    # a source the source check warns about (a face 20 px between the eyes) is named, with its numbers
    face = Face(bbox=np.array([40, 40, 80, 90], np.float32), score=0.99,
                kps=np.array([[50, 60], [70, 60], [60, 70], [52, 80], [68, 80]], np.float32))
    img = np.full((160, 160, 3), 128, np.uint8)
    fm = SourceIdentity(np.zeros(128, np.float32), "dlib", img, face,
                        metadata={"source_check": check_sources([img], [face])})
    warned = warnings_of(fm)
    assert warned and "20.0 px apart" in warned[0]
    note = decide.limits_note("viewer-labelled (mesh swap)", warned)
    assert note.startswith(scope) and "flagged by Build Face Model" in note and "20.0 px apart" in note
