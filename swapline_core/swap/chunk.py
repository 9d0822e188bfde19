"""Swap one chunk of frames: the per-chunk steps every swapper shares.

Order matters and is the same for still images (Swap Faces) and video (Swap Faces in Frames):
1. 68-point landmarks where the swapper needs them and the detector did not give them;
2. guards (``swapline_core.guards``) decide, per face, whether this swapper can swap it well;
   a refused face is left untouched and reported with its reason, never pasted badly;
3. the swapper produces patches for the accepted faces;
4. the mask stack (``swapline_core.masks``), computed on the *target*, cuts occluders, regions
   and the mouth interior out of each patch's mask;
5. paste-back.
Faces refused only for being too small for the swapper go through steps 1-4 again on an upscaled
crop (``swap/upscale.py``) and come back as one frame-space patch.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import SwaplineError
from ..faces.paste import apply_patches
from ..guards import GuardOptions, check_face, competence_for, screen
from ..masks import MaskOptions, refine_masks
from ..types import Face, SourceIdentity, SwapPatch
from . import upscale


@dataclass(frozen=True)
class SwapOptions:
    color_match: bool = True
    masks: MaskOptions = field(default_factory=MaskOptions)
    guards: GuardOptions = field(default_factory=GuardOptions)

    def to_json(self) -> dict:
        return {"color_match": self.color_match, "masks": self.masks.to_json(), "guards": self.guards.to_json()}


@dataclass
class ChunkResult:
    frames: list[np.ndarray]              # the chunk's frames after paste-back
    patches: list[list[SwapPatch]]        # the patches pasted, per frame
    records: list[list[dict]]             # per face: bbox, track, "swapped" or "skipped" + reason


def prepare_landmarks(swapper, analyzer, frames: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
                      source: SourceIdentity) -> None:
    """Swappers that warp 68-point meshes (and the guards/masks that use them) get the landmarks
    the detector did not give."""
    if not swapper.needs_landmarks:
        return
    if analyzer is None or not analyzer.supports_landmarks:
        raise SwaplineError(f"the {swapper.name} swapper needs 68-point landmarks; use the built-in analyzer "
                            "or an InsightFace pack with 1k3d68.onnx")
    missing = [[f for f in fs if f.landmarks is None] for fs in faces]
    if any(missing):
        analyzer.landmarks68(frames, missing)
    if source.face is None or source.image is None:
        raise SwaplineError("this face model holds no source image, which the classical swapper warps; "
                            "rebuild it with Build Face Model")
    if source.face.landmarks is None:
        analyzer.landmarks68([source.image], [[source.face]])


def swap_chunk(swapper, analyzer, frames: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
               source: SourceIdentity, opts: SwapOptions, *, context=None, timings: dict | None = None) -> ChunkResult:
    """``context`` carries what guards and masks may know beyond this chunk (the whole clip's
    tracks, the clip index of the chunk's first frame); None for independent still images."""
    t = timings if timings is not None else {}
    _timed(t, "landmarks", prepare_landmarks, swapper, analyzer, frames, faces, source)
    verdicts = _timed(t, "guards", screen, swapper, frames, faces, opts.guards, context)
    accepted = [[f for f, v in zip(fs, vs) if v is None] for fs, vs in zip(faces, verdicts)]
    patches = _timed(t, "swap", swapper.swap, frames, accepted, source)
    patches = _timed(t, "masks", refine_masks, frames, accepted, patches, opts.masks, context)
    if opts.guards.enabled:
        small = _swap_small(swapper, analyzer, frames, faces, verdicts, source, opts, t)
        if small:
            patches = _merge_small(verdicts, patches, small)
    color = opts.color_match and not getattr(swapper, "matches_color", False)
    out = _timed(t, "paste", lambda: [apply_patches(f, ps, color=color) if ps else f
                                      for f, ps in zip(frames, patches)])
    records = []
    for fs, vs, ps in zip(faces, verdicts, patches):
        it = iter(ps)
        row = []
        for f, v in zip(fs, vs):
            rec = {"bbox": [round(float(x), 1) for x in f.bbox]}
            if f.track_id is not None:
                rec["track_id"] = int(f.track_id)
            if v is None:
                p = next(it)
                rec.update(p.info)
                rec.setdefault("status", "skipped" if p.mask.size == 0 or not p.mask.any() else "swapped")
            else:
                rec.update(status="skipped", reason=v)
            row.append(rec)
        records.append(row)
    return ChunkResult(list(out), patches, records)


def _swap_small(swapper, analyzer, frames, faces, verdicts, source, opts: SwapOptions, t: dict) -> dict:
    """Faces refused only for being too small, swapped on an upscaled crop (swap/upscale.py).
    Returns {(frame k, face j): patch or None}; updates ``verdicts`` in place. The crop's
    landmarks, guards, swap and masks are timed under those names (a small face's mask time is
    mask time), the crop's scaling to and from the frame under "upscaled"."""
    comp = competence_for(swapper, opts.guards)
    out = {}
    for k, (frame, fs, vs) in enumerate(zip(frames, faces, verdicts)):
        for j, (face, v) in enumerate(zip(fs, vs)):
            if v is None or not v.startswith("too small") or not upscale.wants_upscale(face, comp.min_inter_ocular_px):
                continue
            crop, f2, region, (sx, _) = _timed(t, "upscaled", upscale.crop_for, frame, face,
                                               comp.min_inter_ocular_px)
            if swapper.needs_landmarks:
                _timed(t, "landmarks", analyzer.landmarks68, [crop], [[f2]])
            why = _timed(t, "guards", check_face, swapper, crop, f2, opts.guards)
            if why is not None:
                vs[j] = f"{why} (on a {sx:.1f}x upscaled crop)"
                continue
            ps = _timed(t, "swap", swapper.swap, [crop], [[f2]], source)
            ps = _timed(t, "masks", refine_masks, [crop], [[f2]], ps, opts.masks, None)
            patch = _timed(t, "upscaled", upscale.patch_to_frame, ps[0][0], crop.shape, region) if ps[0] else None
            if patch is not None:
                patch.info["upscaled"] = round(float(sx), 2)
                vs[j] = None
                out[(k, j)] = patch
    return out


def _merge_small(verdicts, patches, small: dict) -> list[list[SwapPatch]]:
    """Patches in face order again: the regular swaps, with the upscaled ones where they belong."""
    merged = []
    for k, (vs, ps) in enumerate(zip(verdicts, patches)):
        it = iter(ps)
        row = []
        for j, v in enumerate(vs):
            if (k, j) in small:
                row.append(small[(k, j)])
            elif v is None:
                row.append(next(it))
        merged.append(row)
    return merged


def _timed(t: dict, name: str, fn, *args):
    import time

    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        t[name] = t.get(name, 0.0) + time.perf_counter() - t0
