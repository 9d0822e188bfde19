"""A swap change judged where a viewer can see it: the faces it visibly altered, side by side.

    .venv/bin/python -m bench.qa_labels.visible sheets PATH ROUND    # -> out/bench/qa_labels/sheets/ROUND
    .venv/bin/python -m bench.qa_labels.labels merge FILE --index .../ROUND/index.json --round ROUND ...
    .venv/bin/python -m bench.qa_labels.visible measure PATH ROUND [--json F]

A change to the swap's blending moves most faces by a grey level or two, which no labeller can see:
judged on full side-by-side sheets those near-identical pairs only add the ruler's noise (about one
pair in five gets two verdicts: docs/qa.md). Here a face of the new path is *visibly changed* when
more than SHARE of its result's pixels differ from the shipped picture of the same face (the
lineage's, ``labels.LINEAGE``) by more than LEVELS grey levels (both fixed before any such round was
labelled); only those faces are labelled, each beside the shipped picture, shuffled together. Every
other face keeps the shipped picture's first label for both paths.

``measure`` then says what the shipped gate (the limit set the built-in swap ships,
``agreement.labelled_set``) delivers of each path on the whole development set: the visibly
changed faces with the round's verdicts, the others with their first labels; the gate's own
readings of each path's faces (which may differ where the pictures hardly do).
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np

from . import agreement as ag
from . import build
from . import labels as qlabels

LEVELS, SHARE = 8, 0.03
# Rounds read at another share, fixed before their labels: mixed-18's change (the membrane's field
# taken by dark pixels in proportion to their lightness) turns navy brows black, which covers at
# most 2.9 % of a crop's pixels, so at 3 % it would be judged on 3 faces of 829.
ROUND_SHARE = {"mixed-18": 0.01}
SHIPPED = ag.SHIPPED_PATH


def _result(row: dict) -> np.ndarray:
    import cv2

    return cv2.imread(str(build.SET / row["crop"])).astype(np.int16)[:, build.CROP + 4:]


def pairs(path: str, share: float = SHARE) -> list[tuple[dict, dict, bool]]:
    """(new face, the shipped picture of it, visibly changed: more than ``share`` of its pixels
    moved by more than LEVELS) for every face of ``path`` the lineage also made."""
    rows = qlabels.faces()
    by = {(r["clip"], r["source"], r["frame"], r["track"], build.path_of(r)): r for r in rows}
    lineage = qlabels.LINEAGE[SHIPPED]
    out = []
    for k, r in by.items():
        if k[4] != path:
            continue
        old = next((by[(*k[:4], p)] for p in lineage if (*k[:4], p) in by), None)
        if old is not None:
            changed = (np.abs(_result(r) - _result(old)).max(axis=2) > LEVELS).mean() > share
            out.append((r, old, bool(changed)))
    return out


def sheets(path: str, round_: str) -> Path:
    pick = [f for new, old, changed in pairs(path, ROUND_SHARE.get(round_, SHARE)) if changed for f in (new, old)]
    random.Random(qlabels.SECOND_SEED + 1).shuffle(pick)
    return qlabels._write_sheets(pick, 10001, qlabels.SHEETS / round_)


def measure(path: str, round_: str) -> dict:
    ship = ag.labelled_set(SHIPPED)
    first = qlabels.ruler()
    in_round = qlabels.labels(None, round_)
    gate = {r["id"]: r for r in ag.gate_records()}
    cols = {path: [], "shipped": []}
    changed_n = unjudged = 0
    for new, old, changed in pairs(path, ROUND_SHARE.get(round_, SHARE)):
        if changed and (new["id"] not in in_round or old["id"] not in in_round):
            unjudged += 1
            continue
        if not changed and old["id"] not in first:
            continue
        changed_n += changed
        for key, face in ((path, new), ("shipped", old)):
            ok = in_round[face["id"]]["acceptable"] if changed else first[old["id"]]["acceptable"]
            g = gate[face["id"]]
            cols[key].append({"clip": face["clip"], "acceptable": ok, "changed": changed,
                              "redetected": bool(g.get("redetected", True)),
                              **{m: g.get(m) for m, _ in ag.METRICS}})
    out = {"levels": LEVELS, "share": ROUND_SHARE.get(round_, SHARE), "round": round_, "visibly_changed": changed_n,
           "changed_not_labelled": unjudged, "limit_set": {k: ship[k] for k in ("date", "faces", "limits")}}
    for key, rows in cols.items():
        acc = np.array([r["acceptable"] for r in rows], bool)
        passed = ag.passes(rows, ship["limits"], ship["redetection"])
        ch = np.array([r["changed"] for r in rows], bool)
        out[key] = {"faces": len(rows), "accepted": int(acc.sum()), "accepted_changed": int(acc[ch].sum()),
                    "delivered_ok": int((passed & acc).sum()), "delivered_bad": int((passed & ~acc).sum()),
                    "delivered_ok_changed": int((passed & acc & ch).sum()),
                    "delivered_bad_changed": int((passed & ~acc & ch).sum())}
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("sheets", "measure"):
        s = sub.add_parser(name)
        s.add_argument("path", choices=sorted(build.SWAPPERS))
        s.add_argument("round")
        if name == "measure":
            s.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "sheets":
        print(sheets(a.path, a.round))
    else:
        ag.emit(measure(a.path, a.round), a.json)


if __name__ == "__main__":
    main()
