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
A larger blob brighter than the skin whose edge fades in (sunlit skin, ``_glare``) is swapped too.
Glasses frames and their lenses are told apart in ``glasses``.

What it cannot see (measured in tests/unit/masks): an occluder of the same colour as the skin (a
hand of the same person, a skin-coloured prop) passes as skin; a clear lens shows skin and is
swapped through; a beard or heavy shadow that leaves the feature zones is kept as the target's.
What the glasses test cannot see: ``glasses``.
"""
from __future__ import annotations

from collections.abc import Callable
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
        return dilate_near(m, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * g + 1, 2 * g + 1)), g).astype(bool)
    mc = (kps[3] + kps[4]) / 2
    mw = max(float(np.linalg.norm(kps[4] - kps[3])), 1.0)
    cv2.ellipse(m, tuple(int(v) for v in np.rint(mc)), (int(0.9 * mw), int(0.6 * mw)), 0, 0, 360, 1, -1)
    return m.astype(bool)


def skin_sample_mask(shape, lm68: np.ndarray | None, kps: np.ndarray, nose_only: bool = False) -> np.ndarray:
    """Pixels that are skin on almost every face: the cheeks and the nose, away from edges
    (``nose_only``: the nose ridge's part, with 68 landmarks)."""
    m = np.zeros(shape, np.uint8)
    if lm68 is not None:
        polys = [lm68[[28, 31, 33, 35]]]
        if not nose_only:
            polys += [lm68[[41, 40, 31, 48, 4, 3, 2, 1]], lm68[[46, 47, 35, 54, 12, 13, 14, 15]]]
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
    centres = np.percentile(x, np.linspace(25, 75, k), axis=0) if k > 1 else median0(x)[None]
    w = np.array([0.5, 1.0, 1.0])             # lightness counts less when splitting
    lab_ = None
    cols = [np.ascontiguousarray(x[:, i]) for i in range(3)]     # each k-means round reads the columns
    for _ in range(6):
        new = _nearest(cols, centres, w)
        if lab_ is not None and np.array_equal(new, lab_):
            break                                # converged: later rounds would repeat this one
        lab_ = new
        sels = [lab_ == j for j in range(k)]
        centres = np.array([x[sel].mean(0) if sel.any() else centres[j] for j, sel in enumerate(sels)])
    means, invs = [], []
    for j in range(k):
        part = x[lab_ == j]
        if len(part) < max(20, 0.1 * len(x)):    # a minor cluster is an outlier, not a skin tone
            continue
        mean = median0(part)
        sd = 1.4826 * median0(np.abs(part - mean)) + 1e-3
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
            mean, cov = inl.mean(axis=0), _cov(inl)
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


@dataclass
class Light:
    """Lab lightness on an occluder map, for ``_glare``: this frame's (``own``), the track's
    window's vote (``voted(x0, y0, x1, y1)``: that box of the map, computed only where a bright
    blob asks for it) and the lit skin's."""
    own: np.ndarray
    skin_l: float
    voted: Callable[[int, int, int, int], np.ndarray] | None = None


def threshold_d2(sensitivity: float = 1.0) -> float:
    """The squared skin distance from which a pixel may be an occluder (4.5 sigma at sensitivity 1)."""
    return (4.5 / max(sensitivity, 1e-3)) ** 2


def occluder_mask(d2: np.ndarray, inside: np.ndarray, zones: np.ndarray, sensitivity: float = 1.0,
                  light: Light | None = None, report: dict | None = None) -> np.ndarray:
    """Hard occluder map (bool) inside ``inside`` (the face's paste area), from the squared
    skin distance ``d2`` (``SkinModel.distance2``). ``light`` lets ``_glare`` tell sunlit skin
    from a bright object; ``report`` gets ``glare``: the candidate pixels it released."""
    thresh = threshold_d2(sensitivity)
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
    if light is not None and occ.any():
        glare = _glare(labels, stats, occ, light, inside)
        if report is not None:
            report["glare"] = int(stats[glare, cv2.CC_STAT_AREA].sum())
        occ &= ~glare
    mask = occ[labels]
    # Lens glare or a speck of skin colour inside an occluder is still the occluder.
    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))
    mask = cv2.morphologyEx(mask.astype(np.uint8), cv2.MORPH_CLOSE, k).astype(bool) & inside
    return mask


