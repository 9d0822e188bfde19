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
from ..parallel import map_frames
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
    bridged: dict = {}
    verdicts = _timed(t, "guards", screen, swapper, frames, faces, opts.guards, context, bridged)
    accepted_at = [[j for j, v in enumerate(vs) if v is None] for vs in verdicts]
    accepted = [[fs[j] for j in idx] for fs, idx in zip(faces, accepted_at)]
    patches = one_per_face(swapper, accepted, _timed(t, "swap", swapper.swap, frames, accepted, source))
    patches = _timed(t, "masks", refine_masks, frames, accepted, patches, opts.masks, context)
    # Per frame, face index -> its patch: records pair by index, never by position in a list.
    by_face = [dict(zip(idx, ps)) for idx, ps in zip(accepted_at, patches)]
    if opts.guards.enabled:
        for (k, j), patch in _swap_small(swapper, analyzer, frames, faces, verdicts, source, opts, t).items():
            by_face[k][j] = patch
    # A refusal (SwapPatch.refusal) has nothing to paste: it only gives its face's record a reason.
    patches = [[row[j] for j in sorted(row) if not row[j].refused] for row in by_face]
    color = opts.color_match and not getattr(swapper, "matches_color", False)
    out = _timed(t, "paste", map_frames, lambda fp: apply_patches(fp[0], fp[1], color=color) if fp[1] else fp[0],
                 zip(frames, patches))
    records = []
    for fs, vs, row in zip(faces, verdicts, by_face):
        recs = []
        for j, (f, v) in enumerate(zip(fs, vs)):
            rec = {"bbox": [round(float(x), 1) for x in f.bbox]}
            if f.track_id is not None:
                rec["track_id"] = int(f.track_id)
            if j in row:
                p = row[j]
                rec.update(p.info)
                if (len(records), j) in bridged:
                    rec["bridged_guard"] = bridged[(len(records), j)]
                rec.setdefault("status", "skipped" if p.mask.size == 0 or not p.mask.any() else "swapped")
            else:
                rec.update(status="skipped", reason=v)
            recs.append(rec)
        records.append(recs)
    return ChunkResult(list(out), patches, records)


def one_per_face(swapper, faces: Sequence[Sequence[Face]], patches) -> list[list[SwapPatch]]:
    """``patches`` as returned by ``swapper.swap(frames, faces, ...)``, checked against the
    FaceSwapper contract: one SwapPatch per given face, in order (SwapPatch.refusal for a face it
    cannot swap). Faces and patches are paired by position, so a swapper that dropped or added one
    would pin later faces' results on the wrong face: that is an error here, never a guess."""
    rows = [list(ps) for ps in (patches or [])]
    ok = len(rows) == len(faces) and all(len(ps) == len(fs) and all(isinstance(p, SwapPatch) for p in ps)
                                         for fs, ps in zip(faces, rows))
    if not ok:
        got = [len(ps) for ps in rows]
        want = [len(fs) for fs in faces]
        raise SwaplineError(f"the {getattr(swapper, 'name', 'swapper')} swapper broke its contract: it must "
                            f"return one patch per face (a SwapPatch.refusal with the reason for a face it "
                            f"cannot swap), but for faces per frame {want} it returned {got} patches"
                            + ("" if got != want else " with a non-patch among them")
                            + ". Its results were not pasted, since they cannot be matched to faces.")
    return rows


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
            ps = one_per_face(swapper, [[f2]], _timed(t, "swap", swapper.swap, [crop], [[f2]], source))
            if ps[0][0].refused:
                vs[j] = f"{ps[0][0].info['reason']} (on a {sx:.1f}x upscaled crop)"
                continue
            ps = _timed(t, "masks", refine_masks, [crop], [[f2]], ps, opts.masks, None)
            patch = _timed(t, "upscaled", upscale.patch_to_frame, ps[0][0], crop.shape, region)
            if patch is not None:
                patch.info["upscaled"] = round(float(sx), 2)
                vs[j] = None
                out[(k, j)] = patch
    return out


def _timed(t: dict, name: str, fn, *args):
    import time

    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        t[name] = t.get(name, 0.0) + time.perf_counter() - t0
