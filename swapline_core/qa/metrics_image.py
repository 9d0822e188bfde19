"""Pixel metrics of one swapped face against the target face it replaced.

What a viewer rejects at a glance, measured on the target's 68-point landmarks (so the regions
are where the target's face is, whatever the swapper did):

- occluder overwrite: share of the target's occluder pixels (glasses, hands, hair over the face)
  that the result changed. The occluder mask comes from the caller (the mask stack) or, by
  default, from :func:`estimate_occluder`;
- colour cast: chroma shift (distance in a*, b*) between the median colour of the result's face
  skin and the target's, over the same (target skin) pixels, on each half of the face (either
  side of the nose line), the larger of the two;
- seam ratio: gradient energy on the boundary ring of the changed region, result over target.
  A soft paste keeps the target's edge statistics (~1); a hard or haloed edge adds energy;
- bleed: share of the target's skin pixels (face and forehead) that the result changed into a
  colour no skin of this face has (foreign colour: greener or bluer than every reference skin
  colour of the target, or far from the result's own skin: source background, hair, a
  mis-matched patch);
- off-face: changed pixels outside the target's face (hull grown by ``FACE_MARGIN``), per
  hull pixel. A paste that landed beside the face changes pixels where no face is;
- changed: share of the target's face hull the result changed (coverage: was it swapped at all).

All work happens on a crop around the face, shrunk to at most WORK_SIDE pixels: the cost is bounded
whatever the face size or the frame.
"""
from __future__ import annotations

import cv2
import numpy as np
from scipy.spatial import cKDTree

from .metrics_defects import defect_metrics

# Per-pixel delta E above which a pixel counts as changed. Outside the pasted patches the swap
# layer reproduces the target exactly, so this only has to clear resampling noise inside them.
CHANGED_DE = 6.0
# A pixel of the target's face hull is "skin-coloured" within this delta E of the nearest colour
# of the face's reference skin (cheeks, nose tip, chin: see SKIN_REFERENCE). Lit and shaded skin
# are both in the reference; on the sample clip the red glasses frames sit 12-19 from the nearest
# shaded skin (their lit and shaded parts), dark lenses far beyond. At 14 whole stretches of the
# frames went unmarked and a frame whose glasses were painted over read as "too few occluder
# pixels to measure"; at 12 no skin was marked on the sample frames looked at (0, 8, 20, 40, 44).
SKIN_DE = 12.0
# Reference skin: landmark polygons below the eyes (both cheeks beside the nose and mouth, the
# nose tip, the chin), where glasses, frames and brows never are. One median skin colour is not
# enough: under side light the shaded cheek is 25-30 delta E from the lit one, and a median
# between them called half the face an occluder (the sample clip's shaded cheek, 20-35 % of the
# hull), so a swap that changed shaded skin "painted over an occluder".
SKIN_REFERENCE = ([1, 2, 3, 4, 48, 31], [15, 14, 13, 12, 54, 35], [31, 32, 33, 34, 35, 51, 50],
                  [6, 7, 8, 9, 10, 57, 58, 56])
