"""Labelling sheets and labels: the faces as a person sees them, and what that person said.

    .venv/bin/python -m bench.qa_labels.labels sheets [--second]   # numbered sheets -> out/bench/qa_labels/sheets/
    .venv/bin/python -m bench.qa_labels.labels merge FILE... --pass 1 --labeller NAME
    .venv/bin/python -m bench.qa_labels.labels sheets --mixed [ROUND]   # a new swap path beside the old
    .venv/bin/python -m bench.qa_labels.labels sheets --relabel ROUND   # labelled faces judged again together
    .venv/bin/python -m bench.qa_labels.labels merge FILE... --round ROUND --labeller NAME
    .venv/bin/python -m bench.qa_labels.labels agreement

A sheet shows PER_SHEET crop pairs (target | result), each under its number and nothing else: no
clip, source, metric or gate verdict. A labeller writes one line per number, ``N ok`` or
``N bad CODE[,CODE]`` with the defect codes below; ``merge`` checks the lines against the sheets'
index and appends them to labels.jsonl. ``--second`` makes sheets of a random SECOND_SHARE of the
labelled faces, shuffled, for the second pass whose agreement ``agreement`` reports.
"""
from __future__ import annotations

import argparse
import json
import random
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..paths import OUT
from .build import SET, face_records, path_of

LABELS = SET / "labels.jsonl"
SHEETS = OUT / "qa_labels" / "sheets"
COLS, ROWS = 3, 4
PER_SHEET = COLS * ROWS
SECOND_SHARE, SECOND_SEED = 0.10, 48
# The labelling round whose mixed sheets compare the swap paths today (``mixed_sheets``): mixed-2,
# the mesh swap behind the MTCNN analyzer (path mesh, fcd4339) beside the classical path's faces of
# the same runs; mixed-3, the shipped built-in workflow (path mesh2, 3d123e8) beside them again;
# mixed-4, the shipped workflow after d886271 (path mesh3) beside mesh2 and classical (BESIDE);
# mixed-5, the shipped workflow at 2f321d1 (path mesh4) beside the same two; mixed-6, path mesh5
# beside mesh4. The independent check's set (QA_LABELS_SET=heldout) has its own rounds: heldout-1,
# mesh4, mesh5 and classical on the held-out clips, mixed on the same sheets; heldout-2, mesh4 with
# the four further sources (as mixed-7 on the development set). mixed-8: path mesh6 (busy source
# texture not pasted) beside mesh4, on the good sources and m_astronaut; heldout-3 the same on the
# held-out clips. mixed-9: path mesh7 (source anti-aliased, softened to the target's sharpness,
# finer shading floor) beside mesh6; heldout-4 the same on the held-out clips. mixed-10: path mesh8
# (a glasses rim kept with its lens; a glasses frame 0.06 more chromatic than the skin, not 0.02)
# beside mesh7, on the development clips where either changes a sampled face (the sample clip,
# happyhorse t2v, the flf2v painting); heldout-5 the same on the held-out clips where it does
# (api_kling_o3_flf2v-1, video_humo-1), heldout2-2 on the second held-out set's
# (video_ltx2_3_id_lora-1). mixed-11, heldout-6, heldout2-3: path mesh9 (the rims voted on by the
# track's frames) beside mesh8, on the runs where the rims rule finds a rim. mixed-14: path mesh10
# (a wider margin round the mouth) beside the shipped path's pictures of every run
# (BESIDE_FIRST: mesh9's, else mesh8's, else mesh7's), under the written rule for soft. mixed-15:
# path mesh11 (pasted skin never much darker than the target's) beside the same pictures; heldout-7
# and heldout2-4 the same on the held-out sets. mixed-16, heldout-8, heldout2-5: path mesh12 (the
# membrane reads no edge at the lips) beside the same pictures; mixed-17, heldout-9, heldout2-6: path
# mesh13 (nor under the nose), the same way; mixed-18: path mesh15 (the membrane's field taken by dark
# pixels in proportion to their lightness), the same way.
ROUNDS = {"mesh": "mixed-2", "mesh2": "mixed-3", "mesh3": "mixed-4", "mesh4": "mixed-5", "mesh5": "mixed-6",
          "mesh6": "mixed-8", "mesh7": "mixed-9", "mesh8": "mixed-10", "mesh9": "mixed-11", "mesh10": "mixed-14",
          "mesh11": "mixed-15", "mesh12": "mixed-16", "mesh13": "mixed-17",
          "mesh15": "mixed-18"}