GLARE_LIGHTER = 8.0      # L above the lit skin tone from which a blob may be glare (``_glare``)
GLARE_WIDTH = 2.5        # px at work scale: a rise from the skin wider than this is light, not an edge


def _glare(labels: np.ndarray, stats: np.ndarray, occ: np.ndarray, light: Light, inside: np.ndarray) -> np.ndarray:
    """Per component: True where a candidate is sunlit or specular skin, not an object.

    A hot highlight (the kling clip's sunlit forehead: L 80 against lit skin at 67, near
    neutral) is far from the skin's colour model and, large and reaching the hairline, passes
    the rim and size rules; cut as an occluder it showed the target's pale forehead through the
    swap as a blob. Light fades in over many pixels, an object's edge is a step: the width of a
    bright blob's rise is the area between its 25 % and 75 % lightness contours (of its excess
    over the skin) per pixel of its 50 % contour. Measured at work scale with ``light`` voted
    over the track's window: 2.9-4.5 px for that highlight over 48 frames, 2.0 for a sharp
    white bandage composited on the same forehead (tests/unit/masks/test_mask_stack.py), ~1.4
    for an ideal step blurred as ``lab`` blurs. What it cannot see: a bright object out of
    focus, whose edge is as soft as light's, is swapped over."""
    n = len(stats)
    out = np.zeros(n, bool)
    skin_l = light.skin_l
    lit = np.nan_to_num(light.own.astype(np.float32, copy=False), nan=skin_l)
    counts = np.maximum(np.bincount(labels.ravel(), minlength=n), 1)
    mean_l = np.bincount(labels.ravel(), lit.ravel(), minlength=n) / counts
    idx = np.flatnonzero(occ)
    idx = idx[mean_l[idx] > skin_l + GLARE_LIGHTER]
    if not len(idx):
        return out
    # Each blob is judged within its box grown by the 7-px reach of ``near`` (+1): the same
    # values as over the whole map, at a fraction of the cost.
    h, w = labels.shape
    x, y, bw, bh = (stats[idx, c] for c in (cv2.CC_STAT_LEFT, cv2.CC_STAT_TOP, cv2.CC_STAT_WIDTH, cv2.CC_STAT_HEIGHT))
    boxes = np.stack([np.maximum(x - 8, 0), np.maximum(y - 8, 0),
                      np.minimum(x + bw + 8, w), np.minimum(y + bh + 8, h)], 1)
    ox0, oy0 = boxes[:, :2].min(0)
    ox1, oy1 = boxes[:, 2:].max(0)
    if light.voted is not None:
        lit = lit.copy()
        lit[oy0:oy1, ox0:ox1] = np.nan_to_num(light.voted(int(ox0), int(oy0), int(ox1), int(oy1)), nan=skin_l)
    near = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (15, 15))
    for j, (x0, y0, x1, y1) in zip(idx, boxes):
        win = np.s_[y0:y1, x0:x1]
        blob = (labels[win] == j).astype(np.uint8)
        lw = lit[win]
        peak = float(np.percentile(lw[blob > 0], 90)) - skin_l
        around = (cv2.dilate(blob, near) > 0) & inside[win]
        a25 = int((around & (lw > skin_l + 0.25 * peak)).sum())
        a75 = int((around & (lw > skin_l + 0.75 * peak)).sum())
        half = (around & (lw > skin_l + 0.5 * peak)).astype(np.uint8)
        perim = int((half & (cv2.erode(half, np.ones((3, 3), np.uint8)) == 0)).sum())
        width = (a25 - a75) / max(perim, 1)
        out[j] = width > GLARE_WIDTH
    return out


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


