"""Calibration of Build Face Model's source check (swapline_core/faces/source_check.py).

Writes docs/measurements/source_check.md (command, date, machine, tables):
    OMP_NUM_THREADS=2 .venv/bin/python -m calibration.calibrate_source_check

Real photos only, through the built-in analyzer (what Build Face Model runs with the shipped
workflows): the two shipped sources, every face of insightface's t1.jpg at full size, enlarged 2x
from half size (area down, bicubic up), at half size and at a fifth (not enlarged), the
generalization bench's small source (devset.small_source of the m_t1_smile crop) and its
unscaled crop, the colour source enlarged 3x and blurred (out of focus); then the shipped sources reduced to a known eye
distance and enlarged 1.5x, 2x and 3x, which shows where the enlargement check is sure and where
it is not.
"""
from __future__ import annotations

import time

import cv2
import numpy as np

COMMAND = "OMP_NUM_THREADS=2 .venv/bin/python -m calibration.calibrate_source_check"


def resized(image: np.ndarray, f: float, back: bool) -> np.ndarray:
    h, w = image.shape[:2]
    small = cv2.resize(image, (round(w * f), round(h * f)), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC) if back else small


def cases() -> list[tuple[str, np.ndarray, bool]]:
    """(name, image, every face (else the largest, as Build Face Model picks))."""
    from bench.generalization.devset import SMALL_FROM, small_source
    from bench.quality import panel as qpanel
    from devtools.media import SAMPLES, T1, insightface_image, rgb

    t1 = rgb(insightface_image(T1))
    colour = rgb(SAMPLES / "source_face_colour.png")
    crop = qpanel.crop(t1, next(f for f in qpanel.PANEL if f.name == SMALL_FROM).box)
    return [("source_face.png (shipped)", rgb(SAMPLES / "source_face.png"), False),
            ("source_face_colour.png (shipped)", colour, False),
            ("t1.jpg, full size", t1, True),
            ("t1.jpg, enlarged 2x from half size", resized(t1, 0.5, True), True),
            ("m_t1_smile crop (generalization bench)", crop, False),
            ("small source (devset.small_source of it)", small_source(crop), False),
            ("t1.jpg at half size", resized(t1, 0.5, False), True),
            ("t1.jpg at a fifth", resized(t1, 0.2, False), True),
            ("source_face_colour.png enlarged 3x", cv2.resize(colour, None, fx=3, fy=3,
                                                               interpolation=cv2.INTER_CUBIC), False)] + [
            (f"source_face_colour.png blurred (Gaussian, sigma {s:g} px)", cv2.GaussianBlur(colour, (0, 0), s), False)
            for s in (1, 2, 3, 4)]


def measure_all(an, image: np.ndarray, every: bool) -> list[tuple[dict, str]]:
    from swapline_core.faces import source_check as sc

    faces = sorted(an.detect([image])[0], key=lambda f: -f.area)
    out = []
    for f in faces if every else faces[:1]:
        m = sc.measure(image, f)
        out.append((m, sc.judge(m)[0]))
    return out


def _span(vals, fmt: str) -> str:
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return format(lo, fmt) if lo == hi else f"{lo:{fmt}}-{hi:{fmt}}"


def sweep(an) -> list[list[str]]:
    """The shipped sources reduced to ``real`` px between the eyes, then enlarged ``k`` times."""
    from devtools.media import SAMPLES, rgb

    rows = []
    for name in ("source_face.png", "source_face_colour.png"):
        base = rgb(SAMPLES / name)
        iod0 = measure_all(an, base, False)[0][0]["inter_ocular_px"]
        for real in (20, 24, 28, 31):
            row = [name, str(real)]
            for k in (1.5, 2, 3):
                img = cv2.resize(resized(base, real / iod0, False), None, fx=k, fy=k, interpolation=cv2.INTER_CUBIC)
                got = measure_all(an, img, False)
                m, v = got[0] if got else ({}, "no face")
                row.append(f"{v} ({m.get('detail_iod_px') or '-'})")
            rows.append(row)
    return rows


def main() -> None:
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.faces import source_check as sc

    t0 = time.perf_counter()
    an = BuiltinAnalyzer()
    rows = []
    for name, image, every in cases():
        got = measure_all(an, image, every)
        ms = [m for m, _ in got]
        verdicts = ", ".join(f"{v} {n}" for v, n in sorted(
            {v: sum(1 for _, w in got if w == v) for _, v in got}.items()))
        rows.append([name, str(len(got)), _span([m["inter_ocular_px"] for m in ms], ".1f"),
                     _span([m.get("detail") for m in ms], ".4f"), _span([m.get("top_band_rms") for m in ms], ".2f"),
                     _span([m.get("detail_iod_px") for m in ms], ".1f"),
                     verdicts])
    write(rows, sweep(an), sc, time.perf_counter() - t0)


def write(rows, sweep_rows, sc, seconds: float) -> None:
    from bench.section import write_lines

    lines = [f"Run time {seconds:.0f} s.", "",
             f"Thresholds (`swapline_core/faces/source_check.py`): refused under {sc.REFUSE_IOD_PX:.0f} px between "
             f"the eyes; a warning under {sc.WARN_IOD_PX:.0f} px, or when no size down to {sc.WARN_IOD_PX:.0f} px "
             f"holds fine detail: {sc.MIN_DETAIL} or more (top band 0.3-0.5 cycles/px over mid band "
             f"1/16-0.25) with a top band of at least {sc.MIN_TOP_RMS} grey levels RMS (twice 8-bit rounding "
             "noise), the face aligned at the photo's own scale, capped at "
             f"{sc.DETAIL_IOD_CAP:.0f} px between the eyes.", "",
             "## Photos", "",
             "*detail*, *top band*: at the photo's own scale; *holds detail at*: the largest eye distance "
             "(px) at which the face meets both thresholds (`detail_iod_px`; - for none).", "",
             "| photo | faces | eyes apart (px) | detail | top band (grey levels RMS) | holds detail at | verdicts |",
             "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", "## Enlarged sources: where the check is sure", "",
              "The shipped sources reduced to a known eye distance (area averaging), then enlarged (bicubic); "
              "verdict and, in brackets, where the face holds detail again.", "",
              "| source | eyes apart before enlarging (px) | x1.5 | x2 | x3 |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in sweep_rows]
    print("wrote " + write_lines("source_check", "Build Face Model: source check calibration",
                                 "Measured by `calibration/calibrate_source_check.py` (its docstring says how each "
                                 "photo is made).", COMMAND, lines))


if __name__ == "__main__":
    main()