# Rounds that add sources to a path already judged (not a new path): mixed-7, the shipped path
# (mesh4) on the four sources only the classical path had been judged on (small, side-lit,
# astronaut, a second panel face), beside the classical faces of the same runs.
SOURCE_ROUNDS = ("mixed-7",)
ROUND = ROUNDS["mesh7"]
# A path judged on every labelled clip: its own faces on the runs it changed, the earlier paths'
# elsewhere. mesh8 and mesh9 were built and labelled only on the runs they change (found by swapping
# every clip's sampled frames with and without the change); on the others their pictures are
# mesh7's, whose labels stand for them (labels belong to the pictures: docs/qa.md).
LINEAGE = {"mesh9": ("mesh9", "mesh8", "mesh7"), "mesh8": ("mesh8", "mesh7")}
BESIDE = {"mixed-4": ("mesh2", "classical"), "mixed-5": ("mesh2", "classical"), "mixed-6": ("mesh4",),
          "mixed-7": ("classical",), "mixed-8": ("mesh4",), "heldout-3": ("mesh4",),
          "mixed-9": ("mesh6",), "heldout-4": ("mesh6",), "mixed-10": ("mesh7",), "heldout-5": ("mesh7",),
          "heldout2-2": ("mesh7",), "mixed-11": ("mesh8",), "heldout-6": ("mesh8",), "heldout2-3": ("mesh8",),
          "mixed-14": LINEAGE["mesh9"], "mixed-15": LINEAGE["mesh9"], "heldout-7": LINEAGE["mesh9"],
          "heldout2-4": LINEAGE["mesh9"], "mixed-16": LINEAGE["mesh9"], "heldout-8": LINEAGE["mesh9"],
          "heldout2-5": LINEAGE["mesh9"], "mixed-17": LINEAGE["mesh9"], "heldout-9": LINEAGE["mesh9"],
          "mixed-18": LINEAGE["mesh9"],
          "heldout2-6": LINEAGE["mesh9"]}
# Rounds whose old faces are one path's per run: the first of BESIDE's with faces of that run (the
# pictures a path built only on the runs it changed ships on the others: LINEAGE).
BESIDE_FIRST = ("mixed-14", "mixed-15", "heldout-7", "heldout2-4", "mixed-16", "heldout-8", "heldout2-5",
                "mixed-17", "heldout-9", "heldout2-6", "mixed-18")
# A held-out round and the development round of the same paths: what the gate would deliver on the
# held-out faces is read with the limits each path's labels chose on the development round
# (``agreement.delivered``, ``heldout.measure``).
# Rounds judged only on the faces a path visibly changed (``bench/qa_labels/visible.py``): the path's
# other faces are left unlabelled, the shipped picture's first label standing for both.
VISIBLE = {"mixed-16": "mesh12", "heldout-8": "mesh12", "heldout2-5": "mesh12",
           "mixed-17": "mesh13", "heldout-9": "mesh13", "heldout2-6": "mesh13", "mixed-18": "mesh15"}
DEV_ROUND = {"heldout-7": "mixed-15", "heldout2-4": "mixed-15"}

# Rounds that judge again faces already labelled, on shuffled sheets of their own: the same labellers
# see each listed path's faces of the listed clips. mixed-12: the painted flf2v clip and the sample
# clip, mesh7 and mesh9 (whose first labels came from different rounds, and the same mesh8 pictures
# of flf2v were labelled acceptable 0.60 in mixed-10 and 0.27 in mixed-11): the ruler's drift, and
# the shipped path against mesh7 under one ruler.
# mixed-13 and mixed-13b: the painting's mesh7 and mesh9 faces under the protocol's written rule for
# *soft* on painted or stylised targets (PROTOCOL.md), each face twice, by two labellers (TWIN).
PAINTING = "video_wan2_2_14B_flf2v-1"
RELABEL = {"mixed-12": (("mesh7", "mesh9"), (PAINTING, "api_kling_avatar2-1")),
           "mixed-13": (("mesh7", "mesh9"), (PAINTING,)), "mixed-13b": (("mesh7", "mesh9"), (PAINTING,))}
