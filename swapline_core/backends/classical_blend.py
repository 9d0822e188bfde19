"""Colour and blending steps of the classical swap (``classical.py``): relighting, the
skin-coloured ground the Poisson clone takes its boundary from, the clone itself and the
forehead band's edge match. All work on float RGB 0..255 patches around one face."""
from __future__ import annotations

import cv2
import numpy as np


def _masked_blur(img: np.ndarray, mask: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur that averages only over ``mask``, so background does not leak in.

    The result is low-frequency by construction, so it is computed on a copy shrunk to about
    four pixels per sigma and scaled back: the same shading at a fraction of the cost (a
    full-size blur with sigma ~90 px dominated the swap time at 720p).
    """
    m = mask.astype(np.float32)
    h, w = m.shape
    f = min(1.0, 4.0 / max(sigma, 1e-6))
    if f < 1.0:
        small = (max(1, round(w * f)), max(1, round(h * f)))
        num = cv2.GaussianBlur(cv2.resize(img * m[..., None], small, interpolation=cv2.INTER_AREA), (0, 0), sigma * f)
        den = cv2.GaussianBlur(cv2.resize(m, small, interpolation=cv2.INTER_AREA), (0, 0), sigma * f)
        low = num / np.maximum(den, 1e-4)[..., None]
        return cv2.resize(low, (w, h), interpolation=cv2.INTER_LINEAR)
    num = cv2.GaussianBlur(img * m[..., None], (0, 0), sigma)
    den = cv2.GaussianBlur(m, (0, 0), sigma)
    return num / np.maximum(den, 1e-4)[..., None]


def relight(warped: np.ndarray, patch: np.ndarray, mask: np.ndarray, sigma: float):
    """Keep the source's detail and take the low-frequency shading from the target, so a
    source lit from the other side does not bring its shadows along."""
    low_src = _masked_blur(warped, mask, sigma)
    low_dst = _masked_blur(patch, mask, sigma)
    return np.clip(warped - low_src + low_dst, 0, 255)


# Chroma spread (Lab a/b standard deviation over the face hull) below which a source has no
# colour of its own: a greyscale or single-tint (sepia) photo.
COLOURLESS_SPREAD = 2.0


def colourless(img: np.ndarray, pts68: np.ndarray) -> bool:
    """Whether the source photo's face carries no colour of its own (``COLOURLESS_SPREAD``)."""
    hull = np.zeros(img.shape[:2], np.uint8)
    cv2.fillConvexPoly(hull, np.rint(cv2.convexHull(np.asarray(pts68, np.float32))).astype(np.int32).reshape(-1, 2), 1)
    if hull.sum() < 16:
        return False
    lab = cv2.cvtColor(img.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)[hull > 0]
    return bool(lab[:, 1:].std(axis=0).max() < COLOURLESS_SPREAD)


def target_chroma(warped: np.ndarray, patch: np.ndarray, size: float, skin: np.ndarray,
                  dst68: np.ndarray, moved68: np.ndarray) -> np.ndarray:
    """``warped``'s lightness with chroma painted from the target by region: the target's skin
    chroma, smoothed over its skin only (``skin``, from ``classical.skin_sample``: the lit and
    shaded sides, a flushed cheek), the target's own lip colour on the pasted lips
    (``moved68``: where the warp put the source's lips).

    Why: a colourless source has nothing but a mean to give the colour transfer, and the face
    came out one flat beige with grey lips, a plaster mask on a colour target (the shipped
    greyscale sample on the development set's bride). The target's chroma pixel by pixel does not
    fit (the features sit where the source's proportions put them; glasses frames and eye
    make-up are not skin): measured by eye on the bride, the kling and ltx clips."""
    lab_w = cv2.cvtColor(np.clip(warped / 255.0, 0, 1).astype(np.float32), cv2.COLOR_RGB2Lab)
    lab_t = cv2.cvtColor(np.clip(patch / 255.0, 0, 1).astype(np.float32), cv2.COLOR_RGB2Lab)
    sel = skin > 0
    if sel.sum() < 16:
        return warped
    # Skin as its chroma says: glasses frames, make-up and hair in the sample are not skin.
    t_ab = lab_t[..., 1:]
    med = np.median(t_ab[sel], axis=0)
    dev = np.maximum(np.median(np.abs(t_ab[sel] - med), axis=0) * 1.4826, 1.0)
    sel &= (np.abs(t_ab - med) <= 2.5 * dev).all(axis=-1)
    if sel.sum() < 16:
        return warped
    # Only the face-sized variation (a lit and a shaded side): finer, the lenses' tint and the
    # light the frames throw came along as a glow around the source's eyes.
    ab = _masked_blur(t_ab, sel, max(1.0, 0.15 * size))
    lips = np.zeros(sel.shape, np.uint8)
    cv2.fillPoly(lips, [np.rint(dst68[48:60]).astype(np.int32)], 1)
    cv2.fillPoly(lips, [np.rint(dst68[60:68]).astype(np.int32)], 0)         # not the mouth's inside
    # Lip colour from the lip pixels at least as colourful as the skin: a 68-point lip contour
    # on a small or open mouth takes in teeth, the dark gap and highlights, whose grey painted the
    # source's lips blue-grey (the ltx clip).
    lip_ab = t_ab[lips > 0]
    lip_ab = lip_ab[np.hypot(*lip_ab.T) >= float(np.hypot(*med))]
    if len(lip_ab) >= 4:
        m = np.zeros(sel.shape, np.float32)
        cv2.fillPoly(m, [np.rint(moved68[48:60]).astype(np.int32)], 1.0)
        m = cv2.GaussianBlur(m, (0, 0), max(0.5, 0.012 * size))[..., None]
        ab = ab * (1 - m) + np.median(lip_ab, axis=0) * m
    lab_w[..., 1:] = ab
    return np.clip(cv2.cvtColor(lab_w, cv2.COLOR_Lab2RGB) * 255.0, 0, 255)


def forehead_skin(patch: np.ndarray, hull: np.ndarray, pts68: np.ndarray, size: float):
    """(skin, above) of the target patch: ``skin`` marks pixels coloured like the face's lit
    skin, ``above`` those above the brows along the face's own vertical (chin to eyes, so a
    tilted head works); None for a hull too small to tell."""
    lab = cv2.cvtColor(np.clip(patch / 255.0, 0, 1).astype(np.float32), cv2.COLOR_RGB2Lab)
    inside = lab[hull > 0]
    if len(inside) < 16:
        return None
    # Lit skin: the brighter half of the hull (hair, frame, lenses, mouth and shadows are darker).
    lit = inside[inside[:, 0] >= np.percentile(inside[:, 0], 50)]
    ref = np.median(lit, axis=0)
    spread = np.maximum(np.median(np.abs(lit - ref), axis=0) * 1.4826, 2.0)
    skin = ((lab[..., 0] > ref[0] - max(18.0, 3.0 * spread[0]))
            & (np.abs(lab[..., 1] - ref[1]) < max(8.0, 3.0 * spread[1]))
            & (np.abs(lab[..., 2] - ref[2]) < max(8.0, 3.0 * spread[2])))
    # Lit strands and the hairline's mixed pixels pass the colour test: keep only skin areas
    # wider than a few pixels, and not their rim.
    k = max(3, 2 * round(0.012 * size) + 1)
    skin = cv2.morphologyEx(skin.astype(np.uint8), cv2.MORPH_OPEN, np.ones((k, k), np.uint8))
    skin = cv2.erode(skin, np.ones((3, 3), np.uint8)) > 0
    return skin, height_above_brows(hull.shape, pts68) > 0


def face_height(shape, pts68: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per pixel, its position along the face's own vertical; that unit vector, chin to eyes):
    "above the brows" that holds for a tilted head. A landmark's position is ``pts68[i] @ up``."""
    up = pts68[36:48].mean(axis=0) - pts68[8]
    up = up / max(float(np.linalg.norm(up)), 1e-6)
    ys, xs = np.mgrid[0:shape[0], 0:shape[1]].astype(np.float32)
    return xs * up[0] + ys * up[1], up


def height_above_brows(shape, pts68: np.ndarray) -> np.ndarray:
    """Per pixel, how far (px) above the lowest brow point it lies along the face's own vertical;
    negative below."""
    height, up = face_height(shape, pts68)
    return height - float((pts68[17:27] @ up).min())


def relight_forehead(lit: np.ndarray, warped: np.ndarray, patch: np.ndarray, mask: np.ndarray,
                     pts68: np.ndarray, size: float, sigma: float) -> np.ndarray:
    """``lit`` (``relight`` at the face's scale) with the part above the brows relit at the finer
    ``sigma``, blended in over 8 % of the face size about the lowest brow point: a top-lit
    forehead's highlight is smaller than the face-sized scale, and the source's forehead stayed
    darker than the target's skin showing around and through it."""
    w_up = np.clip(height_above_brows(mask.shape, pts68) / max(1.0, 0.08 * size) + 0.5, 0.0, 1.0)[..., None]
    return lit * (1 - w_up) + relight(warped, patch, mask, sigma) * w_up


def forehead_edge(cloned: np.ndarray, patch: np.ndarray, hull: np.ndarray, size: float,
                   skin_info, pasted: np.ndarray | None = None) -> np.ndarray:
    """Bring the pasted forehead's low frequencies to the target's skin near the edge of what is
    pasted (``pasted``, default the hull): the band's edge, and that of a hole cut for the
    source's hair, where the target's own lit forehead shows through. Runs on what is pasted (the
    clone, or the plain warp where ``clone_drift`` chose it: a match on the clone alone was lost
    there, and the dev set's bride kept a forehead patch 12 L darker than her skin around the hole).

    The forehead band's edge runs through the hairline; the Poisson clone takes its boundary
    from the target there and pulls the pasted forehead toward the hair (5-12 L levels darker
    than the target's forehead along the edge on the kling clip: a visible rim at the band's
    top and sides). The correction is the difference to the target averaged over the target's
    lit forehead skin only (hair is no reference), full at the edge and gone 12 % of the face
    size inside it, above the brows only. Painting the hair over with skin before the clone
    instead fixed the rim too but made the whole band greyer and closer to the target's
    identity (quality bench: moved_to_source 0.09 -> 0.03); this keeps it at 0.09."""
    if skin_info is None:
        return cloned
    skin, above = skin_info
    # The source's brows land on the target's (hull points), which are not skin: left out.
    ref = (skin & above & (hull > 0)).astype(np.uint8)
    if ref.sum() < 16:
        return cloned
    sigma = max(2.0, 0.05 * size)
    diff = _masked_blur(patch - cloned, ref, sigma)
    dist = cv2.distanceTransform((hull if pasted is None else pasted).astype(np.uint8), cv2.DIST_L2, 5)
    reach = max(2.0, 0.12 * size)
    # Where the blur had no skin to average, it extrapolates: only trust it near skin.
    weight = _masked_blur(np.repeat(ref[..., None], 3, -1).astype(np.float32), np.ones_like(hull), sigma)[..., :1]
    fall = (np.clip(1.0 - dist / reach, 0.0, 1.0) * above)[..., None] * np.clip(weight / 0.05, 0.0, 1.0)
    return np.clip(cloned + fall * diff, 0, 255)


def seamless(warped: np.ndarray, patch: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Poisson-blend ``warped`` into ``patch`` inside ``mask``; float32 RGB 0..255."""
    # seamlessClone needs the mask's bounding box plus one pixel inside the destination, which
    # fails for faces cut by the frame edge: pad everything first, crop afterwards.
    p = 3
    src = cv2.copyMakeBorder(np.clip(warped + 0.5, 0, 255).astype(np.uint8), p, p, p, p,
                             cv2.BORDER_REFLECT)
    dst = cv2.copyMakeBorder(np.ascontiguousarray(patch), p, p, p, p, cv2.BORDER_REFLECT)
    m = cv2.copyMakeBorder(mask.astype(np.uint8) * 255, p, p, p, p, cv2.BORDER_CONSTANT, value=0)
    bx, by, bw, bh = cv2.boundingRect(m)
    # OpenCV puts the mask's box at centre - (bw // 2, bh // 2); this centre keeps the clone
    # exactly in place (checked on OpenCV 5.0: a shifted centre moves textured content).
    out = cv2.seamlessClone(src, dst, m, (bx + bw // 2, by + bh // 2), cv2.NORMAL_CLONE)
    return out[p:-p, p:-p].astype(np.float32)


# Skin L spread (robust sigma) up to which a source counts as evenly lit (``source_occlusion``).
EVEN_LIGHT = 12.0


def source_occlusion(img: np.ndarray, pts68: np.ndarray, pts: np.ndarray, skin: np.ndarray,
                     size: float) -> tuple[np.ndarray, float]:
    """(keep, share) on the *source* image: ``keep`` is 1 where the source's face is skin and
    falls softly to 0 over what covers it (hair, a fringe, strands across a cheek, a hat brim, a
    helmet's rim), so the target's own skin stays there instead of getting the source's curl
    pasted onto it; ``share`` is the fraction of the judged area cut.

    Skin is told by the source's own skin colour (``skin``: its cheeks and nose, from
    ``classical.skin_sample``): a pixel is covered when it is much darker than that skin (hair is
    25-50 L below it; the spread used is capped, so a face half in shadow, whose skin L spreads
    widely, still has a usable bound and no cut in its shaded skin at 15-25 L below) or far off
    its chroma (blond or coloured hair, a hat, a grey helmet). The eyes, brows, nostrils and lips
    (grown by ~8 % of the face size) are legitimately non-skin features and never judged. Above
    the brows everything covered is cut; below them only what also reaches above the nose's
    base: hair strands fall across a cheek from above (a pasted dark streak from the eye to the
    jaw, seen with long-haired sources), while a beard, stubble or a moustache sits wholly below
    the nose, is the source's identity and stays. Below the brows only on an evenly lit source
    (skin L spread <= ``EVEN_LIGHT``)."""
    h, w = img.shape[:2]
    keep = np.ones((h, w), np.float32)
    lab = cv2.cvtColor(img.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    s = lab[skin > 0]
    if len(s) < 16:
        return keep, 0.0
    med = np.median(s, axis=0)
    sig = np.median(np.abs(s - med), axis=0) * 1.4826
    dark = lab[..., 0] < med[0] - max(22.0, 3.0 * min(float(sig[0]), 12.0))
    chroma = np.hypot((lab[..., 1] - med[1]) / max(float(sig[1]), 2.0),
                      (lab[..., 2] - med[2]) / max(float(sig[2]), 2.0)) > 5.0
    band = np.zeros((h, w), np.uint8)
    cv2.fillConvexPoly(band, np.rint(cv2.convexHull(pts.astype(np.float32))).astype(np.int32).reshape(-1, 2), 1)
    height, up = face_height((h, w), pts68)
    if float(sig[0]) > EVEN_LIGHT:
        # A face half in shadow: its shaded cheek is as dark as hair (Tom Hanks' sample photo: 36+
        # L below its median skin), so below the brows darkness tells nothing; only the
        # forehead band above them is judged.
        band[height <= float((pts68[17:27] @ up).min())] = 0
    outer = band.copy()
    grow = max(1, int(round(0.08 * size)))
    for idx in (range(17, 22), range(22, 27)):
        cv2.polylines(band, [np.rint(pts68[list(idx)]).astype(np.int32)], False, 0, thickness=2 * grow)
    # Each eye with its brow (the lid and the socket's shadow between them), the nostrils, the lips.
    for idx in ((*range(17, 22), *range(36, 42)), (*range(22, 27), *range(42, 48)), range(31, 36), range(48, 60)):
        poly = np.rint(cv2.convexHull(pts68[list(idx)].astype(np.float32))).astype(np.int32).reshape(-1, 2)
        cv2.fillConvexPoly(band, poly, 0)
        cv2.polylines(band, [poly], True, 0, thickness=grow)
    area = int(band.sum())
    if area < 16:
        return keep, 0.0
    k = max(3, 2 * round(0.015 * size) + 1)
    cover = _covered(((dark | chroma) & (band > 0)).astype(np.uint8), outer, height > float(pts68[33] @ up), k)
    if not cover.any():
        return keep, 0.0
    grown = cv2.dilate(cover, np.ones((k, k), np.uint8))
    soft = cv2.GaussianBlur(grown.astype(np.float32), (0, 0), max(1.0, 0.035 * size))
    keep = np.clip(1.0 - 1.5 * soft, 0.0, 1.0)
    # A 2 px strand's blur stays far below 1: the strand itself (and its mixed-pixel rim) is cut
    # outright, the blur only softens around it.
    keep[cv2.dilate(cover, np.ones((3, 3), np.uint8)) > 0] = 0.0
    return keep, float(grown[band > 0].sum()) / area


def _covered(cover: np.ndarray, outer: np.ndarray, above_nose: np.ndarray, k: int) -> np.ndarray:
    """``source_occlusion``'s covered pixels (uint8 0/1) that count as an occluder.

    Single dark pores, stubble and the odd mixed pixel are skin texture: an area counts when it
    holds ``2 k^2`` pixels, or when it is a line ``4 k`` long entering from the face's outline
    (``outer``: a strand of hair, 1-3 px wide, which an opening would erase along with the
    pores). Of those, only areas that reach ``above_nose`` (with gaps under ``k`` bridged: a
    strand's lighter stretches break it) count: a beard is wholly below the nose."""
    if not cover.any():
        return cover
    n, labels, stats, _ = cv2.connectedComponentsWithStats(cover, connectivity=8)
    rim = (outer > 0) & ~cv2.erode(outer, np.ones((5, 5), np.uint8)).astype(bool)
    touches = np.bincount(labels[(cover > 0) & rim], minlength=n) > 0
    long_ = np.maximum(stats[:, cv2.CC_STAT_WIDTH], stats[:, cv2.CC_STAT_HEIGHT]) >= 4 * k
    big = (stats[:, cv2.CC_STAT_AREA] >= 2 * k * k) | (long_ & touches)
    big[0] = False
    cover = big[labels].astype(np.uint8)
    near = cv2.dilate(cover, np.ones((k, k), np.uint8))
    n, labels = cv2.connectedComponents(near, connectivity=8)
    reaches = np.bincount(labels[(near > 0) & above_nose], minlength=n) > 0
    reaches[0] = False
    return (reaches[labels] & (cover > 0)).astype(np.uint8)


def _skin_lab_offset(img: np.ndarray, ref_lab_mean: np.ndarray, skin: np.ndarray) -> float:
    lab = cv2.cvtColor(np.clip(img / 255.0, 0, 1).astype(np.float32), cv2.COLOR_RGB2Lab)
    return float(np.linalg.norm(lab[skin].mean(axis=0) - ref_lab_mean))


def clone_drift(cloned: np.ndarray, feathered: np.ndarray, patch: np.ndarray, skin: np.ndarray,
                band: float = 2.0) -> tuple[np.ndarray, float]:
    """(pixels, weight of the feathered version): the Poisson clone, unless its skin drifted
    further from the target's skin colour than the plain (colour-matched, relit) warp's did.

    The clone takes its boundary from the target around the hull; where the hull crosses sky,
    a headdress or hair, that boundary pulls the face toward their colour (the ltx2.3 clip's
    dark-skinned face came out grey: clone 2-7 delta E off the target's skin per frame, the plain warp
    1.5-2.8). On the red kling clip the clone is always the nearer (1.5-4.4 against 3.9-7.3), so
    its output is unchanged. The weight ramps over ``band`` delta E of difference (no hard switch
    from frame to frame)."""
    sel = skin > 0
    if sel.sum() < 16:
        return cloned, 0.0
    ref = cv2.cvtColor(np.clip(patch / 255.0, 0, 1).astype(np.float32), cv2.COLOR_RGB2Lab)[sel].mean(axis=0)
    w = float(np.clip((_skin_lab_offset(cloned, ref, sel) - _skin_lab_offset(feathered, ref, sel)) / band, 0.0, 1.0))
    if w <= 0.0:
        return cloned, 0.0
    return cloned * (1.0 - w) + feathered * w, w
