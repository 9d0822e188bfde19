"""The labelled set's tools (bench/qa_labels): labellers' lines are parsed strictly, the crop pair is
what the protocol says, the limit rule never judges a clip with limits chosen on it, and the set in
the repository is complete (every labelled face has its crop, provenance and the gate's record)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bench.qa_labels import agreement, build, labels

INDEX = {"1": "a|s|000|0", "2": "a|s|002|0", "3": "b|s|000|0"}


def test_lines_are_parsed_strictly():
    got = labels.parse("1 ok\n# a comment\n2 bad seam, blotch\n\n3 bad glasses", INDEX)
    assert got == {"a|s|000|0": (True, []), "a|s|002|0": (False, ["blotch", "seam"]),
                   "b|s|000|0": (False, ["glasses"])}
    for text, why in (("4 ok", "no sheet"), ("1 bad", "at least one"), ("1 ok seam", "takes no"),
                      ("1 bad sparkle", "unknown defect"), ("1 ok\n1 ok", "twice"), ("one ok", "not 'N ok'")):
        with pytest.raises(ValueError, match=why):
            labels.parse(text, INDEX)


def test_the_pair_is_target_then_result_on_the_same_square():
    rng = np.random.default_rng(0)
    orig = rng.integers(0, 255, (120, 200, 3), np.uint8)
    res = orig.copy()
    res[40:80, 60:100] = 0
    p = build.pair(orig, res, (60, 40, 100, 80), size=64)
    assert p.shape == (64, 64 * 2 + 4, 3)
    assert not np.array_equal(p[:, :64], p[:, 68:])             # the result differs where it was swapped
    x, y, side = build.square((60, 40, 100, 80), orig.shape)
    assert side == 64 and 0 <= x <= 200 - side and 0 <= y <= 120 - side
    assert build.square((0, 0, 190, 110), orig.shape)[2] == 120  # never larger than the frame


def _rows(n_clips=4, per=30, seed=1):
    """Faces whose seam_ratio separates good from bad; colour_cast is noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_clips):
        for k in range(per):
            ok = bool(rng.random() < 0.6)
            rows.append({"id": f"c{c}|s|{k:03d}|0", "clip": f"c{c}", "source": "s", "acceptable": ok, "defects": [],
                         "shipped_pass": True, "redetected": True,
                         **{m: None for m, _ in agreement.METRICS},
                         "seam_ratio": float(rng.normal(1.0 if ok else 1.6, 0.1)),
                         "colour_cast": float(rng.normal(5, 2))})
    return rows


def test_the_rule_uses_metrics_that_separate_and_keeps_recall():
    rows = _rows()
    limits, _ = agreement.choose(rows)
    assert set(limits) == {"seam_ratio"}                       # colour_cast does not separate: never a limit
    assert 1.1 < limits["seam_ratio"] < 1.5
    acc = np.array([r["acceptable"] for r in rows])
    s = agreement.scores(acc, agreement.passes(rows, limits, False))
    assert s["recall"] >= agreement.MIN_RECALL and s["precision"] > 0.95
    assert agreement.auc(rows, "seam_ratio", "max") > 0.95
    assert 0.3 < agreement.auc(rows, "colour_cast", "max") < 0.7


def test_leave_one_clip_out_never_judges_a_clip_with_its_own_limits(monkeypatch):
    rows = _rows()
    seen = []
    real = agreement.choose

    def spy(train):
        seen.append({r["clip"] for r in train})
        return real(train)

    monkeypatch.setattr(agreement, "choose", spy)
    passed, per_clip = agreement.leave_one_clip_out(rows)
    assert sorted(per_clip) == ["c0", "c1", "c2", "c3"]
    assert all(len(s) == 3 for s in seen) and {frozenset({"c0", "c1", "c2", "c3"} - s) for s in seen} == \
        {frozenset({c}) for c in per_clip}
    assert passed.dtype == bool and len(passed) == len(rows)


