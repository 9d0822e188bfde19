"""Chunk planning (farm-exec's minimal version: no cut alignment; the lead takes farm-data's on merge)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ChunkSpec:
    job_id: str
    index: int
    start: int
    count: int
    preroll: int

    @property
    def chunk_id(self) -> str:
        return hashlib.sha256(f"{self.job_id}:{self.start}:{self.count}:{self.preroll}".encode()).hexdigest()[:16]


def plan_chunks(clip: Path, chunk_frames: int, preroll: int = 8, cut_aligned: bool = True, *,
                start: int = 0, count: int = 0) -> list[ChunkSpec]:
    from swapline_core.video.read import probe

    total = probe(str(clip)).frame_count
    end = total if count <= 0 else min(total, start + count)
    return [ChunkSpec("", i, s, min(chunk_frames, end - s), min(preroll, s - start))
            for i, s in enumerate(range(start, end, chunk_frames))]
