"""Built-in occluder estimate: what inside the face is not this face's own skin.

No model file: a colour model of the target's skin is fitted on its most reliable skin (cheeks and
nose, from the landmarks; pooled over a few frames of the track by ``builtin``), and pixels inside
the face that are unlikely under it are candidates. Eyes, brows, nostrils and lips are not skin
either, so a candidate blob counts as an occluder only where it reaches out of those feature
zones: a dark bar or sunglasses cover the skin around the eyes, a glasses frame crosses the cheeks
and the nose bridge, hair, a microphone or a hand of another colour come in over skin. Under red
light shaded skin is as red in Lab as a red object, so a second test flags saturated pixels whose
hue is redder than any of the skin samples' (``redder_than_skin``; not on the lips, which are). A blob that
stays inside a feature zone is the feature itself and is swapped, and so is a small blob wholly
inside the face (a specular highlight): occluders enter from the face's rim or cover much of it.
Glasses are told apart from their lenses (``glasses``): a thin band more chromatic than the lens
and the skin, closed around an eye, is a frame and stays an occluder even where the colour tests
pass it as skin; the region it encloses is a lens and is swapped (the eyes behind it are the
source's, seen through the target's tint: ``tint_lenses``) unless it is dark (sunglasses).

What it cannot see (measured in tests/unit/masks): an occluder of the same colour as the skin (a
hand of the same person, a skin-coloured prop) passes as skin; a clear lens shows skin and is
swapped through; a beard or heavy shadow that leaves the feature zones is kept as the target's.
Glasses: a frame no more chromatic than the skin (black, grey, gold or skin-toned frames on a
face whose skin is as chromatic) is not found as a frame, so a tinted lens in it stays an
occluder and its eyes the target's; so does a lens whose frame is open over more than a quarter
of its rim (rimless, half-rim, or a face turned so far that the rim leaves the view); a dark but
see-through lens (Lab L under 18) counts as sunglasses and is kept; a lens is found from the
five-point eye centres, so a badly placed eye point misses it; the swapped eye inside is only as
good as the swapper's eye (the classical swapper's is blurred), and its tint is a mean/std colour
transfer, not the lens' real transmission (measured on the sample clip: the lens region ends 5-14
8-bit Lab L units lighter than the target's, 14-25 without the transfer). The frame band is found
at the first chromatic pixels from the eye and runs as wide as the frame's median width, so the frame's own
shadow on the cheek, or shaded skin as red as the frame beside it, joins it and stays the
target's (measured on the sample clip's frames 0 and 15: 88 % and 90 % of the cheek pixels
swapped, 92 % and 97 % before; part of that is the paste-back colour match, which now also sees
the lens region).
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

WORK_SIZE = 128.0       # faces are analysed at about this many pixels (cost independent of size)
HUE_MARGIN = 4.0        # degrees past the skin's reddest hue that count as "not skin" (redder_than_skin)
MIN_HUE_SAT = 0.4       # below this saturation hue is too unsteady to judge


@dataclass
class SkinModel:
    """A mixture of robust Gaussians in Lab: a face lit from one side has two skin colours (in
    the red-lit sample clip the shadow side is 28 units redder in a* than the lit side)."""
    means: np.ndarray      # (K, 3) Lab
    inv_covs: np.ndarray   # (K, 3, 3)
    samples: int

    def distance2(self, x: np.ndarray) -> np.ndarray:
        """Squared Mahalanobis distance to the nearest component, for (N, 3) Lab values."""
        x = np.ascontiguousarray(x, np.float32).reshape(-1, 1, 3)
        out = y = d = None
        for m, ic in zip(self.means, self.inv_covs):
            # (x-m)^T ic (x-m) = |L^T (x-m)|^2 with ic = L L^T: one 3x4 cv2.transform per
            # component (the per-pixel 3x3 product in C, not numpy's (N,3)@(3,3) + einsum: the
            # skin-distance maps were the mask stack's largest single cost). Into reused
            # buffers: fresh map-sized temporaries per component cost page faults, not flops.
            lt = _whitener(ic)
            y = cv2.transform(x, np.hstack([lt, -(lt @ m.astype(np.float64))[:, None]]), dst=y)
            np.multiply(y, y, out=y)
            if out is None:
                out = cv2.transform(y, np.ones((1, 3), np.float64)).reshape(-1)
            else:
                d = cv2.transform(y, np.ones((1, 3), np.float64), dst=d)
                np.minimum(out, d.reshape(-1), out=out)
        return out

    def to_json(self) -> dict:
        return {"lab_means": [[round(float(v), 1) for v in m] for m in self.means], "samples": self.samples}


def work_scale(face_size: float) -> float:
    return min(1.0, WORK_SIZE / max(face_size, 1.0))


def _blurred(rgb: np.ndarray) -> np.ndarray:
    f = rgb.astype(np.float32)
    np.divide(f, np.float32(255.0), out=f)
    return cv2.GaussianBlur(f, (0, 0), 1.0)


def lab(rgb: np.ndarray) -> np.ndarray:
    """Lab of a lightly blurred image: single-pixel noise must not read as an occluder."""
    return cv2.cvtColor(_blurred(rgb), cv2.COLOR_RGB2Lab)


def hue_sat(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hue in degrees (-180..180, 0 = red, skin around +10..+30) and saturation (0..1) of the
    same lightly blurred image ``lab`` sees."""
    return _hue_sat_of(_blurred(rgb))