def test_the_committed_set_is_complete():
    faces = {r["id"]: r for r in build.face_records()}
    gate = {r["id"] for r in build.gate_records()}
    cropped = [r for r in faces.values() if r.get("crop")]
    assert len(cropped) >= 1000 and len({r["clip"] for r in cropped}) >= 14
    assert len({r["source"] for r in cropped}) >= 5
    for r in cropped:
        assert (build.SET / r["crop"]).is_file(), r["id"]
        assert r["id"] in gate and r["commit"], r["id"]
    lab = labels.labels(1)
    assert set(lab) <= set(faces)
    assert all(lb["acceptable"] or lb["defects"] for lb in lab.values())


def test_a_mixed_round_files_each_face_once_under_its_round(tmp_path, monkeypatch):
    monkeypatch.setattr(labels, "LABELS", tmp_path / "labels.jsonl")
    index = tmp_path / "index.json"
    index.write_text(json.dumps(INDEX))
    first = tmp_path / "first.txt"
    first.write_text("1 ok\n")
    assert labels.merge([first], index, 1, "l1") == 1
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("1 bad seam\n3 ok\n")
    assert labels.merge([mixed], index, None, "l2", "r1") == 2
    rows = {(r["id"], r["pass"]): r for r in map(json.loads, labels.LABELS.read_text().splitlines())}
    assert rows[("a|s|000|0", 2)]["sheets"] == "r1" and not rows[("a|s|000|0", 2)]["acceptable"]
    assert rows[("b|s|000|0", 1)]["sheets"] == "r1"          # never labelled before: its first label
    assert set(labels.labels(None, "r1")) == {"a|s|000|0", "b|s|000|0"}
    with pytest.raises(ValueError, match="already labelled in r1"):
        labels.merge([mixed], index, None, "l3", "r1")
    # a later round sees the face a third time: pass 3, read by no pass-1/pass-2 statistic
    assert labels.merge([mixed], index, None, "l3", "r2") == 2
    assert labels.labels(3)["a|s|000|0"]["sheets"] == "r2"
    with pytest.raises(ValueError, match="either a pass"):
        labels.merge([mixed], index, None, "l3")


def test_a_ruled_round_replaces_first_labels_and_its_twin_only_measures(tmp_path, monkeypatch):
    monkeypatch.setattr(labels, "LABELS", tmp_path / "labels.jsonl")
    monkeypatch.setattr(labels, "RULED", {"r1": "a rule"})
    monkeypatch.setattr(labels, "TWIN", {"r1b": "r1"})
    index = tmp_path / "index.json"
    index.write_text(json.dumps(INDEX))
    for text, pass_, round_ in (("1 ok\n2 ok\n3 ok\n", 1, None), ("1 bad soft\n2 ok\n", None, "r1"),
                                ("1 bad soft\n2 bad soft\n", None, "r1b")):
        f = tmp_path / "answers.txt"
        f.write_text(text)
        labels.merge([f], index, pass_, "l", round_)
    ruler = labels.ruler()
    assert not ruler["a|s|000|0"]["acceptable"] and ruler["a|s|002|0"]["acceptable"]
    assert ruler["b|s|000|0"]["acceptable"] and ruler["b|s|000|0"]["pass"] == 1
    tw = labels.twin_agreement("r1b")
    assert tw["faces"] == 2 and tw["same_verdict"] == 0.5 and tw["first_ok_second_bad"] == 1


