"""Which built-in occluder rules the labelled faces need (issue 49, item 4).

    .venv/bin/python -m calibration.occluder_rules [--clips a,b] [--frames 24]
    # -> docs/measurements/occluder_rules.md

For every clip of the labelled set (bench/qa_labels/set/faces.jsonl.gz) its first FRAMES frames (the
frames the set was built from) are analysed by the built-in analyzer (MTCNN + dlib 68 points), the
faces matched to the labelled boxes (IoU >= 0.3, nearest labelled frame; the match gives the
track) and swapped once by the built-in classical swapper (the patches give the paste area the
mask stack cuts). Then the mask stack runs on those patches with every rule on and once per rule
with that rule off (``MaskOptions.rules_off``), on the whole window, so the temporal vote is the
same in every run. Per labelled face (the set's rows, any source: the mask stack works on the
target only), a rule "keeps" the pixels whose final paste mask is below 0.5 with the rule on and
at or above 0.5 with it off (for ``glare``, which releases pixels, the other way round; the
sample rules act through the colour fit: both ways). A face counts when the rule moves at least
MIN_PX pixels. Written: the per-rule per-clip table, with the faces labelled ``occluder``
(an occluder damaged in the swap) apart.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "bench" / "qa_labels" / "set"
MEDIA = ROOT / "tests" / ".cache" / "media"
SOURCE = ROOT / "assets" / "samples" / "source_face.png"
FRAMES = 24
MIN_PX = 20          # pixels a rule must move on a face to count (paste-mask rounding moves a few)


def clip_path(name: str) -> Path:
    for p in (MEDIA / "devset" / f"{name}.webp", MEDIA / "devset_image" / f"{name}.webp", MEDIA / f"{name}.webp"):
        if p.is_file():
            return p
    raise SystemExit(f"clip {name} not found under {MEDIA}: run scripts/setup.sh and "
                     "python -m bench.qa_labels.build (it fetches the labelled set's clips)")


def labelled() -> dict[str, dict[int, list[dict]]]:
    """{clip: {frame: [rows]}} of the labelled faces, each row with ``occluder`` (a label said so)."""
    labels = {r["id"]: r for r in map(json.loads, (SET / "labels.jsonl").read_text().splitlines())}
    out: dict = defaultdict(lambda: defaultdict(list))
    with gzip.open(SET / "faces.jsonl.gz", "rt") as f:
        rows = [json.loads(x) for x in f if x.strip()]
    for r in rows:
        lab = labels.get(r["id"])
        if lab is None or r.get("frame", -1) < 0 or not r.get("crop"):
            continue
        out[r["clip"]][r["frame"]].append({**r, "occluder": "occluder" in lab.get("defects", [])})
    return out


def iou(a, b) -> float:
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / area if area > 0 else 0.0


def boxes_of(rows_by_frame: dict[int, list[dict]]) -> dict[int, list[tuple[int, list[float], bool]]]:
    """Per labelled frame, one (track, box, any label says occluder) per labelled track."""
    out = {}
    for i, rows in rows_by_frame.items():
        tracks: dict = {}
        for r in rows:
            t = tracks.setdefault(r["track"], [r["bbox"], False])
            t[1] |= r["occluder"]
        out[i] = [(t, b, o) for t, (b, o) in tracks.items()]
    return out


def faces_for(analyzer, frames, labelled_boxes):
    """Per frame the detected faces matched to a labelled track (track_id set), with 68 points."""
    found = analyzer.detect(frames)
    keys = sorted(labelled_boxes)
    out = []
    for i, fs in enumerate(found):
        near = min(keys, key=lambda k: abs(k - i))
        kept = []
        for track, box, _ in labelled_boxes[near]:
            best = max(fs, key=lambda f: iou(f.bbox, box), default=None)
            if best is not None and iou(best.bbox, box) >= 0.3 and all(best is not k for k in kept):
                best.track_id = track
                kept.append(best)
        out.append(kept)
    analyzer.landmarks68(frames, out)
    return out


def masks_with(frames, faces, patches, off: tuple[str, ...]):
    from swapline_core.masks import MaskOptions, refine_masks
    from swapline_core.types import ClipContext, SwapPatch

    copies = [[SwapPatch(p.region, p.pixels.copy(), p.mask.copy(), dict(p.info)) for p in ps] for ps in patches]
    refine_masks(frames, faces, copies, MaskOptions(rules_off=off), ClipContext(first_index=0))
    return copies


def measure(clips: list[str], count: int, log=print) -> dict:
    from PIL import Image

    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.faces import identity as face_model
    from swapline_core.masks import rules
    from swapline_core.swap.chunk import one_per_face
    from swapline_core.video.read import iter_frames

    sets = labelled()
    analyzer = BuiltinAnalyzer()
    swapper = ClassicalSwapper()
    source = face_model.build_from_images(analyzer, [np.asarray(Image.open(SOURCE).convert("RGB"))])
    # per rule, per clip: [faces moved, pixels moved, occluder-labelled faces moved, faces judged, occluder faces]
    table: dict = {r: {} for r in rules.NAMES}
    for clip in clips:
        t0 = time.perf_counter()
        frames = [f for _, f in iter_frames(str(clip_path(clip)), count=count)]
        lboxes = boxes_of(sets[clip])
        faces = faces_for(analyzer, frames, lboxes)
        patches = one_per_face(swapper, faces, swapper.swap(frames, faces, source))
        base = masks_with(frames, faces, patches, ())
        judged = [(i, j, occ) for i, fs in enumerate(faces) if i in lboxes for j, f in enumerate(fs)
                  for t, _, occ in lboxes[i] if t == f.track_id and base[i][j].mask.size]
        for rule in rules.NAMES:
            other = masks_with(frames, faces, patches, (rule,))
            moved, px, occ_moved = 0, 0, 0
            for i, j, occ in judged:
                on, off = base[i][j].mask, other[i][j].mask
                kept = (on < 0.5) & (off >= 0.5)
                released = (on >= 0.5) & (off < 0.5)
                unit = rules.BY_NAME[rule].unit
                n = int((released if unit == "px released" else kept | released if unit != rules.KEPT
                         else kept).sum())
                if n >= MIN_PX:
                    moved, px, occ_moved = moved + 1, px + n, occ_moved + int(occ)
            table[rule][clip] = [moved, px, occ_moved, len(judged), sum(o for *_, o in judged)]
        log(f"occluder_rules: {clip}: {len(judged)} labelled faces, {time.perf_counter() - t0:.0f} s")
    return table


def write(table: dict, clips: list[str], argv: list[str]) -> None:
    from swapline_core.masks import rules

    about = ("What it measures (calibration/occluder_rules.py): on each clip of the labelled set "
             "(bench/qa_labels/set), the faces labelled by eye on its first frames, masked by the "
             "built-in stack on the classical swapper's patches with every rule on and with one rule "
             f"off. A cell is *faces where the rule moves >= {MIN_PX} px of the paste mask (pixels "
             "moved on them in all) [the same count among the faces labelled `occluder`, an occluder "
             "damaged in the swap]*; *faces* is the labelled faces judged [of them labelled `occluder`]. "
             "Keep rules (hands included): pixels the rule keeps as the target's; glare: pixels it releases "
             "to the swap; the sample rule (beside): pixels moved either way through the colour fit.")
    lines = []
    lines.append("| clip | faces [o] | " + " | ".join(rules.NAMES) + " |")
    lines.append("| --- | --- |" + " --- |" * len(rules.NAMES))
    tot = {r: np.zeros(5, np.int64) for r in rules.NAMES}
    for c in clips + ["all clips"]:
        first = table[rules.NAMES[0]].get(c)
        n, on = (first[3], first[4]) if first else (int(tot[rules.NAMES[0]][3]), int(tot[rules.NAMES[0]][4]))
        cells = []
        for rule in rules.NAMES:
            row = table[rule].get(c)
            if row is not None:
                tot[rule] += row
            moved, px, om = row[:3] if row is not None else tot[rule][:3]
            cells.append(f"{moved} ({px})" + (f" [{om}]" if on else ""))
        lines.append(f"| {c} | {n} [{on}] | " + " | ".join(cells) + " |")
    unused = [r for r in rules.NAMES if all(table[r][c][0] == 0 for c in clips)]
    lines += ["", "Rules that move no labelled face's paste mask on any clip (candidates for removal): "
              + (", ".join(unused) if unused else "none") + ".",
              "Rules that move no paste mask of a face labelled `occluder`: "
              + (", ".join(r for r in rules.NAMES if all(table[r][c][2] == 0 for c in clips)) or "none") + ".",
              "", f"Labelled clips judged: {len(clips)} (clips of the set without labels are left out).", ""]
    from bench.section import write_lines

    print(write_lines("occluder_rules", "Occluder rules on the labelled faces", about,
                      f"python -m calibration.occluder_rules {' '.join(argv)}".rstrip(), lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clips", default="", help="comma-separated clip names (default: every labelled clip)")
    ap.add_argument("--frames", type=int, default=FRAMES)
    ap.add_argument("--json", type=Path, default=None, help="also write the raw table here")
    args = ap.parse_args(argv)
    clips = [c for c in args.clips.split(",") if c] or sorted(labelled())
    table = measure(clips, args.frames)
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))
    write(table, clips, list(argv) if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