def dilate_near(m: np.ndarray, kernel: np.ndarray, reach: int) -> np.ndarray:
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


def median0(a: np.ndarray):
    """``np.median(a, axis=0)`` for a non-empty 1-D or 2-D float array, the same values bit for
    bit (the same partition, the middle two summed and halved as ``np.mean`` does) without its
    generic wrapper: fit_skin and the glasses test take a few thousand medians of small arrays,
    where that wrapper cost more than the partition itself."""
    n = a.shape[0]
    if n == 0:
        return np.median(a, axis=0)
    h = n // 2
    p = np.partition(a, [h - 1, h, -1] if n % 2 == 0 and n > 1 else [h, -1], axis=0)
    m = p[h] if n % 2 else (p[h - 1] + p[h]) / 2
    nan = np.isnan(p[-1])
    if np.any(nan):             # as np.median: NaN where the data holds one
        m = np.where(nan, np.nan, m).astype(a.dtype)[()] if np.ndim(m) else a.dtype.type(np.nan)
    return m


def percentile1(a: np.ndarray, q: int | float):
    """``np.percentile(a, q)`` (linear method, a Python number ``q``) of a non-empty array,
    flattened, the same value bit for bit: numpy's virtual index, partition and weakly typed
    lerp, step by step, without the generic wrapper (the glasses test and the colour fits take
    about 5 percentiles per face and frame, each mostly wrapper)."""
    a = np.asarray(a).ravel()
    n = a.shape[0]
    if n == 0 or a.dtype.kind != "f" or type(q) not in (int, float):
        return np.percentile(a, q)
    qq = np.true_divide(q, 100)
    vi = (n - 1) * qq                               # numpy's virtual index for the linear method
    lo = np.floor(vi)
    if vi >= n - 1:
        i0 = i1 = n - 1
        lo = np.float64(-1.0)
    elif vi < 0:
        i0 = i1 = 0
        lo = np.float64(0.0)
    else:
        i0 = int(lo)
        i1 = i0 + 1
    p = np.partition(a, sorted({0, n - 1, i0, i1}))
    if np.isnan(p[-1]):
        return p[-1]
    t = float(vi - lo)
    x0, x1 = p[i0], p[i1]
    d = x1 - x0
    return x1 - d * (1 - t) if t >= 0.5 else x0 + d * t


def _cov(x: np.ndarray) -> np.ndarray:
    """``np.cov(x.T)`` for (N, 3) float64 samples, the same steps (a row-major copy of the
    transpose, its row means, the product with a conjugated copy, which keeps numpy on the same
    BLAS call) without np.cov's argument handling."""
    xt = np.array(x.T, dtype=np.float64)
    xt -= xt.mean(axis=1)[:, None]
    c = np.dot(xt, xt.T.conj())
    c *= np.true_divide(1, xt.shape[1] - 1)
    return c


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


def _nearest(x: list[np.ndarray], centres: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Index of the nearest centre (weighted squared distance, first on ties) for samples given
    as their three columns ``x`` (contiguous copies of an (N, 3) array's columns: the same values,
    no strided reads in every k-means round): the same sums as
    ``argmin((((x[:, None] - centres) * w) ** 2).sum(-1), 1)``, column by column, without the
    (N, K, 3) temporaries (the k-means was the colour fit's largest cost)."""
    best = dist = None
    for j, c in enumerate(centres):
        d = ((x[0] - c[0]) * w[0]) ** 2
        d += ((x[1] - c[1]) * w[1]) ** 2
        d += ((x[2] - c[2]) * w[2]) ** 2
        if best is None:
            best, dist = np.zeros(len(d), np.int64), d
        else:
            closer = d < dist
            best[closer] = j
            dist = np.where(closer, d, dist)
    return best


def _mahalanobis2(x: np.ndarray, mean: np.ndarray, inv_cov: np.ndarray) -> np.ndarray:
    d = (x - mean).astype(np.float32)
    return np.einsum("ij,ij->i", d @ inv_cov.astype(np.float32), d)
