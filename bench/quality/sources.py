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
from pathlib import Path

import cv2
import numpy as np

from ..paths import OUT, QUALITY_MEDIA
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
        from ..machine import machine_info
        from ..measurements import write_sources

        print(write_sources(rows, args.clip, machine_info()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
