"""How the QA gate agrees with the labels: per face, leave-one-clip-out.

    .venv/bin/python -m bench.qa_labels.agreement [--doc]

A face the gate passes is a positive: precision is the share of passed faces a viewer accepts, recall
the share of accepted faces the gate passes (what a studio gets, and what it loses). Two gates are
judged on the same faces:

- ``shipped``: the limits in swapline_core/qa/thresholds.json (chosen on one clip), as they stand;
- ``chosen``: limits chosen by ``choose`` on every clip but one and judged on that one (each clip in
  turn), so no face is judged by limits chosen on it.

``choose`` is a rule, not a fit to one frame: starting with no limit, it tightens one metric at a
time to the candidate (a quantile of the training faces' values) that raises training precision
most (the loosest such candidate, within STEP_GAIN) while training recall stays >= MIN_RECALL;
only metrics that separate labelled good from bad faces on the training clips (AUC >= MIN_AUC,
failing direction) may fail a face. It stops when no step raises precision by STEP_GAIN.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from swapline_core.qa.decide import _CHECKS, QAThresholds, is_off

from ..paths import REPO
from . import labels as qlabels
from . import source_rule
from .build import SWAPPERS, gate_records, path_of

MIN_RECALL, MIN_AUC, STEP_GAIN = 0.70, 0.60, 0.005
# issue 49's "good sources": the shipped photos and a sharp frontal panel face
GOOD_SOURCES = ("shipped_colour", "shipped_grey", "f_blonde_smile")
QUANTILES = np.linspace(0.5, 0.99, 50)
# the gate's checks as (metric, direction), then the readings the gate reports without a limit yet
# (metrics_defects); redetection is a yes/no check of its own
METRICS = tuple((m, d) for m, _, d, _, _ in _CHECKS) + (("edge_loss", "max"),)
FIELD = {m: f for m, f, *_ in _CHECKS}        # metric -> QAThresholds field (edge_loss has none yet)
# The path the shipped built-in workflows run (scripts/make_workflows.py): the targets are judged on it.
# mesh6 from round mixed-8 (mesh4 with busy source texture not pasted), mesh7 since round mixed-9
# (the source prefiltered and softened to the target's sharpness, a finer shading floor); mesh4's
# labels chose the mesh limit set and carry the side-by-side with the classical path (rounds
# mixed-5 and mixed-7).
SHIPPED_PATH = "mesh9"
LINEAGE = qlabels.LINEAGE
# the limit set each path's labels choose (swapline_core/qa/decide.py LIMIT_SETS); the mesh set
# from the shipped path's labels since mesh7 (its softened texture moved the detail and blotch
# readings: mesh4's limits passed its faces at precision 0.683, the rule on its own clips at 0.814
# leave-one-clip-out)
LIMITS_OUT = {"classical": REPO / "swapline_core" / "qa" / "thresholds_labelled.json",
              SHIPPED_PATH: REPO / "swapline_core" / "qa" / "thresholds_labelled_mesh.json"}
DOC = REPO / "docs" / "measurements" / "qa_agreement.md"
# written by --doc from the development set's side-by-side rounds; read by the held-out pages
DELIVERED_LIMITS = REPO / "bench" / "qa_labels" / "set" / "delivered_limits.json"


def table(swapper: str = "classical", whole: bool = False) -> list[dict]:
    """One row per labelled face of one swap path: id, clip, source, acceptable, defects, the gate's
    values and verdict. ``whole``: for a path in ``LINEAGE``, on every run the lineage labelled
    (the path's own faces first, then the earlier paths' on the runs it left unchanged)."""
    paths = LINEAGE.get(swapper, (swapper,)) if whole else (swapper,)
    lab = qlabels.ruler()
    gate = {r["id"]: r for r in gate_records()}
    prov = {r["id"]: r for r in qlabels.faces()}
    by_path: dict[str, list[dict]] = {p: [] for p in paths}
    for fid, lb in lab.items():
        g, p = gate[fid], prov[fid]
        if path_of(p) not in by_path:
            continue
        by_path[path_of(p)].append({"id": fid, "clip": p["clip"], "source": p["source"],
                                    "acceptable": lb["acceptable"], "defects": lb["defects"],
                                    "shipped_pass": not g.get("reasons"),
                                    "redetected": bool(g.get("redetected", True)),
                                    **{m: g.get(m) for m, _ in METRICS}})
    rows, taken = [], set()
    for p in paths:
        rows += [r for r in by_path[p] if (r["clip"], r["source"]) not in taken]
        taken |= {(r["clip"], r["source"]) for r in by_path[p]}
    return rows


def _share(rows: list[dict]) -> dict:
    """How many faces, and the share of them a viewer accepts (None without faces)."""
    return {"faces": len(rows),
            "accepted": round(sum(r["acceptable"] for r in rows) / len(rows), 3) if rows else None}


def _values(rows: list[dict], metric: str) -> np.ndarray:
    return np.array([np.nan if r[metric] is None else float(r[metric]) for r in rows])


def auc(rows: list[dict], metric: str, direction: str) -> float | None:
    """P(a bad face reads worse than a good one) on this metric; 0.5: no separation. Faces without a
    value are left out; None when one class has none."""
    v = _values(rows, metric)
    ok = np.array([r["acceptable"] for r in rows], bool)
    has = np.isfinite(v)
    good, bad = v[has & ok], v[has & ~ok]
    if not len(good) or not len(bad):
        return None
    if direction == "min":
        good, bad = -good, -bad
    greater = (bad[:, None] > good[None, :]).mean()
    ties = (bad[:, None] == good[None, :]).mean()
    return float(greater + ties / 2)


def passes(rows: list[dict], limits: dict[str, float], redetection: bool) -> np.ndarray:
    ok = np.ones(len(rows), bool)
    for m, d in METRICS:
        if m not in limits:
            continue
        v = _values(rows, m)
        bad = (v > limits[m]) if d == "max" else (v < limits[m])
        ok &= ~np.nan_to_num(bad, nan=False).astype(bool)
    if redetection:
        ok &= np.array([r["redetected"] for r in rows])
    return ok


def scores(acceptable: np.ndarray, passed: np.ndarray) -> dict:
    tp = int(np.sum(passed & acceptable))
    return {"faces": int(len(acceptable)), "acceptable": int(acceptable.sum()), "passed": int(passed.sum()),
            "precision": round(tp / passed.sum(), 3) if passed.sum() else None,
            "recall": round(tp / acceptable.sum(), 3) if acceptable.sum() else None}


def choose(rows: list[dict]) -> tuple[dict[str, float], bool]:
    """Limits and whether re-detection is required, by the rule in the module docstring."""
    acc = np.array([r["acceptable"] for r in rows], bool)
    # only metrics the gate can apply (a QAThresholds field) may fail a face
    usable = [(m, d) for m, d in METRICS
              if m in FIELD and (a := auc(rows, m, d)) is not None and a >= MIN_AUC]
    red = np.array([r["redetected"] for r in rows])
    # re-detection counts as one more yes/no metric: required only if it separates
    redetection = bool((~red).any() and acc[~red].mean() < acc[red].mean() - 0.1) if red.any() else False
    limits: dict[str, float] = {}

    def prec(lim):
        p = passes(rows, lim, redetection)
        s = scores(acc, p)
        return (s["precision"] or 0.0), (s["recall"] or 0.0)

    best_p, _ = prec(limits)
    while True:
        cands = []                                  # (precision, recall, metric, limit)
        for m, d in usable:
            v = _values(rows, m)
            v = v[np.isfinite(v)]
            if not len(v):
                continue
            qs = np.quantile(v, QUANTILES if d == "max" else 1 - QUANTILES)
            for q in np.unique(qs):
                if m in limits and ((d == "max" and q >= limits[m]) or (d == "min" and q <= limits[m])):
                    continue
                p, rc = prec({**limits, m: float(q)})
                if rc >= MIN_RECALL and p > best_p + STEP_GAIN:
                    cands.append((p, rc, m, float(q)))
        if not cands:
            return limits, redetection
        # the best precision, then the loosest limit that reaches it (within STEP_GAIN): a limit
        # is not tightened for a gain the labels cannot tell from noise
        top = max(c[0] for c in cands)
        best_p, _, m, q = max((c for c in cands if c[0] >= top - STEP_GAIN), key=lambda c: (c[1], c[0]))
        limits[m] = q


def shipped_limits() -> dict[str, float | None]:
    """The sample clip's limits (thresholds.json) by metric; None where off."""
    th = QAThresholds()
    return {m: (None if is_off(getattr(th, f)) else getattr(th, f)) for m, f, *_ in _CHECKS}


