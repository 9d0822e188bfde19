"""Blending steps of the mesh swap (``mesh_swap.py``): the boundary membrane that takes the
colour at the paste's edge from the target. Float RGB 0..255 patches around one face."""
from __future__ import annotations

import cv2
import numpy as np

# Width of the band inside the paste's edge whose colour difference the membrane carries inward,
# as a share of the face size, and the robust clip of that difference (MADs about its median):
# a hair strand or a glasses frame on the edge would otherwise spread inward as a smear.
BAND = 0.03
CLIP_MADS = 2.5

# Source skin (``source_skin``): Lab spread floor (L, a, b) and how many spreads darker (L) or off
# chroma (a, b) a pixel may be and still count as skin.
SKIN_SPREAD_FLOOR = (6.0, 3.0, 3.0)
SKIN_Z = (3.0, 3.5)
# Source skin by texture: a pixel whose local edge strength (Sobel magnitude, smoothed over
# BUSY_SIGMA px) passes BUSY_TIMES x the median of the source's skin is not skin, whatever its
# colour, fading out over the next BUSY_TIMES x that median.
BUSY_TIMES = 3.0
BUSY_SIGMA = 2.0
# The most pixels a colour statistic (median, mean, spread) is read on, evenly spread over its
# region: a 350 px face's medians took milliseconds, and a few thousand pixels give the same value.
STATS_PIXELS = 8000