def lab_hue_sat(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lab(rgb)`` and ``hue_sat(rgb)`` with the blur done once (the same values)."""
    f = _blurred(rgb)
    return (cv2.cvtColor(f, cv2.COLOR_RGB2Lab), *_hue_sat_of(f))


def _hue_sat_of(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hsv = cv2.cvtColor(f, cv2.COLOR_RGB2HSV)
    # (h + 180) % 360 - 180 for OpenCV's h in [0, 360) without the float modulo: t - 360 is
    # exact for t in [360, 720), so the values are the same bit for bit, at a third of the cost.
    t = hsv[..., 0] + np.float32(180.0)
    np.subtract(t, np.float32(360.0), out=t, where=t >= 360.0)
    t -= np.float32(180.0)
    return t, hsv[..., 1]


def redder_than_skin(hue: np.ndarray, sat: np.ndarray, floor: float) -> np.ndarray:
    """A squared pseudo skin distance for saturated pixels more purple-red than the skin's
    reddest tone: 4.5 (the occluder threshold) at HUE_MARGIN degrees past it.

    Why: under red light the shaded skin is about as red in Lab as a red object (the sample
    clip: shaded cheek a* 33, the glasses frames a* 40-60, within 4 sigma of the shaded tone),
    so the colour model passes red glasses frames as skin. Their hue still tells them apart:
    skin stays on the yellow side of red (measured on that clip: skin samples' hue >= 0..4 deg,
    the frames' -7..+2 deg at saturation 0.6-0.9)."""
    # Weighted in over 0.1 of saturation, not switched, and rising over 2 x HUE_MARGIN degrees
    # (threshold at HUE_MARGIN past the floor): hue is noisier than Lab, and a steeper or gated
    # term made the glasses' edges flicker on a still face (measured: twice the toggling pixels).
    w = np.clip((sat - MIN_HUE_SAT) / 0.1 + 0.5, 0.0, 1.0)
    d = w * np.clip(4.5 * (floor + HUE_MARGIN - hue) / (2.0 * HUE_MARGIN), 0.0, None)
    return np.square(d).astype(np.float32)


LENS_RAYS = 32          # directions searched from each eye for a glasses frame around it
RING_CONTRAST = 0.08    # chroma (Lab, /100) the frame must have above the lens centre
MIN_RING_SHARE = 0.75   # rays that must meet the frame: a closed (or nearly closed) ring
THIN_RING = 0.3         # the frame is a band: along most rays it ends within this many eye distances
OPAQUE_L = 18.0         # a "lens" darker than this (Lab L) is opaque (sunglasses, a bar): an occluder
FRAME_OVER_SKIN = 0.02  # chroma the frame must have above the skin samples' 90th percentile
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
    for e in eyes:
        x0, x1 = int(max(0, e[0] - 0.95 * iod)), int(min(w, e[0] + 0.95 * iod + 1))
        y0, y1 = int(max(0, e[1] - 0.9 * iod)), int(min(h, e[1] + 0.9 * iod + 1))
        if x1 - x0 < 4 or y1 - y0 < 4 or not (0 <= e[0] < w and 0 <= e[1] < h):
            continue
        win = chroma[y0:y1, x0:x1]
        yy, xx = np.mgrid[y0:y1, x0:x1]
        c = float(np.median(win[np.hypot(xx - e[0], yy - e[1]) <= max(1.5, 0.12 * iod)]))
        top = float(np.percentile(win, 95))
        row = {"centre_chroma": round(c, 3), "frame_chroma": round(top, 3)}
        info.append(row)
        if top - c < RING_CONTRAST:
            continue
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
            continue
        first = np.argmax(run, 1)
        # Thin: past the band the ray leaves the colour again (the frame is a band, not the
        # red-lit skin around an eye without glasses, which is "more chromatic" all the way out).
        off = ~on & (np.arange(on.shape[1])[None, :] >= first[:, None])
        width = np.where(off.any(1), (np.argmax(off, 1) - first) * 0.5 / iod, np.inf)
        thin = float(np.mean(width[hit] <= THIN_RING))
        row["thin_share"] = round(thin, 2)
        if thin < 0.5:
            continue
        r = np.where(hit, rs[first], np.nan)
        idx, ok = np.arange(LENS_RAYS), hit
        r = np.interp(idx, np.concatenate([idx[ok] - LENS_RAYS, idx[ok], idx[ok] + LENS_RAYS]), np.tile(r[ok], 3))
        # a circular median: one ray stopped by a reflection inside the lens does not notch it
        r = np.median(np.stack([np.roll(r, k) for k in (-2, -1, 0, 1, 2)]), 0)
        # The band's own width along each ray (a wide run, where the ray went along a temple arm
        # or into red-lit skin, counts as the median width): the frame, not what lies around it.
        # A frame is about as thick all round: a run wider than the median is the frame plus
        # red-lit skin beside it (measured: that skin, kept as the target's, cost 7 % of the
        # cheeks' swapped pixels on the sample clip's frame 0), so runs are capped at the median.
        wd = np.where(hit & (width <= THIN_RING), width, np.nan)
        med = float(np.nanmedian(wd))
        wd = np.minimum(np.where(np.isnan(wd), med, wd), med) * iod
        wd = np.median(np.stack([np.roll(wd, k) for k in (-1, 0, 1)]), 0)
        inner = np.zeros((h, w), np.uint8)
        cv2.fillPoly(inner, [np.rint(e + r[:, None] * dirs).astype(np.int32)], 1)
        outer = np.zeros((h, w), np.uint8)
        cv2.fillPoly(outer, [np.rint(e + (r + wd)[:, None] * dirs).astype(np.int32)], 1)
        band = outer & hi & (1 - inner)
        row["band_chroma"] = round(float(np.median(chroma[band.astype(bool)])), 3) if band.any() else 0.0
        if skin is not None and len(skin):
            # More chromatic than (nearly all) the skin: around an eye without glasses the "band"
            # is the brightest skin itself (measured on a tinted face: within 0.015 of the skin's
            # 90th percentile; the kling clip's frames 0.03-0.17 above it).
            row["skin_chroma"] = round(float(np.percentile(np.hypot(skin[:, 1], skin[:, 2]), 90)) / 100, 3)
            if row["band_chroma"] < row["skin_chroma"] + FRAME_OVER_SKIN:
                continue
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
        row["lens_l"] = round(float(np.median(lab_[..., 0][hole.astype(bool)])), 1)
        ring |= band
        if row["lens_l"] >= OPAQUE_L:
            lens |= hole
    return ring.astype(bool), lens.astype(bool), info


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
    return d2.astype(np.float32), (lens if lens.any() else None), (ring if ring.any() else None), info


def tint_lenses(pixels: np.ndarray, mask: np.ndarray, lens: np.ndarray, target_lab: np.ndarray,
                patch_to_map: np.ndarray) -> np.ndarray:
    """The swapped pixels seen through the target's tinted lenses (in place and returned).

    Why: a swapped eye behind a red-tinted lens came out untinted (pink skin and a white eye
    inside a red frame: the lens vanished), since paste-back matches colour over the whole face.
    Within each lens the swapped pixels are moved (Lab mean/std) so that, after paste-back's
    whole-face match (``faces.paste.color_match``, undone here in advance), the lens region
    differs from the face as the target's lens differs from the target's face.
    ``lens`` and ``target_lab`` are maps (``patch_to_map``: patch -> map transform)."""
    h, w = mask.shape
    lens_p = cv2.warpAffine(lens.astype(np.float32), cv2.invertAffineTransform(patch_to_map), (w, h),
                            flags=cv2.INTER_LINEAR, borderValue=0.0)
    sel_p = (lens_p > 0.5) & (mask > 0.5)
    face_m = cv2.warpAffine((mask > 0.5).astype(np.uint8), patch_to_map, lens.shape[::-1],
                            flags=cv2.INTER_NEAREST).astype(bool) & ~lens
    if sel_p.sum() < 16 or face_m.sum() < 16:
        return pixels
    # Face statistics from every 3rd pixel, the colour moves only in the lenses' box: this step
    # cost 8 ms a face over the whole patch, the largest part of the glasses' cost.
    step = 3
    face_p = ((mask > 0.5) & ~sel_p)[::step, ::step]
    sub = np.ascontiguousarray(pixels[::step, ::step])
    slab = cv2.cvtColor(np.clip(sub, 0, 255).astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    if face_p.sum() < 16:
        return pixels
    ys, xs = np.nonzero(lens_p > 0.01)
    y0, y1 = max(0, ys.min() - 3), min(h, ys.max() + 4)
    x0, x1 = max(0, xs.min() - 3), min(w, xs.max() + 4)
    box = pixels[y0:y1, x0:x1]
    plab = cv2.cvtColor(np.clip(box, 0, 255).astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    sel_b = sel_p[y0:y1, x0:x1]
    pf_mu, pf_sd = slab[face_p].mean(0), slab[face_p].std(0) + 1e-3
    pl_mu, pl_sd = plab[sel_b].mean(0), plab[sel_b].std(0) + 1e-3
    tf_mu, tf_sd = target_lab[face_m].mean(0), target_lab[face_m].std(0) + 1e-3
    tl_mu, tl_sd = target_lab[lens].mean(0), target_lab[lens].std(0) + 1e-3
    # lens stats of the target, then the inverse of paste-back's face match (patch face -> target face)
    want = (plab - pl_mu) * (tl_sd / pl_sd) + tl_mu
    pre = (want - tf_mu) * (pf_sd / tf_sd) + pf_mu
    rgb = cv2.cvtColor(pre.astype(np.float32), cv2.COLOR_Lab2RGB) * 255.0
    wgt = cv2.GaussianBlur(lens_p, (0, 0), 1.0)[y0:y1, x0:x1, None]
    box[:] = np.clip(box * (1.0 - wgt) + rgb * wgt, 0, 255)
    return pixels


def mouth_region(shape, lm68: np.ndarray | None, kps: np.ndarray) -> np.ndarray:
    """The lips and a wide margin around them: where ``redder_than_skin`` does not judge. Lips
    (lipstick or not) are redder than the skin by nature; the feature-zone rule protects them
    only where the landmarks sit right, and a turned face's mis-read lips otherwise became an
    "occluder" that kept the target's whole mouth (the sample clip's frame 4)."""
    m = np.zeros(shape, np.uint8)
    if lm68 is not None:
        lips = lm68[48:60]
        mw = max(float(np.linalg.norm(lm68[54] - lm68[48])), 1.0)
        cv2.fillConvexPoly(m, cv2.convexHull(np.rint(lips).astype(np.int32)), 1)
        g = max(1, round(0.3 * mw))
        return _dilate_near(m, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * g + 1, 2 * g + 1)), g).astype(bool)
    mc = (kps[3] + kps[4]) / 2
    mw = max(float(np.linalg.norm(kps[4] - kps[3])), 1.0)
    cv2.ellipse(m, tuple(int(v) for v in np.rint(mc)), (int(0.9 * mw), int(0.6 * mw)), 0, 0, 360, 1, -1)
    return m.astype(bool)


def skin_sample_mask(shape, lm68: np.ndarray | None, kps: np.ndarray) -> np.ndarray:
    """Pixels that are skin on almost every face: the cheeks and the nose, away from edges."""
    m = np.zeros(shape, np.uint8)
    if lm68 is not None:
        polys = [lm68[[41, 40, 31, 48, 4, 3, 2, 1]], lm68[[46, 47, 35, 54, 12, 13, 14, 15]],
                 lm68[[28, 31, 33, 35]]]
        for p in polys:
            c = p.mean(axis=0)
            cv2.fillPoly(m, [np.rint(c + 0.6 * (p - c)).astype(np.int32)], 1)
    else:
        # Five points: discs on both cheeks (below the eye, outside the mouth corner line) and
        # the nose ridge, sized by the eye distance.
        iod = max(float(np.linalg.norm(kps[1] - kps[0])), 1.0)
        for eye, corner in ((kps[0], kps[3]), (kps[1], kps[4])):
            c = eye + 0.62 * (corner - eye) + 0.35 * (eye - kps[2]) * np.array([1.0, 0.0])
            cv2.circle(m, tuple(int(v) for v in np.rint(c)), max(1, int(0.16 * iod)), 1, -1)
        bridge = (kps[0] + kps[1]) / 2
        cv2.line(m, tuple(int(v) for v in np.rint(bridge + 0.35 * (kps[2] - bridge))),
                 tuple(int(v) for v in np.rint(kps[2])), 1, max(1, int(0.12 * iod)))
    return m.astype(bool)


def fit_skin(samples: np.ndarray, components: int = 2) -> SkinModel | None:
    """Split the reliable skin samples by lightness/colour (a tiny deterministic k-means), then
    fit each part robustly: start from median/MAD, refit on inliers, so a frame arm or hair
    across a cheek does not become "skin". Lightness gets extra room for shading."""
    x = np.asarray(samples, np.float64).reshape(-1, 3)
    if len(x) < 30:
        return None
    k = components if len(x) >= 60 * components else 1
    centres = np.percentile(x, np.linspace(25, 75, k), axis=0) if k > 1 else np.median(x, axis=0)[None]
    w = np.array([0.5, 1.0, 1.0])             # lightness counts less when splitting
    lab_ = None
    for _ in range(6):
        new = _nearest(x, centres, w)
        if lab_ is not None and np.array_equal(new, lab_):
            break                                # converged: later rounds would repeat this one
        lab_ = new
        centres = np.array([x[lab_ == j].mean(0) if (lab_ == j).any() else centres[j] for j in range(k)])
    means, invs = [], []
    for j in range(k):
        part = x[lab_ == j]
        if len(part) < max(20, 0.1 * len(x)):    # a minor cluster is an outlier, not a skin tone
            continue
        mean = np.median(part, axis=0)
        sd = 1.4826 * np.median(np.abs(part - mean), axis=0) + 1e-3
        cov = np.diag(sd ** 2)
        kept = None
        for _ in range(3):
            sel = _mahalanobis2(part, mean, np.linalg.inv(cov)) < 9.0
            if kept is not None and np.array_equal(sel, kept):
                break                            # same inliers: the same mean and covariance again
            kept = sel
            inl = part[sel]
            if len(inl) < 20:
                break
            mean, cov = inl.mean(axis=0), np.cov(inl.T)
        # Floors: a flat-lit face has tiny spread, compression noise must not turn into edges;
        # 4x the lightness variance: shading within a tone is not an occluder.
        cov = cov + np.diag([4.0, 4.0, 4.0])
        cov[0, :] *= 2.0
        cov[:, 0] *= 2.0
        means.append(mean)
        invs.append(cov)
    if len(means) == 2:
        # The penumbra between the two tones is skin too: add tones along the way.
        a, b = means
        ca, cb = invs
        for t in (0.25, 0.5, 0.75):
            means.append((1 - t) * a + t * b)
            invs.append((1 - t) * ca + t * cb)
    invs = [np.linalg.inv(c) for c in invs]
    return SkinModel(np.array(means, np.float32), np.array(invs, np.float32), len(x))


def feature_zones(shape, lm68: np.ndarray | None, kps: np.ndarray) -> np.ndarray:
    """Eyes, brows, nostrils and lips, generously grown: non-skin that is the face itself."""
    z = np.zeros(shape, np.uint8)
    iod = max(float(np.linalg.norm(kps[1] - kps[0])), 1.0)
    if lm68 is not None:
        for idx in (range(36, 42), range(42, 48), range(48, 60), (31, 32, 33, 34, 35, 30)):
            hull = cv2.convexHull(np.rint(lm68[list(idx)]).astype(np.int32))
            cv2.fillConvexPoly(z, hull, 1)
        for idx in (range(17, 22), range(22, 27)):
            cv2.polylines(z, [np.rint(lm68[list(idx)]).astype(np.int32)], False, 1,
                          thickness=max(1, round(0.16 * iod)))
        grow = max(1, round(0.09 * iod))
        z = cv2.dilate(z, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1)))
    else:
        axes = (max(1, int(0.3 * iod)), max(1, int(0.2 * iod)))
        up = (kps[0] + kps[1]) / 2 - kps[2]
        for eye in kps[:2]:
            cv2.ellipse(z, tuple(int(v) for v in eye), axes, 0, 0, 360, 1, -1)
            cv2.ellipse(z, tuple(int(v) for v in eye + 0.45 * up), (axes[0], axes[1] // 2 + 1), 0, 0, 360, 1, -1)
        mc = (kps[3] + kps[4]) / 2
        mw = max(float(np.linalg.norm(kps[4] - kps[3])), 1.0)
        cv2.ellipse(z, tuple(int(v) for v in mc), (int(0.7 * mw), int(0.4 * mw)), 0, 0, 360, 1, -1)
        cv2.circle(z, tuple(int(v) for v in kps[2]), int(0.2 * iod), 1, -1)
    return z.astype(bool)


def occluder_mask(d2: np.ndarray, inside: np.ndarray, zones: np.ndarray, sensitivity: float = 1.0) -> np.ndarray:
    """Hard occluder map (bool) inside ``inside`` (the face's paste area), from the squared
    skin distance ``d2`` (``SkinModel.distance2``)."""
    thresh = (4.5 / max(sensitivity, 1e-3)) ** 2
    d2 = cv2.GaussianBlur(d2.astype(np.float32), (0, 0), 2.0)    # edges that do not crawl with noise
    cand = ((d2 > thresh) & inside).astype(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(cand, connectivity=8)
    if n <= 1:
        return np.zeros(inside.shape, bool)
    area = max(int(inside.sum()), 1)
    outside = np.bincount(labels[cand.astype(bool) & ~zones], minlength=n)
    comp = stats[:, cv2.CC_STAT_AREA]
    occ = (outside >= max(3, 0.003 * area)) & (outside >= 0.15 * comp)
    # Real occluders enter the face from outside (glasses temples, hands, microphones, hair) or
    # cover much of it (a bar, sunglasses). A small blob wholly inside the face is the face itself:
    # a specular highlight on the nose or forehead, which kept as "target" reads as a white patch
    # in the swap (seen on the kling clip's nose). Such blobs must touch the rim of the paste area
    # or cover >= 3 % of it.
    rim = inside & ~cv2.erode(inside.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    touches = np.bincount(labels[cand.astype(bool) & rim], minlength=n) > 0
    occ &= touches | (comp >= 0.03 * area)
    occ[0] = False
    mask = occ[labels]
    # Lens glare or a speck of skin colour inside an occluder is still the occluder.
    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))
    mask = cv2.morphologyEx(mask.astype(np.uint8), cv2.MORPH_CLOSE, k).astype(bool) & inside
    return mask


def soften(hard: np.ndarray, grow_px: float, blur_px: float) -> np.ndarray:
    """A "may swap" map that is exactly 0 on the occluder and rises outside it, so the
    occluder itself keeps the target's pixels and the swap fades out around it."""
    if not hard.any():
        return np.ones(hard.shape, np.float32)
    sigma = max(blur_px / 2.0, 0.5)
    r = int(np.ceil(grow_px + 2.0 * sigma))
    # The colour test runs on a lightly blurred image, so its edge lags the occluder's true edge by
    # about a pixel: count that rim as occluder (measured: a dark hand's finger edges otherwise
    # let 2 % of its pixels be painted).
    hard = cv2.dilate(hard.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    m = hard.astype(np.uint8)
    if r > 0:
        m = cv2.dilate(m, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
    soft = cv2.GaussianBlur(m.astype(np.float32), (0, 0), sigma)
    np.maximum(soft, hard, out=soft)          # in place (the same values, fewer patch-sized copies)
    np.subtract(np.float32(1.0), soft, out=soft)
    return np.clip(soft, 0.0, 1.0, out=soft)


def _dilate_near(m: np.ndarray, kernel: np.ndarray, reach: int) -> np.ndarray:
    """``cv2.dilate(m, kernel)`` computed only around m's nonzero pixels (the same result: a
    dilation reaches ``reach`` pixels at most, and beyond the image edge it sees nothing)."""
    ys, xs = np.nonzero(m.any(axis=1))[0], np.nonzero(m.any(axis=0))[0]
    if len(ys) == 0:
        return cv2.dilate(m, kernel)
    y0, y1 = max(0, ys[0] - reach), min(m.shape[0], ys[-1] + reach + 1)
    x0, x1 = max(0, xs[0] - reach), min(m.shape[1], xs[-1] + reach + 1)
    out = np.zeros_like(m)
    out[y0:y1, x0:x1] = cv2.dilate(np.ascontiguousarray(m[y0:y1, x0:x1]), kernel)
    return out


def _whitener(inv_cov: np.ndarray) -> np.ndarray:
    """L^T with inv_cov = L L^T (inv_cov is symmetric positive definite: an inverted covariance
    plus a diagonal floor); an eigen-decomposition where float rounding broke definiteness."""
    ic = np.asarray(inv_cov, np.float64)
    ic = (ic + ic.T) / 2
    try:
        return np.linalg.cholesky(ic).T
    except np.linalg.LinAlgError:
        w, v = np.linalg.eigh(ic)
        return (v * np.sqrt(np.clip(w, 0, None))).T


def _nearest(x: np.ndarray, centres: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Index of the nearest centre (weighted squared distance, first on ties) for (N, 3) ``x``:
    the same sums as ``argmin((((x[:, None] - centres) * w) ** 2).sum(-1), 1)``, column by
    column, without the (N, K, 3) temporaries (the k-means was the colour fit's largest cost)."""
    best = dist = None
    for j, c in enumerate(centres):
        d = ((x[:, 0] - c[0]) * w[0]) ** 2
        d += ((x[:, 1] - c[1]) * w[1]) ** 2
        d += ((x[:, 2] - c[2]) * w[2]) ** 2
        if best is None:
            best, dist = np.zeros(len(x), np.int64), d
        else:
            closer = d < dist
            best[closer] = j
            dist = np.where(closer, d, dist)
    return best


def _mahalanobis2(x: np.ndarray, mean: np.ndarray, inv_cov: np.ndarray) -> np.ndarray:
    d = (x - mean).astype(np.float32)
    return np.einsum("ij,ij->i", d @ inv_cov.astype(np.float32), d)
