"""The generalization section's smoke form (``python -m bench.generalization --smoke``): the shipped
sample clip's first frames x the shipped colour source, plus one composited eye occluder, through
the shipped workflow on a real ComfyUI server, scored by the independent scorer. The same code path
as the full section, on inputs that ship with the repo (no download), so a change to the workflow,
the nodes' reports or the bench breaks this test, not the next measurement. The numbers are not
measurements; the test checks that every metric is there and finite.

Plus the pure pieces of the metrics on hand-made records: reason categories, outcome shares and
identity switches inside a shot.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bench import section
from bench.generalization import metrics, report
from bench.generalization.section import SECTION

REPO = Path(__file__).resolve().parents[3]

ROW_KEYS = {"tracked_pairs", "eligible_pairs", "yield", "refused", "qa_failed", "refused_by_reason",
            "qa_failed_by_reason", "bridged_by_reason", "identity_switches", "off_face_frames", "mouth_open_corr",
            "toward_source", "moved_to_source", "identity_distances", "qa_decision", "seconds", "detail_ratio",
            "forehead_step"}
FINITE = ("yield", "refused", "qa_failed", "identity_switches", "off_face_frames", "mouth_open_corr",
          "toward_source", "moved_to_source", "detail_ratio")


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("generalization-smoke")
    rec = section.execute(SECTION, {"out": str(out)}, smoke=True, log=lambda *a: None)   # bench.run's protocol
    assert rec["section"] == "generalization" and len(rec["targets"]) == len(SECTION.targets)
    res = rec["data"]
    res["_out"], res["_record"] = out, rec
    return res


def test_smoke_reports_every_metric_finite(smoke):
    assert smoke["smoke"] is True and smoke["frames_per_clip"] >= 5
    (clip, per), = smoke["runs"].items()
    (src, row), = per.items()
    assert src == "shipped_colour"
    assert ROW_KEYS <= set(row), ROW_KEYS - set(row)
    assert row["tracked_pairs"] >= 1 and row["eligible_pairs"] >= 1
    for k in FINITE:
        assert _finite(row[k]), (k, row[k])
    assert 0.0 <= row["yield"] <= 1.0 and row["identity_switches"] >= 0
    assert all(_finite(v) for v in row["identity_distances"])
    for k in ("yield", "identity_switches", "mouth_open_corr", "toward_source", "off_face_frames_total",
              "occluder_kept_min"):
        assert _finite(smoke["summary"][k]), (k, smoke["summary"][k])


def test_smoke_occluder_and_strips(smoke):
    (shape, row), = smoke["occluders"].items()
    assert row["occluder_frames"] >= 1
    assert _finite(row["occluder_kept"]) and 0.0 <= row["occluder_kept"] <= 1.0
    strips = smoke["_out"] / "strips"
    assert (strips / "sample_kling_avatar_clip.png").is_file()
    assert (strips / f"occluder_{shape}.png").is_file()
    text = "\n".join(report.markdown(smoke))     # the doc's tables render from a result
    assert "shipped_colour" in text and shape in text
    with pytest.raises(ValueError, match="smoke"):
        section.write(SECTION, smoke["_record"], section.stamp())


def test_face_detail_reads_a_smeared_face_lower():
    """The scorer's detail_ratio: the same face blurred (what an upscaled 60 px source gives) holds
    less fine detail at the same 68 points; the unchanged face exactly as much."""
    import cv2

    from swapline_core.video.read import iter_frames

    frame = next(f for _, f in iter_frames(REPO / "assets" / "samples" / "kling_avatar_clip.mp4"))
    from bench.quality import score

    rect = score.hog(frame, 1)[0]
    l68 = score.landmarks(frame, rect)
    sharp = metrics.face_detail(frame, l68)
    soft = metrics.face_detail(cv2.GaussianBlur(frame, (0, 0), 2.0), l68)
    assert sharp is not None and sharp > 0
    assert soft < 0.6 * sharp, (soft, sharp)
    assert metrics.face_detail(frame.copy(), l68) == sharp


def test_forehead_step_reads_a_patch_on_the_forehead_higher():
    """The scorer's forehead_step: a lighter patch with a hard edge pasted on the forehead (what the
    target's lit skin showing through a cut-out gives) reads higher than the unchanged face, which
    reads exactly as it did."""
    from swapline_core.video.read import iter_frames

    frame = next(f for _, f in iter_frames(REPO / "assets" / "samples" / "kling_avatar_clip.mp4"))
    from bench.quality import score

    l68 = score.landmarks(frame, score.hog(frame, 1)[0])
    before = metrics.forehead_step(frame, l68)
    assert before is not None and before > 0
    patched = frame.copy()
    up = l68[17:27].mean(0) - l68[8]
    cx, cy = (l68[17:27].mean(0) + 0.15 * up).astype(int)       # the middle of the measured band
    half = max(3, int(0.06 * np.linalg.norm(up)))
    patched[cy - half:cy + half, cx - 2 * half:cx + 2 * half] = np.clip(
        patched[cy - half:cy + half, cx - 2 * half:cx + 2 * half].astype(int) + 40, 0, 255).astype(np.uint8)
    assert metrics.forehead_step(patched, l68) > 1.5 * before
    assert metrics.forehead_step(frame.copy(), l68) == before


def test_reason_categories_drop_the_numbers():
    assert metrics.category("colour cast: chroma shift 12.3 > 10") == "colour cast: chroma shift"
    assert metrics.category("identity 0.512 < 0.6") == "identity"
    assert metrics.category("face not swapped (changed 0.01 of the face < 0.05)") == "face not swapped"
    assert metrics.category("foreign colour bled into the face: share 0.120 > 0.05") == \
        "foreign colour bled into the face: share"
    assert metrics.refusal_category("head turned: yaw 55.5 deg beyond the classical swapper's 40 deg") == \
        "head turned"


def _p(frame, outcome, track=0, eligible=True, why=()):
    return {"frame": frame, "track": track, "outcome": outcome, "eligible": eligible, "why": list(why),
            "height": 80.0 if eligible else 20.0, "yaw": 0.0}


def test_identity_switches_count_flips_inside_a_shot_only():
    ps = [_p(0, "delivered"), _p(1, "qa_failed", why=["seam"]), _p(2, "delivered"),   # two flips
          _p(3, "refused", why=["head turned"]),                                      # a third
          _p(4, "delivered")]                                                          # cut at 4: not a flip
    assert metrics.identity_switches(ps, cuts=[4]) == 3
    assert metrics.identity_switches(ps, cuts=[]) == 4
    # another track's state never counts against this one
    assert metrics.identity_switches([_p(0, "delivered"), _p(0, "refused", track=1), _p(1, "delivered")], []) == 0
    # a bridged frame (failed just past a limit, delivered swapped) shows the swap: no flip
    assert metrics.identity_switches([_p(0, "delivered"), _p(1, "bridged", why=["mouth"]), _p(2, "delivered")], []) == 0


def test_pairs_read_bridged_and_reverted_frames_from_the_report():
    import numpy as np

    from swapline_core.types import Face

    def rec(i, reasons):
        return {"frame": i, "status": "fail" if reasons else "ok",
                "faces": [{"track_id": 0, "bbox": [0, 0, 80, 100], "reasons": reasons}]}
    kps = np.array([[25, 40], [55, 40], [40, 60], [28, 80], [52, 80]], np.float32)
    faces = [[Face(bbox=np.array([0, 0, 80, 100], np.float32), kps=kps, score=1.0, track_id=0)] for _ in range(3)]
    qa = {"frames": [rec(0, []), rec(1, ["mouth opening differs from the target's by 0.08 > 0.0777"]),
                     rec(2, ["seam at the paste boundary: gradient ratio 2.0 > 1.5"])], "reverted_frames": [2]}
    assert [p["outcome"] for p in metrics.pairs(qa, faces)] == ["delivered", "bridged", "qa_failed"]


def test_outcome_shares_over_eligible_pairs():
    ps = [_p(0, "delivered"), _p(1, "qa_failed", why=["seam", "bleed"]), _p(2, "refused", why=["head turned"]),
          _p(3, "delivered"), _p(4, "refused", eligible=False, why=["too small"])]
    s = metrics.outcome_shares(ps)
    assert (s["tracked_pairs"], s["eligible_pairs"]) == (5, 4)
    assert (s["yield"], s["refused"], s["qa_failed"]) == (0.5, 0.25, 0.25)
    assert s["qa_failed_by_reason"] == {"seam": 0.25, "bleed": 0.25}
    assert s["refused_by_reason"] == {"head turned": 0.25} and s["ineligible"]["small"] == 1
    assert s["bridged_by_reason"] == {}
    # bridged pairs are delivered with their shot: what they failed on is reported on its own
    s = metrics.outcome_shares(ps + [_p(5, "bridged", why=["mouth"]), _p(6, "bridged", why=["mouth", "seam"])])
    assert s["bridged"] == round(2 / 6, 4) and s["bridged_by_reason"] == {"mouth": round(2 / 6, 4),
                                                                          "seam": round(1 / 6, 4)}
    assert s["qa_failed_by_reason"] == {"seam": round(1 / 6, 4), "bleed": round(1 / 6, 4)}


def test_one_misfit_frame_does_not_make_a_closed_mouth_speak():
    # the scorer's readings on the development set's first 24 frames: the vace dancer's closed mouth
    # (0.135 on one tilted frame, a landmark misfit) and the kling sample's speech
    closed = [0.069, 0.027, 0.066, 0.068, 0.042, 0.135, 0.071, 0.065, 0.043, 0.044, 0.043, 0.062, 0.051,
              0.052, 0.022, 0.021, 0.021, 0.043, 0.042, 0.044, 0.044, 0.067, 0.045, 0.021]
    speech = [0.166, 0.145, 0.337, 0.237, 0.156, 0.11, 0.093, 0.221, 0.229, 0.228, 0.259, 0.266, 0.22, 0.2,
              0.139, 0.21, 0.173, 0.22, 0.184, 0.168, 0.222, 0.204, 0.147, 0.173]
    assert max(closed) - min(closed) >= metrics.MOUTH_MOVES          # the full range would call it speech
    assert metrics.mouth_span(closed) < metrics.MOUTH_MOVES
    assert metrics.mouth_span(speech) >= metrics.MOUTH_MOVES
    assert metrics.mouth_span([]) is None
