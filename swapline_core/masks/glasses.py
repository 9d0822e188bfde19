"""Glasses frames vs the lenses they hold, for the built-in occluder estimate (``occlusion``).

Glasses are told apart from their lenses (``glasses``): a thin band more chromatic than the lens
and the skin, closed around an eye, is a frame and stays an occluder even where the colour tests
pass it as skin; the region it encloses is a lens and is swapped (the eyes behind it are the
source's, seen through the target's tint: ``tint_lenses``) unless it is dark (sunglasses).

What it cannot see (measured in tests/unit/masks): a frame no more chromatic than the skin (black,
grey, gold or skin-toned frames on a face whose skin is as chromatic) is not found as a frame, so a
tinted lens in it stays an occluder and its eyes the target's; so does a lens whose frame is open
over more than a quarter of its rim (rimless, half-rim, or a face turned so far that the rim leaves
the view); a dark but see-through lens (Lab L under 18) counts as sunglasses and is kept; a lens is
found from the five-point eye centres, so a badly placed eye point misses it; the swapped eye
inside (filled up to the frame: ``open_lenses``) is only as good as the swapper's eye (the
classical swapper's is blurred), and its tint is a
mean/std colour transfer, not the lens' real transmission (measured on the sample clip: the lens
region ends 5-14 8-bit Lab L units lighter than the target's, 14-25 without the transfer). The
frame band is found at the first chromatic pixels from the eye and runs as wide as the frame's
median width, so the frame's own shadow on the cheek, or shaded skin as red as the frame beside it,
joins it and stays the target's (measured on the sample clip's frames 0 and 15: 88 % and 90 % of
the cheek pixels swapped, 92 % and 97 % before; part of that is the paste-back colour match, which
now also sees the lens region).
"""
from __future__ import annotations

import cv2
import numpy as np

from .occlusion import median0, percentile1

LENS_RAYS = 32          # directions searched from each eye for a glasses frame around it
RING_CONTRAST = 0.08    # chroma (Lab, /100) the frame must have above the lens centre
MIN_RING_SHARE = 0.75   # rays that must meet the frame: a closed (or nearly closed) ring
THIN_RING = 0.3         # the frame is a band: along most rays it ends within this many eye distances
OPAQUE_L = 18.0         # a "lens" darker than this (Lab L) is opaque (sunglasses, a bar): an occluder
FRAME_OVER_SKIN = 0.06  # chroma the frame must have above the skin samples' 90th percentile
# Pseudo skin distance given to frame pixels: what one frame alone decides (builtin.STRONG_SIGMA),
# not more: occluder_mask's blur carried 8.0 onto the skin beside the frame (measured on the sample
# clip: 2 % more of frame 0's cheek pixels kept as the target's, and a still face's paste mask
# toggled on 0.62 % of its pixels instead of 0.10 %).
RING_D2 = 6.5 ** 2


