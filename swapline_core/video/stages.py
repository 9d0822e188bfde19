"""Streaming stages over a FrameSequence: track faces, swap, restore, each chunk by chunk.

Every stage writes its chunks to a ChunkStore keyed by its inputs, so peak memory is one chunk
and a re-run after an interrupt or crash resumes at the first missing chunk. ``hooks`` lets
the ComfyUI layer plug in its progress bar and interrupt check without the core importing it.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..faces.paste import apply_patches
from ..faces.tracking import FaceTracker
from ..swap.chunk import SwapOptions, swap_chunk
from ..types import ClipContext, Face, FaceSet, FrameFaces
from .frames import FrameSequence, Layer, encode_diff_chunk, encode_layer_chunk
from .store import ChunkStore, faces_key, model_stamp, stage_key


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
def _faces_to_arrays(per_frame: list[list[Face]], state: dict) -> dict[str, np.ndarray]:
    counts = np.array([len(fs) for fs in per_frame], np.int32)
    flat = [f for fs in per_frame for f in fs]
    return {"counts": counts,
            "bbox": np.array([f.bbox for f in flat], np.float32).reshape(-1, 4),
            "kps": np.array([f.kps for f in flat], np.float32).reshape(-1, 5, 2),
            "score": np.array([f.score for f in flat], np.float32),
            "track": np.array([-1 if f.track_id is None else f.track_id for f in flat], np.int32),
            "state": np.array(json.dumps(state))}


def _arrays_to_faces(a: dict[str, np.ndarray]) -> list[list[Face]]:
    out, k = [], 0
    for n in a["counts"]:
        out.append([Face(bbox=a["bbox"][k + j], kps=a["kps"][k + j], score=float(a["score"][k + j]),
                         track_id=int(a["track"][k + j])) for j in range(int(n))])
        k += int(n)
    return out


def track_faces(seq: FrameSequence, analyzer, store_root: str, hooks: Hooks, *, mode: str = "identity",
                reference: np.ndarray | None = None, threshold: float = 0.35, max_faces: int = 1,
                detect_every: int = 8, max_missing: int = 12, smoothing: float = 0.5) -> tuple[FaceSet, StageReport]:
    params = dict(mode=mode, threshold=threshold, max_faces=max_faces, detect_every=detect_every,
                  max_missing=max_missing, smoothing=smoothing,
                  reference=None if reference is None else stage_key(reference.round(5).tolist()))
    key = stage_key("track", seq.key, params, model_stamp(analyzer), analyzer.name)
    store = ChunkStore(store_root, key, {"stage": "track", **params})
    report = StageReport("track", key, seq.n_chunks)
    tracker = FaceTracker(analyzer, mode, reference, threshold, max_faces, detect_every, max_missing, smoothing,
                          fps=seq.fps)
    per_frame: list[list[Face]] = []
    first_missing = seq.n_chunks
    state = None
    for c in range(seq.n_chunks):
        if not store.has(c):
            first_missing = c
            break
        a = store.load(c)
        per_frame += _arrays_to_faces(a)
        state = json.loads(str(a["state"]))
        report.chunks_resumed += 1
        hooks.progress(len(seq.chunk_range(c)))
    if first_missing < seq.n_chunks:
        if state is not None:  # continue exactly where the finished chunks left the tracker
            tracker.restore(state, seq.read_chunk(first_missing - 1)[-1])
        t_dec = time.perf_counter()
        for c, frames in seq.iter_chunks(first_missing):
            report.seconds["decode"] += time.perf_counter() - t_dec
            hooks.check_interrupt()
            faces = tracker.process(frames)
            store.save(c, _faces_to_arrays(faces, tracker.state()))
            per_frame += faces
            hooks.progress(len(frames))
            t_dec = time.perf_counter()
    st = tracker.stats
    report.seconds["detect"] += st.detect_s
    report.seconds["embed"] += st.embed_s
    report.seconds["flow"] += st.flow_s
    report.extra["tracker"] = st.to_json()
    frames = [FrameFaces(i, fs, seq.width, seq.height) for i, fs in enumerate(per_frame)]
    return FaceSet(frames, analyzer, selection=f"tracked:{mode}"), report



def patch_stage(seq: FrameSequence, faces: FaceSet, stage: str, key: str, meta: dict, store_root: str,
                 hooks: Hooks, compute) -> tuple[ChunkStore, StageReport]:
    """The loop shared by stages that paste patches: resume, decode, compute, store the layer.

    ``compute(frames, chunk_faces, report, first_index)`` returns (patches per frame, resulting
    frames); ``first_index`` is the clip index of the chunk's first frame.
    """
    if len(faces.frames) != seq.count:
        raise ValueError(f"the faces cover {len(faces.frames)} frames but the clip has {seq.count}: "
                         f"connect the same frames to Track Faces and the {stage} node")
    store = ChunkStore(store_root, key, {"stage": stage, **meta})
    report = StageReport(stage, key, seq.n_chunks)
    first_missing = next((c for c in range(seq.n_chunks) if not store.has(c)), seq.n_chunks)
    report.chunks_resumed = first_missing
    for c in range(first_missing):
        hooks.progress(len(seq.chunk_range(c)))
    if first_missing < seq.n_chunks:
        t_dec = time.perf_counter()
        for c, frames in seq.iter_chunks(first_missing):
            report.seconds["decode"] += time.perf_counter() - t_dec
            if not store.has(c):
                hooks.check_interrupt()
                chunk_faces = [[f.copy() for f in faces.frames[i].faces] for i in seq.chunk_range(c)]
                patches, results = compute(frames, chunk_faces, report, seq.chunk_range(c).start)
                t0 = time.perf_counter()
                store.save(c, encode_layer_chunk(frames, results, patches))
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

    Faces the guards refuse are left untouched; ``report.extra["skipped"]`` counts them by reason.
    """
    opts = opts or SwapOptions()
    key = stage_key("swap", seq.key, faces_key(faces), stage_key(source.embedding.round(5).tolist()),
                    swapper.name, model_stamp(swapper), opts.to_json(), getattr(swapper, "settings", None))
    skipped: dict[str, int] = defaultdict(int)

    def compute(frames, chunk_faces, report, first):
        ctx = ClipContext(faces, first)
        res = swap_chunk(swapper, analyzer, frames, chunk_faces, source, opts, context=ctx, timings=report.seconds)
        for row in res.records:
            for rec in row:
                if rec.get("status") == "skipped":
                    skipped[rec.get("reason", "unknown")] += 1
        return res.patches, res.frames

    store, report = patch_stage(seq, faces, "swap", key, {"swapper": swapper.name, **opts.to_json()},
                                 store_root, hooks, compute)
    report.extra["skipped"] = dict(skipped)
    models = tuple(swapper.model_files()) + tuple(faces.analyzer.model_files() if faces.analyzer else ())
    return seq.with_layer(Layer("swap", str(store.dir.parent), key, models)), report