# A round whose sheets hold its twin's faces again: the twin's sheets rotated by half and shuffled
# within each sheet, so a labeller given sheet k of one and sheet k of the other never sees a face twice.
TWIN = {"mixed-13b": "mixed-13"}
# Rounds judged under a protocol rule written after the first labels: on their clips their labels
# are the ruler (``ruler``), replacing the first labels of the faces they judged.
RULED = {"mixed-13": "soft on painted or stylised targets, written in PROTOCOL.md on 2026-12-07"}

# what a viewer sees, in the words
DEFECTS = {
    "occluder": "occluder damaged (hand, hair, object, lens edge cut or painted over)",
    "glasses": "glasses removed (frames or lenses in the target, skin in the result)",
    "seam": "seam or edge at the paste boundary",
    "blotch": "smudge or blotch, brightness step inside the face",
    "ghost": "colourless or ghost face",
    "cast": "colour cast against the target",
    "mouth": "wrong expression or mouth",
    "offface": "pasted off the face",
    "distorted": "face distorted out of the target's proportions",
    "soft": "soft against a sharp target",
}


def faces() -> list[dict]:
    return [r for r in face_records() if r.get("crop")]


def labels(pass_: int | None = 1, sheets: str | None = None) -> dict[str, dict]:
    """Labels of one pass (None: any; a later row wins), optionally only those given on one kind
    of sheet ("mixed": beside another swap path's faces)."""
    if not LABELS.is_file():
        return {}
    rows = [json.loads(x) for x in LABELS.read_text().splitlines() if x.strip()]
    return {r["id"]: r for r in rows if (pass_ is None or r["pass"] == pass_)
            and (sheets is None or r.get("sheets") == sheets)}


def ruler() -> dict[str, dict]:
    """The labels every figure reads: the first labels, except where a ``RULED`` round judged the
    face again under a rule written later."""
    out = labels(1)
    for round_ in RULED:
        out.update(labels(None, round_))
    return out


def twin_agreement(round_: str = "mixed-13b") -> dict:
    """Two labellers on the same faces in one round and its twin: share with the same verdict, kappa."""
    return _agreement(labels(None, TWIN[round_]), labels(None, round_))