def test_a_lineage_round_shows_one_earlier_path_per_run(monkeypatch):
    """Beside a new path, each run's pictures as shipped: the first path of BESIDE_FIRST with faces."""
    def row(clip, path, k=0):
        return {"id": f"{clip}|s|{k:03d}|0|{path}", "clip": clip, "source": "s", "path": path, "crop": "x"}
    rows = [row("a", "mesh10"), row("a", "mesh9"), row("a", "mesh7"), row("b", "mesh10"), row("b", "mesh7"),
            row("b", "mesh8", 2), row("c", "mesh7")]
    monkeypatch.setattr(labels, "faces", lambda: rows)
    first = {r["id"]: {"acceptable": True} for r in rows if r["path"] != "mesh10"}
    monkeypatch.setattr(labels, "labels", lambda pass_=1, sheets=None: first if pass_ == 1 and sheets is None else {})
    got = {}
    monkeypatch.setattr(labels, "_write_sheets",
                        lambda mix, n, sub: got.setdefault("ids", sorted(r["id"] for r in mix)))
    monkeypatch.setattr(labels, "BESIDE_FIRST", ("r-test",))
    monkeypatch.setitem(labels.BESIDE, "r-test", ("mesh9", "mesh8", "mesh7"))
    labels.mixed_sheets("r-test")
    assert got["ids"] == sorted(["a|s|000|0|mesh10", "a|s|000|0|mesh9", "b|s|000|0|mesh10", "b|s|002|0|mesh8"])


def test_a_twin_round_never_shows_a_labeller_the_same_face_twice(tmp_path, monkeypatch):
    """Sheet k of a round and sheet k of its twin (one labeller's pair) share no face; together
    they hold the same faces."""
    monkeypatch.setattr(labels, "LABELS", tmp_path / "none.jsonl")
    for twin, round_ in labels.TWIN.items():
        a = json.loads(labels.relabel_sheets(round_, tmp_path).read_text())
        b = json.loads(labels.relabel_sheets(twin, tmp_path).read_text())
        assert len(a) >= 2 * labels.PER_SHEET and sorted(a.values()) == sorted(b.values())
        assert min(map(int, b)) > max(map(int, a))
        av, bv = list(a.values()), list(b.values())
        for s in range(0, len(av), labels.PER_SHEET):
            assert not set(av[s:s + labels.PER_SHEET]) & set(bv[s:s + labels.PER_SHEET])


def test_the_held_out_clips_are_none_of_the_development_clips_and_were_chosen_by_the_rule():
    """The independent check's clips: candidates no development clip is among, chosen by the
    recorded rule (enough large faces, seeded shuffle), each labelled face from one of them."""
    import random

    from bench.qa_labels import heldout

    dev = {c.name for c in build.CLIPS}
    assert not dev & set(heldout.CANDIDATES)
    record = json.loads(heldout.CLIPS_JSON.read_text())
    readings = record["readings"]
    assert set(readings) == set(heldout.CANDIDATES)
    qualifying = sorted(n for n, r in readings.items() if r["frames_with_face_ge_min"] >= heldout.MIN_FRAMES)
    assert qualifying == record["qualifying"]
    order = qualifying[:]
    random.Random(heldout.SEED).shuffle(order)
    assert [c["name"] for c in heldout.clips()] == order[:heldout.COUNT]
    faces = build.face_records(heldout.ROOT)
    assert faces and {r["clip"] for r in faces} <= set(order[:heldout.COUNT])
    labelled = {json.loads(x)["id"] for x in (heldout.ROOT / "labels.jsonl").read_text().splitlines()}
    # every swapped face labelled, but a path judged only where it visibly changed a face
    visible = set(labels.VISIBLE.values())
    assert labelled <= {r["id"] for r in faces if r.get("crop")}
    assert {r["id"] for r in faces if r.get("crop") and build.path_of(r) not in visible} <= labelled


def test_the_second_held_out_set_is_the_rest_of_the_same_shuffle():
    """heldout2: the qualifying clips after the first check's, in the same seeded order; none of
    them a development clip or one of the first check's."""
    import random

    from bench.qa_labels import heldout

    record = json.loads(heldout.CLIPS_JSON.read_text())
    order = record["qualifying"][:]
    random.Random(heldout.SEED).shuffle(order)
    second = [c["name"] for c in heldout.clips("heldout2")]
    assert second == order[heldout.COUNT:] and second
    assert not set(second) & {c["name"] for c in heldout.clips()}
    assert not set(second) & {c.name for c in build.CLIPS}


