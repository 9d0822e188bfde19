"""The coordinator's bookkeeping: a queued chunk, a job in flight, a worker slot; job specs as JSON."""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Task:
    job_id: str
    chunk: object                 # plan.ChunkSpec
    rank: int
    seq: int
    attempts: list = field(default_factory=list)
    not_before: float = 0.0
    last_worker: str | None = None

    def order(self) -> tuple:
        return (self.rank, self.seq, self.chunk.index)


@dataclass
class JobRun:
    spec: object                  # jobs.JobSpec
    seq: int
    workflow: dict
    chunks: list
    files: dict
    done: dict = field(default_factory=dict)        # chunk index -> stored chunk file
    state: str = "queued"
    failures: Counter = field(default_factory=Counter)
    worker_seconds: float = 0.0
    error: str | None = None
    result: dict | None = None
    started_at: float | None = None


@dataclass
class Slot:
    name: str
    handle: object
    in_flight: int = 0
    up: bool = True
    misses: int = 0               # health checks in a row whose HTTP call failed
    peak: int = 0                 # most chunks it ever had in flight (backpressure, for tests and logs)


def spec_to_dict(spec) -> dict:
    return {k: (str(v) if isinstance(v, Path) else [str(x) for x in v] if k == "faces" else v)
            for k, v in dataclasses.asdict(spec).items()}


def spec_from_dict(d: dict):
    from .jobs import JobSpec

    names = {f.name for f in dataclasses.fields(JobSpec)}
    d = {k: v for k, v in d.items() if k in names}
    d.update(clip=Path(d["clip"]), faces=tuple(Path(f) for f in d["faces"]), workflow=Path(d["workflow"]))
    if d.get("destination"):
        d["destination"] = Path(d["destination"])
    return JobSpec(**d)
