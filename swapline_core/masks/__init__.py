"""The mask stack: which pixels of a swapped face may replace the target's (issue 13, items 1-2).

Computed on the *target* after the swapper, for every swapper alike, and combined by minimum
with the swapper's own feathered box/hull mask (``stack.combine``):
- occlusion: the built-in skin-appearance occluder (``occlusion``) and/or an XSeg model;
- region: the BiSeNet face parser's chosen regions;
- area: hulls of landmark areas (upper face, lower face, mouth);
- mouth: the target's open mouth interior stays (``mouth``).
Occlusion and region maps are smoothed along each track (``temporal``). Each patch keeps its
parts in ``patch.layers`` for previews and a JSON summary in ``patch.info["masks"]``.
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..types import Face, SwapPatch
from . import mouth as mouth_mod
from . import occlusion as occ
from . import temporal
from .region import area_part, model_parts
from .stack import (
    AREAS,
    DEFAULT_REGIONS,
    MOUTH_MODES,
    OCCLUSION_MODES,
    PART_NAMES,
    REGIONS,
    MaskOptions,
    combine,
    parse_list,
)

__all__ = [
    "AREAS",
    "DEFAULT_REGIONS",
    "MOUTH_MODES",
    "OCCLUSION_MODES",
    "PART_NAMES",
    "REGIONS",
    "MaskOptions",
    "parse_list",
    "refine_masks",
]
MAX_SAMPLES = 20000        # skin pixels per track used for the colour fit


def refine_masks(frames: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
                 patches: Sequence[Sequence[SwapPatch]], opts: MaskOptions, context=None):
    """Cut each patch's mask by the stack computed on the target; returns the patches."""
    if not opts.enabled:
        return patches
    items = [_Item(i, f, p) for i, (fs, ps) in enumerate(zip(faces, patches)) for f, p in _pairs(fs, ps)]
    if not items:
        return patches
    first = getattr(context, "first_index", 0) if context is not None else 0
    cuts = tuple(getattr(context, "cuts", ()) or ()) if context is not None else ()

    # Occluders and regions follow the image: smoothed along the track (decisions and maps).
    keys = [None if it.face.track_id is None or context is None else it.face.track_id for it in items]
    groups = temporal.neighbours(keys, [it.i for it in items], opts.temporal,
                                 lambda fi: sum(1 for c in cuts if c <= first + fi))
    if opts.builtin_occlusion or opts.mouth != "off":
        _builtin(frames, items, opts, groups)
    for it in items:
        a = area_part(it.shape, it.lm, opts.areas, it.size)
        if a is not None:
            it.parts["area"] = a
    mparts, minfo = model_parts(frames, [(it.i, it.face, it.patch) for it in items], opts)
    for it, mp in zip(items, mparts):
        it.parts.update(mp)

    # The mouth follows per-frame landmarks: a window of one frame either side removes their
    # jitter without lagging behind speech.
    short = temporal.neighbours(keys, [it.i for it in items], min(opts.temporal, 1),
                                lambda fi: sum(1 for c in cuts if c <= first + fi))
    # (the built-in occlusion was decided on track-smoothed skin distances already)
    for name in ("occlusion_model", "region", "mouth"):
        maps = [it.parts.get(name) for it in items]
        if any(m is not None for m in maps):
            smoothed = temporal.smooth(maps, [it.origin for it in items], [it.face.kps for it in items],
                                       short if name == "mouth" else groups)
            for it, m in zip(items, smoothed):
                if m is not None:
                    it.parts[name] = m

    for it in items:
        p = it.patch
        if "occlusion_model" in it.parts:        # one occlusion layer: the stricter of both
            om = it.parts.pop("occlusion_model")
            it.parts["occlusion"] = np.minimum(it.parts.get("occlusion", om), om)
        base = p.mask
        p.mask = combine(it.parts, base)
        inside = base > 0
        n = max(int(inside.sum()), 1)
        summary = {name: round(float(((m < 0.5) & inside).sum()) / n, 4) for name, m in it.parts.items()}
        p.info["masks"] = {"cut_fraction": summary, **it.info, **minfo}
        p.layers = dict(it.parts)
    return patches


class _Item:
    def __init__(self, i: int, face: Face, patch: SwapPatch):
        self.i, self.face, self.patch = i, face, patch
        x0, y0, x1, y1 = patch.region
        self.origin = np.array([x0, y0], np.float32)
        self.shape = (y1 - y0, x1 - x0)
        self.kps = np.asarray(face.kps, np.float32) - self.origin
        self.lm = None if face.landmarks is None else np.asarray(face.landmarks, np.float32) - self.origin
        pts = self.lm if self.lm is not None else self.kps
        span = pts.max(0) - pts.min(0)
        self.size = float(max(span.max() * (1.0 if self.lm is not None else 2.2), 8.0))
        self.parts: dict[str, np.ndarray] = {}
        self.info: dict = {}