def restore_frames(seq: FrameSequence, faces: FaceSet, restorer, store_root: str, hooks: Hooks,
                   *, weight: float = 1.0, batch: int = 4) -> tuple[FrameSequence, StageReport]:
    """Restore the tracked faces of every frame (on top of any swap layer); adds a restore layer."""
    # ``batch`` is left out of the key: it changes speed and memory, not the result.
    key = stage_key("restore", seq.key, faces_key(faces), restorer.name, model_stamp(restorer),
                    round(float(weight), 4), getattr(restorer, "settings", None))
    restored = [0]

    def compute(frames, chunk_faces, report, _first):
        patches = _timed(report, "restore", restorer.restore, frames, chunk_faces, weight=weight, batch=batch,
                         check_interrupt=hooks.check_interrupt)
        restored[0] += sum(len(ps) for ps in patches)
        results = _timed(report, "paste", lambda: [apply_patches(f, ps) if ps else f for f, ps in zip(frames, patches)])
        return patches, results

    store, report = patch_stage(seq, faces, "restore", key, {"restorer": restorer.name, "weight": weight},
                                 store_root, hooks, compute)
    report.extra["faces_restored"] = restored[0]
    return seq.with_layer(Layer("restore", str(store.dir.parent), key, tuple(restorer.model_files()))), report


def revert_frames(seq: FrameSequence, frames: set[int], store_root: str, hooks: Hooks) -> FrameSequence:
    """Put the original pixels back on ``frames`` (the QA gate's "keep original" policy).

    Implemented as one more layer, so the frame count and every other frame stay as they were.
    """
    if not frames:
        return seq
    key = stage_key("revert", seq.key, sorted(frames))
    store = ChunkStore(store_root, key, {"stage": "revert", "frames": sorted(frames)})
    original = seq.original()
    for (c, before), (_, orig) in zip(seq.iter_chunks(), original.iter_chunks()):
        hooks.check_interrupt()
        if not store.has(c):
            rng = seq.chunk_range(c)
            after = [orig[k] if i in frames else before[k] for k, i in enumerate(rng)]
            store.save(c, encode_diff_chunk(before, after))
        hooks.progress(len(before))
    return seq.with_layer(Layer("revert", str(store.dir.parent), key))


def overlay_images(seq: FrameSequence, images: Sequence[np.ndarray], store_root: str, hooks: Hooks) -> FrameSequence:
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
    return seq.with_layer(Layer("images", str(store.dir.parent), key))