def test_a_crop_is_the_same_picture_within_a_few_grey_levels():
    import cv2

    rng = np.random.default_rng(3)
    img = rng.integers(40, 200, (64, 128, 3)).astype(np.uint8)
    jpeg = lambda a: cv2.imencode(".jpg", a, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()  # noqa: E731
    old = jpeg(img)
    assert build.same_picture(old, old)
    nudged = img.copy()
    nudged[10:12, 10:12] += 3                  # a rerun's rounding: invisible
    assert build.same_picture(jpeg(nudged), old)
    changed = img.copy()
    changed[20:40, 20:60] = 255                # a patch a labeller would see
    assert not build.same_picture(jpeg(changed), old)
    assert not build.same_picture(None, old)


def test_the_flicker_readings_of_the_committed_set():
    from bench.qa_labels import flicker

    res = flicker.readings(["mesh7", "mesh9"], ["api_kling_avatar2-1"])
    assert set(res) == {("api_kling_avatar2-1", "mesh7"), ("api_kling_avatar2-1", "mesh9")}
    for r in res.values():
        assert r["faces"] >= 40 and 0.5 < r["median"] <= r["max"] < 5


def test_delivered_counts_each_face_of_a_side_by_side_round_once():
    """``agreement.delivered`` on the committed round mixed-15: every face the round labelled is in
    one column, judged with that round's label, and what the gate passes splits into accepted and not."""
    got = agreement.delivered("mixed-15")
    round_labels = labels.labels(None, "mixed-15")
    assert sum(v["faces"] for v in got.values()) == len(round_labels)
    assert len(got) == 2 and any(k.startswith("mesh9 as shipped") for k in got) and "mesh11" in got
    for v in got.values():
        assert v["delivered_ok"] + v["delivered_bad"] == v["passed"] <= v["faces"]
        assert v["delivered_ok"] <= v["acceptable"]
    acc11 = sum(round_labels[r["id"]]["acceptable"] for r in agreement.table("mesh11") if r["id"] in round_labels)
    assert got["mesh11"]["acceptable"] == acc11


def test_a_visible_round_labelled_each_visibly_changed_face_beside_its_shipped_picture():
    """Round mixed-16 (path mesh12): every face ``visible.pairs`` finds visibly changed is labelled in
    the round together with the shipped picture of it, and no other face is; ``visible.measure``
    counts both paths on the same faces."""
    from bench.qa_labels import visible

    pairs = visible.pairs("mesh12")
    changed = {f["id"] for new, old, ch in pairs if ch for f in (new, old)}
    assert changed and set(labels.labels(None, "mixed-16")) == changed
    got = visible.measure("mesh12", "mixed-16")
    assert got["changed_not_labelled"] == 0 and got["visibly_changed"] == len(changed) // 2
    assert got["mesh12"]["faces"] == got["shipped"]["faces"]
    for v in (got["mesh12"], got["shipped"]):
        assert v["delivered_ok"] <= v["accepted"] and v["delivered_ok_changed"] <= v["accepted_changed"]


def test_held_out_rounds_are_read_with_the_limits_their_development_round_chose():
    """The committed delivered_limits.json is what ``agreement.delivered`` chooses on each development
    round now, and ``delivered_with`` splits the faces those limits pass into accepted and not."""
    data = json.loads(agreement.DELIVERED_LIMITS.read_text())
    assert set(labels.DEV_ROUND.values()) <= set(data)
    for v in agreement.delivered("mixed-15").values():
        assert data["mixed-15"][v["path"]] == {"limits": v["limits"], "redetection": v["redetection"]}
    rows = [{"acceptable": ok, "blotch": b, "redetected": True, **{m: None for m, _ in agreement.METRICS
                                                                    if m != "blotch"}}
            for ok, b in ((True, 5.0), (True, 12.0), (False, 8.0), (False, 20.0))]
    got = agreement.delivered_with(rows, {"limits": {"blotch": 10.0}, "redetection": False})
    assert (got["passed"], got["delivered_ok"], got["delivered_bad"]) == (2, 1, 1)