def _pairs(fs: Sequence[Face], ps: Sequence[SwapPatch]):
    """Faces with their non-empty patch. Swappers give one patch per face, but a neural swapper
    drops faces wholly outside the frame: then match by the face centre."""
    if len(fs) == len(ps):
        pairs = list(zip(fs, ps))
    else:
        pairs = []
        for p in ps:
            x0, y0, x1, y1 = p.region
            for f in fs:
                cx, cy = (f.bbox[0] + f.bbox[2]) / 2, (f.bbox[1] + f.bbox[3]) / 2
                if x0 <= cx < x1 and y0 <= cy < y1:
                    pairs.append((f, p))
                    break
    return [(f, p) for f, p in pairs if p.mask.size and p.mask.any()]


def _builtin(frames, items: list[_Item], opts: MaskOptions, groups) -> None:
    """The built-in occluder and the mouth part: fit the skin colour per track, then cut.
    The skin distance is a median along the track before any decision: a still face must not
    flip blobs in and out of "occluder" with sensor noise."""
    work = []
    for it in items:
        x0, y0, x1, y1 = it.patch.region
        s = occ.work_scale(it.size)
        sub = frames[it.i][y0:y1, x0:x1]
        shape = (max(1, round(it.shape[0] * s)), max(1, round(it.shape[1] * s)))
        small = cv2.resize(sub, shape[::-1], interpolation=cv2.INTER_AREA) if s < 1 else sub
        lm = None if it.lm is None else it.lm * s
        kps = it.kps * s
        inside = cv2.resize((it.patch.mask > 0).astype(np.uint8), shape[::-1], interpolation=cv2.INTER_NEAREST) > 0
        lab = occ.lab(small)
        work.append((s, lab, lm, kps, inside))
    # One colour model per track (per face for stills), pooled over the chunk's frames.
    pools: dict = {}
    for k, (it, (s, lab, lm, kps, inside)) in enumerate(zip(items, work)):
        key = ("t", it.face.track_id) if it.face.track_id is not None else ("f", k)
        pools.setdefault(key, []).append(lab[occ.skin_sample_mask(inside.shape, lm, kps) & inside])
    models = {}
    rng = np.random.default_rng(0)           # fixed: the same chunk always gives the same fit
    for key, chunks in pools.items():
        x = np.concatenate(chunks)
        if len(x) > MAX_SAMPLES:
            x = x[rng.choice(len(x), MAX_SAMPLES, replace=False)]
        models[key] = occ.fit_skin(x)
    d2s = []
    for k, (it, (s, lab, lm, kps, inside)) in enumerate(zip(items, work)):
        model = models[("t", it.face.track_id) if it.face.track_id is not None else ("f", k)]
        d2s.append(None if model is None else model.distance2(lab.reshape(-1, 3)).reshape(inside.shape))
    d2s = temporal.smooth(d2s, [it.origin for it in items], [it.face.kps for it in items], groups,
                          [w[0] for w in work])
    for k, (it, (s, lab, lm, kps, inside)) in enumerate(zip(items, work)):
        model = models[("t", it.face.track_id) if it.face.track_id is not None else ("f", k)]
        if model is None:
            it.info["occlusion"] = "too little visible skin to fit a colour model"
            continue
        it.info["skin"] = model.to_json()
        if opts.builtin_occlusion:
            zones = occ.feature_zones(inside.shape, lm, kps)
            hard = occ.occluder_mask(d2s[k], inside, zones, opts.occlusion_sensitivity)
            full = _up(hard, it.shape)
            it.parts["occlusion"] = occ.soften(full, opts.erode * it.size, max(opts.blur * it.size, 1.0))
        if opts.mouth == "on" or (opts.mouth == "auto" and it.patch.info.get("source_mouth")):
            nonskin = None if it.lm is not None else _up(d2s[k] > 16.0, it.shape)
            keep, info = mouth_mod.keep_mask(it.shape, it.lm, it.kps, opts.mouth_size, opts.mouth_feather,
                                             opts.mouth_lower_lip, nonskin)
            it.info.update(info)
            if info["mouth_open"]:
                it.parts["mouth"] = keep


def _up(hard: np.ndarray, shape) -> np.ndarray:
    if hard.shape == tuple(shape):
        return hard
    return cv2.resize(hard.astype(np.float32), (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR) > 0.5
