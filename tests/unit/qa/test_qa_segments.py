"""One decision per shot ("keep original" on track segments, swapline_core/qa/segments.py).
Pure record-level tests: the records are what the gate writes, the thresholds the shipped ones."""
from dataclasses import replace

from swapline_core.qa import decide, gate

TH = decide.QAThresholds()


def face(track=0, changed=0.5, **m):
    base = {"track_id": track, "changed": changed, "redetected": True, "identity": 0.95, "leakage": 0.5,
            "landmark_drift": 0.05, "flicker_ratio": 1.0, "mouth_delta": 0.01, "seam_ratio": 1.0}
    return {**base, **m}


def report(rows, cuts=(), skipped=None, th=TH):
    """rows: per frame a list of faces (empty: no face)."""
    records = [{"frame": i, "status": "ok" if fs else "no_face", "faces": fs} for i, fs in enumerate(rows)]
    gate.finalize(records, th, skipped)
    acc = decide.QAAccumulator()
    acc.add(records)
    rep = acc.report(th, skipped=skipped)
    rep["cuts"] = list(cuts)
    return rep


def keep(rep):
    return decide.apply_policy("keep original", rep)


def test_a_marginal_failure_inside_a_swapped_shot_is_bridged():
    mouth = TH.max_mouth_delta * 1.05                       # 5 % past its limit
    rows = [[face()] for _ in range(10)]
    rows[4] = [face(mouth_delta=mouth)]
    rep = report(rows)
    assert rep["frames"][4]["status"] == "fail"             # the gate's verdict is unchanged
    assert keep(rep) == set()
    (seg,) = rep["segments"]
    assert seg["decision"] == "swapped" and seg["bridged_frames"] == [4]
    assert seg["reasons"][0].startswith("mouth opening differs")
    assert decide.apply_policy("keep original per frame", rep) == {4}


def test_a_clear_failure_keeps_its_whole_shot_original_and_only_that_shot():
    rows = [[face()] for _ in range(12)]
    rows[3] = [face(mouth_delta=TH.max_mouth_delta * 3)]
    rep = report(rows, cuts=[6])
    assert keep(rep) == set(range(0, 6))
    first, second = rep["segments"]
    assert (first["shot"], first["decision"], first["first"], first["last"]) == (0, "kept original", 0, 5)
    assert first["reasons"][0].startswith("mouth opening differs") and "frame 3" in first["reasons"][0]
    assert (second["shot"], second["decision"]) == (1, "swapped")


def test_lost_faces_and_painted_occluders_are_never_bridged():
    for bad in (dict(redetected=False), dict(occluder_overwrite=TH.max_occluder_overwrite * 1.05),
                dict(offface=TH.max_offface * 1.05), dict(changed=0.0)):
        rows = [[face()] for _ in range(6)]
        rows[2] = [face(**bad)]
        rep = report(rows)
        assert keep(rep) == set(range(6)), bad


def test_a_refused_run_inside_a_swapped_shot_keeps_the_shot_original():
    rows = [[face()] for _ in range(8)]
    for i in (3, 4):
        rows[i] = [face(changed=0.0)]
    skipped = {3: {0: "head turned: yaw 50.0 deg beyond the classical swapper's 45 deg"},
               4: {0: "head turned: yaw 52.0 deg beyond the classical swapper's 45 deg"}}
    rep = report(rows, skipped=skipped)
    assert keep(rep) == set(range(8))
    assert rep["segments"][0]["reasons"][0].startswith("head turned")


def test_a_face_refused_throughout_stays_the_target_and_reverts_nothing():
    rows = [[face(track=0), face(track=1, changed=0.0)] for _ in range(5)]
    skipped = {i: {1: "too small: 30 px"} for i in range(5)}
    rep = report(rows, skipped=skipped)
    assert keep(rep) == set()
    decisions = {s["track_id"]: s["decision"] for s in rep["segments"]}
    assert decisions == {0: "swapped", 1: "refused"}


def test_a_reverted_segment_takes_the_other_faces_of_its_frames_along():
    # track 1 fails clearly on frame 2; frames 0-3 go back, so track 0 (swapped on 0-7) would
    # flip there: its segment is kept original as well
    rows = [[face(track=0)] + ([face(track=1)] if i < 4 else []) for i in range(8)]
    rows[2][1] = face(track=1, mouth_delta=TH.max_mouth_delta * 3)
    rep = report(rows)
    assert keep(rep) == set(range(8))
    why = {s["track_id"]: s["reasons"] for s in rep["segments"]}
    assert why[0] == ["another face in these frames was kept original"]