# Reference colours are bins of this size (delta E); a bin counts when it holds at least
# REF_MIN_SHARE of the reference pixels, so a stray hair or specular dot there is not "skin".
REF_BIN = 4.0
REF_MIN_SHARE = 0.004
# Foreign colour: this far from the result's median skin is no skin tone at all (blue, green,
# saturated background); shading and lips of a swapped face stay well inside it.
FOREIGN_DE = 40.0
# Foreign colour, by hue: a changed pixel whose a* (green-red) or b* (blue-yellow) is below the
# lowest of the target's reference skin colours by this margin is greener or bluer than any skin
# of this face under this light. Lighting moves skin along a* and b* together, but skin never turns
# greener or bluer than its own palette. The demo output of issue 14 had a cyan band on the
# forehead (a* -7, b* 3 where the target's forehead is a* 3, b* 7, its palette's lowest a* 2): only
# ~10 delta E away and 20-30 from the result's median skin, so the distance test missed it, while
# a viewer sees it at once against the red-lit face. The margin is a little more than a colour bin
# (REF_BIN), so a bin's rounding is no foreign colour.
FOREIGN_AB = 5.0
# The forehead (above the brows, not in the 68-point hull): the brows moved up by this many face
# sizes. The demo output of issue 14 put its cyan band there, 0.05-0.27 face sizes above the
# brows, where no hull-based region looked. Only the target's skin-coloured pixels there count
# (hair, a hat or a fringe are not skin).
FOREHEAD = 0.3
# Margins in face sizes (face size = sqrt of the hull area).
FACE_MARGIN = 0.12           # off-face: grown hull; paste masks feather a little past the hull
FEATURE_MARGIN = 0.05        # eyes/brows/lips grown by this before they are excluded from skin
RING = 0.04                  # half-width of the seam ring
MIN_OCCLUDER_SHARE = 0.02    # fewer occluder pixels than this share of the hull: no measurement
HALF_MIN_SHARE = 0.1         # colour cast: a face half with less of the skin is not measured alone
SEAM_EPS = 2.0               # added to both gradient energies (grey levels): flat rings stay ~1
OCC_PAD = 2                  # px around the hull's box where the occluder measurements are taken
# Crops larger than this (pixels, longer side) are measured shrunk to it: every metric is a share,
# a median colour or a gradient ratio on regions sized in face sizes, so a 1080p close-up says
# nothing a 384 px view does not, at a fraction of the cost (a 720p talking head's crop is ~650 px:
# ~0.35 of the pixels). The calibration clip's crops are smaller, so its limits are measured as is.
WORK_SIDE = 384

_EYES = (list(range(36, 42)), list(range(42, 48)))
_BROWS = (list(range(17, 22)), list(range(22, 27)))
_LIPS = list(range(48, 60))


def lab(img: np.ndarray) -> np.ndarray:
    """RGB uint8 -> CIE Lab float32 (L 0..100, a/b about -128..127): delta E in real units."""
    return cv2.cvtColor(img.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)


