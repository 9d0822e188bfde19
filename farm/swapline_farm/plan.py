"""Chunk plans: split a clip's frames into ranges that workers process independently.

Each chunk is ``count`` output frames from ``start``, plus ``preroll`` frames before ``start``
that the worker processes only so face tracking and temporal smoothing enter the chunk already
settled, then discards. Guarantees, tested on the sample clips and a generated clip with cuts:

- the chunks tile the clip: first starts at 0, each starts where the previous ended, the counts
  sum to the clip's exact frame count (``swapline_core.video.probe``: counted from the stream);
- with ``cut_aligned``, a boundary moves to a hard cut (``swapline_core.video.cuts``, the same
  detector Track Faces uses) that lies within ``chunk_frames / 4`` of where it would fall, so a
  worker's chunk starts a fresh shot instead of tracking across it;
- preroll never crosses a hard cut: frames of a previous shot tell the tracker nothing (it
  resets at the cut anyway) and would only cost time, so the preroll is cut back to the shot;
- a tail shorter than ``chunk_frames / 4`` joins the previous chunk rather than making a worker
  start up for a handful of frames.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from swapline_core.video import read as video_read
from swapline_core.video.cuts import CutDetector

CUT_WINDOW = 4             # a cut within chunk_frames / CUT_WINDOW of a boundary takes it
CUT_MIN_GAP = 4            # as Track Faces' default cut_min_gap, so both see the same cuts


@dataclass(frozen=True)
class ChunkSpec:
    job_id: str
    index: int
    start: int      # first output frame (source frame index)
    count: int      # output frames of this chunk
    preroll: int    # frames before `start` processed for tracking continuity, then discarded

    @property
    def chunk_id(self) -> str:
        """Content address of the chunk's output: the job's id (itself a content hash) and range."""
        raw = f"swapline-farm.chunk.v1\0{self.job_id}\0{self.start}\0{self.count}\0{self.preroll}"
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    @property
    def first(self) -> int:
        """First frame the worker decodes (the preroll's first)."""
        return self.start - self.preroll

    @property
    def end(self) -> int:
        return self.start + self.count

    def to_json(self) -> dict:
        return {"job_id": self.job_id, "index": self.index, "start": self.start, "count": self.count,
                "preroll": self.preroll, "chunk_id": self.chunk_id}

    @classmethod
    def from_json(cls, d: dict) -> ChunkSpec:
        return cls(d["job_id"], int(d["index"]), int(d["start"]), int(d["count"]), int(d["preroll"]))


def detect_cuts(clip: str | os.PathLike, min_gap: int = CUT_MIN_GAP, start: int = 0,
                count: int | None = None) -> list[int]:
    """Clip indices where a new shot starts within frames [start, start + count), streaming
    through them once (constant memory)."""
    det = CutDetector(min_gap)
    cuts: list[int] = []
    for batch in video_read.iter_chunks(clip, start, count, 1, 32):
        cuts += [start + c for c in det.feed([frame for _, frame in batch])]
    return cuts


def boundaries(n: int, chunk_frames: int, cuts: Sequence[int] = ()) -> list[int]:
    """Chunk starts plus ``n``: [0, b1, ..., n], strictly increasing (see the module docstring)."""
    if n <= 0:
        raise ValueError(f"cannot plan a clip of {n} frames")
    window = chunk_frames // CUT_WINDOW
    inner = sorted({int(c) for c in cuts if 0 < int(c) < n})
    out = [0]
    while True:
        prev = out[-1]
        nominal = prev + chunk_frames
        near = [c for c in inner if prev < c and abs(c - nominal) <= window]
        b = min(near, key=lambda c: (abs(c - nominal), c)) if near else nominal
        if b >= n:
            break
        if not near and n - b < window:
            break            # a short tail joins this chunk (a cut-aligned boundary always stays)
        out.append(b)
    out.append(n)
    return out


def preroll_for(start: int, preroll: int, cuts: Sequence[int]) -> int:
    """``preroll`` cut back so frames [start - p, start) hold no cut (a cut at ``start`` gives 0)."""
    p = min(preroll, start)
    shot = max((c for c in cuts if start - p < c <= start), default=None)
    return p if shot is None else start - shot


def plan_chunks(clip: Path, chunk_frames: int, preroll: int = 8, cut_aligned: bool = True, *,
                job_id: str = "", cuts: Sequence[int] | None = None, frame_count: int | None = None,
                start: int = 0, count: int = 0) -> list[ChunkSpec]:
    """The chunks of ``clip`` (see the module docstring for the guarantees).

    ``job_id`` goes into every ChunkSpec (and so into its chunk_id). ``cuts`` (clip indices)
    skips the cut scan; ``frame_count`` skips the probe. ``start``/``count`` (0 = to the end)
    plan only that range of the clip, as a job whose video node reads a range (stride 1): the
    chunks tile the range and no preroll reaches before ``start``, where a single-server run of
    the range starts cold too. Preroll is always kept off cuts, whether or not boundaries are
    cut-aligned.
    """
    if int(chunk_frames) < 1:
        raise ValueError(f"chunk_frames must be >= 1, got {chunk_frames}")
    if int(preroll) < 0:
        raise ValueError(f"preroll must be >= 0, got {preroll}")
    total = int(frame_count) if frame_count is not None else video_read.probe(clip).frame_count
    start = int(start)
    if not 0 <= start < total:
        raise ValueError(f"start frame {start} is outside {Path(clip).name} (frames 0..{total - 1})")
    n = total - start if int(count) <= 0 else min(int(count), total - start)
    if cuts is None:
        cuts = detect_cuts(clip, start=start, count=n)
    rel = sorted({int(c) - start for c in cuts if start < int(c) < start + n})    # range-relative
    bounds = boundaries(n, int(chunk_frames), rel if cut_aligned else ())
    return [ChunkSpec(job_id, i, start + s, e - s, preroll_for(s, int(preroll), rel))
            for i, (s, e) in enumerate(zip(bounds, bounds[1:]))]
