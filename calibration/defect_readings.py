"""How a per-face reading separates the ghost and soft defect classes of the labelled set.

    .venv/bin/python -m calibration.defect_readings [--json FILE]

Read from the labelled crops (target | result, what the labeller saw), through the gate's own code:
the target half's 68 points (the built-in analyzer; the mean shape where it finds no face) and
``metrics_image.image_metrics`` on the pair, so a crop reads what the gate computes. Reported per
reading and class (classical path, first-pass labels):

- AUC of the class against every other face and against the acceptable faces (0.5: no
  separation), on the tuning half of the clips (TUNE: the free constants were chosen there), on
  the held-out half, on all clips and per clip (the classical path: the labelled set holds no other
  path's faces now);
- leave-one-clip-out recall of the class with agreement.choose given the reading as one more limit
  (it picks limits for acceptability, not for one class), and with a limit per class: on the other
  clips, the value that fails at most PASS_SHARE of their acceptable faces;
- the same limit added to agreement.choose's leave-one-clip-out gate: recall of each class and the
  gate's precision and recall, with and without it;
- resolution: the reading on the 192 px crop against the same crop shrunk to the face's native
  size (the crops upscale small faces), and the crop's reading against the gate's own (gate.jsonl.gz).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench.paths import OUT
from bench.qa_labels import agreement as ag
from bench.qa_labels.build import CROP, PAD, SET, gate_records

# readings looked at: (key, class it is meant for, failing direction); "detail_ratio_low" is the
# gate's detail_ratio read as a minimum (its limit is a maximum: pasted texture)
READINGS = (("feature_contrast", "ghost", "min"), ("detail_ratio_low", "soft", "min"))
CLASSES = ("ghost", "soft")
PASS_SHARE = 0.10
CACHE = OUT / "qa_labels" / "defect_readings_landmarks.json"


def tune_half(clips: list[str]) -> set[str]:
    """Every other clip in name order: where the constants were chosen (fixed before reading)."""
    return set(sorted(set(clips))[0::2])


def _crop_pair(row: dict) -> tuple[np.ndarray, np.ndarray]:
    import cv2

    im = cv2.cvtColor(cv2.imread(str(SET / row["crop"])), cv2.COLOR_BGR2RGB)
    return np.ascontiguousarray(im[:, :CROP]), np.ascontiguousarray(im[:, CROP + 4:2 * CROP + 4])


def landmarks(faces: list[dict]) -> dict[str, list | None]:
    """68 points on each crop's target half, cached (30 s on 2 cores for the whole set)."""
    cached = json.loads(CACHE.read_text()) if CACHE.is_file() else {}
    todo = [f for f in faces if f["id"] not in cached]
    if todo:
        from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

        an = BuiltinAnalyzer()
        for k in range(0, len(todo), 16):
            chunk = todo[k:k + 16]
            ims = [_crop_pair(f)[0] for f in chunk]
            found = an.detect(ims)
            centre = np.array([CROP / 2, CROP / 2])
            pick = [[min(d, key=lambda f: np.linalg.norm((f.bbox[:2] + f.bbox[2:]) / 2 - centre))] if d else []
                    for d in found]
            an.landmarks68(ims, pick)
            for f, p in zip(chunk, pick):
                cached[f["id"]] = p[0].landmarks.tolist() if p and p[0].landmarks is not None else None
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_text(json.dumps(cached))
    return cached


