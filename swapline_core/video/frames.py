"""SWAPLINE_FRAMES: a lazy, chunked, disk-backed frame sequence.

A sequence is a source (video, animated image, image folder) and a frame range, plus the
stages applied so far as *patch layers*: each layer stores, per frame, only the pixels a stage
changed (a face region and which of its pixels changed). Materialising a chunk decodes the
source and replays the layers. Nothing ever holds the whole clip: memory is one chunk, disk is
proportional to the face area, and every layer is a resumable ChunkStore.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..provenance.method import StageRecord
from ..types import SwapPatch
from . import read as video_read
from .store import ChunkStore, stage_key

DEFAULT_CHUNK = 16
# A stage may decode the next chunk while it works on this one (parallel.read_ahead) when the
# extra chunk (or pair: QA holds both views) stays under this: 720p and 1080p chunks do, a 4K
# chunk (~400 MB of RGB) is read in turn.
READ_AHEAD_BYTES = 256 << 20

# Source frames decoded ahead of the chunk being processed (``iter_chunks(ahead=...)``), by
# (path, source index): mask smoothing reads a few frames past its chunk (its post-roll), which
# the next chunk decodes anyway; served from here, each is decoded once (on a 1080p-ish clip the
# post-roll's decode was a third of the mask stage's time). Only a live iteration fills it, and
# it removes its frames when it moves on or stops; they are the source's, never changed.
_AHEAD: dict[tuple[str, int], np.ndarray] = {}


@dataclass(frozen=True)
class Layer:
    name: str
    store_root: str
    key: str
    models: tuple = ()           # (role, path, sha256 loaded) of every model that shaped this layer
    stages: tuple = ()           # StageRecords: what ran, by which method, with which of the models

    def store(self) -> ChunkStore:
        return ChunkStore(self.store_root, self.key)

    def stage_records(self) -> tuple:
        """What made this layer; a layer built without records still says what is known of it."""
        if self.stages:
            return self.stages
        if self.name == "revert":
            return (StageRecord("revert", "original frames put back (QA policy)", "none"),)
        return (StageRecord(self.name, "method not recorded", "unknown", self.models),)


@dataclass(frozen=True)
class FrameSequence:
    path: str
    start: int
    count: int                   # frames in the sequence (after stride)
    stride: int
    fps: float
    width: int
    height: int
    has_audio: bool
    content_key: str
    chunk: int = DEFAULT_CHUNK
    layers: tuple[Layer, ...] = field(default_factory=tuple)

    @classmethod
    def open(cls, path: str, start: int = 0, count: int = 0, stride: int = 1,
             chunk: int = DEFAULT_CHUNK) -> FrameSequence:
        from ..provenance.jobs import note_path

        note_path(path)   # a clip kept in the stage cache (memory/image frames) is one of the job's entries
        info = video_read.probe(path)
        if info.frame_count == 0:
            raise video_read.VideoReadError(path, "the clip has no frames", 0)
        if start >= info.frame_count:
            raise ValueError(f"start frame {start} is past the end of {path} ({info.frame_count} frames)")
        available = len(range(start, info.frame_count, stride))
        n = available if count <= 0 else min(count, available)
        return cls(info.path, start, n, stride, info.fps / stride, info.width, info.height,
                   info.has_audio, info.content_key, chunk)

    @property
    def key(self) -> str:
        """Identity of this sequence's pixels: source content, range and every layer."""
        return stage_key(self.content_key, self.start, self.count, self.stride, self.chunk,
                         [layer.key for layer in self.layers])

    @property
    def n_chunks(self) -> int:
        return (self.count + self.chunk - 1) // self.chunk

    def chunk_range(self, c: int) -> range:
        return range(c * self.chunk, min((c + 1) * self.chunk, self.count))

    def reads_ahead(self, views: int = 1) -> bool:
        """Whether ``views`` decoded chunks fit READ_AHEAD_BYTES (see there)."""
        return views * self.chunk * self.width * self.height * 3 <= READ_AHEAD_BYTES

    def with_layer(self, layer: Layer) -> FrameSequence:
        return replace(self, layers=self.layers + (layer,))

    def original(self) -> FrameSequence:
        """The same frames before any stage changed them."""
        return replace(self, layers=())

    def model_files(self) -> list[tuple[str, str]]:
        return [m for layer in self.layers for m in layer.models]

    def stage_records(self) -> list[StageRecord]:
        """Every stage applied so far, in order (provenance states these)."""
        return [r for layer in self.layers for r in layer.stage_records()]

    def iter_chunk_pairs(self, first_chunk: int = 0, ahead: int = 0
                         ) -> Iterator[tuple[int, list[np.ndarray], list[np.ndarray]]]:
        """(chunk number, frames before any layer, frames with every layer applied), decoding the
        source once (QA compares both views). ``ahead``: source frames past each chunk decoded
        before it is handed out, which ``read_frames`` serves while that chunk is processed (a
        per-chunk stage's post-roll) and the next chunk then uses: each frame is decoded once
        instead of twice."""
        start = self.start + first_chunk * self.chunk * self.stride
        count = self.count - first_chunk * self.chunk
        stores = [layer.store() for layer in self.layers]
        if ahead > 0:
            batches = _chunks_ahead(self.path, video_read.iter_frames(self.path, start, count, self.stride),
                                    self.chunk, ahead)
        else:
            batches = video_read.iter_chunks(self.path, start, count, self.stride, self.chunk)
        for c, batch in enumerate(batches, start=first_chunk):
            originals = frames = [f for _, f in batch]
            for arrays in _layers_from_last_revert([store.load for store in stores], c, len(batch)):
                frames = apply_layer_chunk(frames, arrays, originals)   # copies a frame before changing it
            yield c, originals, frames

    def iter_chunks(self, first_chunk: int = 0, ahead: int = 0) -> Iterator[tuple[int, list[np.ndarray]]]:
        """(chunk number, frames with every layer applied): :meth:`iter_chunk_pairs` without the
        frames before the layers."""
        for c, _, frames in self.iter_chunk_pairs(first_chunk, ahead):
            yield c, frames

    def read_chunk(self, c: int) -> list[np.ndarray]:
        return next(self.iter_chunks(c))[1]

    def read_frames(self, indices: Sequence[int]) -> list[np.ndarray]:
        """A few frames by sequence index with every layer applied: the pre-/post-roll that
        per-chunk stages (mask smoothing) read around their chunk."""
        src = [self.start + int(i) * self.stride for i in indices]
        # frames an iteration decoded ahead (iter_chunks' ``ahead``) are copied, not decoded again
        have = {s: _AHEAD.get((self.path, s)) for s in src}
        missing = sorted({s for s in src if have[s] is None})
        decoded = dict(zip(missing, video_read.read_frames(self.path, missing))) if missing else {}
        frames = [decoded[s] if have[s] is None else have[s].copy() for s in src]
        stores = [layer.store() for layer in self.layers]
        out = []
        for i, f in zip(indices, frames):
            c, k = divmod(int(i), self.chunk)
            original = f
            for store in stores:
                arrays = store.load(c)
                f = apply_layer_chunk([f], _layer_frame(arrays, k), [original])[0]
            out.append(f)
        return out