def push_pull(values: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Fill ``values`` (h, w, c) everywhere from the pixels where ``weight`` (h, w) > 0: a smooth
    interpolant (weighted pyramid down, then each level's holes filled from the coarser one), a
    fast stand-in for solving Laplace's equation with the known pixels as boundary."""
    levels = [(values * weight[..., None], weight)]
    while min(levels[-1][1].shape) > 2:
        v, w = levels[-1]
        size = (max(1, w.shape[1] // 2), max(1, w.shape[0] // 2))
        levels.append((cv2.resize(v, size, interpolation=cv2.INTER_AREA).reshape(size[1], size[0], -1),
                       cv2.resize(w, size, interpolation=cv2.INTER_AREA)))
    v, w = levels[-1]
    filled = v / np.maximum(w, 1e-6)[..., None]
    for v, w in reversed(levels[:-1]):
        up = cv2.resize(filled, (w.shape[1], w.shape[0]), interpolation=cv2.INTER_LINEAR).reshape(v.shape)
        alpha = np.clip(w * 4.0, 0.0, 1.0)[..., None]
        filled = alpha * (v / np.maximum(w, 1e-6)[..., None]) + (1 - alpha) * up
    return filled


def membrane(warped: np.ndarray, patch: np.ndarray, paste: np.ndarray, size: float) -> np.ndarray:
    """``warped`` plus the smooth field that makes it meet the target at the paste's edge: the
    target minus the warp, averaged over a band just inside the edge (every edge: the face's
    outline and the kept eyes and mouth), clipped robustly and interpolated over the inside.

    Why: a texture matched to the target's skin in the mean still differs from it along the jaw
    and the hairline (the target's shading, a beard's shadow, the source's own light), and a
    feather only hides a step of a few pixels: the labelled mesh faces showed a hard colour edge
    at the jaw (``seam``), the largest defect class after blotches."""
    inside = (paste > 0).astype(np.uint8)
    if inside.sum() < 16:
        return warped
    dist = cv2.distanceTransform(inside, cv2.DIST_L2, 3)
    band = (dist > 0) & (dist <= max(1.5, BAND * size))
    if band.sum() < 8:
        return warped
    diff = cv2.GaussianBlur(patch - warped, (0, 0), max(0.8, 0.25 * BAND * size))
    d = diff[band]
    med = np.median(d, axis=0)
    mad = np.median(np.abs(d - med), axis=0) * 1.4826 + 1.0
    diff = np.clip(diff, med - CLIP_MADS * mad, med + CLIP_MADS * mad)
    field = push_pull(diff.astype(np.float32), band.astype(np.float32))
    return np.clip(warped + field * inside[..., None], 0, 255)


def skin_likeness(img: np.ndarray, reference: np.ndarray, where: np.ndarray) -> np.ndarray:
    """(h, w) float32 in 0..1: how much each pixel of ``img`` (float RGB 0..255) looks like the skin
    under ``reference`` (bool map), read robustly (median, MAD in Lab, on at most STATS_PIXELS of
    it); worked out only ``where`` (bool map), 0 elsewhere. Much darker than that skin or far off
    its chroma is not skin; brighter is allowed (highlights), chroma only loosely (blush)."""
    where = where | reference
    lab = cv2.cvtColor(img[where].reshape(1, -1, 3).astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab).reshape(-1, 3)
    ref_px = lab[reference[where]]
    ref_px = ref_px[::max(1, len(ref_px) // STATS_PIXELS)]
    ref = np.median(ref_px, axis=0)
    spread = np.maximum(np.median(np.abs(ref_px - ref), axis=0) * 1.4826, SKIN_SPREAD_FLOOR)
    z = (lab - ref) / spread
    far = np.sqrt(np.minimum(z[:, 0], 0.0) ** 2 / SKIN_Z[0] ** 2 + (z[:, 1] ** 2 + z[:, 2] ** 2) / SKIN_Z[1] ** 2)
    out = np.zeros(img.shape[:2], np.float32)
    out[where] = np.clip(2.0 - far, 0.0, 1.0)
    return out


def source_skin(img: np.ndarray, label: np.ndarray, skin: np.ndarray) -> np.ndarray:
    """(h, w) float32 in 0..1 over the source photo (``label``: its mesh rasterised, ``skin``: which
    triangles are plain skin): how much each pixel inside its mesh looks like the source's own
    skin (``skin_likeness`` against its skin triangles), 1 on the other triangles (brows, eyes,
    lips, nostrils: features never judged by colour).

    Why: a source's hair across the temple or cheek, a hand at the jaw, a shadow cast by a curl
    all lie inside the mesh, and were pasted onto the target as dark or golden blotches (the
    f_blonde_smile source on the three-quarter targets of the labelled set). Busy texture counts
    too (``busy``): the striped metal of the m_astronaut source's helmet below its chin lies inside
    the mesh and is as grey as that dim face's skin, and was pasted as a striped patch at the
    target's chin (labelled *seam*/*mouth* on the development clips, named by the held-out
    labellers)."""
    inside = label >= 0
    is_skin = inside & skin[np.maximum(label, 0)]
    if is_skin.sum() < 64:
        return inside.astype(np.float32)
    w = np.minimum(skin_likeness(img, is_skin, inside), busy(img, is_skin))
    w[inside & ~is_skin] = 1.0
    w[~inside] = 0.0
    return w


def busy(img: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """(h, w) float32 in 0..1: 1 where ``img``'s local edge strength is skin-like (at most
    BUSY_TIMES x the median over ``reference``), falling to 0 at twice that: a grille, a striped
    collar or a patterned cloth is far busier than any skin, stubble and pores included."""
    grey = cv2.cvtColor(np.ascontiguousarray(img).astype(np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)
    mag = cv2.GaussianBlur(np.hypot(cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1)),
                           (0, 0), BUSY_SIGMA)
    ref = BUSY_TIMES * float(np.median(mag[reference])) + 1e-3
    return np.clip(2.0 - mag / ref, 0.0, 1.0).astype(np.float32)


def smooth(img: np.ndarray, sigma: float) -> np.ndarray:
    """A Gaussian blur of ``sigma`` px, run on a copy shrunk so that sigma is about 2 px there: the
    fields blurred this wide are smooth, and a 350 px face's blur at full size took milliseconds."""
    k = int(sigma // 2)
    if k < 2:
        return cv2.GaussianBlur(img, (0, 0), sigma)
    h, w = img.shape[:2]
    small = cv2.resize(img, (max(1, round(w / k)), max(1, round(h / k))), interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), sigma / k)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR).reshape(img.shape)


def _skin_low(img: np.ndarray, weight: np.ndarray, sigma: float) -> np.ndarray:
    """``img``'s low frequencies (Gaussian ``sigma``) read from the pixels ``weight`` holds,
    filled smoothly (``push_pull``) where no such pixel is near; worked out at a size where sigma
    is about 2 px (the result is smooth at that scale), then enlarged."""
    h, w = weight.shape
    k = max(1, int(sigma // 2))
    size = (max(1, round(w / k)), max(1, round(h / k)))
    num = cv2.resize(img * weight[..., None], size, interpolation=cv2.INTER_AREA).reshape(size[1], size[0], -1)
    den = cv2.resize(weight, size, interpolation=cv2.INTER_AREA)
    num, den = cv2.GaussianBlur(num, (0, 0), sigma / k).reshape(num.shape), cv2.GaussianBlur(den, (0, 0), sigma / k)
    est = num / np.maximum(den, 1e-4)[..., None]
    fill = push_pull(est.astype(np.float32), np.where(den > 0.05, den, 0.0).astype(np.float32))
    known = np.clip(den * 4.0, 0.0, 1.0)[..., None]
    low = (known * est + (1.0 - known) * fill).astype(np.float32)
    return cv2.resize(low, (w, h), interpolation=cv2.INTER_LINEAR).reshape(h, w, -1)


def skin_shading(warped: np.ndarray, patch: np.ndarray, src_skin: np.ndarray, dst_skin: np.ndarray,
                 sigma: float) -> np.ndarray:
    """``warped`` with its shading (detail above ``sigma`` px) read on skin only, replaced by the
    target's read the same way: ``src_skin`` / ``dst_skin`` weight the pixels that are plain skin
    in the warped source and in the target (no brows, eyes, lips, beard or glasses frame).

    Why: shading read over the whole face (``classical_blend.relight``) mixes the features into
    it, so it must stay coarse (a quarter of the face) or the target's brows and eyes ghost
    through; the source's own shadows below that scale (under the cheekbone, a side-lit half, the
    shadow of a beard) were then pasted as "blotches", the first defect of the labelled mesh
    faces (233 of 471, round mixed-3). Read on skin only, the scale can be fine."""
    if src_skin.sum() < 16 or dst_skin.sum() < 16:
        return warped
    return np.clip(warped - _skin_low(warped, src_skin, sigma) + _skin_low(patch, dst_skin, sigma), 0, 255)


def mirror_seam(warped: np.ndarray, valid: np.ndarray, mirrored: np.ndarray, size: float) -> np.ndarray:
    """``warped`` with its mirrored part (``mirrored``: pixels textured from the other half of the
    source's face) brought to meet the directly warped texture beside it: the colour step along
    their shared edge, interpolated over the mirrored part (``membrane``'s method, inside the warp).

    Why: the other half of a turned or side-lit source face is lit differently, and its texture
    showed as a hard-edged band on the cheek or jaw (shipped_grey on the labelled clips)."""
    m = (mirrored & (valid > 0)).astype(np.uint8)
    if m.sum() < 8:
        return warped
    b = max(1.5, BAND * size)
    # worked out in the mirrored part's box grown by the band: it is usually a sliver of the face
    ys, xs = np.nonzero(m)
    g = int(np.ceil(4 * b))
    y0, y1 = max(0, ys.min() - g), min(m.shape[0], ys.max() + g + 1)
    x0, x1 = max(0, xs.min() - g), min(m.shape[1], xs.max() + g + 1)
    mw, win = m[y0:y1, x0:x1], warped[y0:y1, x0:x1].astype(np.float32)
    ring = (valid[y0:y1, x0:x1] > 0) & (mw == 0) & (cv2.distanceTransform(1 - mw, cv2.DIST_L2, 3) <= b)
    if ring.sum() < 8:
        return warped
    beside = push_pull(win, ring.astype(np.float32))
    band = ((mw > 0) & (cv2.distanceTransform(mw, cv2.DIST_L2, 3) <= b)).astype(np.float32)
    field = push_pull(((beside - win) * band[..., None]).astype(np.float32), band)
    out = warped.copy()
    out[y0:y1, x0:x1] = np.clip(win + field * mw[..., None], 0, 255)
    return out


# Skin detail: the source's fine texture (below ``DETAIL_SCALE`` of the face size) on plain skin is
# scaled down where it is stronger than ``DETAIL_GAIN`` x the target's own at the same place.
DETAIL_SCALE = 0.05
DETAIL_GAIN = 1.0


def match_detail(warped: np.ndarray, patch: np.ndarray, skin: np.ndarray, size: float) -> np.ndarray:
    """``warped`` with its fine texture on plain skin (``skin``: bool map) no stronger than the
    target's: local RMS of the detail band, source over target, capped at ``DETAIL_GAIN``.

    Why: the source's stubble, pores and the shadow of its nose side, pasted onto a smooth or soft
    target, read as dirt: "blotch" was the first defect of the labelled mesh faces (251 of 488 on
    round mixed-2), mostly stubble on young faces and on low-resolution frames."""
    if not skin.any():
        return warped
    s = max(0.8, DETAIL_SCALE * size)
    base_w = smooth(warped, s)
    det_w = warped - base_w
    det_t = patch - smooth(patch, s)
    win = 3.0 * s
    e_w = smooth((det_w ** 2).mean(axis=2), win)
    e_t = smooth((det_t ** 2).mean(axis=2), win)
    gain = np.minimum(1.0, DETAIL_GAIN * np.sqrt(e_t / np.maximum(e_w, 1e-3)))
    gain = np.where(skin, gain, 1.0).astype(np.float32)
    return base_w + det_w * gain[..., None]


# Sharpness match (``match_sharpness``): the Gaussian blurs tried, in px, until the warped texture's
# finest band is no stronger than the target's.
SOFTEN_SIGMAS = (0.5, 0.75, 1.0, 1.4, 2.0, 2.8)


def _grey(img: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(np.clip(img, 0, 255).astype(np.float32), cv2.COLOR_RGB2GRAY)


def _fine(grey: np.ndarray, where: np.ndarray, sigma: float = 0.0) -> float:
    """RMS over ``where`` of the finest band (minus a further 1 px blur) of ``grey`` blurred by ``sigma``."""
    g = cv2.GaussianBlur(grey, (0, 0), sigma) if sigma > 0 else grey
    return float(np.sqrt(np.mean((g - cv2.GaussianBlur(g, (0, 0), 1.0))[where] ** 2)))


def fine_rms(img: np.ndarray, where: np.ndarray) -> float:
    """RMS of ``img``'s finest band (grey minus its 1 px Gaussian blur) over ``where`` (bool map)."""
    return _fine(_grey(img), where)


def match_sharpness(warped: np.ndarray, patch: np.ndarray, where: np.ndarray) -> tuple[np.ndarray, float]:
    """(``warped`` blurred until its finest band over ``where`` is no stronger than the target's,
    the blur's sigma in px; 0 where the target is as sharp).

    Why: a sharp source photo pasted onto a soft target (a small, out-of-focus or heavily
    compressed face) kept its pixel-level texture, which on the soft face read as a blocky,
    pasted patch (labelled *blotch* on the development clips' small faces: woman in a coat, hooded
    dancer, selfie). ``match_detail`` only tones skin texture down; brows, lips and the paste's
    texture as a whole stayed sharper than the face around them."""
    if where.sum() < 64:
        return warped, 0.0
    target = fine_rms(patch, where)
    grey = _grey(warped)
    if _fine(grey, where) <= target:
        return warped, 0.0
    # searched on the grey image (a blur commutes with the grey conversion), applied once in colour
    sigma = next((s for s in SOFTEN_SIGMAS if _fine(grey, where, s) <= target), SOFTEN_SIGMAS[-1])
    return cv2.GaussianBlur(warped, (0, 0), sigma), sigma