def readings(with_native: bool = True) -> list[dict]:
    import cv2

    from bench.qa_labels import labels as qlabels
    from swapline_core.qa.metrics_image import image_metrics

    lab = qlabels.labels(1)
    prov = {r["id"]: r for r in qlabels.faces()}
    gate = {r["id"]: r for r in gate_records()}
    faces = [prov[i] for i in lab if prov[i].get("crop")]
    lms = landmarks(faces)
    mean = np.mean([v for v in lms.values() if v is not None], axis=0).astype(np.float32)
    rows = []
    for f in faces:
        o, s = _crop_pair(f)
        lm = np.asarray(lms[f["id"]], np.float32) if lms.get(f["id"]) is not None else mean
        m = image_metrics(o, s, lm)
        x0, y0, x1, y1 = f["bbox"]
        native = max(x1 - x0, y1 - y0) * PAD            # the crop's side in the frame, before resizing
        row = {"id": f["id"], "clip": f["clip"], "source": f["source"], "path": ag.path_of(f),
               "acceptable": lab[f["id"]]["acceptable"], "defects": lab[f["id"]]["defects"],
               "native_side": native, "landmarks_found": lms.get(f["id"]) is not None,
               "feature_contrast": m.get("feature_contrast"), "detail_ratio_crop": m.get("detail_ratio"),
               "detail_ratio_low": gate[f["id"]].get("detail_ratio")}
        if with_native and native < CROP * 0.9:
            # the same crop at the face's native size: does the upscaling set the reading?
            n = max(16, round(native))
            sc = n / CROP
            m2 = image_metrics(cv2.resize(o, (n, n), interpolation=cv2.INTER_AREA),
                               cv2.resize(s, (n, n), interpolation=cv2.INTER_AREA), lm * sc)
            row["feature_contrast_native"] = m2.get("feature_contrast")
        rows.append(row)
    return rows


def auc(rows: list[dict], key: str, cls: str, direction: str, against: str = "rest") -> float | None:
    """P(a face with the defect reads worse than one without it / than an acceptable face)."""
    pos = np.array([r[key] for r in rows if cls in r["defects"] and r.get(key) is not None], float)
    neg = np.array([r[key] for r in rows if r.get(key) is not None
                    and (r["acceptable"] if against == "acceptable" else cls not in r["defects"])], float)
    if not len(pos) or not len(neg):
        return None
    if direction == "min":
        pos, neg = -pos, -neg
    return round(float((pos[:, None] > neg[None]).mean() + 0.5 * (pos[:, None] == neg[None]).mean()), 3)


def loco_choose(rows: list[dict], extra: tuple) -> dict:
    """agreement's leave-one-clip-out with ``extra`` readings usable as limits: recall per class."""
    table = {r["id"]: r for r in ag.table()}
    by_id = {r["id"]: r for r in rows}
    trows = [{**t, **{k: by_id.get(i, {}).get(k) for k, _ in extra}} for i, t in table.items()]
    metrics, field = ag.METRICS, ag.FIELD
    try:
        ag.METRICS = metrics + tuple(extra)
        ag.FIELD = {**field, **{k: k for k, _ in extra}}
        passed, per_clip = ag.leave_one_clip_out(trows)
    finally:
        ag.METRICS, ag.FIELD = metrics, field
    acc = np.array([r["acceptable"] for r in trows])
    out = {"overall": ag.scores(acc, passed),
           "chosen_in": sorted(c for c, v in per_clip.items() if any(k in v["limits"] for k, _ in extra))}
    for cls in CLASSES:
        idx = np.array([cls in r["defects"] for r in trows])
        out[cls] = {"recall": round(float((~passed[idx]).mean()), 3),
                    "per_clip": {c: f"{int((~passed[idx & cm]).sum())}/{int((idx & cm).sum())}"
                                 for c in sorted({r["clip"] for r in trows})
                                 if (idx & (cm := np.array([r["clip"] == c for r in trows]))).any()}}
    return out


def loco_per_class(rows: list[dict], key: str, cls: str, direction: str) -> dict:
    """A limit for one class, chosen on the other clips: fails at most PASS_SHARE of their acceptable
    faces. Recall of the class and acceptable faces failed, on each held-out clip."""
    out, hit, n, lost, n_ok = {}, 0, 0, 0, 0
    for c in sorted({r["clip"] for r in rows}):
        train = [r[key] for r in rows if r["clip"] != c and r["acceptable"] and r.get(key) is not None]
        lim = float(np.quantile(train, PASS_SHARE if direction == "min" else 1 - PASS_SHARE))
        test = [r for r in rows if r["clip"] == c and r.get(key) is not None]

        def fails(r, lim=lim):
            return r[key] < lim if direction == "min" else r[key] > lim

        pos = [r for r in test if cls in r["defects"]]
        ok = [r for r in test if r["acceptable"]]
        hit += sum(map(fails, pos))
        n += len(pos)
        lost += sum(map(fails, ok))
        n_ok += len(ok)
        if pos or ok:
            out[c] = {"limit": round(lim, 3), "failed_of_class": f"{sum(map(fails, pos))}/{len(pos)}",
                      "failed_of_acceptable": f"{sum(map(fails, ok))}/{len(ok)}"}
    return {"recall": round(hit / n, 3) if n else None,
            "acceptable_failed": round(lost / n_ok, 3) if n_ok else None, "per_clip": out}


