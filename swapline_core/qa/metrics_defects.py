"""Per-face readings of defects a viewer rejects and the older metrics do not see (issue 48).

Each compares the result with the target on the same crop and regions as
:func:`metrics_image.image_metrics` (work scale, 68-point regions, the target's occluders left out):

- ``detail_ratio``: the result's fine detail (mean |Laplacian| of grey) over the target's on the face
  hull: a swap from a small or upscaled source reads soft or smeared on a sharp target (< 1);
- ``blotch``: the spread (95th - 5th percentile) of the lightness change result - target over the
  face's skin, both smoothed first so texture and noise do not count: a colour match shifts the
  whole face evenly, a dark smudge or a bright patch on the forehead does not;
- ``chroma_blotch``: how far the colour change result - target strays from one even shift over the
  face's skin (95th percentile of the distance of the smoothed a*, b* change from its median): a
  colour match moves the whole face by one vector, a yellow patch on a dark cheek or a pink one on
  a clay face moves part of it. ``blotch`` reads lightness only and misses these; smoothed twice
  as wide as ``blotch`` (patches, not specks);
- ``edge_loss``: of the target's strong edges around the features and over the face (glasses frames,
  lens edges, hair strands; the eyes, brows and lips themselves are left out), the share the result
  lost (its gradient under half the target's): glasses painted over, lens edges cut;
- ``texture_excess``: where on the skin the result's finest texture most exceeds the target's: the
  95th percentile, over the face's skin, of the local ratio of fine-band energy (result over
  target), read at a fixed viewing size of the face. ``detail_ratio`` averages over the whole face,
  so a patch of pasted stubble, specks or a blotchy smear on a smooth cheek is diluted by the rest;
  here it is what is read;
- ``feature_contrast``: the contrast of the result's eyes, brows and lips against the target's (RMS
  of a band-pass of lightness at the features' own scale, 0.02-0.05 face sizes, over the target's
  feature regions): a ghost face, washed out or half showing the target through, reads low (< 1).
  Measured in face sizes, so the face's pixel size does not set the reading.
"""
from __future__ import annotations

import cv2
import numpy as np

DETAIL_EPS = 0.5       # grey levels added to both Laplacian energies: flat faces stay near 1
BLOTCH_SIGMA = 0.04    # smoothing, in face sizes (sqrt of the hull's area)
CHROMA_SIGMA = 0.08    # chroma blotch smoothing, in face sizes ...
CHROMA_WORK_SIGMA = 2.0  # ... read where it is this many px (the change shrunk to fit)
CHROMA_QUANTILE = 95.0
STRONG_EDGE = 24.0     # grey-level gradient (Sobel magnitude) that counts as a strong edge ...
STRONG_SHARE = 0.85    # ... and at least this quantile of the region's gradients
LOST = 0.5             # the result keeps less than this share of the edge's gradient: lost
MIN_PIXELS = 16
# feature contrast: the band (Gaussian sigmas, in face sizes) holds the features' own structure
# (eye whites against iris and lid, brow against skin, lip line); finer is texture and noise,
# coarser is the face's shading. The floors keep a tiny face's band above one pixel.
CONTRAST_BAND = (0.02, 0.05)
CONTRAST_FLOOR = (0.5, 0.8)
CONTRAST_EPS = 0.05    # L* units added to both energies: a flat target does not divide by zero
# texture excess: the face is read at TEXTURE_VIEW px (sqrt of the hull's area; about the size a
# labeller sees it at on the labelled crops) so the band means the same on a 40 px and a 400 px
# face; the band is grey between Gaussian sigmas TEXTURE_BAND px, its energy averaged over
# TEXTURE_SMOOTH px (a patch, not a pixel), TEXTURE_EPS grey levels squared added to both energies
# (a flat target does not divide by zero), and the TEXTURE_QUANTILE-th percentile over the skin.
TEXTURE_VIEW = 96.0
TEXTURE_BAND = (0.5, 1.2)
TEXTURE_SMOOTH = 6.0
TEXTURE_EPS = 1.0
TEXTURE_QUANTILE = 95.0


def _grad(grey: np.ndarray) -> np.ndarray:
    gx = cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(grey, cv2.CV_32F, 0, 1, ksize=3)
    return np.sqrt(gx * gx + gy * gy)


def defect_metrics(o: np.ndarray, s: np.ndarray, lo: np.ndarray, ls: np.ndarray, reg: dict,
                   occ: np.ndarray) -> dict:
    """``o``/``s``: target/result RGB crops; ``lo``/``ls`` their Lab; ``reg``: face_regions;
    ``occ``: the target's occluders on the crop (bool)."""
    out: dict = {"detail_ratio": None, "blotch": None, "chroma_blotch": None, "edge_loss": None,
                 "feature_contrast": feature_contrast(lo, ls, reg, occ), "texture_excess": None}
    hull = reg["hull"]
    go = cv2.cvtColor(o, cv2.COLOR_RGB2GRAY).astype(np.float32)
    gs = cv2.cvtColor(s, cv2.COLOR_RGB2GRAY).astype(np.float32)
    face = hull & ~occ
    if face.sum() >= MIN_PIXELS:
        lo_d = np.abs(cv2.Laplacian(go, cv2.CV_32F, ksize=3))[face].mean()
        ls_d = np.abs(cv2.Laplacian(gs, cv2.CV_32F, ksize=3))[face].mean()
        out["detail_ratio"] = float((ls_d + DETAIL_EPS) / (lo_d + DETAIL_EPS))
    skin = hull & ~reg["features"] & ~occ
    if skin.sum() >= MIN_PIXELS:
        sigma = max(0.5, BLOTCH_SIGMA * reg["size"])
        d = cv2.GaussianBlur(ls[..., 0] - lo[..., 0], (0, 0), sigma)[skin]
        p5, p95 = np.percentile(d, (5, 95))
        out["blotch"] = float(p95 - p5)
        out["chroma_blotch"] = chroma_blotch(lo, ls, skin, max(0.5, CHROMA_SIGMA * reg["size"]))
        out["texture_excess"] = texture_excess(go, gs, skin, reg["size"])
    # occluders count here: their edges (frames, lens rims) are what a paste must not lose
    around = reg["grown"] & ~reg["features"]
    if around.sum() >= MIN_PIXELS:
        gro, grs = _grad(go), _grad(gs)
        v = gro[around]
        strong = around & (gro >= max(STRONG_EDGE, float(np.quantile(v, STRONG_SHARE))))
        if strong.sum() >= MIN_PIXELS:
            out["edge_loss"] = float((grs[strong] < LOST * gro[strong]).mean())
    return out