def _layers_from_last_revert(loads, c: int, n: int) -> list[dict[str, np.ndarray]]:
    """Chunk ``c`` of each layer (``loads``: their stores' ``load``), last first until one puts
    all ``n`` frames back (``encode_revert_chunk``), returned in order: the layers under a whole
    reverted chunk change nothing, so they are neither read nor applied (a shot the QA gate put
    back is encoded from the source alone)."""
    out = []
    for load in reversed(loads):
        arrays = load(c)
        out.append(arrays)
        if "orig" in arrays and len(arrays["orig"]) == n:
            break
    return out[::-1]


# -- patch layers ---------------------------------------------------------------------------
def encode_layer_chunk(originals: Sequence[np.ndarray], results: Sequence[np.ndarray],
                       patches: Sequence[Sequence[SwapPatch]]) -> dict[str, np.ndarray]:
    """Store, per frame, the union region of its patches and exactly which pixels changed there."""
    arrays: dict[str, np.ndarray] = {"n": np.array(len(results))}
    for i, (orig, res, ps) in enumerate(zip(originals, results, patches)):
        if not ps:
            continue
        x0 = min(p.region[0] for p in ps)
        y0 = min(p.region[1] for p in ps)
        x1 = max(p.region[2] for p in ps)
        y1 = max(p.region[3] for p in ps)
        changed = _changed(res[y0:y1, x0:x1], orig[y0:y1, x0:x1])
        arrays[f"r{i}"] = np.array([x0, y0, x1, y1], np.int32)
        arrays[f"u{i}"] = _changed_only(res[y0:y1, x0:x1], changed)
        arrays[f"m{i}"] = np.packbits(changed)
    return arrays