def sample_clip_passes(rows: list[dict]) -> np.ndarray:
    """The sample clip's limits applied to the faces' readings (the verdicts stored with the faces
    are the gate's as it ran when they were made, under whatever set was the default then)."""
    limits = {m: v for m, v in shipped_limits().items() if v is not None}
    return passes(rows, limits, QAThresholds().require_redetection)


def leave_one_clip_out(rows: list[dict]) -> tuple[np.ndarray, dict[str, dict]]:
    passed = np.zeros(len(rows), bool)
    per_clip = {}
    for clip in sorted({r["clip"] for r in rows}):
        train = [r for r in rows if r["clip"] != clip]
        test_idx = [i for i, r in enumerate(rows) if r["clip"] == clip]
        limits, red = choose(train)
        passed[test_idx] = passes([rows[i] for i in test_idx], limits, red)
        per_clip[clip] = {"limits": {k: round(v, 4) for k, v in limits.items()}, "redetection": red}
    return passed, per_clip


def round_columns(round_: str | None = None, paths=None) -> dict[str, tuple[str, list[dict]]]:
    """{column name: (path, rows)} of each built-in path with labelled faces: ``table`` rows, or
    with ``round_`` the faces that round labelled, each with that round's verdict. In a lineage
    round (``labels.BESIDE_FIRST``) the shipped pictures beside the new path are one column, the
    lineage's run by run. ``paths``: only these paths (default: every one in SWAPPERS)."""
    mixed = qlabels.labels(None, round_) if round_ else None
    lineage = qlabels.BESIDE[round_] if round_ in qlabels.BESIDE_FIRST else ()
    out = {}
    for sw in paths or SWAPPERS:
        if sw in lineage[1:]:
            continue
        shipped = bool(lineage) and sw == lineage[0]
        rows = table(sw, whole=shipped)
        if mixed is not None:
            rows = [{**r, "acceptable": mixed[r["id"]]["acceptable"]} for r in rows if r["id"] in mixed]
        if rows:
            out[f"{sw} as shipped ({', '.join(lineage)}, run by run)" if shipped else sw] = (sw, rows)
    return out


