"""The gate's flicker reading of the labelled faces, per clip and swap path: what a still crop on a
labelling sheet cannot show (a region kept on one frame and swapped on the next).

    .venv/bin/python -m bench.qa_labels.flicker --paths mesh7,mesh8,mesh9 [--clips a,b]
    QA_LABELS_SET=heldout ... (the same on a held-out set)

``flicker_ratio`` (gate.jsonl.gz, ``swapline_core.qa``): the result's frame-to-frame change inside the
face over the target's; 1 = as steady as the target. Median, mean and maximum over the faces the
gate read (every 2nd of the first 24 frames of each run).
"""
from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from .build import face_records, gate_records, path_of


def readings(paths: list[str], clips: list[str] | None = None) -> dict:
    faces = {r["id"]: r for r in face_records()}
    out: dict = defaultdict(list)
    for g in gate_records():
        f = faces.get(g["id"])
        if f is None or g.get("flicker_ratio") is None or path_of(f) not in paths:
            continue
        if clips and f["clip"] not in clips:
            continue
        out[(f["clip"], path_of(f))].append(float(g["flicker_ratio"]))
    return {k: {"faces": len(v), "median": round(float(np.median(v)), 3), "mean": round(float(np.mean(v)), 3),
                "max": round(float(np.max(v)), 3)} for k, v in sorted(out.items())}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", required=True, help="comma-separated swap paths")
    ap.add_argument("--clips", help="comma-separated clips (default: every clip the paths were built on)")
    a = ap.parse_args(argv)
    res = readings(a.paths.split(","), a.clips.split(",") if a.clips else None)
    print("| clip | path | faces | median | mean | max |\n| --- | --- | --- | --- | --- | --- |")
    for (clip, path), r in res.items():
        print(f"| {clip} | {path} | {r['faces']} | {r['median']} | {r['mean']} | {r['max']} |")


if __name__ == "__main__":
    main()