def glasses(lab_: np.ndarray, eyes: np.ndarray, skin: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """Glasses frames and the see-through lenses they hold: (frame ring, lens interior, per-eye info).

    Why: a tinted lens is not skin-coloured, so the colour tests call it an occluder along with its
    frame, and the eyes behind it stay the target's (the kling clip's red-tinted lenses: the swap
    kept the target's eyes on every frame). The frame and the lens differ in what a lens cannot
    hide: the frame is a thin, strongly coloured band closed around the eye; the lens inside it is
    less chromatic (it shows the skin and the eye through its tint) and, unless it is sunglasses,
    not dark. From each eye centre, rays look for the first pixels more chromatic than the lens
    centre by half the window's range; when most rays meet such a band, it is thin, and the
    region inside is not dark, the region is a lens (swapped) and the band a frame (kept, even
    where the colour model passes it as skin: the turned face's frames under red light). Chroma,
    not HSV saturation: on the lit side the frame's saturation is the lens' (measured on the kling
    clip: 0.80 vs 0.71), its chroma is not (0.55-0.65 vs 0.35-0.45)."""
    h, w = lab_.shape[:2]
    eyes = np.asarray(eyes, np.float64)[:2]
    iod = float(np.linalg.norm(eyes[1] - eyes[0]))
    # Only the box around the eyes (rays reach 0.9 eye distances, a frame 0.3 more): a third of
    # the map, and the step's cost with it.
    x0, y0 = (int(max(0, np.floor(v))) for v in eyes.min(0) - 1.3 * iod)
    x1, y1 = int(min(w, np.ceil(eyes[:, 0].max() + 1.3 * iod))), int(min(h, np.ceil(eyes[:, 1].max() + 1.3 * iod)))
    ring = np.zeros((h, w), bool)
    lens = np.zeros((h, w), bool)
    if x1 - x0 < 4 or y1 - y0 < 4:
        return ring, lens, []
    r, le, info = _glasses_in(lab_[y0:y1, x0:x1], eyes - (x0, y0), skin)
    ring[y0:y1, x0:x1], lens[y0:y1, x0:x1] = r, le
    return ring, lens, info


def _glasses_in(lab_: np.ndarray, eyes: np.ndarray, skin: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    h, w = lab_.shape[:2]
    chroma = np.hypot(lab_[..., 1], lab_[..., 2]) / 100.0
    ring = np.zeros((h, w), np.uint8)
    lens = np.zeros((h, w), np.uint8)
    info: list[dict] = []
    eyes = np.asarray(eyes, np.float64)[:2]
    iod = float(np.linalg.norm(eyes[1] - eyes[0]))
    if iod < 8.0:                              # too small to see a frame
        return ring.astype(bool), lens.astype(bool), info
    th = np.linspace(0.0, 2.0 * np.pi, LENS_RAYS, endpoint=False)
    dirs = np.stack([np.cos(th), np.sin(th)], 1)
    rs = np.arange(0.12 * iod, 0.9 * iod, 0.5)
    # Each eye's search sees only what its rays (0.9 eye distances) and its frame band (0.3 more)
    # can reach, plus the 3x3 closing's reach: the same results on a box about half the size.
    reach = int(np.ceil(1.25 * iod)) + 4
    skin_c = _skin_chroma(skin)
    for e in eyes:
        row: dict = {}
        if not (0 <= e[0] < w and 0 <= e[1] < h):
            found, (bx, by) = None, (0, 0)
        else:
            bx, by = max(0, int(e[0]) - reach), max(0, int(e[1]) - reach)
            bx1, by1 = min(w, int(e[0]) + reach + 1), min(h, int(e[1]) + reach + 1)
            found = _frame_around(e - (bx, by), chroma[by:by1, bx:bx1], lab_[by:by1, bx:bx1], skin_c, iod,
                                  (dirs, rs), row, (w - bx, h - by))
        if row:
            info.append(row)
        if found is not None:
            fh, fw = found[0].shape
            ring[by:by + fh, bx:bx + fw] |= found[0]
            if found[1] is not None:
                lens[by:by + fh, bx:bx + fw] |= found[1]
    return ring.astype(bool), lens.astype(bool), info


# One pass of tests that share the eye's windows and measurements; parts would pass them all along.
def _frame_around(e: np.ndarray, chroma: np.ndarray, lab_: np.ndarray, skin_c: float | None, iod: float,
                  rays, row: dict, limit=None) -> tuple[np.ndarray, np.ndarray | None] | None:
    """One eye's glasses frame (band) and the see-through lens it holds (None: opaque), or None
    when there is no frame around it; ``row`` collects what was measured, for the report.
    ``skin_c``: the skin samples' chroma (``_skin_chroma``; None: no samples). ``limit``: (w, h)
    of the whole map ``chroma`` is cut from (its top left corner at 0, 0), where the windows
    stop; default ``chroma``'s own size."""
    dirs, rs = rays
    h, w = chroma.shape
    lw, lh = (w, h) if limit is None else limit
    x0, x1 = int(max(0, e[0] - 0.95 * iod)), int(min(lw, e[0] + 0.95 * iod + 1))
    y0, y1 = int(max(0, e[1] - 0.9 * iod)), int(min(lh, e[1] + 0.9 * iod + 1))
    if x1 - x0 < 4 or y1 - y0 < 4 or not (0 <= e[0] < lw and 0 <= e[1] < lh):
        return None
    win = chroma[y0:y1, x0:x1]
    # the centre disc's pixels, tested only within the disc's box (the same pixels and test)
    rad = max(1.5, 0.12 * iod)
    dx0, dy0 = max(x0, int(np.floor(e[0] - rad)) - 1), max(y0, int(np.floor(e[1] - rad)) - 1)
    dx1, dy1 = min(x1, int(np.ceil(e[0] + rad)) + 2), min(y1, int(np.ceil(e[1] + rad)) + 2)
    yy, xx = np.ogrid[dy0:dy1, dx0:dx1]
    c = float(median0(chroma[dy0:dy1, dx0:dx1][np.hypot(xx - e[0], yy - e[1]) <= rad]))
    top = float(percentile1(win, 95))
    row.update(centre_chroma=round(c, 3), frame_chroma=round(top, 3))
    if top - c < RING_CONTRAST:
        return None
    hi = cv2.morphologyEx((chroma >= c + 0.5 * (top - c)).astype(np.uint8), cv2.MORPH_CLOSE,
                          np.ones((3, 3), np.uint8))
    pts = e[None, None] + rs[None, :, None] * dirs[:, None, :]          # (rays, steps, 2)
    inb = (pts[..., 0] >= 0) & (pts[..., 0] <= w - 1) & (pts[..., 1] >= 0) & (pts[..., 1] <= h - 1)
    on = hi[np.clip(np.rint(pts[..., 1]).astype(int), 0, h - 1),
            np.clip(np.rint(pts[..., 0]).astype(int), 0, w - 1)].astype(bool) & inb
    run = on[:, :-1] & on[:, 1:]            # two samples in a row: not a speck inside the lens
    hit = run.any(1)
    row["ring_share"] = round(float(hit.mean()), 2)
    if hit.mean() < MIN_RING_SHARE:
        return None
    first = np.argmax(run, 1)
    # Thin: past the band the ray leaves the colour again (the frame is a band, not the
    # red-lit skin around an eye without glasses, which is "more chromatic" all the way out).
    off = ~on & (np.arange(on.shape[1])[None, :] >= first[:, None])
    width = np.where(off.any(1), (np.argmax(off, 1) - first) * 0.5 / iod, np.inf)
    thin = float(np.mean(width[hit] <= THIN_RING))
    row["thin_share"] = round(thin, 2)
    if thin < 0.5:
        return None
    r = np.where(hit, rs[first], np.nan)
    idx, ok = np.arange(LENS_RAYS), hit
    r = np.interp(idx, np.concatenate([idx[ok] - LENS_RAYS, idx[ok], idx[ok] + LENS_RAYS]), np.tile(r[ok], 3))
    # a circular median: one ray stopped by a reflection inside the lens does not notch it
    r = _circular_median(r, 2)
    # The band's own width along each ray (a wide run, where the ray went along a temple arm
    # or into red-lit skin, counts as the median width): the frame, not what lies around it.
    # A frame is about as thick all round: a run wider than the median is the frame plus
    # red-lit skin beside it (measured: that skin, kept as the target's, cost 7 % of the
    # cheeks' swapped pixels on the sample clip's frame 0), so runs are capped at the median.
    wd = np.where(hit & (width <= THIN_RING), width, np.nan)
    med = float(median0(wd[~np.isnan(wd)]))     # np.nanmedian's value, without its masked arrays
    wd = np.minimum(np.where(np.isnan(wd), med, wd), med) * iod
    wd = _circular_median(wd, 1)
    inner = np.zeros((h, w), np.uint8)
    cv2.fillPoly(inner, [np.rint(e + r[:, None] * dirs).astype(np.int32)], 1)
    outer = np.zeros((h, w), np.uint8)
    cv2.fillPoly(outer, [np.rint(e + (r + wd)[:, None] * dirs).astype(np.int32)], 1)
    band = outer & hi & (1 - inner)
    row["band_chroma"] = round(float(median0(chroma[band.astype(bool)])), 3) if band.any() else 0.0
    if skin_c is not None:
        # More chromatic than (nearly all) the skin: around an eye without glasses the "band"
        # is the brightest skin itself (measured on a tinted face: within 0.015 of the skin's
        # 90th percentile; the kling clip's frames 0.03-0.17 above it).
        row["skin_chroma"] = skin_c
        if row["band_chroma"] < row["skin_chroma"] + FRAME_OVER_SKIN:
            return None
    # The lens is everything the band encloses that is not band: also its less tinted edge,
    # and single chromatic specks inside it (opened away: they came and went with noise and
    # made the paste mask flicker on a still face).
    filled = band | inner
    cs, _ = cv2.findContours(filled, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    filled = np.zeros_like(filled)
    cv2.drawContours(filled, cs, -1, 1, -1)
    band = cv2.morphologyEx(band, cv2.MORPH_OPEN, np.ones((2, 2), np.uint8))
    hole = filled & (1 - band)
    row["lens_area"] = round(float(hole.sum()) / iod ** 2, 3)
    row["lens_l"] = round(float(median0(lab_[..., 0][hole.astype(bool)])), 1)
    return band, hole if row["lens_l"] >= OPAQUE_L else None


def _circular_median(v: np.ndarray, k: int) -> np.ndarray:
    """Median of each entry and its k neighbours either side, wrapping round (the rays form a
    circle): ``np.median`` of the 2k+1 rolled copies, by one sort of a sliding window view."""
    ext = np.concatenate([v[-k:], v, v[:k]])
    return np.sort(np.lib.stride_tricks.sliding_window_view(ext, 2 * k + 1), axis=1)[:, k]


def _skin_chroma(skin: np.ndarray | None) -> float | None:
    """The skin samples' 90th percentile chroma (Lab, /100), rounded as reported; None: no samples."""
    if skin is None or not len(skin):
        return None
    return round(float(percentile1(np.hypot(skin[:, 1], skin[:, 2]), 90)) / 100, 3)


def see_through_lenses(d2: np.ndarray, lab_: np.ndarray, eyes: np.ndarray, skin: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, list[dict]]:
    """The skin distance map with glasses frames raised to an occluder and see-through lens
    interiors lowered to skin (``glasses``): the frame is kept, the eyes behind a tinted lens are
    swapped. Opaque lenses (dark) keep their distance, as does anything outside a found frame.
    Also returns the lens interiors (for ``tint_lenses``) and the frame rings (for the occluder
    as found: a thin rim the colour model passes as skin does not survive ``occluder_mask``'s blur
    of this map; measured on the sample clip's turned frames 45-55: 66-90 % of the frame pixels
    kept through the map alone), each None where none was found."""
    ring, lens, info = glasses(lab_, eyes, skin)
    lens &= ~ring
    if lens.any():
        d2 = np.where(lens, 0.0, d2)
    if ring.any():
        d2 = np.where(ring, np.maximum(d2, RING_D2), d2)
    return d2.astype(np.float32, copy=False), (lens if lens.any() else None), (ring if ring.any() else None), info


LENS_MARGIN = 0.012     # of the face size: lens pixels this close to the frame keep the occluder's fade


def open_lenses(may_swap: np.ndarray, lens: np.ndarray, frame: np.ndarray, size: float) -> np.ndarray:
    """Let the swap fill each see-through lens up to its frame (``may_swap`` in place and returned).

    Why: the occluder's cut is feathered outward (``occlusion.soften``: grown by the blur, then
    blurred) and its colour test runs on a blurred map, so the fade around a frame reaches
    several pixels into a lens some 30 px across, where the eyes behind it stayed partly the
    target's, blended with the source's (test_lenses: 39 % of a lens' inside fully swapped
    without this step, 94 % with it). A frame's inner edge
    is a sharp, high-contrast line, which hides a short fade: inside the lens (voted along the
    track like the frame, ``lens``) the map rises to 1 within ``LENS_MARGIN`` of the frame
    (``frame``: the voted ring) and stays as it was elsewhere; the frame's pixels stay 0.
    Measured on the quality bench's speech case (classical swapper): moved_to_source 0.03 ->
    0.09 with the synthetic occluders still untouched (0.000) and the share of the red pixels
    around the eyes that changed the same as without this step; a small step: the kept frame
    itself holds the identity near the target's (with the frame painted over it is 1.0)."""
    if not lens.any():
        return may_swap
    e = max(1, round(LENS_MARGIN * size))
    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * e + 1, 2 * e + 1))
    keep = cv2.dilate(frame.astype(np.uint8), np.ones((3, 3), np.uint8))   # the ring's edge lags by a pixel
    core = cv2.erode(lens.astype(np.uint8), k) & (1 - cv2.dilate(keep, k))
    if not core.any():
        return may_swap
    soft = cv2.GaussianBlur(core.astype(np.float32), (0, 0), max(e / 2.0, 0.5))
    soft[(keep > 0) | ~lens] = 0.0
    np.maximum(may_swap, soft, out=may_swap)
    return may_swap


def tint_lenses(pixels: np.ndarray, mask: np.ndarray, lens: np.ndarray, target_lab: np.ndarray,
                patch_to_map: np.ndarray) -> np.ndarray:
    """The swapped pixels seen through the target's tinted lenses (in place and returned).

    Why: a swapped eye behind a red-tinted lens came out untinted (pink skin and a white eye
    inside a red frame: the lens vanished), since paste-back matches colour over the whole face.
    Within each lens the swapped pixels are moved (Lab mean/std) so that, after paste-back's
    whole-face match (``faces.paste.color_match``, undone here in advance), the lens region
    differs from the face as the target's lens differs from the target's face. The move is relative
    to the patch's own face, so it holds without that match too (the classical swapper matches
    colour itself, and ``color_match`` can be off): the lens then sits against the swapped face as
    the target's against the target's face, scaled by the faces' spread (test_lenses.py).
    ``lens`` and ``target_lab`` are maps (``patch_to_map``: patch -> map transform)."""
    h, w = mask.shape
    lens_p = cv2.warpAffine(lens.astype(np.float32), cv2.invertAffineTransform(patch_to_map), (w, h),
                            flags=cv2.INTER_LINEAR, borderValue=0.0)
    inside = mask > 0.5
    sel_p = (lens_p > 0.5) & inside
    if np.count_nonzero(sel_p) < 16:
        return pixels
    face_m = cv2.warpAffine(inside.view(np.uint8), patch_to_map, lens.shape[::-1],
                            flags=cv2.INTER_NEAREST).view(bool) & ~lens
    if np.count_nonzero(face_m) < 16:
        return pixels
    # Face statistics from every 3rd pixel, the colour moves only in the lenses' box: this step
    # cost 8 ms a face over the whole patch, the largest part of the glasses' cost.
    step = 3
    face_p = (inside & ~sel_p)[::step, ::step]
    if np.count_nonzero(face_p) < 16:
        return pixels
    sub = np.ascontiguousarray(pixels[::step, ::step])
    slab = cv2.cvtColor(np.clip(sub, 0, 255).astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    ys, xs = np.nonzero(lens_p > 0.01)
    y0, y1 = max(0, ys.min() - 3), min(h, ys.max() + 4)
    x0, x1 = max(0, xs.min() - 3), min(w, xs.max() + 4)
    box = pixels[y0:y1, x0:x1]
    plab = cv2.cvtColor(np.clip(box, 0, 255).astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    sel_b = sel_p[y0:y1, x0:x1]
    pf_mu, pf_sd = _mean_sd(slab, face_p)
    pl_mu, pl_sd = _mean_sd(plab, sel_b)
    tf_mu, tf_sd = _mean_sd(target_lab, face_m)
    tl_mu, tl_sd = _mean_sd(target_lab, lens)
    # lens stats of the target, then the inverse of paste-back's face match (patch face -> target face)
    # want = (plab - pl_mu) * (tl_sd / pl_sd) + tl_mu, then pre = (want - tf_mu) * (pf_sd / tf_sd)
    # + pf_mu, in place in plab (float32 throughout: the same values, no box-sized temporaries)
    pre = plab.astype(np.float32, copy=False)
    pre -= pl_mu
    pre *= tl_sd / pl_sd
    pre += tl_mu
    pre -= tf_mu
    pre *= pf_sd / tf_sd
    pre += pf_mu
    rgb = cv2.cvtColor(pre, cv2.COLOR_Lab2RGB)
    rgb *= 255.0
    wgt = cv2.GaussianBlur(lens_p, (0, 0), 1.0)[y0:y1, x0:x1, None]
    out = box * (1.0 - wgt)
    rgb *= wgt
    out += rgb
    box[:] = np.clip(out, 0, 255, out=out)
    return pixels


def _mean_sd(img: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and spread (+ 1e-3) of ``img``'s pixels where ``sel``, float32: one
    masked pass in OpenCV (double sums) instead of numpy's gather, mean and std (the masked
    statistics were half of ``tint_lenses``' cost)."""
    mu, sd = cv2.meanStdDev(np.ascontiguousarray(img, np.float32), mask=np.ascontiguousarray(sel).view(np.uint8))
    return mu[:, 0].astype(np.float32), (sd[:, 0] + 1e-3).astype(np.float32)