def encode_diff_chunk(befores: Sequence[np.ndarray], afters: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """A layer chunk turning ``befores`` into ``afters`` (region = bounding box of the change)."""
    arrays: dict[str, np.ndarray] = {"n": np.array(len(afters))}
    for i, (b, a) in enumerate(zip(befores, afters)):
        changed = _changed(a, b)
        if not changed.any():
            continue
        ys, xs = np.nonzero(changed)
        x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
        arrays[f"r{i}"] = np.array([x0, y0, x1, y1], np.int32)
        arrays[f"u{i}"] = _changed_only(a[y0:y1, x0:x1], changed[y0:y1, x0:x1])
        arrays[f"m{i}"] = np.packbits(changed[y0:y1, x0:x1])
    return arrays


def encode_revert_chunk(n: int, reverted: Sequence[int]) -> dict[str, np.ndarray]:
    """A layer chunk of ``n`` frames that puts the source's own pixels back on the frames at
    ``reverted`` (chunk positions): a list, no pixels. A diff against the layers before it would
    hold the same result but need both views decoded and every changed pixel stored (the QA
    gate's revert of a failed 300-frame 720p clip took 2.5 s that way)."""
    return {"n": np.array(int(n)), "orig": np.asarray(sorted(int(k) for k in reverted), np.int32)}


def _changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where two H x W x C images differ, as a bool map: the channels OR-ed as slices, about 10x
    faster than ``np.any(a != b, axis=2)`` on a 720p frame (13 ms, a reverted 300-frame clip's
    4 s)."""
    ne = a != b
    out = ne[..., 0].copy()
    for k in range(1, ne.shape[2]):
        out |= ne[..., k]
    return out


def _changed_only(pixels: np.ndarray, changed: np.ndarray) -> np.ndarray:
    """``pixels`` with the unchanged ones zeroed, each row then stored as its difference from the
    row above (modulo 256, PNG's "Up" filter; ``_pixels`` undoes it exactly). Replay takes only the
    changed pixels; zeros and a face's row-to-row differences deflate well: a 720p talking head's
    layer 0.14 -> ~0.09 MB per frame, at the raw bytes' encoding time."""
    out = pixels.copy()
    out[~changed] = 0
    out[1:] -= out[:-1].copy()
    return out


def _pixels(arrays: dict[str, np.ndarray], i: int) -> np.ndarray:
    """Frame ``i``'s layer pixels: "u" rows as stored by ``_changed_only``, "p" raw (chunks
    written before the filter: a resumed cache holds both)."""
    if f"u{i}" in arrays:
        return np.cumsum(arrays[f"u{i}"], axis=0, dtype=np.uint8)
    return arrays[f"p{i}"]


def _layer_frame(arrays: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    """Frame ``k`` of a layer chunk as a one-frame chunk: its region "r", pixels ("u" filtered or
    "p" raw, see ``_pixels``) and changed mask "m", whatever this chunk's version wrote."""
    one = {"n": np.array(1), **{f"{p}0": arrays[f"{p}{k}"] for p in "rupm" if f"{p}{k}" in arrays}}
    if "orig" in arrays:
        one["orig"] = np.asarray([0] if k in set(arrays["orig"].tolist()) else [], np.int32)
    return one


def apply_layer_chunk(frames: Sequence[np.ndarray], arrays: dict[str, np.ndarray],
                      originals: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """``frames`` with one layer chunk applied. ``originals``: the same frames before any layer,
    which a revert chunk (``encode_revert_chunk``) puts back."""
    reverted = set(arrays["orig"].tolist()) if "orig" in arrays else set()
    if reverted and originals is None:
        raise ValueError("this layer chunk puts original frames back: pass the frames before any layer")
    out = []
    for i, frame in enumerate(frames):
        if i in reverted:
            out.append(originals[i])
            continue
        if f"r{i}" not in arrays:
            out.append(frame)
            continue
        x0, y0, x1, y1 = (int(v) for v in arrays[f"r{i}"])
        h, w = y1 - y0, x1 - x0
        changed = np.unpackbits(arrays[f"m{i}"])[: h * w].reshape(h, w, 1).view(bool)
        f = frame.copy()
        # copyto with a broadcast mask: the same pixels as boolean indexing, without gathering them
        np.copyto(f[y0:y1, x0:x1], _pixels(arrays, i), where=changed)
        out.append(f)
    return out


def layer_mask(arrays: dict[str, np.ndarray], i: int, hw: tuple[int, int]) -> np.ndarray:
    m = np.zeros(hw, np.float32)
    if f"r{i}" in arrays:
        x0, y0, x1, y1 = (int(v) for v in arrays[f"r{i}"])
        h, w = y1 - y0, x1 - x0
        m[y0:y1, x0:x1] = np.unpackbits(arrays[f"m{i}"])[: h * w].reshape(h, w)
    return m


def _chunks_ahead(path: str, frames, chunk: int, ahead: int):
    """``video_read.iter_chunks`` over ``frames`` ((index, frame) pairs), with up to ``ahead``
    frames past each chunk decoded before the chunk is yielded and left in ``_AHEAD`` while it
    is processed. A decoding fault is raised where ``iter_chunks`` would raise it: when the
    chunk holding the bad frame is asked for, after every whole chunk before it."""
    it = iter(frames)
    buf: list = []
    err: Exception | None = None
    done = False
    try:
        while True:
            while not done and len(buf) < chunk + ahead:
                try:
                    item = next(it, None)
                except Exception as e:            # noqa: BLE001 - re-raised in its chunk's turn
                    err, done = e, True
                    break
                if item is None:
                    done = True
                else:
                    buf.append(item)
            if err is not None and len(buf) < chunk:
                raise err
            if not buf:
                return
            batch, buf = buf[:chunk], buf[chunk:]
            for i, f in buf:
                _AHEAD[(path, i)] = f
            yield batch
            for i, _ in buf:
                _AHEAD.pop((path, i), None)
    finally:
        for i, _ in buf:
            _AHEAD.pop((path, i), None)
