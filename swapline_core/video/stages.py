"""Streaming stages over a FrameSequence: track faces, swap, restore, each chunk by chunk.

Every stage writes its chunks to a ChunkStore keyed by its inputs, so peak memory is one chunk
and a re-run after an interrupt or crash resumes at the first missing chunk. ``hooks`` lets
the ComfyUI layer plug in its progress bar and interrupt check without the core importing it.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..backends.cache import file_sha256, loaded_model_files
from ..faces import source_check
from ..faces.paste import apply_patches
from ..faces.tracking import FaceTracker
from ..guards import Refusals
from ..metrics import observe_stage
from ..parallel import read_ahead
from ..provenance.method import StageRecord, restore_record, swap_record
from ..swap.chunk import SwapOptions, swap_chunk
from ..types import ClipContext, Face, FaceSet, FrameFaces
from .cuts import CutDetector
from .frames import FrameSequence, Layer, encode_diff_chunk, encode_layer_chunk, encode_revert_chunk
from .store import ChunkStore, faces_key, model_stamp, stage_key

# Source frames decoded past each chunk of a patch stage before it runs (FrameSequence.iter_chunks'
# ``ahead``): the mask stack's post-roll at smoothing radius <= 3 (masks.builtin.roll_radius).
READ_AHEAD = 8


@dataclass
class Hooks:
    progress: Callable[[int], None] = lambda n: None      # frames finished (incl. resumed)
    check_interrupt: Callable[[], None] = lambda: None


@dataclass
class StageReport:
    stage: str
    key: str
    chunks_total: int = 0
    chunks_resumed: int = 0
    seconds: dict = field(default_factory=lambda: defaultdict(float))
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"stage": self.stage, "key": self.key, "chunks_total": self.chunks_total,
                "chunks_resumed": self.chunks_resumed,
                "seconds": {k: round(v, 4) for k, v in self.seconds.items()}, **self.extra}



# -- face tracks as chunk arrays -------------------------------------------------------------
def _flat_arrays(flat: list[Face], prefix: str = "") -> dict[str, np.ndarray]:
    return {prefix + "bbox": np.array([f.bbox for f in flat], np.float32).reshape(-1, 4),
            prefix + "kps": np.array([f.kps for f in flat], np.float32).reshape(-1, 5, 2),
            prefix + "score": np.array([f.score for f in flat], np.float32),
            prefix + "track": np.array([-1 if f.track_id is None else f.track_id for f in flat], np.int32)}


def _flat_faces(a: dict[str, np.ndarray], prefix: str = "") -> list[Face]:
    return [Face(bbox=a[prefix + "bbox"][k], kps=a[prefix + "kps"][k], score=float(a[prefix + "score"][k]),
                 track_id=int(a[prefix + "track"][k])) for k in range(len(a[prefix + "score"]))]


def _faces_to_arrays(per_frame: list[list[Face]], state: dict, cuts: Sequence[int] = (),
                     backfilled: dict[int, list[Face]] | None = None) -> dict[str, np.ndarray]:
    """One track chunk: its frames' faces, the faces it added to earlier chunks' frames
    (``bf_*``, applied in order on load), the cuts found in it and the state to resume from."""
    bf = sorted((backfilled or {}).items())
    return {"counts": np.array([len(fs) for fs in per_frame], np.int32),
            **_flat_arrays([f for fs in per_frame for f in fs]),
            "bf_index": np.array([i for i, fs in bf for _ in fs], np.int32),
            **_flat_arrays([f for _, fs in bf for f in fs], "bf_"),
            "cuts": np.array(list(cuts), np.int32),
            "state": np.array(json.dumps(state))}


def _arrays_to_faces(a: dict[str, np.ndarray]) -> list[list[Face]]:
    flat, out, k = _flat_faces(a), [], 0
    for n in a["counts"]:
        out.append(flat[k:k + int(n)])
        k += int(n)
    return out


def _frames_from(seq: FrameSequence, first: int, stop: int) -> list[np.ndarray]:
    """Frames ``first`` .. ``stop - 1`` of the sequence (a resume needs the tracker's buffer)."""
    out = []
    for c in range(first // seq.chunk, (stop - 1) // seq.chunk + 1) if stop > first else ():
        rng = seq.chunk_range(c)
        out += [f for i, f in zip(rng, seq.read_chunk(c)) if first <= i < stop]
    return out


@observe_stage("track")
def track_faces(seq: FrameSequence, analyzer, store_root: str, hooks: Hooks, *, mode: str = "identity",
                reference: np.ndarray | None = None, threshold: float = 0.35, max_faces: int = 1,
                detect_every: int = 8, max_missing: int = 12, smoothing: float = 0.5,
                cut_min_gap: int = 4) -> tuple[FaceSet, StageReport]:
    """Track faces chunk by chunk; shot cuts reset the tracker and are returned in ``FaceSet.cuts``."""
    params = dict(mode=mode, threshold=threshold, max_faces=max_faces, detect_every=detect_every,
                  max_missing=max_missing, smoothing=smoothing, cut_min_gap=cut_min_gap,
                  # v2: cuts, backfill of late faces, tracks end when the face leaves
                  tracker=2, reference=None if reference is None else stage_key(reference.round(5).tolist()))
    key = stage_key("track", seq.key, params, model_stamp(analyzer), analyzer.name)
    store = ChunkStore(store_root, key, {"stage": "track", **params})
    report = StageReport("track", key, seq.n_chunks)
    tracker = FaceTracker(analyzer, mode, reference, threshold, max_faces, detect_every, max_missing, smoothing,
                          fps=seq.fps)
    cutter = CutDetector(cut_min_gap)
    per_frame: list[list[Face]] = []
    cuts: list[int] = []
    first_missing = seq.n_chunks
    state = None
    for c in range(seq.n_chunks):
        if not store.has(c):
            first_missing = c
            break
        a = store.load(c)
        per_frame += _arrays_to_faces(a)
        for i, f in zip(a["bf_index"].tolist(), _flat_faces(a, "bf_")):
            per_frame[i].append(f)
        cuts += a["cuts"].tolist()
        state = json.loads(str(a["state"]))
        report.chunks_resumed += 1
        hooks.progress(len(seq.chunk_range(c)))
    if first_missing < seq.n_chunks:
        if state is not None:  # continue exactly where the finished chunks left the tracker
            start = seq.chunk_range(first_missing).start
            prev = seq.read_chunk(first_missing - 1)[-1]
            first = state["tracker"]["buffer_from"]
            buffered = list(zip(_frames_from(seq, first, start), per_frame[first:start]))
            tracker.restore(state["tracker"], prev, buffered)
            cutter.restore(state["cuts"], prev)
        t_dec = time.perf_counter()
        # the next chunk is decoded while this one is tracked: "decode" counts only the wait
        for c, frames in read_ahead(seq.iter_chunks(first_missing), enabled=seq.reads_ahead()):
            report.seconds["decode"] += time.perf_counter() - t_dec
            hooks.check_interrupt()
            t0 = time.perf_counter()
            start = seq.chunk_range(c).start
            found = cutter.feed(frames)
            report.seconds["cuts"] += time.perf_counter() - t0
            faces = tracker.process(frames, [i - start for i in found])
            for i, fs in sorted(tracker.backfilled.items()):
                per_frame[i] += fs
            store.save(c, _faces_to_arrays(faces, {"tracker": tracker.state(), "cuts": cutter.state()},
                                           found, tracker.backfilled))
            per_frame += faces
            cuts += found
            hooks.progress(len(frames))
            t_dec = time.perf_counter()
    st = tracker.stats
    report.seconds["detect"] += st.detect_s
    report.seconds["embed"] += st.embed_s
    report.seconds["flow"] += st.flow_s
    report.extra["tracker"] = st.to_json()
    report.extra["cuts"] = cuts
    frames = [FrameFaces(i, fs, seq.width, seq.height) for i, fs in enumerate(per_frame)]
    return FaceSet(frames, analyzer, selection=f"tracked:{mode}", cuts=tuple(cuts)), report



@observe_stage()  # swap, restore, refine: the stage is its `stage` argument
def patch_stage(seq: FrameSequence, faces: FaceSet, stage: str, key: str, meta: dict, store_root: str,
                 hooks: Hooks, compute, on_records=None) -> tuple[ChunkStore, StageReport]:
    """The loop shared by stages that paste patches: resume, decode, compute, store the layer.

    ``compute(frames, chunk_faces, report, first_index)`` returns (patches per frame, resulting
    frames) or (patches, frames, records); ``first_index`` is the clip index of the chunk's first
    frame. Records (JSON: per frame, per face) are stored with the chunk, and ``on_records(first_index,
    records)`` sees them for computed and resumed chunks alike, so a resumed run reports the same.
    """
    if len(faces.frames) != seq.count:
        raise ValueError(f"the faces cover {len(faces.frames)} frames but the clip has {seq.count}: "
                         f"connect the same frames to Track Faces and the {stage} node")
    store = ChunkStore(store_root, key, {"stage": stage, **meta})
    report = StageReport(stage, key, seq.n_chunks)
    first_missing = next((c for c in range(seq.n_chunks) if not store.has(c)), seq.n_chunks)
    report.chunks_resumed = first_missing
    for c in range(first_missing):
        if on_records is not None:
            stored = store.load(c, ("records",)).get("records")
            if stored is not None:
                on_records(seq.chunk_range(c).start, json.loads(stored.tobytes()))
        hooks.progress(len(seq.chunk_range(c)))
    if first_missing < seq.n_chunks:
        t_dec = time.perf_counter()
        # READ_AHEAD: the masks' post-roll (masks.builtin.roll_radius: 6 frames at the default
        # smoothing) comes from the frames decoded for the next chunk, not a second decode.
        for c, frames in seq.iter_chunks(first_missing, ahead=READ_AHEAD):
            report.seconds["decode"] += time.perf_counter() - t_dec
            if not store.has(c):
                hooks.check_interrupt()
                chunk_faces = [[f.copy() for f in faces.frames[i].faces] for i in seq.chunk_range(c)]
                patches, results, *rest = compute(frames, chunk_faces, report, seq.chunk_range(c).start)
                t0 = time.perf_counter()
                arrays = encode_layer_chunk(frames, results, patches)
                if rest:
                    arrays["records"] = np.frombuffer(json.dumps(rest[0]).encode(), np.uint8)
                    if on_records is not None:
                        on_records(seq.chunk_range(c).start, rest[0])
                store.save(c, arrays)
                report.seconds["store"] += time.perf_counter() - t0
            hooks.progress(len(frames))
            t_dec = time.perf_counter()
    return store, report


def _timed(report: StageReport, name: str, fn, *args, **kwargs):
    t0 = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    finally:
        report.seconds[name] += time.perf_counter() - t0


def swap_frames(seq: FrameSequence, faces: FaceSet, source, swapper, analyzer, store_root: str, hooks: Hooks,
                opts: SwapOptions | None = None) -> tuple[FrameSequence, StageReport]:
    """Swap the tracked faces of every frame; returns the sequence with a swap layer added.

    Faces the guards refuse are left untouched; ``report.extra["skipped"]`` counts them by reason
    category (e.g. "head turned", "track jump"; the full reasons are in each face's record), and
    ``report.extra["skipped_frames"]`` lists, per category, the clip frames that had one.
    """
    opts = opts or SwapOptions()
    key = stage_key("swap", seq.key, faces_key(faces), stage_key(source.embedding.round(5).tolist()),
                    swapper.name, model_stamp(swapper), opts.to_json(), getattr(swapper, "settings", None))
    refusals = Refusals()

    def compute(frames, chunk_faces, report, first):
        ctx = ClipContext(faces, first, tuple(faces.cuts), read_frames=seq.read_frames, frames_key=seq.key)
        res = swap_chunk(swapper, analyzer, frames, chunk_faces, source, opts, context=ctx, timings=report.seconds)
        # Only what reports need: the patch info (hulls, sizes) stays out of the stored chunk.
        slim = [[{k: v for k, v in rec.items() if k in ("status", "reason", "track_id", "bbox", "bridged_guard")}
                 for rec in row]
                for row in res.records]
        return res.patches, res.frames, slim

    store, report = patch_stage(seq, faces, "swap", key, {"swapper": swapper.name, **opts.to_json()},
                                 store_root, hooks, compute, on_records=refusals.add)
    report.extra.update(refusals.to_json())
    if source_check.warnings_of(source):     # a soft source makes a soft swap: say so here too
        report.extra["source_warnings"] = source_check.warnings_of(source)
    batching = getattr(swapper, "batching", {})
    if batching:  # the providers each session really got and the batch it really ran at
        report.extra["inference"] = {name: {"providers": swapper.providers.get(name), **run.report()}
                                     for name, run in batching.items()}
    records = swap_stage_records(swapper, faces.analyzer, opts)
    models = tuple(m for r in records for m in r.models)
    return seq.with_layer(Layer("swap", str(store.dir.parent), key, models, records)), report


def swap_stage_records(swapper, analyzer, opts: SwapOptions) -> tuple:
    """What a swap ran: analysis, the swap itself (classical or which trained family) and the masks,
    each with its model files and the hashes recorded at load time (the weights that ran, not
    whatever file is at that path when the result is signed)."""
    analysis_models = tuple(loaded_model_files(analyzer) if analyzer else ())
    mask_models = tuple((role, path, file_sha256(path)) for role, path in opts.masks.model_files()
                        if os.path.isfile(path))
    return (StageRecord("analysis", f"face detection and landmarks ({getattr(analyzer, 'name', 'analyzer')})",
                        "none", analysis_models),
            swap_record(swapper, tuple(loaded_model_files(swapper))),
            StageRecord("masks", opts.masks.describe(), "none", mask_models))


def swap_refusals(seq: FrameSequence) -> dict[int, dict]:
    """{clip frame: {track_id: reason}} of the faces the swap stage(s) of ``seq`` refused (guards,
    the swapper's competence), read back from the records stored with each swap layer chunk: what
    the QA gate counts as "skipped on purpose" rather than as failed swaps."""
    out: dict[int, dict] = {}
    for layer in seq.layers:
        if layer.name != "swap":
            continue
        store = layer.store()
        for c in range(seq.n_chunks):
            if not store.has(c):
                continue
            stored = store.load(c, ("records",)).get("records")
            if stored is None:
                continue
            for k, row in enumerate(json.loads(stored.tobytes())):
                for rec in row:
                    if rec.get("status") == "skipped" and rec.get("reason") and rec.get("track_id") is not None:
                        out.setdefault(seq.chunk_range(c).start + k, {})[int(rec["track_id"])] = rec["reason"]
    return out


def without_refused(chunk_faces, first: int, refusals: dict[int, dict]) -> tuple[list[list], int]:
    """A chunk's faces less those a swap stage refused (``swap_refusals``), and how many were left
    out. A face the swap left as it was stays as it was: restoring or refining it would change the
    target's own face, which nobody asked for, where the swap said it could not do its part."""
    kept, dropped = [], 0
    for k, fs in enumerate(chunk_faces):
        refused = refusals.get(first + k, {})
        row = [f for f in fs if f.track_id is None or int(f.track_id) not in refused]
        dropped += len(fs) - len(row)
        kept.append(row)
    return kept, dropped


def restore_frames(seq: FrameSequence, faces: FaceSet, restorer, store_root: str, hooks: Hooks,
                   *, weight: float = 1.0, batch: int = 4) -> tuple[FrameSequence, StageReport]:
    """Restore the tracked faces of every frame (on top of any swap layer) except those the swap
    refused (``report.extra["faces_left_as_refused"]``); adds a restore layer."""
    # ``batch`` is left out of the key: it changes speed and memory, not the result. The refusals
    # need no place in it: they are read from the swap layers, which ``seq.key`` covers.
    key = stage_key("restore", seq.key, faces_key(faces), restorer.name, model_stamp(restorer),
                    round(float(weight), 4), getattr(restorer, "settings", None))
    restored, refusals, left = [0], swap_refusals(seq), [0]

    def compute(frames, chunk_faces, report, first):
        chunk_faces, n = without_refused(chunk_faces, first, refusals)
        left[0] += n
        patches = _timed(report, "restore", restorer.restore, frames, chunk_faces, weight=weight, batch=batch,
                         check_interrupt=hooks.check_interrupt)
        restored[0] += sum(len(ps) for ps in patches)
        results = _timed(report, "paste", lambda: [apply_patches(f, ps) if ps else f for f, ps in zip(frames, patches)])
        return patches, results

    store, report = patch_stage(seq, faces, "restore", key, {"restorer": restorer.name, "weight": weight},
                                 store_root, hooks, compute)
    report.extra["faces_restored"] = restored[0]
    report.extra["faces_left_as_refused"] = left[0]
    models = tuple(loaded_model_files(restorer))
    return seq.with_layer(Layer("restore", str(store.dir.parent), key, models,
                                (restore_record(restorer, models),))), report


def revert_frames(seq: FrameSequence, frames: set[int], store_root: str, hooks: Hooks) -> FrameSequence:
    """Put the original pixels back on ``frames`` (the QA gate's "keep original" policy).

    Implemented as one more layer, so the frame count and every other frame stay as they were.
    The layer lists the reverted frames (``encode_revert_chunk``): nothing is decoded here, and
    reading the sequence hands out the source's own decoded frames there.
    """
    if not frames:
        return seq
    key = stage_key("revert", "list", seq.key, sorted(frames))
    store = ChunkStore(store_root, key, {"stage": "revert", "frames": sorted(frames)})
    for c in range(seq.n_chunks):
        hooks.check_interrupt()
        span = seq.chunk_range(c)
        if not store.has(c):
            store.save(c, encode_revert_chunk(len(span), [k for k, i in enumerate(span) if i in frames]))
        hooks.progress(len(span))
    return seq.with_layer(Layer("revert", str(store.dir.parent), key))


def overlay_images(seq: FrameSequence, images: Sequence[np.ndarray], store_root: str, hooks: Hooks,
                   stages: tuple = ()) -> FrameSequence:
    """``seq`` with its pixels replaced by ``images`` (edited elsewhere, e.g. by diffusion nodes).

    Stored as one more layer holding only the changed pixels, so the source clip's frame rate,
    audio, provenance chain and unchanged pixels are kept exactly.
    """
    if len(images) != seq.count:
        raise ValueError(f"{len(images)} images for a sequence of {seq.count} frames: the images must be "
                         "the whole sequence, in order (e.g. from Frames to IMAGE of the same frames)")
    bad = next((i for i, a in enumerate(images) if a.shape[:2] != (seq.height, seq.width)), None)
    if bad is not None:
        raise ValueError(f"image {bad} is {images[bad].shape[1]}x{images[bad].shape[0]} but the sequence is "
                         f"{seq.width}x{seq.height}: resize the images back before this node")
    digest = [hashlib.sha256(a.tobytes()).hexdigest() for a in images]
    key = stage_key("images", seq.key, digest)
    store = ChunkStore(store_root, key, {"stage": "images"})
    for c, before in seq.iter_chunks():
        hooks.check_interrupt()
        if not store.has(c):
            store.save(c, encode_diff_chunk(before, [images[i] for i in seq.chunk_range(c)]))
        hooks.progress(len(before))
    # ``stages``: what made the images, when the node that made them recorded it (else "unknown")
    models = tuple(m for r in stages for m in r.models)
    return seq.with_layer(Layer("images", str(store.dir.parent), key, models, tuple(stages)))