def loco_added(rows: list[dict], key: str, direction: str) -> dict:
    """agreement.choose's leave-one-clip-out gate with the per-class limit of ``loco_per_class`` added
    on each held-out clip (what a limit on the reading would add to the gate as it stands)."""
    table = ag.table()
    by_id = {r["id"]: r.get(key) for r in rows}
    passed, _ = ag.leave_one_clip_out(table)
    v = np.array([np.nan if by_id.get(t["id"]) is None else by_id[t["id"]] for t in table], float)
    clips = np.array([t["clip"] for t in table])
    acc = np.array([t["acceptable"] for t in table])
    fails = np.zeros(len(table), bool)
    for c in sorted(set(clips)):
        train = v[(clips != c) & acc & np.isfinite(v)]
        lim = np.quantile(train, PASS_SHARE if direction == "min" else 1 - PASS_SHARE)
        with np.errstate(invalid="ignore"):
            fails[clips == c] = (v[clips == c] < lim) if direction == "min" else (v[clips == c] > lim)
    both = passed & ~fails
    out = {"gate": ag.scores(acc, passed), "gate_and_reading": ag.scores(acc, both)}
    for cls in CLASSES:
        idx = np.array([cls in t["defects"] for t in table])
        out[cls] = {"gate": round(float((~passed[idx]).mean()), 3),
                    "gate_and_reading": round(float((~both[idx]).mean()), 3)}
    return out


def measure(rows: list[dict]) -> dict:
    from scipy.stats import spearmanr

    cl = [r for r in rows if r["path"] == "classical"]
    tune = tune_half([r["clip"] for r in cl])
    res: dict = {"faces": len(cl), "tune_clips": sorted(tune),
                 "landmarks_found": sum(r["landmarks_found"] for r in rows), "readings": {}}
    for key, cls, d in READINGS:
        parts = {"tune": [r for r in cl if r["clip"] in tune], "held_out": [r for r in cl if r["clip"] not in tune],
                 "all": cl}
        entry = {}
        for c2 in CLASSES:
            entry[c2] = {name: {"vs_rest": auc(p, key, c2, d), "vs_acceptable": auc(p, key, c2, d, "acceptable"),
                                "faces": sum(c2 in r["defects"] for r in p)} for name, p in parts.items()}
            entry[c2]["per_clip"] = {c: auc([r for r in cl if r["clip"] == c], key, c2, d)
                                     for c in sorted({r["clip"] for r in cl})
                                     if any(c2 in r["defects"] for r in cl if r["clip"] == c)}
        # what agreement.choose looks at: acceptable faces against every rejected face
        entry["auc_acceptability"] = ag.auc(cl, key, d)
        entry["loco_per_class"] = loco_per_class(cl, key, cls, d)
        entry["loco_added_to_gate"] = loco_added(cl, key, d)
        res["readings"][key] = entry
    base = loco_choose(cl, ())
    res["loco_choose"] = {"without": base, **{k: loco_choose(cl, ((k, d),)) for k, _, d in READINGS}}
    nat = [(r["feature_contrast"], r["feature_contrast_native"]) for r in cl
           if r.get("feature_contrast_native") is not None and r.get("feature_contrast") is not None]
    dr = [(r["detail_ratio_crop"], r["detail_ratio_low"]) for r in cl
          if r["detail_ratio_crop"] is not None and r["detail_ratio_low"] is not None]
    res["resolution"] = {
        "feature_contrast_crop_vs_native_spearman": round(float(spearmanr(*zip(*nat))[0]), 3) if nat else None,
        "native_faces": len(nat),
        "feature_contrast_vs_native_side_spearman": round(float(spearmanr(
            [r["native_side"] for r in cl if r["feature_contrast"] is not None],
            [r["feature_contrast"] for r in cl if r["feature_contrast"] is not None])[0]), 3),
        "detail_ratio_crop_vs_gate_spearman": round(float(spearmanr(*zip(*dr))[0]), 3)}
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    a = ap.parse_args(argv)
    ag.emit(measure(readings()), a.json)


if __name__ == "__main__":
    main()