def test_frames_sampled_out_inside_a_kept_segment_go_back_too():
    rows = [[face()] for _ in range(9)]
    rows[3] = [face(mouth_delta=TH.max_mouth_delta * 3)]
    rep = report(rows)
    for i in (1, 5, 7):                                     # what sample_every leaves unevaluated
        rep["frames"][i] = {"frame": i, "status": "skipped", "faces": []}
    assert keep(rep) == set(range(9))


def test_the_bridge_band_is_in_each_metrics_own_units():
    from swapline_core.qa.segments import BAND

    for limit in (0.8, 0.2):                                # dlib-like and ArcFace-like identity limits
        th = replace(TH, min_identity=limit)
        inside, outside = limit - BAND["identity"] * 0.9, limit - BAND["identity"] * 1.1
        for ident, reverted in ((inside, set()), (outside, set(range(4)))):
            rows = [[face()] for _ in range(4)]
            rows[1] = rows[2] = [face(identity=ident)]      # two frames: not a lone fit spike
            assert keep(report(rows, th=th)) == reverted, (limit, ident)
    # an ArcFace identity of 0.05 against 0.2 is a different person, not a marginal reading (a band
    # relative to the limit bridged it: (1 - 0.05) / (1 - 0.2) = 1.19 < 1.25)
    rows = [[face()] for _ in range(4)]
    rows[1] = rows[2] = [face(identity=0.05)]
    assert keep(report(rows, th=replace(TH, min_identity=0.2))) == set(range(4))


def test_a_leakage_failure_is_never_bridged():
    # the shipped limit is 0.99: any band relative to it bridged every leakage failure
    for lone in (True, False):
        rows = [[face()] for _ in range(6)]
        rows[2] = [face(leakage=TH.max_leakage + 0.001)]
        if not lone:
            rows[3] = [face(leakage=TH.max_leakage + 0.001)]
        rep = report(rows)
        assert keep(rep) == set(range(6)), lone
        assert rep["shipped_failing"] == []


def test_the_report_lists_every_failing_frame_that_shipped():
    rows = [[face()] for _ in range(10)]
    rows[4] = [face(mouth_delta=TH.max_mouth_delta * 1.05)]
    rep = report(rows)
    keep(rep)
    (entry,) = rep["shipped_failing"]
    assert entry["frame"] == 4 and entry["why"].startswith("bridged")
    assert entry["faces"][0]["track_id"] == 0 and entry["faces"][0]["reasons"][0].startswith("mouth opening")
    rows[7] = [face(mouth_delta=TH.max_mouth_delta * 3)]    # clear failure: the shot is kept original
    rep = report(rows)
    keep(rep)
    assert rep["shipped_failing"] == []
    rep = report(rows)
    decide.apply_policy("flag only", rep)
    assert [e["frame"] for e in rep["shipped_failing"]] == [4, 7]
    assert all("flag only" in e["why"] for e in rep["shipped_failing"])
    rep = report(rows)
    decide.apply_policy("keep original per frame", rep)
    assert rep["shipped_failing"] == []


def test_a_lone_fit_spike_in_a_long_shot_is_bridged_a_lasting_one_is_not():
    # 1.6x past the mouth limit: beyond the bridging band, under its SPIKE
    mouth = TH.max_mouth_delta * 1.6
    rows = [[face()] for _ in range(300)]
    rows[220] = [face(mouth_delta=mouth)]
    rep = report(rows)
    assert keep(rep) == set()
    (seg,) = rep["segments"]
    assert seg["decision"] == "swapped" and seg["bridged_frames"] == [220]
    rows[221] = [face(mouth_delta=mouth)]                   # two frames in a row: a real mismatch
    assert keep(report(rows)) == set(range(300))


def test_what_a_lone_spike_allowance_does_not_cover():
    seam = {"seam_ratio": TH.max_seam_ratio * 1.6}           # a pixel metric: what the viewer sees
    gross = {"mouth_delta": TH.max_mouth_delta * 2.5}        # past its SPIKE
    for bad in (seam, gross):
        rows = [[face()] for _ in range(9)]
        rows[4] = [face(**bad)]
        assert keep(report(rows)) == set(range(9)), bad
    rows = [[face()] for _ in range(9)]
    rows[4] = [face(mouth_delta=TH.max_mouth_delta * 1.6)]
    rep = report(rows)
    for i in (3, 5):                                        # QA sampled: its neighbours unseen
        rep["frames"][i] = {"frame": i, "status": "skipped", "faces": []}
    assert keep(rep) == set(range(9))
    rows = [[face()] for _ in range(9)]
    rows[8] = [face(mouth_delta=TH.max_mouth_delta * 1.6)]  # the segment's last frame: no after
    assert keep(report(rows)) == set(range(9))