def accepted(round_: str | None = None) -> dict:
    """What a viewer accepts of each built-in swap path's raw swapped faces: overall, per clip, per
    source, and on the good sources (the shipped photos and the sharp frontal panel face).
    ``round_``: only the labels of one mixed-sheet round, where the same labellers judged two
    paths' faces of the same runs, shuffled together (the fair comparison: labellers differ)."""
    out = {}
    for key, (_, rows) in round_columns(round_).items():
        good = [r for r in rows if r["source"] in GOOD_SOURCES]
        out[key] = {**_share(rows), "good_sources": _share(good),
                    "per_clip": {c: _share([r for r in rows if r["clip"] == c])
                                 for c in sorted({r["clip"] for r in rows})},
                    "per_source": {s: _share([r for r in rows if r["source"] == s])
                                   for s in sorted({r["source"] for r in rows})}}
    return out


def delivered(round_: str) -> dict:
    """What the gate would deliver of each path of a side-by-side round (``labels.BESIDE_FIRST``),
    judged on that round's labels only: limits chosen leave-one-clip-out on the path's own faces
    (``choose``), and of the faces they pass, how many a viewer accepts and how many not. A swap
    change that removes the defects the gate's readings see can leave viewers accepting more raw
    faces while the gate delivers more bad ones: both paths are judged here as a studio gets them."""
    out = {}
    for key, (sw, rows) in round_columns(round_).items():
        acc = np.array([r["acceptable"] for r in rows], bool)
        loco, _ = leave_one_clip_out(rows)
        limits, red = choose(rows)
        out[key] = {**scores(acc, loco), "delivered_ok": int((loco & acc).sum()),
                    "delivered_bad": int((loco & ~acc).sum()), "path": sw,
                    "limits": {k: round(v, 4) for k, v in limits.items()}, "redetection": red}
    return out


