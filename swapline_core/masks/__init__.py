"""The mask stack: which pixels of a swapped face may replace the target's (issue 13, items 1-2).

Computed on the *target* after the swapper, for every swapper alike, and combined by minimum
with the swapper's own feathered box/hull mask (``stack.combine``):
- occlusion: the built-in skin-appearance occluder (``occlusion``) and/or an XSeg model;
- region: the BiSeNet face parser's chosen regions;
- area: hulls of landmark areas (upper face, lower face, mouth);
- mouth: the target's open mouth interior stays (``mouth``).
The built-in occluder's rules form one registry (``rules``): each can be switched off
(``MaskOptions.rules_off``) and each face's record counts what each kept. Occlusion evidence is
smoothed along each track (``temporal``), with a pre-/post-roll read through the clip context so
a chunk's masks do not depend on chunking or resume. Each patch keeps its parts in ``patch.layers``
for previews and a JSON summary in ``patch.info["masks"]``.
"""
from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ..parallel import map_frames
from ..types import Face, SwapPatch
from . import builtin, hands, rules, rules_off, temporal
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

    def shot_of(clip_index: int) -> int:
        return sum(1 for c in cuts if c <= clip_index)

    def key_of(face: Face):
        return None if face.track_id is None or context is None else int(face.track_id)

    off = opts.rules_off
    if opts.builtin_occlusion:
        for it in items:
            it.info["rules"] = rules.record(off)
    if opts.builtin_occlusion or opts.mouth != "off":
        r = opts.temporal
        view_off = off if opts.builtin_occlusion else (*off, "rims")     # rims: the built-in occluder's
        views, pool, notes = _skin_views(frames, items, context, first, builtin.roll_radius(r), key_of, cuts, view_off)
        # Models pool samples over +-r frames, the median then spans +-r models: 2r of roll.
        near = [v for v in pool if any(abs(v.clip_index - w.clip_index) <= r for w in views)]
        builtin.fit_views(near, pool, r, shot_of, off)
        builtin.apply(items, views, pool, opts, r, shot_of)
        for it, v, n in zip(items, views, notes):
            skin_notes = {k: why for k, why in n.items() if k in rules.NOTE_OF}
            if skin_notes:  # a sample rule that kept every sample (rules_off.py): the record says so
                it.info["skin_rules_off"] = skin_notes
            if "rules" in it.info:
                for name, dropped in (v.dropped or {}).items():
                    rules.count(it.info["rules"], name, dropped)
                for k, why in n.items():
                    rules.switched_off(it.info["rules"], rules.NOTE_OF.get(k, k), why)
        builtin.keep_rims(items, views, pool, r, shot_of)      # a no-op where the views looked for none
    if opts.builtin_occlusion:
        _keep_lines_and_hands(frames, items, off)
    for it in items:
        a = area_part(it.shape, it.lm, opts.areas, it.size)
        if a is not None:
            it.parts["area"] = a
    mparts, minfo = model_parts(frames, [(it.i, it.face, it.patch) for it in items], opts)
    for it, mp in zip(items, mparts):
        it.parts.update(mp)
    # Model maps are smoothed within the chunk (a resumed chunk is the same chunk; the chunk
    # size, unlike for the built-in occluder, changes them at chunk edges).
    mats = [temporal.patch_affine(it.origin) for it in items]
    for name in ("occlusion_model", "region"):
        if not any(name in it.parts for it in items):
            continue
        keys, idx = [key_of(it.face) for it in items], [it.i for it in items]
        new = []
        for a, it in enumerate(items):
            own = it.parts.get(name)
            group = temporal.window(keys[a], idx[a], keys, idx, opts.temporal, lambda i: shot_of(first + i))
            others = [temporal.warp_between(items[b].parts[name], mats[b], items[b].face.kps, own.shape, mats[a],
                                            it.face.kps) for b in group if b != a and name in items[b].parts] \
                if own is not None else []
            new.append(None if own is None else temporal.median(own, others))
        for it, m in zip(items, new):
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


# Skin views (and their fits) of recent frames, for the next chunk: its pre-roll is this
# chunk's tail and its chunk is this chunk's post-roll. A view depends on its own frame and face
# only and a fit on its track's views within +-radius, which every pool that fits it holds, so
# reusing them changes nothing; it saves the roll's reads, landmarks, colour maps and fits (about
# a third of the mask time with 16-frame chunks). Keyed by the clip's face set and the face's
# exact box and points; a few dozen entries (a 128-px map each), each with the notes of the
# sample rules that switched themselves off on it (rules_off.py).
_VIEWS: OrderedDict = OrderedDict()
_VIEWS_MAX = 64


def _view_key(faceset, frames_key, clip_index: int, face: Face, use_lm: bool, radius: int, cuts,
              off=()) -> tuple | None:
    # Without the frames' key a view could not tell the original frames from the same clip already
    # swapped once (same face set, same boxes): a second swap stage would mask with stale views.
    if faceset is None or face.track_id is None or frames_key is None:
        return None
    return (id(faceset), frames_key, clip_index, int(face.track_id), use_lm, radius, tuple(cuts), tuple(off),
            np.asarray(face.bbox, np.float64).tobytes(), np.asarray(face.kps, np.float64).tobytes())


def _cached(key, faceset):
    hit = _VIEWS.get(key) if key is not None else None
    # id() of a freed face set can be reused by a new one: the weak reference says whether the
    # entry still belongs to this very face set
    if hit is None or hit[0]() is not faceset:
        return None
    _VIEWS.move_to_end(key)
    return hit[1]