# -- "keep original unless few fail": a shot ships with at most FEW_FAILING_SHARE of its frames failing
def few(rep):
    return decide.apply_policy(decide.FEW_FAILING_POLICY, rep)


def test_few_failing_is_the_default_policy_beside_keep_original():
    from swapline_core.qa.segments import FEW_FAILING_SHARE

    assert decide.FEW_FAILING_POLICY == "keep original unless few fail"
    assert decide.FEW_FAILING_POLICY in decide.POLICIES and "keep original" in decide.POLICIES
    assert decide.DEFAULT_POLICY == decide.FEW_FAILING_POLICY
    assert FEW_FAILING_SHARE == 0.2


def test_one_clearly_failing_frame_in_ten_ships_and_is_listed():
    rows = [[face()] for _ in range(10)]
    rows[4] = [face(mouth_delta=TH.max_mouth_delta * 3)]    # fails outright: no band, no spike
    rep = report(rows)
    assert keep(rep) == set(range(10))                      # per shot: the whole shot goes back
    rep = report(rows)
    assert few(rep) == set()
    (seg,) = rep["segments"]
    assert seg["decision"] == "swapped" and seg["shipped_failing_frames"] == [4]
    assert "bridged_frames" not in seg and seg["reasons"][0].startswith("mouth opening differs")
    (entry,) = rep["shipped_failing"]
    assert entry["frame"] == 4 and entry["why"] == "within the shot's failing share"
    assert entry["faces"] == [{"track_id": 0, "reasons": rep["frames"][4]["faces"][0]["reasons"]}]
    assert rep["frames"][4]["status"] == "fail"             # the gate's verdict is unchanged


def test_two_in_ten_ship_three_in_ten_keep_the_shot_original():
    for bad, reverted in (((2, 7), set()), ((2, 5, 7), set(range(10)))):
        rows = [[face()] for _ in range(10)]
        for i in bad:
            rows[i] = [face(mouth_delta=TH.max_mouth_delta * 3)]
        rep = report(rows)
        assert few(rep) == reverted, bad
        (seg,) = rep["segments"]
        if reverted:
            assert seg["decision"] == "kept original" and "shipped_failing_frames" not in seg
            assert seg["reasons"][0].startswith("3 of 10 evaluated frames fail"), seg["reasons"]
            assert rep["shipped_failing"] == []
        else:
            assert seg["shipped_failing_frames"] == list(bad)
            assert [e["frame"] for e in rep["shipped_failing"]] == list(bad)


def test_a_marginal_failure_is_bridged_and_does_not_count_against_the_share():
    rows = [[face()] for _ in range(10)]
    rows[1] = [face(mouth_delta=TH.max_mouth_delta * 1.05)]  # within its band
    rows[3] = rows[6] = [face(mouth_delta=TH.max_mouth_delta * 3)]
    rep = report(rows)
    assert few(rep) == set()
    (seg,) = rep["segments"]
    assert seg["bridged_frames"] == [1] and seg["shipped_failing_frames"] == [3, 6]
    why = {e["frame"]: e["why"] for e in rep["shipped_failing"]}
    assert why[1].startswith("bridged") and why[3] == why[6] == "within the shot's failing share"


def test_failures_no_share_ships_keep_the_shot_original():
    for bad in (dict(occluder_overwrite=TH.max_occluder_overwrite * 1.05), dict(offface=TH.max_offface * 1.05),
                dict(redetected=False), dict(changed=0.0)):
        rows = [[face()] for _ in range(10)]
        rows[5] = [face(**bad)]
        rep = report(rows)
        assert few(rep) == set(range(10)), bad
        assert rep["segments"][0]["decision"] == "kept original" and rep["shipped_failing"] == []


def test_a_refused_run_inside_a_shot_still_keeps_it_original_under_the_share():
    rows = [[face()] for _ in range(10)]
    rows[3] = [face(changed=0.0)]
    rep = report(rows, skipped={3: {0: "head turned: yaw 50.0 deg beyond the classical swapper's 45 deg"}})
    assert few(rep) == set(range(10))
    assert rep["segments"][0]["reasons"][0].startswith("head turned")