def delivered_with(rows: list[dict], chosen: dict) -> dict:
    """``delivered``'s figures for faces judged with limits chosen elsewhere (``chosen``: one path's
    entry of ``delivered``): a held-out round read with the development round's limits."""
    acc = np.array([r["acceptable"] for r in rows], bool)
    passed = passes(rows, chosen["limits"], chosen["redetection"])
    return {**scores(acc, passed), "delivered_ok": int((passed & acc).sum()),
            "delivered_bad": int((passed & ~acc).sum()), "limits": chosen["limits"]}


def write_delivered_limits(res: dict) -> Path:
    """Each side-by-side round's limits per path, chosen on all its clips (``DELIVERED_LIMITS``):
    what the held-out pages read the held-out rounds with (``labels.DEV_ROUND``)."""
    data = {rnd: {v["path"]: {"limits": v["limits"], "redetection": v["redetection"]} for v in dv.values()}
            for rnd, dv in res.get("delivered_side_by_side", {}).items()}
    DELIVERED_LIMITS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return DELIVERED_LIMITS


def accepted_whole(path: str = SHIPPED_PATH) -> dict:
    """What a viewer accepts of ``path`` on every labelled clip (``table(path, whole=True)``, first
    labels), overall and per clip, all sources and the good ones: issue 49's target reads per clip
    with the good sources."""
    rows = table(path, whole=True)
    good = [r for r in rows if r["source"] in GOOD_SOURCES]
    clips = sorted({r["clip"] for r in rows})
    return {**_share(rows), "good_sources": _share(good),
            "per_clip": {c: {"all": _share([r for r in rows if r["clip"] == c]),
                             "good": _share([r for r in good if r["clip"] == c])} for c in clips}}


def measure(path: str = SHIPPED_PATH) -> dict:
    """Every figure of the page for ``path``'s labelled faces, plus the gate on the other paths and
    each mixed round's side-by-side shares."""
    res = measure_path(path)
    res["path"] = path
    res["other_paths"] = {p: {k: v for k, v in measure_path(p).items() if k in ("faces", "acceptable", "shipped",
                                                                                    "loco", "all_clips_limits",
                                                                                    "per_clip")}
                          for p in SWAPPERS if p != path and table(p)}
    res["accepted"] = accepted()
    res["accepted_whole"] = accepted_whole(path)
    res["accepted_side_by_side"] = {r: accepted(r) for r in sorted(set(qlabels.ROUNDS.values())
                                                                   | set(qlabels.SOURCE_ROUNDS) | set(qlabels.RELABEL))}
    labelled = {json.loads(x).get("sheets") for x in qlabels.LABELS.read_text().splitlines() if x.strip()}
    res["delivered_side_by_side"] = {r: delivered(r) for r in qlabels.BESIDE_FIRST
                                     if r in labelled and r not in qlabels.VISIBLE}
    res["visible_side_by_side"] = visible_rounds(labelled)
    return res


def labelled_set(path: str) -> dict | None:
    """The limit set shipped for ``path`` (``LIMITS_OUT``, written by ``--write-limits``): its limits
    by metric, whether it requires re-detection, when and on which clips it was chosen; None where
    the path has none."""
    f = LIMITS_OUT.get(path)
    if f is None or not f.is_file():
        return None
    d = json.loads(f.read_text())
    metric = {v: m for m, v in FIELD.items()}
    th = d["thresholds"]
    return {"limits": {metric[k]: v for k, v in th.items() if k in metric},
            "redetection": bool(th.get("require_redetection")), "date": d["date"],
            "faces": d["labelled_faces"], "clips": d.get("clips")}


def visible_rounds(labelled: set) -> dict:
    """``visible.measure`` for each round of this set judged only where its path visibly changed a
    face (``labels.VISIBLE``)."""
    from . import visible

    return {r: visible.measure(p, r) for r, p in qlabels.VISIBLE.items() if r in labelled}