def _remember(key, entry, faceset) -> None:
    """``entry``: (SkinView, its rules_off notes), as ``_view`` makes them."""
    if key is None:
        return
    _VIEWS[key] = (weakref.ref(faceset), entry)
    _VIEWS.move_to_end(key)
    while len(_VIEWS) > _VIEWS_MAX:
        _VIEWS.popitem(last=False)


def _view(frame, face: Face, clip_index: int, key, lm68, off=()):
    """(builtin.skin_view, {rule: why} of the rules that switched themselves off in it)."""
    with rules_off.collecting() as notes:
        view = builtin.skin_view(frame, face.bbox, face.kps, clip_index, key, lm68, off)
    return view, notes


def _skin_views(frames, items, context, first: int, radius: int, key_of, cuts=(), off=()):
    """Skin views of the chunk's faces plus, for video, those of the same tracks in the
    +-radius frames around the chunk (read through the context): the pool the temporal fits
    and medians draw on. Every view depends on its own frame only. Also returns, per chunk
    face, the notes of the sample rules that switched themselves off on its view."""
    faceset = getattr(context, "faces", None)
    reader = getattr(context, "read_frames", None)
    frames_key = getattr(context, "frames_key", None)
    analyzer = getattr(faceset, "analyzer", None)
    # Landmarks locate the skin samples better than five points (glasses frames sit right under
    # the eyes), but every view must be made the same way, roll frames included.
    use_lm = all(it.lm is not None for it in items)
    roll_lm = use_lm and analyzer is not None and getattr(analyzer, "supports_landmarks", False)
    cache = faceset is not None and reader is not None and radius > 0 and (roll_lm or not use_lm)
    keys_ = [_view_key(faceset, frames_key, first + it.i, it.face, use_lm, radius, cuts, off)
             if cache and key_of(it.face) is not None else None for it in items]
    hits = [_cached(k, faceset) for k in keys_]
    todo = [a for a, v in enumerate(hits) if v is None]
    made = map_frames(lambda it: _view(frames[it.i], it.face, first + it.i, key_of(it.face),
                                       it.face.landmarks if use_lm else None, off),
                      [items[a] for a in todo])
    for a, vn in zip(todo, made):
        hits[a] = vn
        _remember(keys_[a], vn, faceset)
    views = [v for v, _ in hits]
    notes = [n for _, n in hits]
    pool = list(views)
    keys = {v.key for v in views if v.key is not None}
    if not keys or not cache:
        return views, pool, notes
    total = len(faceset.frames)
    lo, hi = max(0, first - radius), min(total, first + len(frames) + radius)
    need = []
    # A roll frame farther than ``radius`` from every face being masked is in no window that
    # matters: fits pool +-r around views within r of a masked face (of any track: ``near``),
    # medians +-r around the masked faces. Skipping it (where guards refused the chunk's edge
    # faces) saves a frame read and its landmarks and changes no fit.
    masked_at = sorted({v.clip_index for v in views})
    for i in range(lo, hi):
        if first <= i < first + len(frames):
            continue
        if not any(abs(i - j) <= radius for j in masked_at):
            continue
        for f in faceset.frames[i].faces:
            if key_of(f) in keys:
                k = _view_key(faceset, frames_key, i, f, use_lm, radius, cuts, off)
                hit = _cached(k, faceset)
                if hit is not None:
                    pool.append(hit[0])
                else:
                    need.append((i, f.copy(), k))
    if need:
        roll = sorted({i for i, _, _ in need})
        imgs = dict(zip(roll, reader(roll)))
        if use_lm:
            by_frame = [[f for i2, f, _ in need if i2 == i and f.landmarks is None] for i in roll]
            if any(by_frame):
                analyzer.landmarks68([imgs[i] for i in roll], by_frame)
        made = map_frames(lambda n: _view(imgs[n[0]], n[1], n[0], key_of(n[1]),
                                          n[1].landmarks if use_lm else None, off), need)
        for (_, _, k), vn in zip(need, made):
            _remember(k, vn, faceset)
            pool.append(vn[0])
    return views, pool, notes


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
    """Faces with their non-empty patch. One patch per face, in order (``swap.chunk.one_per_face``
    checks every swapper's output before it gets here): pairing by anything looser, such as the
    face centre, could hand one face's mask cuts to another."""
    if len(fs) != len(ps):
        raise ValueError(f"the mask stack needs one patch per face, got {len(ps)} patches for {len(fs)} faces")
    return [(f, p) for f, p in zip(fs, ps) if p.mask.size and p.mask.any()]


def _keep_lines_and_hands(frames, items, off) -> None:
    """The rules that keep what they find at full resolution on each frame's own pixels."""
    if rules.enabled(off, "wires"):
        map_frames(lambda it: builtin.keep_wires(it, frames[it.i]), items)
    if rules.enabled(off, "hands"):
        _keep_hands(frames, items)


def _keep_hands(frames, items) -> None:
    """The ``hands`` rule: the hand pixels over each face kept from the target, or, without the
    hand models, the rule off on every face with the reason (logged once)."""
    why = hands.keep_hands(frames, items, lambda it, m: builtin.keep_pixels(it, "hands", builtin.in_patch(it, m)))
    if why:
        _warn_once(why)
        for it in items:
            rules.switched_off(it.info["rules"], "hands", why)


def _warn_once(why: str) -> None:
    """One log line per reason and process (a missing model would otherwise log every chunk)."""
    if why not in _WARNED:
        _WARNED.add(why)
        logging.getLogger("swapline").warning("Swapline masks: the 'hands' occluder rule is off: %s", why)


_WARNED: set[str] = set()
