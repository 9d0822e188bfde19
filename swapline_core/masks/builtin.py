"""The built-in (model-free) parts: the skin-colour occluder and the kept mouth interior.

Per face and frame, a skin colour model is fitted on that frame's own reliable skin (cheeks and
nose, located by the 68 landmarks where the chunk's faces have them, computed the same way for
the frames around the chunk; else by the five keypoints) and turned into a skin-distance map
over a box around the face. The maps of the same
track are median-filtered over +-N frames (``temporal``) before anything is decided, so noise
does not flip blobs in and out of "occluder"; only then are blobs judged against the feature
zones (with 68 landmarks where the chunk has them) and cut out.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..parallel import map_frames
from . import beside, chroma, rims, rules, rules_off, temporal, texture, wires
from . import glasses as glasses_mod
from . import mouth as mouth_mod
from . import occlusion as occ

MAX_SAMPLES = 2000          # skin samples per colour fit (2000 fit 4x faster than 8000, same tones)
STRONG_SIGMA = 6.5          # skin distance this frame alone decides (the threshold is 4.5)
LENS_OPEN = True            # see-through lens interiors swapped up to the frame (glasses.open_lenses)

@dataclass
class SkinView:
    """One face in one frame: its skin-distance map over a box around the face."""
    clip_index: int
    key: object                    # track key (None: no smoothing)
    kps: np.ndarray                # (5, 2) frame coordinates
    m: np.ndarray                  # frame -> map transform
    lab: np.ndarray | None         # Lab of the box at work scale
    samples: np.ndarray | None     # (N, 3) Lab of this frame's reliable skin
    d2: np.ndarray | None = None   # squared skin distance; None if too little skin was visible
    model: occ.SkinModel | None = None
    fitted: bool = False           # fit_views fitted it (its window's fit never changes)
    hue: np.ndarray | None = None  # hue (degrees) and saturation of the box at work scale
    sat: np.ndarray | None = None
    hue_samples: np.ndarray | None = None   # (N,) hue of the skin samples with usable saturation
    hue_floor: float | None = None          # the window's reddest skin hue (fit_views)
    glasses: list | None = None             # per eye: what glasses.glasses found (fit_views)
    lens: np.ndarray | None = None          # see-through lens interiors in map space (fit_views)
    ring: np.ndarray | None = None          # glasses frames around them in map space (fit_views)
    busy: np.ndarray | None = None          # texture.busy: pseudo skin distance of busy pixels above the brows
    off: np.ndarray | None = None           # chroma.off_hue: pseudo skin distance of colours skin never has
    skin_d2: np.ndarray | None = None       # the colour model's own distance (before the other rules' max)
    red: np.ndarray | None = None           # occlusion.redder_than_skin's pseudo skin distance
    dropped: dict | None = None             # skin samples each sample rule dropped ({rule: n})
    rims: list | None = None                # per eye: rims.find's ellipse on this frame, or None


def skin_view(frame: np.ndarray, bbox, kps, clip_index: int, key, lm68=None, off=()) -> SkinView:
    """``off``: the rules switched off (``rules.NAMES``); the sample and texture rules run here,
    and ``rims`` looks for its ellipses (voted on by the track in ``keep_rims``)."""
    view = _skin_view(frame, bbox, kps, clip_index, key, lm68, off)
    if rules.enabled(off, "rims"):
        view.rims = rims.find(frame, kps, lm68)[0]
    return view


def _skin_view(frame: np.ndarray, bbox, kps, clip_index: int, key, lm68=None, off=()) -> SkinView:
    h, w = frame.shape[:2]
    x0, y0, x1, y1 = (float(v) for v in bbox)
    size = max(x1 - x0, y1 - y0, 8.0)
    pad = 0.45 * size              # covers the classical swapper's forehead band and margins
    bx0, by0 = int(max(0, np.floor(x0 - pad))), int(max(0, np.floor(y0 - pad)))
    bx1, by1 = int(min(w, np.ceil(x1 + pad))), int(min(h, np.ceil(y1 + pad)))
    s = occ.work_scale(size)
    m = temporal.patch_affine((bx0, by0), s)
    if bx1 - bx0 < 4 or by1 - by0 < 4:
        return SkinView(clip_index, key, np.asarray(kps, np.float32), m, None, None)
    sub = frame[by0:by1, bx0:bx1]
    shape = (max(1, round(sub.shape[0] * s)), max(1, round(sub.shape[1] * s)))
    # INTER_AREA, not pyrDown + bilinear (a third cheaper): the cheaper shrink raised the still-face
    # flicker test's toggling pixels from 0.16 % to 0.41 % (tests/unit/masks/test_mask_stack.py).
    small = cv2.resize(sub, shape[::-1], interpolation=cv2.INTER_AREA) if s < 1 else sub
    lab, hue, sat = occ.lab_hue_sat(small)
    local = (np.asarray(kps, np.float32) - (bx0, by0)) * s
    lm = None if lm68 is None else (np.asarray(lm68, np.float32) - (bx0, by0)) * s
    sm = occ.skin_sample_mask(shape, lm, local)
    sat = np.ascontiguousarray(sat, np.float32)
    sat[occ.mouth_region(shape, lm, local)] = 0.0       # no hue test on the lips
    dropped = {}
    if lm is not None and rules.enabled(off, "beside"):     # the background past a turned cheek is not skin
        keep = beside.not_background(lab, sm, occ.skin_sample_mask(shape, lm, local, nose_only=True), lm)
        dropped["beside"] = int(keep.size - np.count_nonzero(keep))
        sm[sm] = keep
    elif rules.enabled(off, "beside"):
        rules_off.note("beside", "five points only: the band beside the face needs the 68 landmarks")
    busy = None
    if rules.enabled(off, "texture"):
        busy = texture.busy(lab[..., 0], lm, local, size * s)
        if size * s <= texture.MIN_FACE:
            rules_off.note("texture", f"a {size * s:.0f} px face at work scale (under {texture.MIN_FACE:.0f}): its "
                                      "brows' and hairline's edges would read as texture")
    return SkinView(clip_index, key, np.asarray(kps, np.float32), m, lab, lab[sm], hue=hue, sat=sat,
                    hue_samples=hue[sm & (sat >= 0.15)], busy=busy, dropped=dropped)


def roll_radius(radius: int) -> int:
    """Frames of roll the pool needs: medians read views within +-radius of a masked face, and
    each of those views' fits reads +-radius around it. (One fit per block of 4 frames was
    tried: it saved ~0.08 s of the speech case's 0.6 s of masks but cost mouth_open_corr 0.837
    -> 0.825 on the quality bench and raised the still-face flicker test's toggling pixels 0.09 %
    -> 0.16 %.)"""
    return 2 * radius if radius > 0 else 0


def fit_views(targets: list[SkinView], pool: list[SkinView], radius: int, shot_of, off=()) -> None:
    """Each target view's colour model is fitted on the skin samples of its track within
    +-radius frames (one frame's fit wobbles with noise; a window's does not), then its skin
    distance map is computed."""
    keys, index = [v.key for v in pool], [v.clip_index for v in pool]
    # Each fit writes only its own view and reads the others' samples: views on threads.
    todo = list({id(v): v for v in targets if v.lab is not None and not v.fitted}.values())
    map_frames(lambda v: _fit(v, pool, keys, index, radius, shot_of, off), todo)


def _fit(v: SkinView, pool: list[SkinView], keys, index, radius: int, shot_of, off=()) -> None:
    group = [pool[b] for b in temporal.window(v.key, v.clip_index, keys, index, radius, shot_of)]
    if not any(g is v for g in group):
        group.append(v)
    # In clip order, so the samples (and the thinning below) do not depend on how the
    # window happens to be split between the chunk and its roll.
    group.sort(key=lambda g: g.clip_index)
    xs = [g.samples for g in group if g.samples is not None]
    x = np.concatenate(xs) if xs else np.zeros((0, 3), np.float32)
    if len(x) > MAX_SAMPLES:                 # deterministic thinning: the same set, the same fit
        x = x[np.linspace(0, len(x) - 1, MAX_SAMPLES).astype(np.int64)]
    # A retry after a fit that raised starts clean: no half-computed map may survive it.
    v.d2 = v.off = v.lens = v.ring = v.glasses = v.skin_d2 = v.red = None
    v.model = occ.fit_skin(x)
    v.hue_floor = None
    if v.model is not None:
        # The colour model's distance is the base every other rule's evidence is maxed into;
        # with the skin rule off the base is 0 (the model still locates the lit skin for glare).
        v.skin_d2 = v.model.distance2(v.lab.reshape(-1, 3)).reshape(v.lab.shape[:2])
        v.d2 = v.skin_d2.copy() if rules.enabled(off, "skin") else np.zeros_like(v.skin_d2)
        hs = [g.hue_samples for g in group if g.hue_samples is not None]
        h = np.concatenate(hs) if hs else np.zeros(0, np.float32)
        v.hue_floor = float(occ.percentile1(h, 5)) if len(h) >= 30 else None
        if v.hue_floor is not None and rules.enabled(off, "redder"):
            v.red = occ.redder_than_skin(v.hue, v.sat, v.hue_floor)
            np.maximum(v.d2, v.red, out=v.d2)
        # Sky, foliage, blue objects: a hue skin never has (chroma.py); not judged on the
        # lips either (skin_view zeroes their saturation).
        angle = chroma.skin_angle(x) if rules.enabled(off, "off_hue") else None
        if angle is not None:
            v.off = chroma.off_hue(v.lab, *angle, v.sat > 0)
            np.maximum(v.d2, v.off, out=v.d2)
        # Glasses: the frame stays an occluder, a see-through (tinted) lens is not one.
        if rules.enabled(off, "glasses"):
            eyes = cv2.transform(np.asarray(v.kps[None, :2], np.float64), v.m)[0]
            v.d2, v.lens, v.ring, v.glasses = glasses_mod.see_through_lenses(v.d2, v.lab, eyes, x)
    # Only now: views are cached across chunks, so a view marked before its fit and left unfitted
    # by an exception would go without a model for the rest of the clip (issue 50).
    v.fitted = True


def apply(items, views: list[SkinView], pool: list[SkinView], opts, radius: int, shot_of) -> None:
    """Occlusion and mouth parts for the chunk's ``items`` (one ``views`` entry each); ``pool``
    holds every view (chunk and roll) a window may draw on."""
    pool_keys = [v.key for v in pool]
    pool_index = [v.clip_index for v in pool]
    # Each item writes only its own parts, info and patch pixels: items on threads.
    map_frames(lambda iv: _apply_one(*iv, pool, pool_keys, pool_index, opts, radius, shot_of), zip(items, views))


def _apply_one(it, view: SkinView, pool: list[SkinView], pool_keys, pool_index, opts, radius: int, shot_of) -> None:
    if view.d2 is None:
        it.info["occlusion"] = "too little visible skin to fit a colour model"
        return
    s = occ.work_scale(it.size)
    shape = (max(1, round(it.shape[0] * s)), max(1, round(it.shape[1] * s)))
    m_dst = temporal.patch_affine(it.origin, s)
    # One keypoint fit per neighbour moves both its skin distance and its glasses ring.
    group = [view] + [pool[b] for b in temporal.window(view.key, view.clip_index, pool_keys, pool_index,
                                                       radius, shot_of)
                      if pool[b] is not view and pool[b].d2 is not None]
    mats = {id(v): temporal.between(v.m, v.kps, m_dst, view.kps) for v in group}
    own, d2 = _voted(view, group, mats, shape, "d2")
    # The median steadies borderline pixels; what this frame clearly sees as not-skin stays,
    # so an occluder that moves across the face (a waving hand) is never voted away.
    strong = (STRONG_SIGMA / max(opts.occlusion_sensitivity, 1e-3)) ** 2
    if d2 is own:
        d2 = own.copy()
    np.maximum(d2, own, out=d2, where=own > strong)
    it.info["skin"] = {**view.model.to_json(), "hue_floor": None if view.hue_floor is None
                       else round(view.hue_floor, 1)}
    if opts.builtin_occlusion:
        inside = cv2.resize((it.patch.mask > 0).astype(np.uint8), shape[::-1], interpolation=cv2.INTER_NEAREST) > 0
        _cut_occluders(it, view, group, mats, shape, d2, inside, s, opts)
    if opts.mouth == "on" or (opts.mouth == "auto" and it.patch.info.get("source_mouth")):
        nonskin = None if it.lm is not None else _up(d2 > 16.0, it.shape)
        keep, info = mouth_mod.keep_mask(it.shape, it.lm, it.kps, opts.mouth_size, opts.mouth_feather,
                                         opts.mouth_lower_lip, nonskin)
        it.info.update(info)
        if info["mouth_open"]:
            it.parts["mouth"] = keep



def _cut_occluders(it, view: SkinView, group: list[SkinView], mats: dict, shape, d2: np.ndarray, inside: np.ndarray,
                   s: float, opts) -> None:
    """The occlusion part of one face from its voted skin distance ``d2`` (on the patch map of
    ``shape``, at work scale ``s``) and the enabled rules' own passes; counts each rule's pixels in
    the face's ``rules`` record. ``group``/``mats``: the view and its window's views, their transforms."""
    lm = None if it.lm is None else it.lm * s
    rec = it.info["rules"] if "rules" in it.info else rules.record(opts.rules_off)
    thr = occ.threshold_d2(opts.occlusion_sensitivity)
    zones = occ.feature_zones(shape, lm, it.kps * s)
    skin_l = float(view.model.means[:, 0].max())
    own_l = temporal.warp_by(view.lab[..., 0], mats[id(view)], shape)

    def voted(x0, y0, x1, y1, own_l=own_l, group=group, mats=mats, skin_l=skin_l):
        # Lightness voted on like the skin distance (in the box asked for): glare is
        # judged from its shape, which must not flip with one frame's noise.
        own = np.nan_to_num(own_l[y0:y1, x0:x1], nan=skin_l)
        return temporal.median(own, [temporal.warp_by(v.lab[..., 0], _shifted(mats[id(v)], x0, y0),
                                                      (y1 - y0, x1 - x0)) for v in group[1:]], scratch=True)
    light = occ.Light(own_l, skin_l, voted) if rules.enabled(opts.rules_off, "glare") else None
    found: dict = {}
    cut = occ.occluder_mask(d2, inside, zones, opts.occlusion_sensitivity, light, found)
    # Per rule, the pixels of this cut its own evidence on this frame flags (rules.py)
    by_rule = {name: cut & (temporal.warp_by(m, mats[id(view)], shape) > thr)
               for name, m in (("skin", view.skin_d2), ("redder", view.red), ("off_hue", view.off))
               if m is not None}
    if view.busy is not None and view.busy.max() > texture.THRESHOLD_D2 / 4:
        # Hats, headbands, hair above the brows (texture.py), voted like the skin distance
        # and judged apart from it: merged into it, a busy brim joined the brows and the
        # eye make-up below them into one blob reaching past the feature zones, and the
        # target's eyes were cut out of the swap with it (the ltx clip's frames 24-26).
        by_rule["texture"] = occ.occluder_mask(_voted(view, group, mats, shape, "busy")[1], inside, zones,
                                               opts.occlusion_sensitivity)
        cut |= by_rule["texture"]
    if view.off is not None and any(v.off is not None and v.off.max() > thr for v in group):
        # A colour skin never has is an object, never light: judged again without the glare
        # test, which took bright goggles with a brighter rim for a highlight fading in
        # (their lightness rises in two steps) and swapped the source's eyes over them.
        off_cut = occ.occluder_mask(_voted(view, group, mats, shape, "off")[1], inside, zones,
                                    opts.occlusion_sensitivity)
        by_rule["off_hue"] = by_rule["off_hue"] | off_cut
        cut |= off_cut
    ring = None
    if view.ring is not None:       # glasses frames found by their shape are occluders as found
        ring = _ring(view, group, shape, mats) & inside
        by_rule["glasses"] = ring
        cut |= ring
    px = it.shape[0] * it.shape[1] / (shape[0] * shape[1])     # patch pixels per map pixel
    for name, m in by_rule.items():
        rules.count(rec, name, np.count_nonzero(m) * px)
    rules.count(rec, "glare", found.get("glare", 0) * px)
    hard = _up(cut, it.shape)
    it.parts["occlusion"] = occ.soften(hard, opts.erode * it.size, max(opts.blur * it.size, 1.0))
    if view.lens is not None and ring is not None and LENS_OPEN:
        lens = _ring(view, group, shape, mats, "lens") & inside
        glasses_mod.open_lenses(it.parts["occlusion"], _up(lens, it.shape), _up(ring, it.shape), it.size)
    if view.lens is not None:       # the swapped eyes seen through the target's tinted lenses
        m_view = view.m.copy()
        m_view[:, 2] += view.m[:, :2] @ it.origin
        glasses_mod.tint_lenses(it.patch.pixels, it.patch.mask, view.lens, view.lab, m_view)


def keep_wires(it, frame: np.ndarray) -> None:
    """Thin lines over the eyes (wire frames, their bridge and temples: ``wires``) keep the target's
    pixels exactly, on top of the occlusion part; judged on this frame's own pixels at full
    resolution, where a one-pixel frame is still a line."""
    x0, y0 = (int(v) for v in it.origin)
    crop = frame[y0:y0 + it.shape[0], x0:x0 + it.shape[1]]
    hard, info = wires.lines(crop, it.kps, it.lm)
    it.info["wires"] = info.get("wire_px", 0)
    keep_pixels(it, "wires", hard)


def keep_rims(items, views: list[SkinView], pool: list[SkinView], radius: int, shot_of) -> None:
    """Glasses rims closed round an eye and the lenses they hold (``rims``) keep the target's
    pixels exactly, on top of the occlusion part: each view's own find (``skin_view``), voted on
    by its track's views within +-``radius`` frames of the same shot, the chunk's neighbours
    included (``rims.vote``: the same result whatever the chunk size)."""
    pool_keys, pool_index = [v.key for v in pool], [v.clip_index for v in pool]
    for it, view in zip(items, views):
        group = [view] + [pool[b] for b in temporal.window(view.key, view.clip_index, pool_keys, pool_index,
                                                            radius, shot_of) if pool[b] is not view]
        found = [v.rims for v in group if v.rims is not None]
        if not found:           # the rule off, or not the built-in occluder's run (``refine_masks``)
            continue
        params = rims.vote(found)
        it.info["rims"] = sum(q is not None for q in params)
        keep_pixels(it, "rims", rims.draw(it.shape, it.kps, it.lm, params))


def keep_pixels(it, rule: str, hard: np.ndarray) -> None:
    """A full-resolution rule's finds (bool over the patch) keep the target's pixels exactly, on top
    of the occlusion part, and count in the face's ``rules`` record. The rules that find their own
    pixels at patch resolution come through here: ``wires`` and, where a hand detector is wired
    in, the ``hands`` slot (a rule entry in ``rules.RULES`` and a step beside ``keep_wires`` in
    ``refine_masks``: ``keep_pixels(it, "hands", in_patch(it, hand_masks(...)[k]))``)."""
    n = int(np.count_nonzero(hard))
    if "rules" in it.info:
        rules.count(it.info["rules"], rule, n)
    if n:
        part = wires.keep_part(hard)
        it.parts["occlusion"] = np.minimum(it.parts["occlusion"], part) if "occlusion" in it.parts else part


def in_patch(it, frame_map: np.ndarray) -> np.ndarray:
    """A frame-sized map (``hands.hand_masks``' per-face masks: 255 = keep) as a bool map over the
    face's patch, for ``keep_pixels``."""
    x0, y0 = (int(v) for v in it.origin)
    return frame_map[y0:y0 + it.shape[0], x0:x0 + it.shape[1]] > 0


def _voted(view: SkinView, group: list[SkinView], mats: dict, shape, attr: str) -> tuple[np.ndarray, np.ndarray]:
    """(this frame's, the track window's median) of a pseudo skin distance map (``attr``: d2 or
    busy) moved onto the patch map; outside a map there is no evidence of an occluder (0 for this
    frame's, a neighbour's vote goes to this frame's). ``group`` and ``mats`` as in ``_ring``."""
    own = np.nan_to_num(temporal.warp_by(getattr(view, attr), mats[id(view)], shape), copy=False, nan=0.0)
    others = [temporal.warp_by(getattr(v, attr), mats[id(v)], shape) for v in group[1:]
              if getattr(v, attr) is not None]
    return own, temporal.median(own, others, scratch=True)


def _ring(view: SkinView, group: list[SkinView], shape, mats: dict, attr: str = "ring") -> np.ndarray:
    """This frame's glasses frames (``glasses.glasses``), voted on by the track's frames within
    +-radius like the skin distance (a neighbour that found none votes no): the ring's edges
    follow noise, and one frame's alone made a still face's paste mask toggle (0.52 % of its
    pixels, 0.10 % with the vote). ``group``: the view, then its neighbours with a skin
    distance map (``apply``'s window), ``mats`` their transforms onto the patch map."""
    def warped(v):
        r = getattr(v, attr)
        r = r.astype(np.float32) if r is not None else np.zeros(v.d2.shape, np.float32)
        return temporal.warp_by(r, mats[id(v)], shape)
    own = np.nan_to_num(warped(view), copy=False)
    others = [warped(v) for v in group[1:]]
    return temporal.median(own, others, scratch=True) > 0.5     # the warped maps are ours


def _shifted(m: np.ndarray, x0: int, y0: int) -> np.ndarray:
    """A map -> map transform onto the box of the destination map starting at (x0, y0)."""
    out = m.copy()
    out[:, 2] -= (x0, y0)
    return out


def _up(hard: np.ndarray, shape) -> np.ndarray:
    if hard.shape == tuple(shape):
        return hard
    return cv2.resize(hard.astype(np.float32), (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR) > 0.5