def measure_path(path: str) -> dict:
    from . import policy

    rows = table(path, whole=True)
    acc = np.array([r["acceptable"] for r in rows], bool)
    shipped = sample_clip_passes(rows)
    loco, loco_limits = leave_one_clip_out(rows)
    full_limits, full_red = choose(rows)
    ship = labelled_set(path)
    if ship:
        # the shipped set on the development clips labelled since it was chosen (its limits never saw them)
        ship_pass = passes(rows, ship["limits"], ship["redetection"])
        unseen = sorted({r["clip"] for r in rows} - set(ship["clips"] or ()))
        per = {c: scores(acc[idx], ship_pass[idx]) for c in unseen
               if (idx := np.array([r["clip"] == c for r in rows])).any()}
        idx = np.array([r["clip"] in unseen for r in rows], bool)
        ship = {**ship, "unseen": scores(acc[idx], ship_pass[idx]) if idx.any() else None, "unseen_per_clip": per}

    def grouped(key: str) -> dict:
        out = {}
        for g in sorted({r[key] for r in rows}):
            idx = np.array([r[key] == g for r in rows])
            out[g] = {"shipped": scores(acc[idx], shipped[idx]), "loco": scores(acc[idx], loco[idx])}
        return out

    defects = Counter(d for r in rows for d in r["defects"])
    per_defect = {}
    for d, n in defects.most_common():
        idx = np.array([d in r["defects"] for r in rows])
        per_defect[d] = {"faces": n, "shipped_recall": round(float((~shipped[idx]).mean()), 3),
                         "loco_recall": round(float((~loco[idx]).mean()), 3)}
    separation = {m: (round(a, 3) if (a := auc(rows, m, d)) is not None else None) for m, d in METRICS}
    return {"faces": len(rows), "acceptable": int(acc.sum()), "clips": len({r["clip"] for r in rows}),
            "sources": len({r["source"] for r in rows}),
            "shipped": scores(acc, shipped), "loco": scores(acc, loco),
            "per_clip": grouped("clip"), "per_source": grouped("source"), "per_defect": per_defect,
            "auc": separation, "loco_limits": loco_limits,
            "all_clips_limits": {"limits": {k: round(v, 4) for k, v in full_limits.items()},
                                 "redetection": full_red},
            "shipped_limits": shipped_limits(), "agreement": qlabels.agreement(),
            "ruled": {r: {"rule": why, "twins": {t: qlabels.twin_agreement(t)
                                                 for t, o in qlabels.TWIN.items() if o == r}}
                      for r, why in qlabels.RULED.items()},
            "policies": policy.simulate(rows, loco), "policies_shipped": policy.simulate(rows, shipped),
            "source_rule": source_rule.figures(rows, loco, ship_pass if ship else None, source_rule.source_checks()),
            "rule": {"min_recall": MIN_RECALL, "min_auc": MIN_AUC, "step_gain": STEP_GAIN},
            "labelled_set": ship}


def write_limits(res: dict) -> list[Path]:
    """Each labelled limit set (``LIMITS_OUT``): the limits the rule chose on every labelled clip of
    its path, as QAThresholds fields (what it did not choose is off: decide.limit_set), with
    provenance."""
    out = []
    for path, fig in ((res["path"], res), *res["other_paths"].items()):
        if path not in LIMITS_OUT:
            continue
        chosen = fig["all_clips_limits"]
        th = {FIELD[m]: v for m, v in chosen["limits"].items()}
        th["require_redetection"] = bool(chosen["redetection"]) or QAThresholds().require_redetection
        LIMITS_OUT[path].write_text(json.dumps({
            "generated_by": "python -m bench.qa_labels.agreement --write-limits",
            "doc": "docs/measurements/qa_agreement.md", "date": res["date"], "swap_path": path,
            "labelled_faces": fig["faces"], "clips": sorted(fig["per_clip"]), "rule": res["rule"],
            "leave_one_clip_out": fig["loco"], "thresholds": th}, indent=1) + "\n")
        out.append(LIMITS_OUT[path])
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    ap.add_argument("--doc", action="store_true", help="write docs/measurements/qa_agreement.md")
    ap.add_argument("--write-limits", action="store_true",
                    help="write the limits chosen on all labelled clips of each path to "
                         f"{', '.join(p.name for p in LIMITS_OUT.values())} "
                         "(a decision: see docs/qa.md)")
    a = ap.parse_args(argv)
    res = measure()
    res["date"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if a.write_limits:
        print(f"wrote {write_limits(res)}")
    if a.doc:
        from .. import section
        from . import report

        print(f"wrote {report.write(res, section.stamp('python -m bench.qa_labels.agreement --doc'))}")
        print(f"wrote {write_delivered_limits(res)}")
    emit(res, a.json)


def emit(res: dict, path: Path | None) -> None:
    """The figures as JSON on stdout, and in ``path`` where given (the --json of these scripts)."""
    text = json.dumps(res, indent=1)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