def chroma_blotch(lo: np.ndarray, ls: np.ndarray, skin: np.ndarray, sigma: float) -> float:
    """The CHROMA_QUANTILE-th percentile over ``skin`` (bool map) of the distance of the chroma change
    (a*, b* of ``ls`` - ``lo``, Gaussian-smoothed by ``sigma`` px) from its median over the skin.
    Read on the change shrunk until sigma is CHROMA_WORK_SIGMA px: at full size the wide blur took
    a quarter of the face's image metrics, and a field this smooth loses nothing when shrunk."""
    d = ls[..., 1:] - lo[..., 1:]
    f = min(1.0, CHROMA_WORK_SIGMA / max(sigma, 1e-6))
    if f < 1.0:
        size = (max(1, round(d.shape[1] * f)), max(1, round(d.shape[0] * f)))
        d = cv2.resize(d, size, interpolation=cv2.INTER_AREA)
        small = cv2.resize(skin.astype(np.float32), size, interpolation=cv2.INTER_AREA) >= 0.5
        skin = small if small.any() else cv2.resize(skin.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST) > 0
        sigma *= f
    d = cv2.GaussianBlur(d, (0, 0), sigma)[skin]
    if not len(d):
        return 0.0
    return float(np.percentile(np.linalg.norm(d - np.median(d, axis=0), axis=1), CHROMA_QUANTILE))


def texture_excess(go: np.ndarray, gs: np.ndarray, skin: np.ndarray, size: float) -> float | None:
    """The TEXTURE_QUANTILE-th percentile over ``skin`` (bool map) of sqrt(local fine-band energy
    of ``gs`` over that of ``go``) (grey float32 crops of result and target), both read with the
    face (``size`` px, sqrt of its hull's area) scaled to TEXTURE_VIEW px."""
    k = TEXTURE_VIEW / max(size, 1.0)
    h, w = go.shape[:2]
    view = (max(8, round(w * k)), max(8, round(h * k)))
    interp = cv2.INTER_AREA if k < 1 else cv2.INTER_CUBIC
    m = cv2.resize(skin.astype(np.uint8), view, interpolation=cv2.INTER_NEAREST) > 0
    if m.sum() < MIN_PIXELS:
        return None

    def energy(g: np.ndarray) -> np.ndarray:
        g = cv2.resize(g, view, interpolation=interp)
        b = cv2.GaussianBlur(g, (0, 0), TEXTURE_BAND[0]) - cv2.GaussianBlur(g, (0, 0), TEXTURE_BAND[1])
        return cv2.GaussianBlur(b * b, (0, 0), TEXTURE_SMOOTH)[m]

    ratio = np.sqrt((energy(gs) + TEXTURE_EPS) / (energy(go) + TEXTURE_EPS))
    return float(np.percentile(ratio, TEXTURE_QUANTILE))


def _band_rms(light: np.ndarray, mask: np.ndarray, s1: float, s2: float) -> float:
    d = cv2.GaussianBlur(light, (0, 0), s1) - cv2.GaussianBlur(light, (0, 0), s2)
    v = d[mask]
    return float(np.sqrt(np.mean(v * v)))


def feature_contrast(lo: np.ndarray, ls: np.ndarray, reg: dict, occ: np.ndarray) -> float | None:
    """Band-pass energy of the result's lightness over the target's on the target's eyes, brows and
    lips (grown a little, inside the hull, occluders left out); None with too few pixels. Both
    blurs run on the features' box grown by three of the coarser sigma, not on the whole crop."""
    feats = reg["features"] & reg["hull"] & ~occ
    if feats.sum() < MIN_PIXELS:
        return None
    s1 = max(CONTRAST_FLOOR[0], CONTRAST_BAND[0] * reg["size"])
    s2 = max(CONTRAST_FLOOR[1], CONTRAST_BAND[1] * reg["size"])
    pad = int(np.ceil(3 * s2))
    x, y, w, h = cv2.boundingRect(feats.astype(np.uint8))
    y0, x0 = max(0, y - pad), max(0, x - pad)
    y1, x1 = min(feats.shape[0], y + h + pad), min(feats.shape[1], x + w + pad)
    box = (slice(y0, y1), slice(x0, x1))
    m = feats[box]
    eo = _band_rms(np.ascontiguousarray(lo[box][..., 0]), m, s1, s2)
    es = _band_rms(np.ascontiguousarray(ls[box][..., 0]), m, s1, s2)
    return float((es + CONTRAST_EPS) / (eo + CONTRAST_EPS))