def _sheet(rows: list[dict], numbers: list[int], path: Path) -> None:
    import cv2
    from PIL import Image

    tiles = []
    for r, n in zip(rows, numbers):
        im = np.asarray(Image.open(SET / r["crop"]).convert("RGB"))
        head = np.full((26, im.shape[1], 3), 255, np.uint8)
        cv2.putText(head, str(n), (4, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.7, (0, 0, 0), 2, cv2.LINE_AA)
        tile = np.concatenate([head, im], axis=0)
        tiles.append(np.pad(tile, ((4, 4), (4, 4), (0, 0)), constant_values=255))
    blank = np.full_like(tiles[0], 255)
    tiles += [blank] * (-len(tiles) % COLS)
    grid = np.concatenate([np.concatenate(tiles[i:i + COLS], axis=1) for i in range(0, len(tiles), COLS)], axis=0)
    Image.fromarray(grid).save(path)


def mixed_sheets(round_: str = ROUND, out: Path = SHEETS) -> Path:
    """Sheets for a new swap path judged beside the old one, one labelling round: every face not
    labelled yet, plus every labelled face of the same clip x source runs made by another path
    (only the paths ``BESIDE`` names for the round, where it names them), shuffled together
    (numbered from 10001), so the same labellers judge both
    paths on the same sheets without knowing which is which. ``merge --round`` files each label
    with the round's name: the paths are compared only on the labels of one round."""
    have = labels(1)
    done = labels(None, round_)
    rows = [r for r in faces() if r["id"] not in done]
    new = [r for r in rows if r["id"] not in have]
    runs = {(r["clip"], r["source"]) for r in new}
    paths = {path_of(r) for r in new}
    beside = BESIDE.get(round_)
    old = [r for r in rows if r["id"] in have and (r["clip"], r["source"]) in runs and path_of(r) not in paths
           and (beside is None or path_of(r) in beside)]
    if round_ in BESIDE_FIRST:
        have_paths = {(r["clip"], r["source"], path_of(r)) for r in old}
        first = {run: next(p for p in beside if (*run, p) in have_paths)
                 for run in {(r["clip"], r["source"]) for r in old}}
        old = [r for r in old if path_of(r) == first[(r["clip"], r["source"])]]
    mix = new + old
    random.Random(SECOND_SEED + 1).shuffle(mix)
    return _write_sheets(mix, 10001, out / round_)


def relabel_sheets(round_: str, out: Path = SHEETS) -> Path:
    """Sheets for a ``RELABEL`` round: its paths' faces of its clips not yet labelled in it,
    shuffled together (numbered from 10001); ``merge --round`` files the labels under it."""
    paths, clips = RELABEL[round_]
    done = labels(None, round_)
    rows = [r for r in faces() if path_of(r) in paths and r["clip"] in clips and r["id"] not in done]
    random.Random(SECOND_SEED + 2).shuffle(rows)
    if round_ in TWIN:
        order = json.loads((out / TWIN[round_] / "index.json").read_text())
        by_id = {r["id"]: r for r in rows}
        twin = [by_id[i] for i in order.values() if i in by_id]
        blocks = [twin[s:s + PER_SHEET] for s in range(0, len(twin), PER_SHEET)]
        blocks = blocks[len(blocks) // 2:] + blocks[:len(blocks) // 2]
        rng = random.Random(SECOND_SEED + 3)
        rows = [r for b in blocks for r in rng.sample(b, len(b))]
    return _write_sheets(rows, 20001 if round_ in TWIN else 10001, out / round_)


def _write_sheets(rows: list[dict], first: int, sub: Path) -> Path:
    sub.mkdir(parents=True, exist_ok=True)
    for old in sub.glob("sheet_*.png"):
        old.unlink()
    index = {}
    for s in range(0, len(rows), PER_SHEET):
        chunk = rows[s:s + PER_SHEET]
        numbers = list(range(first + s, first + s + len(chunk)))
        _sheet(chunk, numbers, sub / f"sheet_{s // PER_SHEET + 1:03d}.png")
        index.update({str(n): r["id"] for n, r in zip(numbers, chunk)})
    (sub / "index.json").write_text(json.dumps(index, indent=0))
    return sub / "index.json"


def sheets(second: bool = False, out: Path = SHEETS, path: str | None = None,
           sources: list[str] | None = None) -> Path:
    """Write the sheets and their index (number -> face id); returns the index path. First pass:
    every cropped face not yet labelled, numbered from 1 in the set's order (runs grouped, so a
    labeller sees a clip's faces together); ``path``/``sources``: only that swap path's faces, of
    those sources (a path judged where it visibly changed a face leaves the rest unlabelled on
    purpose). Second pass: SECOND_SHARE of the first pass's faces (with ``path``/``sources``, of
    those faces: the share holds for them too), shuffled, numbered from 5001."""
    rows = [r for r in faces() if (path is None or path_of(r) == path) and (not sources or r["source"] in sources)]
    have = labels(1)
    if second:
        if path or sources:
            ids = {r["id"] for r in rows}
            have = {i: v for i, v in have.items() if i in ids}
        done2 = {i: v for i, v in labels(2).items() if i in have}
        pool = sorted(i for i in have if i not in done2)
        rng = random.Random(SECOND_SEED)
        k = max(1, round(SECOND_SHARE * len(have))) - len(done2)
        pick = set(rng.sample(pool, max(0, min(k, len(pool)))))
        rows = [r for r in rows if r["id"] in pick]
        rng.shuffle(rows)
        first = 5001
    else:
        rows = [r for r in rows if r["id"] not in have]
        first = 1
    return _write_sheets(rows, first, out / ("second" if second else "first"))


LINE = re.compile(r"^\s*(\d+)\s+(ok|bad)\s*([a-z,\s]*)$")


def parse(text: str, index: dict[str, str]) -> dict[str, tuple[bool, list[str]]]:
    """{face id: (acceptable, defects)} from a labeller's lines; an unknown number, an unknown code,
    a 'bad' without a code or a number given twice is an error (nothing is guessed)."""
    out: dict[str, tuple[bool, list[str]]] = {}
    for k, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            raise ValueError(f"line {k}: {line!r} is not 'N ok' or 'N bad CODE[,CODE]'")
        n, verdict, codes = m.group(1), m.group(2), [c for c in re.split(r"[,\s]+", m.group(3)) if c]
        if n not in index:
            raise ValueError(f"line {k}: number {n} is on no sheet of this index")
        unknown = [c for c in codes if c not in DEFECTS]
        if unknown:
            raise ValueError(f"line {k}: unknown defect code(s) {unknown}; codes: {sorted(DEFECTS)}")
        if verdict == "bad" and not codes:
            raise ValueError(f"line {k}: 'bad' needs at least one defect code")
        if verdict == "ok" and codes:
            raise ValueError(f"line {k}: 'ok' takes no defect code")
        if index[n] in out:
            raise ValueError(f"line {k}: number {n} labelled twice")
        out[index[n]] = (verdict == "ok", sorted(set(codes)))
    return out


def merge(files: list[Path], index: Path, pass_: int | None, labeller: str, round_: str | None = None) -> int:
    """Append the files' labels. On a mixed round's sheets (``round_``, ``pass_`` None) each label
    is filed under the round; its pass is 1 for a face never labelled, else the next pass (a face
    already seen twice gets pass 3, which no pass-1/pass-2 statistic reads)."""
    if (pass_ is None) == (round_ is None):
        raise ValueError("give either a pass (first or second sheets) or a round (mixed sheets)")
    idx = json.loads(index.read_text())
    have = {1: labels(1), 2: labels(2), 3: labels(3)}
    in_round = labels(None, round_) if round_ else {}
    new = {}
    for f in files:
        for fid, v in parse(f.read_text(), idx).items():
            p = pass_ or next((k for k in (1, 2) if fid not in have[k]), 3)
            if fid in new or (pass_ and fid in have[p]) or fid in in_round:
                raise ValueError(f"{f}: {fid} already labelled in {round_ or f'pass {p}'}")
            new[fid] = (p, v)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    with open(LABELS, "a") as out:
        for fid, (p, (ok, defects)) in new.items():
            row = {"id": fid, "acceptable": ok, "defects": defects, "pass": p, "labeller": labeller, "date": when}
            if round_:
                row["sheets"] = round_      # judged beside another path's faces (mixed_sheets)
            out.write(json.dumps(row, sort_keys=True) + "\n")
    return len(new)


def agreement() -> dict:
    """Second pass against the first: share of faces with the same verdict, and Cohen's kappa."""
    return _agreement(labels(1), labels(2))


def _agreement(a: dict[str, dict], b: dict[str, dict]) -> dict:
    both = sorted(set(a) & set(b))
    if not both:
        return {"faces": 0}
    x = np.array([a[i]["acceptable"] for i in both])
    y = np.array([b[i]["acceptable"] for i in both])
    po = float(np.mean(x == y))
    pe = float(x.mean() * y.mean() + (1 - x.mean()) * (1 - y.mean()))
    kappa = (po - pe) / (1 - pe) if pe < 1 else 1.0
    return {"faces": len(both), "same_verdict": round(po, 3), "kappa": round(kappa, 3),
            "first_ok_second_bad": int(np.sum(x & ~y)), "first_bad_second_ok": int(np.sum(~x & y))}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sheets")
    s.add_argument("--second", action="store_true")
    s.add_argument("--mixed", nargs="?", const=ROUND, metavar="ROUND",
                   help=f"a new swap path's faces shuffled with the old path's, for one round (default {ROUND})")
    s.add_argument("--relabel", metavar="ROUND", choices=sorted(RELABEL),
                   help="faces already labelled, judged again together (RELABEL)")
    s.add_argument("--path", help="only this swap path's faces")
    s.add_argument("--sources", help="only these sources' faces (comma-separated)")
    m = sub.add_parser("merge")
    m.add_argument("files", nargs="+", type=Path)
    m.add_argument("--index", type=Path, required=True)
    m.add_argument("--pass", dest="pass_", type=int, choices=(1, 2), help="first or second sheets")
    m.add_argument("--round", dest="round_", help="mixed sheets: the round they were made for")
    m.add_argument("--labeller", required=True)
    sub.add_parser("agreement")
    a = ap.parse_args(argv)
    if a.cmd == "sheets":
        srcs = [x.strip() for x in a.sources.split(",") if x.strip()] if a.sources else None
        print(relabel_sheets(a.relabel) if a.relabel else mixed_sheets(a.mixed) if a.mixed
              else sheets(a.second, path=a.path, sources=srcs))
    elif a.cmd == "merge":
        print(f"{merge(a.files, a.index, a.pass_, a.labeller, a.round_)} labels added to {LABELS}")
    else:
        print(json.dumps(agreement()))


if __name__ == "__main__":
    main()
