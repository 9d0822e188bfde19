"""Is a source photo's face big and sharp enough for a swap? (Build Face Model's check.)

Two measures per source image, on the face the face model is built from:

- size: the inter-ocular distance (five-point eye centres) in the photo's own pixels;
- detail: on the face aligned at the photo's own scale (ArcFace's five-point template, never
  enlarged), the energy of the top frequency band (0.3-0.5 cycles per pixel) relative to the
  mid band (1/16-0.25), in the eyes-nose-mouth area. An enlarged small photo keeps its eye
  distance but loses the top band: bicubic enlargement by k leaves almost nothing above 0.5/k
  cycles per pixel, which a sharp photo has around the eyes, brows and lips. The top band must
  also stand above 8-bit rounding noise (``MIN_TOP_RMS``): an out-of-focus face has almost no
  mid band, and rounding noise over it would read as detail. Where the top band is missing, the
  face is measured again scaled down in quarter-octave steps: the largest eye distance at which
  it holds detail (``detail_iod_px``) is about its size before an enlargement.

Verdicts: ``refuse`` below ``REFUSE_IOD_PX`` (nothing a swapper can use: Build Face Model stops
with the numbers); ``warn`` below ``WARN_IOD_PX``, or when no size down to ``WARN_IOD_PX`` holds
detail (the swap works, but texture and identity come from interpolated pixels); else ``ok``.
Calibrated on real photos (the shipped sources, insightface's t1.jpg at full size, enlarged
from half size and downscaled, the generalization bench's small source, blurred sources):
tests/unit/faces/test_source_check.py; the numbers are in docs/measurements/source_check.md
(``python -m calibration.calibrate_source_check``).
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..types import Face
from .align import ARCFACE_112, umeyama

# Calibration, every measured number: docs/measurements/source_check.md.
# The built-in classical swapper's declared minimum (its Competence.min_inter_ocular_px): its
# landmark warp has nothing to work with below it, and INSwapper-style models declare 10.
REFUSE_IOD_PX = 12.0
# The recognisers' aligned crops (ArcFace 112 px, INSwapper 128 px) hold the eyes 35 px apart:
# below that a source's identity and texture are interpolated up. 32, not 35, because detectors
# read the same face's eye distance some 10 % apart (the built-in analyzer reads more than 35 on
# the shipped source_face.png, itself an ArcFace-aligned 112 px crop).
WARN_IOD_PX = 32.0
# Top band / mid band (see the module docstring), at the photo's own scale: between what sharp
# photos (the shipped sources, t1.jpg's six faces) and the same faces enlarged 2x measure.
MIN_DETAIL = 0.006
# ...and the top band must stand above 8-bit rounding noise: twice the level rounding alone
# leaves there (measured on blurred faces). Without it a face blurred until its mid band is
# nearly gone reads as detailed, its top band being rounding noise over almost nothing.
MIN_TOP_RMS = 0.46
# Faces larger than this (eye distance, px) are measured after an area downscale to it: beyond it
# a source holds more than any swapper uses, and the spectrum of a 4K portrait's face costs time.
DETAIL_IOD_CAP = 96.0
_STEP = 2.0 ** -0.25                       # quarter-octave steps of the detail_iod_px search
_UNIT_IOD = float(np.linalg.norm(ARCFACE_112[1] - ARCFACE_112[0])) / 112.0
_HINT = ("a sharp, frontal photo where the face is at least {n:.0f} px between the eyes "
         "(not enlarged from a smaller one) would do")


def inter_ocular(face: Face) -> float:
    return float(np.linalg.norm(np.asarray(face.kps[1], np.float64) - np.asarray(face.kps[0], np.float64)))


def aligned(image: np.ndarray, face: Face, iod_px: float) -> np.ndarray:
    """The face aligned to ArcFace's template with its eyes ``iod_px`` apart (never above the
    photo's own distance: an enlargement would add nothing to measure)."""
    kps = np.asarray(face.kps, np.float64)
    img = np.asarray(image)
    f = min(1.0, iod_px / max(inter_ocular(face), 1e-6))
    if f < 1.0:
        # an area downscale first: warpAffine alone would alias, which reads as detail
        h, w = img.shape[:2]
        img = cv2.resize(img, (max(1, round(w * f)), max(1, round(h * f))), interpolation=cv2.INTER_AREA)
        kps = kps * (np.array([img.shape[1] / w, img.shape[0] / h]))
    size = max(32, int(round(inter_ocular(face) * f / _UNIT_IOD)))
    m = umeyama(kps, ARCFACE_112 / 112.0 * size)
    return cv2.warpAffine(img, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def detail(crop: np.ndarray) -> tuple[float, float]:
    """(top-band (0.3-0.5 cycles/px) over mid-band (1/16-0.25) energy, the top band's RMS in grey
    levels) of the crop's eyes-nose-mouth area (rows 20-85 %, columns 15-85 % of the aligned
    crop: brows to chin, not the background)."""
    g = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_RGB2GRAY).astype(np.float64)
    n = g.shape[0]
    g = g[int(n * 0.2):int(n * 0.85), int(n * 0.15):int(n * 0.85)]
    g = g - g.mean()
    # a window, so the crop's borders do not add a spectrum of their own
    win = np.outer(np.hanning(g.shape[0]), np.hanning(g.shape[1]))
    power = np.abs(np.fft.fft2(g * win)) ** 2
    r = np.hypot(np.fft.fftfreq(g.shape[0])[:, None], np.fft.fftfreq(g.shape[1])[None, :])
    mid = float(power[(r >= 1 / 16) & (r < 0.25)].sum())
    top = float(power[(r >= 0.3) & (r <= 0.5)].sum())
    # Parseval: the band's share of the (windowed) pixel variance
    rms = float(np.sqrt(top / (g.size * float((win ** 2).sum()))))
    return (top / mid if mid > 0 else 0.0), rms


