"""The quality bench's speech case with other source faces (and optionally another talking clip).

Compares candidate source images on one clip with the bench's own pipeline and scorer
(``run.run_pipeline`` + ``run.expression``): moved_to_source, toward_source, the median
identity distances d(result, source), d(result, target), d(target, source), face_delta_e and
mouth_open_corr. Writes ``out/bench/sources/<clip>.json`` and one before/after strip per source
(the source, then five frontal frames of the target over the result).

``--panel`` adds the fixed panel of nine more faces (``panel.py``: fetched on first use, cropped to
out/bench/sources/panel/) and the two shipped sources; ``--panel-only NAME,...`` takes some of them.

    python -m bench.quality.sources [--media DIR] [--clip NAME] [--doc] [--panel] [--panel-only NAMES]
                                    [SOURCE.png ...]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

import cv2
import numpy as np

from ..paths import OUT, QUALITY_MEDIA
from ..section import Section, f, stamp, table, write
from . import cases as qcases
from . import panel as qpanel
from . import run, score


def speech_case(media: Path, clip: str) -> qcases.Case:
    base = qcases.load_clip(media, clip)
    l68, boxes = qcases.truth(base)
    return qcases.Case("speech", [f.copy() for f in base], boxes, l68)


def strip(case, res, source: np.ndarray) -> np.ndarray:
    frontal = [i for i, lm in enumerate(case.clean_l68) if lm is not None and score.yaw_ratio(lm) < 0.15]
    frontal = frontal or list(range(len(case.frames)))
    idx = [frontal[k] for k in np.linspace(0, len(frontal) - 1, 5).astype(int)]
    h = case.frames[0].shape[0]
    s = cv2.resize(source, (h, h), interpolation=cv2.INTER_AREA)
    top = np.concatenate([s] + [res["inputs"][i] for i in idx], 1)
    bottom = np.concatenate([np.zeros_like(s)] + [res["outputs"][i] for i in idx], 1)
    return np.concatenate([top, bottom], 0)


def is_colour(img: np.ndarray) -> bool:
    """False for a greyscale image stored as RGB (the shipped source_face.png: R == G == B)."""
    c = img.astype(np.int16)
    return float(np.abs(c[..., 0] - c[..., 2]).mean() + np.abs(c[..., 0] - c[..., 1]).mean()) > 2.0


def compare(sources: list[Path], media: Path, clip: str, out: Path, log=print, origins=None) -> dict:
    from bench.cases import builtin_case, face_model, load_rgb

    c0 = builtin_case()
    case = speech_case(media, clip)
    rows = {}
    for path in sources:
        img = load_rgb(path)
        rect, _ = score.largest_face(img)
        if rect is None:
            log(f"{path}: the scorer (dlib HOG) finds no face in it; skipped")
            continue
        res = run.run_pipeline(case, c0.analyzer, c0.swapper, face_model(c0.analyzer, img), out / "work")
        row = run.expression(case, res, score.embedding(img, rect))
        row["catastrophic_pastes"] = len(run.catastrophic(case, run.off_face(case, res)))
        row["skipped"] = res["swap"].get("skipped", {})
        row["colour"] = is_colour(img)
        row["origin"] = (origins or {}).get(path.resolve()) or f"`{path}`"
        rows[path.stem] = row
        log(f"{path.stem}: moved {row['moved_to_source']} toward {row['toward_source']} "
            f"d(res,src)/d(res,tgt)/d(tgt,src) {row['identity_distances']} "
            f"dE {row['face_delta_e']:.2f} mouth {row['mouth_open_corr']}")
        cv2.imwrite(str(out / f"{Path(clip).stem}_{path.stem}.png"),
                    cv2.cvtColor(strip(case, res, img), cv2.COLOR_RGB2BGR))
    shutil.rmtree(out / "work", ignore_errors=True)
    (out / f"{Path(clip).stem}.json").write_text(json.dumps(rows, indent=1, default=float))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="*", type=Path)
    ap.add_argument("--media", type=Path, default=QUALITY_MEDIA)
    ap.add_argument("--clip", default=qcases.KLING)
    ap.add_argument("--out", type=Path, default=OUT / "sources")
    ap.add_argument("--doc", action="store_true", help="write docs/measurements/quality_sources.md")
    ap.add_argument("--panel", action="store_true",
                    help="also the fixed source panel (bench/quality/panel.py) and both shipped sources")
    ap.add_argument("--panel-only", metavar="NAME,...", help="only these panel faces (implies --panel)")
    args = ap.parse_args(argv)
    use_panel = args.panel or bool(args.panel_only)
    if not args.sources and not use_panel:
        ap.error("give SOURCE.png files, --panel or --panel-only")
    args.out.mkdir(parents=True, exist_ok=True)
    sources, origins = list(args.sources), qpanel.origins(())
    if use_panel:
        try:
            faces = qpanel.select(args.panel_only)
        except ValueError as e:
            ap.error(str(e))
        sources += [p for p in qpanel.shipped() if p.resolve() not in {s.resolve() for s in sources}]
        sources += qpanel.build(faces)
        origins = qpanel.origins(faces)
    rows = compare(sources, args.media, args.clip, args.out, origins=origins)
    if args.doc:
        print(write_doc(rows, args.clip, stamp(" ".join(["python -m bench.quality.sources", *(argv or sys.argv[1:])]))))
    return 0


def _median(values) -> str:
    return f"{statistics.median(values):.3f}" if values else "n/a"


def summary(rows: dict) -> str:
    """One line over the colour sources: the greyscale default source is not a fair comparison."""
    colour = [r for r in rows.values() if r.get("colour") and r.get("moved_to_source") is not None]
    if not colour:
        return "No colour source was scored."
    moved = [r["moved_to_source"] for r in colour]
    toward = [r["toward_source"] for r in colour if r.get("toward_source") is not None]
    return (f"Over the {len(colour)} colour sources: median moved_to_source {_median(moved)}, median toward_source "
            f"{_median(toward)}; {sum(v >= 0.9 for v in moved)} of {len(colour)} reach moved_to_source >= 0.9 "
            f"({sum(v >= 0.9 for v in toward)} reach toward_source >= 0.9).")


def body(data: dict) -> list[str]:
    cells = [[name, *(f(v) for v in (r.get("moved_to_source"), r.get("toward_source"),
                                     *(r.get("identity_distances") or [None] * 3), r.get("face_delta_e"),
                                     r.get("mouth_open_corr"))), r.get("origin", "n/a")]
             for name, r in data["rows"].items()]
    return [summary(data["rows"]), "", *table(["source", "moved_to_source", "toward_source", "d(res,src)", "d(res,tgt)",
                                               "d(tgt,src)", "face_delta_e", "mouth_open_corr", "origin"], cells)]


# Not a bench.run section (about 45 s per source, the panel downloaded on first use): this module's
# main runs it, and the common writer makes its page.
SECTION = Section(
    name="quality_sources", title="Identity with other source faces: measurements",
    about=lambda d: (f"The quality bench's speech case (`{d['clip']}`) swapped with each source image; the same "
                     "pipeline and independent scorer as `quality.md` (`bench/quality/sources.py`). The bench's "
                     "default source is `source_face.png` (greyscale, 112 px); `moved_to_source` depends on how far "
                     "the source is from the target to begin with (d(target, source)) and on the target's kept "
                     "glasses frames. `--panel` adds a fixed panel of faces cropped from frames of MIT-licensed "
                     "ComfyUI workflow-template wheels (PyPI) and insightface's t1.jpg (recipe and who is who: "
                     "`bench/quality/panel.py`; crops: `out/bench/sources/panel/`). "
                     "Strips: `out/bench/sources/<clip>_<source>.png`."),
    run=lambda sources, clip=qcases.KLING, log=print: {"clip": clip, "rows": compare(
        [Path(p) for p in sources], QUALITY_MEDIA, clip, OUT / "sources", log)},
    body=body, full={"sources": []}, smoke={"sources": []},
)


def write_doc(rows: dict, clip: str, st: dict | None = None) -> str:
    return write(SECTION, {"data": {"clip": clip, "rows": rows}, "targets": []}, st or stamp())


if __name__ == "__main__":
    raise SystemExit(main())