def delta_e(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distance over the last axis (3 channels): the float32 values of
    ``np.linalg.norm(a - b, axis=-1)`` without its slow reduction over a length-3 axis."""
    d = a - b
    return np.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2])


def dilate_disc(mask: np.ndarray, grow: int) -> np.ndarray:
    """``mask`` (uint8) dilated by an elliptic element of radius ``grow``, computed only on the box
    the result can reach (the set pixels' box grown by ``grow``): a feature's disc is a few percent
    of the crop, and dilating the whole crop per feature took about a quarter of image_metrics' time.
    The same pixels as ``cv2.dilate`` on the whole mask."""
    if grow <= 0:
        return mask.copy()
    out = np.zeros_like(mask)
    x, y, w, h = cv2.boundingRect(mask)
    if w == 0:
        return out
    y0, x0 = max(0, y - grow), max(0, x - grow)
    y1, x1 = min(mask.shape[0], y + h + grow), min(mask.shape[1], x + w + grow)
    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1))
    out[y0:y1, x0:x1] = cv2.dilate(mask[y0:y1, x0:x1], k)
    return out


def _poly(mask: np.ndarray, pts: np.ndarray, grow: int) -> None:
    hull = cv2.convexHull(np.round(pts).astype(np.int32))
    cv2.fillConvexPoly(mask, hull, 1)
    if grow > 0:
        mask[:] = dilate_disc(mask, grow)


def occluder_regions(shape_hw: tuple[int, int], lm: np.ndarray) -> dict[str, np.ndarray]:
    """What the occluder estimate needs (crop coordinates, from 68 landmarks): hull, features,
    reference skin and the face size."""
    h, w = shape_hw
    hull = np.zeros((h, w), np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.round(lm).astype(np.int32)), 1)
    size = float(np.sqrt(max(hull.sum(), 1)))
    feats = np.zeros((h, w), np.uint8)
    g = max(1, round(FEATURE_MARGIN * size))
    for idx in (*_EYES, *_BROWS, _LIPS):
        m = np.zeros((h, w), np.uint8)
        _poly(m, lm[idx], g)
        feats |= m
    ref = np.zeros((h, w), np.uint8)
    for idx in SKIN_REFERENCE:
        cv2.fillConvexPoly(ref, cv2.convexHull(np.round(lm[idx]).astype(np.int32)), 1)
    hull, feats = hull.astype(bool), feats.astype(bool)
    return {"hull": hull, "features": feats, "skin_ref": ref.astype(bool) & hull & ~feats, "size": size}


def face_regions(shape_hw: tuple[int, int], lm: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`occluder_regions` plus the grown hull (off-face) and the forehead's band."""
    reg = occluder_regions(shape_hw, lm)
    size = reg["size"]
    grown = dilate_disc(reg["hull"].astype(np.uint8), int(FACE_MARGIN * size))
    brows = lm[17:27]
    fh = np.zeros(shape_hw, np.uint8)
    up = brows - np.array([0.0, FOREHEAD * size], np.float32)
    cv2.fillConvexPoly(fh, cv2.convexHull(np.round(np.concatenate([brows, up])).astype(np.int32)), 1)
    return {**reg, "grown": grown.astype(bool), "forehead": fh.astype(bool) & ~reg["hull"] & ~reg["features"]}


def skin_colours(target_lab: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The reference skin's colours: centres of the Lab bins that hold enough reference pixels.
    Deterministic (no clustering with random starts): a resumed QA run must measure the same."""
    px = target_lab[ref]
    q = np.floor(px / REF_BIN).astype(np.int64)
    # One integer per bin (each channel's bin index offset into 0..127, 7 bits apiece): a 1-D
    # unique avoids np.unique(axis=0)'s structured-row sort and orders the bins the same way.
    key = ((q[:, 0] + 64) << 14) | ((q[:, 1] + 64) << 7) | (q[:, 2] + 64)
    keys, counts = np.unique(key, return_counts=True)
    keys = keys[counts >= max(2, REF_MIN_SHARE * len(px))]
    keep = np.stack([(keys >> 14) - 64, ((keys >> 7) & 127) - 64, (keys & 127) - 64], axis=1)
    return (keep.astype(np.float32) + 0.5) * REF_BIN


def _skin_distance(px: np.ndarray, colours: np.ndarray) -> np.ndarray:
    """Delta E of each pixel to the nearest reference skin colour. A k-d tree over the colours:
    comparing every pixel with every colour built (N, 64, 3) blocks, ~150 MB and a quarter of a
    second per 400 px face."""
    if len(colours) == 0:
        return np.full(len(px), np.inf, np.float32)
    d, _ = cKDTree(np.asarray(colours, np.float64)).query(np.asarray(px, np.float64), k=1)
    return d.astype(np.float32)


def _bin_offsets(radius: float, margin: float = 1e-3) -> tuple[np.ndarray, np.ndarray, int]:
    """Bin offsets (pixel's bin - colour's bin) at which every pixel of the bin is within
    ``radius`` of the colour (sure), or some may be (maybe), and the largest offset looked at.
    A pixel of bin q lies in [q B, (q + 1) B), a colour at (k + 1/2) B: per axis the pixel is
    between |d B| - B/2 and |d B| + B/2 from it. ``margin`` keeps float rounding out of the sure cases."""
    reach = int(np.ceil(radius / REF_BIN)) + 1
    g = np.arange(-reach, reach + 1)
    d = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    a = np.abs(d) * REF_BIN
    closest = np.sqrt((np.maximum(a - REF_BIN / 2, 0) ** 2).sum(1))
    farthest = np.sqrt(((a + REF_BIN / 2) ** 2).sum(1))
    return d[farthest <= radius - margin], d[closest <= radius + margin], reach


def near_skin(px: np.ndarray, colours: np.ndarray, radius: float) -> np.ndarray:
    """``_skin_distance(px, colours) <= radius``, exactly, at a fraction of the cost (a 720p
    face's ~45 000 pixels: ~10 -> ~2.5 ms). The colours are bin centres (:func:`skin_colours`), so
    whether a pixel is near one depends mostly on its own bin: a small grid over the colours' bins
    says near, far or undecided, and only undecided pixels (~7 %) are measured."""
    if len(colours) == 0:
        return np.zeros(len(px), bool)
    kc = np.floor(colours / REF_BIN).astype(np.intp)
    if not np.array_equal((kc + 0.5) * REF_BIN, colours):     # not bin centres: measure them all
        return _skin_distance(px, colours) <= radius
    sure, maybe, reach = _bin_offsets(radius)
    lo = kc.min(0) - reach - 1          # one empty layer around: a clipped index reads "far"
    shape = tuple(int(v) for v in kc.max(0) + reach + 2 - lo)
    grid = np.zeros(shape, np.uint8)    # 0 far, 1 undecided, 2 near
    for offsets, v in ((maybe, 1), (sure, 2)):
        idx = (kc[:, None, :] + offsets[None] - lo).reshape(-1, 3)
        grid[idx[:, 0], idx[:, 1], idx[:, 2]] = v
    q = np.floor(np.asarray(px, np.float32) * np.float32(1.0 / REF_BIN)).astype(np.intp) - lo
    cls = grid.ravel()[np.ravel_multi_index(q.T, shape, mode="clip")]
    out = cls == 2
    undecided = np.flatnonzero(cls == 1)
    if len(undecided):
        out[undecided] = _skin_distance(px[undecided], colours) <= radius
    return out


def reference_colours(target_lab: np.ndarray, regions: dict) -> np.ndarray:
    cand = regions["hull"] & ~regions["features"]
    ref = regions.get("skin_ref")
    if ref is None or ref.sum() < 16:
        ref = cand                       # no cheeks/chin in view: the whole candidate area
    return skin_colours(target_lab, ref)


def estimate_occluder(target_lab: np.ndarray, regions: dict, skin_de: float = SKIN_DE,
                      colours: np.ndarray | None = None) -> np.ndarray:
    """Pixels inside the target's face hull, outside eyes/brows/lips, far from every colour of
    the target's reference skin (:data:`SKIN_REFERENCE`).

    The gate's own estimate, independent of the mask stack (QA must not trust the stage it
    checks): lenses, frames, hair read as far from skin, lit or shaded; the face's own features
    are excluded because a swap is meant to change them. A skin-coloured hand is not seen.
    ``colours``: :func:`reference_colours`, where the caller has them already.
    """
    cand = regions["hull"] & ~regions["features"]
    if cand.sum() < 16:
        return np.zeros_like(cand)
    if colours is None:
        colours = reference_colours(target_lab, regions)
    occ = np.zeros(cand.shape, np.uint8)
    occ[cand] = ~near_skin(target_lab[cand], colours, skin_de)
    # Opening removes speckle (pores, specular dots) that is not an object in front of the face.
    occ = cv2.morphologyEx(occ, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    return occ.astype(bool)


def _crop_box(lm: np.ndarray, hw: tuple[int, int], pad: float = 0.6) -> tuple[int, int, int, int]:
    x0, y0 = lm.min(axis=0)
    x1, y1 = lm.max(axis=0)
    p = pad * max(x1 - x0, y1 - y0)
    h, w = hw
    return (int(max(0, np.floor(x0 - p))), int(max(0, np.floor(y0 - p))),
            int(min(w, np.ceil(x1 + p))), int(min(h, np.ceil(y1 + p))))


def _grad(grey: np.ndarray) -> np.ndarray:
    gx = cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(grey, cv2.CV_32F, 0, 1, ksize=3)
    return np.sqrt(gx * gx + gy * gy)


def colour_cast(lo: np.ndarray, ls: np.ndarray, skin: np.ndarray, lm: np.ndarray) -> float:
    """Chroma shift (a*, b*) of the result's skin against the target's, the larger of the face's
    two halves (either side of the nose line, landmarks 27-33).

    Chroma, not delta E: a viewer calls a face colour-cast when its hue is off; the source's skin
    being darker or lighter is its complexion (and lighting moves L most). Halves, not the whole
    face: under side light the lit and shaded halves are two colours, and one median over both
    lands between them, where a swap that made both halves wrong can still match it. The demo
    output of issue 14 (the shaded half 13-15 redder than the target's, the lit half olive):
    whole-face median delta E 3.5-10.4, halves 12-16 in chroma.
    """
    p0, p1 = lm[27], lm[33]
    yy, xx = np.nonzero(skin)                     # the skin's pixels only, in mask order
    side = (p1[0] - p0[0]) * (yy - p0[1]) - (p1[1] - p0[1]) * (xx - p0[0]) > 0
    s_ab, o_ab = ls[yy, xx, 1:], lo[yy, xx, 1:]

    def shift(m: np.ndarray) -> float:
        return float(np.linalg.norm(np.median(s_ab[m], axis=0) - np.median(o_ab[m], axis=0)))

    # a half hardly in view (a profile) is not measured on its own
    halves = [m for m in (side, ~side) if m.sum() >= max(16, HALF_MIN_SHARE * len(side))]
    return max(shift(m) for m in halves) if halves else shift(np.ones_like(side))


def _occluders(o: np.ndarray, s: np.ndarray, lm: np.ndarray, occluder: np.ndarray | None,
               reg: dict | None = None, lo: np.ndarray | None = None, ls: np.ndarray | None = None) -> dict:
    """The occluder measurements, on the crop's own pixels whatever its size: a thin occluder (a
    wire frame, the rim of red glasses, a strand of hair) is a few pixels wide, and on a shrunk crop
    it mixes with the skin around it, drops out of the estimate and reads as changed where the
    swap kept it (the 720p bench clip: overwrite 0.39-0.45 at full size, 0.47-0.57 at 384 px).
    Returns the occluder mask (the crop's size) and the reference skin colours with the metrics.
    ``reg``, ``lo`` and ``ls``: the crop's regions and both Labs where the caller has them at this size.

    Everything here lies inside the face hull, so it is measured on the hull's box (a fifth of a
    0.6-padded crop), grown by OCC_PAD so the opening's erosion sees the zeros around the hull as
    it does on the whole crop: the same masks and numbers, without converting the whole crop."""
    h, w = o.shape[:2]
    hx, hy, hw, hh = cv2.boundingRect(np.round(lm).astype(np.int32))
    x0, y0 = max(0, hx - OCC_PAD), max(0, hy - OCC_PAD)
    x1, y1 = min(w, hx + hw + OCC_PAD), min(h, hy + hh + OCC_PAD)
    box = (slice(y0, y1), slice(x0, x1))
    if reg is not None:
        reg = {k: (v[box] if isinstance(v, np.ndarray) else v) for k, v in reg.items()}
    else:
        reg = occluder_regions((y1 - y0, x1 - x0), lm - np.array([x0, y0], np.float32))
    lo = lo[box] if lo is not None else lab(o[box])
    colours = reference_colours(lo, reg)
    hull = reg["hull"]
    n_hull = max(int(hull.sum()), 1)
    if occluder is not None:
        occ, source = (np.asarray(occluder)[box] > 0.5) & hull, "mask"
    else:
        occ, source = estimate_occluder(lo, reg, colours=colours), "estimate"
    n = int(occ.sum())
    overwrite = None
    if n >= MIN_OCCLUDER_SHARE * n_hull:
        ls_occ = ls[box][occ] if ls is not None else lab(s[box][occ][:, None])[:, 0]   # the occluder's pixels only
        de = delta_e(ls_occ, lo[occ])
        overwrite = float((de > CHANGED_DE).mean())
    full = np.zeros((h, w), bool)
    full[box] = occ
    return {"occluder_share": float(n / n_hull), "occluder_source": source, "occluder_overwrite": overwrite,
            "occ": full, "colours": colours}


def image_metrics(original: np.ndarray, swapped: np.ndarray, target_landmarks: np.ndarray,
                  occluder: np.ndarray | None = None) -> dict:
    """Metrics of one face; ``occluder`` (optional) is a full-frame bool/0..1 mask of the target's
    occluders for this face (the mask stack's); without it :func:`estimate_occluder` is used."""
    lm = np.asarray(target_landmarks, np.float32)
    x0, y0, x1, y1 = _crop_box(lm, original.shape[:2])
    if x1 - x0 < 8 or y1 - y0 < 8:
        return {}
    o, s = original[y0:y1, x0:x1], swapped[y0:y1, x0:x1]
    lm_c = lm - np.array([x0, y0], np.float32)
    occ_in = None if occluder is None else np.asarray(occluder)[y0:y1, x0:x1]
    scale = WORK_SIDE / max(x1 - x0, y1 - y0)
    reg = lo = ls = None
    if scale >= 1.0:
        reg, lo, ls = face_regions(o.shape[:2], lm_c), lab(o), lab(s)
    oc = _occluders(o, s, lm_c, occ_in, reg, lo, ls)
    occ, colours = oc.pop("occ"), oc.pop("colours")
    if scale < 1.0:
        size = (max(8, round((x1 - x0) * scale)), max(8, round((y1 - y0) * scale)))
        o = cv2.resize(o, size, interpolation=cv2.INTER_AREA)
        s = cv2.resize(s, size, interpolation=cv2.INTER_AREA)
        lm_c = lm_c * np.array([size[0] / (x1 - x0), size[1] / (y1 - y0)], np.float32)
        occ = cv2.resize(occ.astype(np.float32), size, interpolation=cv2.INTER_AREA) > 0.5
        reg, lo, ls = face_regions(o.shape[:2], lm_c), lab(o), lab(s)
    de = delta_e(ls, lo)
    changed = de > CHANGED_DE
    hull = reg["hull"]
    n_hull = max(int(hull.sum()), 1)
    out: dict = {"changed": float(changed[hull].mean()) if hull.any() else 0.0,
                 "offface": float((changed & ~reg["grown"]).sum() / n_hull), **oc}
    occ &= hull
    out.update(defect_metrics(o, s, lo, ls, reg, occ))

    skin = hull & ~reg["features"] & ~occ
    if skin.sum() >= 16:
        med_s = np.median(ls[skin], axis=0)
        out["colour_cast"] = colour_cast(lo, ls, skin, lm_c)
        # Foreign colour: skin pixels of the target that the result changed into a colour far
        # from the result's own skin (a swapped-in skin tone is not foreign, a blob of
        # background, hair or a mis-pasted patch is).
        # Measured on the face's skin and on the forehead's (the target's skin-coloured pixels
        # above the brows), where a paste's edge often lands.
        fh = reg["forehead"]
        fh_skin = np.zeros_like(fh)
        if fh.any() and len(colours):
            fh_skin[fh] = near_skin(lo[fh], colours, SKIN_DE)
        area = skin | fh_skin
        ls_a = ls[area]                           # only the area's pixels are judged
        foreign = delta_e(ls_a, med_s) > FOREIGN_DE
        if len(colours):
            foreign |= (ls_a[:, 1] < colours[:, 1].min() - FOREIGN_AB) | (ls_a[:, 2] < colours[:, 2].min() - FOREIGN_AB)
        out["bleed"] = float((foreign & changed[area]).mean())
    else:
        out["colour_cast"] = out["bleed"] = None

    if changed.sum() >= 16:
        r = max(1, round(RING * reg["size"]))
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
        cm = cv2.morphologyEx(changed.astype(np.uint8), cv2.MORPH_CLOSE, k)
        ring = (cv2.dilate(cm, k) > 0) & ~(cv2.erode(cm, k) > 0)
        if ring.any():
            # gradients on the ring's box only, one pixel wider (Sobel's 3x3 reach); at the
            # crop's edge the box edge is the crop's, so the border rule is the same
            bx, by, bw, bh = cv2.boundingRect(ring.astype(np.uint8))
            ya, yb = max(0, by - 1), min(ring.shape[0], by + bh + 1)
            xa, xb = max(0, bx - 1), min(ring.shape[1], bx + bw + 1)
            rg = ring[ya:yb, xa:xb]
            go = _grad(cv2.cvtColor(o[ya:yb, xa:xb], cv2.COLOR_RGB2GRAY).astype(np.float32))
            gs = _grad(cv2.cvtColor(s[ya:yb, xa:xb], cv2.COLOR_RGB2GRAY).astype(np.float32))
            out["seam_ratio"] = float((gs[rg].mean() + SEAM_EPS) / (go[rg].mean() + SEAM_EPS))
        else:
            out["seam_ratio"] = None
    else:
        out["seam_ratio"] = None
    return out