def holds_detail(ratio: float, rms: float) -> bool:
    return ratio >= MIN_DETAIL and rms >= MIN_TOP_RMS


def measure(image: np.ndarray, face: Face) -> dict:
    """``inter_ocular_px``; ``detail`` and ``top_band_rms`` at the photo's own scale (capped at
    ``DETAIL_IOD_CAP``); ``detail_iod_px``: the largest eye distance, from there down in
    quarter-octave steps to ``WARN_IOD_PX``, at which the face holds fine detail
    (``holds_detail``), or None. A sharp photo's is its own size; a photo enlarged k times regains
    its top band only once scaled back by about k, so this reads its size before the enlargement
    (a 3x enlarged 70 px face passes at ~68 px instead of being called soft at 205 px)."""
    iod = inter_ocular(face)
    out = {"inter_ocular_px": round(iod, 1)}
    if iod < REFUSE_IOD_PX:               # refused on size; too few pixels for a spectrum
        return out
    size, found = min(iod, DETAIL_IOD_CAP), None
    while True:
        ratio, rms = detail(aligned(image, face, size))
        if "detail" not in out:
            out.update(detail=round(ratio, 4), top_band_rms=round(rms, 3))
        if holds_detail(ratio, rms):
            found = size
            break
        if size * _STEP < WARN_IOD_PX:
            break
        size *= _STEP
    out["detail_iod_px"] = None if found is None else round(found, 1)
    return out


def judge(m: dict, index: int | None = None) -> tuple[str, str | None]:
    """("ok" | "warn" | "refuse", the message with the numbers, the thresholds and what would do)."""
    where = "the source photo" if index is None else f"source image {index}"
    iod = m["inter_ocular_px"]
    hint = _HINT.format(n=WARN_IOD_PX)
    if iod < REFUSE_IOD_PX:
        return "refuse", (f"{where}: the face is too small to swap from: its eyes are {iod:.1f} px apart, "
                          f"under the {REFUSE_IOD_PX:.0f} px no swapper works below; {hint}")
    if iod < WARN_IOD_PX:
        return "warn", (f"{where}: the face is small: its eyes are {iod:.1f} px apart, under {WARN_IOD_PX:.0f} px, "
                        f"so the swap's identity and texture come from interpolated pixels (expect a soft "
                        f"face); {hint}")
    if m.get("detail_iod_px", iod) is None:
        return "warn", (f"{where}: the face looks enlarged from a smaller photo, or out of focus: its eyes are "
                        f"{iod:.1f} px apart but it holds no fine detail at any size down to {WARN_IOD_PX:.0f} px "
                        f"between the eyes (at its own size: fine detail {m['detail']:.4f}, under the "
                        f"{MIN_DETAIL} a sharp photo measures, or top band {m['top_band_rms']:.2f} grey levels, "
                        f"under {MIN_TOP_RMS}), so the swap will be soft; {hint}")
    return "ok", None


def check_sources(images: Sequence[np.ndarray], faces: Sequence[Face]) -> dict:
    """The check of every source image's chosen face: what the face model records (``metadata
    ["source_check"]``). ``status`` is the worst verdict; ``messages`` one line per image that is
    not ok (also in that image's entry of ``images``)."""
    rank = {"ok": 0, "warn": 1, "refuse": 2}
    status, per_image = "ok", []
    for i, (image, face) in enumerate(zip(images, faces)):
        m = measure(image, face)
        verdict, why = judge(m, i if len(faces) > 1 else None)
        per_image.append({**m, "verdict": verdict, **({"message": why} if why else {})})
        status = max(status, verdict, key=rank.__getitem__)
    return {"status": status, "messages": [i["message"] for i in per_image if "message" in i],
            "images": per_image,
            "thresholds": {"refuse_inter_ocular_px": REFUSE_IOD_PX, "warn_inter_ocular_px": WARN_IOD_PX,
                           "min_detail": MIN_DETAIL, "min_top_band_rms": MIN_TOP_RMS}}


def warnings_of(identity) -> list[str]:
    """The source check's warnings a face model carries (none for an ok check, or for a face model
    saved before the check existed): what the swap reports repeat, so a soft swap's cause is
    stated where the swap is judged, not only on Build Face Model."""
    check = (getattr(identity, "metadata", None) or {}).get("source_check") or {}
    return list(check.get("messages") or []) if check.get("status") == "warn" else []