def test_few_failing_keeps_two_faces_in_the_same_frames_consistent():
    # track 1 (frames 0-4) fails on 3 of its 5 frames: kept original, frames 0-4 go back; track 0
    # (frames 0-9, one clear failure: within its share) would flip there, so it follows
    rows = [[face(track=0)] + ([face(track=1)] if i < 5 else []) for i in range(10)]
    rows[8][0] = face(track=0, mouth_delta=TH.max_mouth_delta * 3)
    for i in (1, 2, 3):
        rows[i][1] = face(track=1, mouth_delta=TH.max_mouth_delta * 3)
    rep = report(rows)
    assert few(rep) == set(range(10))
    segs = {s["track_id"]: s for s in rep["segments"]}
    assert segs[1]["decision"] == segs[0]["decision"] == "kept original"
    assert segs[1]["reasons"][0].startswith("3 of 5 evaluated frames fail outright")
    assert segs[0]["reasons"][0] == "another face in these frames was kept original"
    assert rep["shipped_failing"] == []
    # the same two faces, each within its share: both ship, frames 0-9 swapped throughout
    rows[2][1] = rows[3][1] = face(track=1)
    rep = report(rows)
    assert few(rep) == set()
    assert {s["track_id"]: s["shipped_failing_frames"] for s in rep["segments"]} == {0: [8], 1: [1]}


def test_few_failing_keeps_the_frame_count():
    import numpy as np

    rows = [[face()] for _ in range(10)]
    rows[4] = [face(mouth_delta=TH.max_mouth_delta * 3)]
    rows[7] = [face(occluder_overwrite=TH.max_occluder_overwrite * 2)]
    rep = report(rows, cuts=[6])
    revert = few(rep)
    assert revert == set(range(6, 10))                      # shot 0 ships frame 4, shot 1 goes back
    originals = [np.zeros((2, 2, 3), np.uint8) for _ in range(10)]
    swapped = [np.ones((2, 2, 3), np.uint8) for _ in range(10)]
    out = decide.merge_chunk(0, originals, swapped, revert)
    assert len(out) == 10 and [int(f[0, 0, 0]) for f in out] == [1] * 6 + [0] * 4


def _warned_report(th, source_warned, skipped=None):
    rows = [[face()] for _ in range(8)]
    rows[5] = [face(changed=0.0)]                           # one face the swap left unchanged
    records = [{"frame": i, "status": "ok", "faces": fs} for i, fs in enumerate(rows)]
    gate.finalize(records, th, skipped, source_warned)
    acc = decide.QAAccumulator()
    acc.add(records)
    rep = acc.report(th, skipped=skipped)
    rep["cuts"] = []
    return rep


def test_a_labelled_set_fails_every_swapped_face_of_a_source_the_source_check_warned_about():
    labelled = decide.limit_set("viewer-labelled (mesh swap)")
    assert labelled.fail_on_source_warning and not decide.limit_set("calibrated (sample clip)").fail_on_source_warning
    rep = _warned_report(labelled, source_warned=True)
    swapped = [f for fr in rep["frames"] for f in fr["faces"] if f["swapped"]]
    assert len(swapped) == 7 and all(decide.SOURCE_WARNING_REASON in f["reasons"] for f in swapped)
    # the unchanged face keeps its own one reason: there is no swap of it to judge
    assert rep["frames"][5]["faces"][0]["reasons"][0].startswith("face not swapped")
    # no frame of the shot is delivered swapped, under either shot policy
    assert keep(rep) == set(range(8))
    assert decide.apply_policy("keep original unless few fail", rep) == set(range(8))
    # a sharp source, the rule switched off, or the calibrated set: the faces are judged by the limits
    for th, warned in ((labelled, False), (replace(labelled, fail_on_source_warning=False), True),
                       (decide.limit_set("calibrated (sample clip)"), True)):
        rep = _warned_report(th, warned)
        assert not any(decide.SOURCE_WARNING_REASON in f["reasons"] for fr in rep["frames"] for f in fr["faces"])


def test_the_note_says_the_faces_failed_for_the_source():
    note = decide.limits_note("viewer-labelled (mesh swap)", ["the source photo: the face is small"], True)
    assert "flagged by Build Face Model: the source photo: the face is small." in note
    assert "Every swapped face fails for it" in note
    assert "Every swapped face" not in decide.limits_note("viewer-labelled (mesh swap)", ["x"], False)
