"""Shared by the farm tests (a uniquely named module: `conftest` clashes with tests/conftest.py
when both suites run in one pytest)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import ray  # noqa: F401  (the farm tests fail, not skip, without Ray)

FARM = Path(__file__).resolve().parents[1]
REPO = FARM.parent
for p in (str(REPO), str(FARM)):
    if p not in sys.path:
        sys.path.insert(0, p)

from swapline_farm.jobs import JobSpec, job_id  # noqa: E402

COMFY = REPO / ".comfy" / "ComfyUI"
SAMPLES = REPO / "assets" / "samples"
ARTIFACTS = REPO / "out" / "test-artifacts" / "farm"


def passthrough_workflow() -> dict:
    """The smallest video workflow: load the chunk's frames and save them (decode + encode only)."""
    return {"1": {"class_type": "SwaplineLoadVideo",
                  "inputs": {"video": "clip.mp4", "start": 0, "count": 0, "stride": 1, "chunk": 4}},
            "2": {"class_type": "SwaplineSaveVideo",
                  "inputs": {"frames": ["1", 0], "filename_prefix": "x", "crf": 18, "preset": "ultrafast",
                             "audio": False}}}


def make_job(clip, workflow, faces=(), settings=None, priority="normal", key=None, inputs=None) -> JobSpec:
    settings = dict(settings or {})
    faces = tuple(Path(f) for f in faces)
    return JobSpec(job_id(clip, faces, workflow, settings, key), Path(clip), faces, Path(workflow),
                   dict(inputs or {}), settings, priority, None, None, key)




def ledger_rows(coord) -> list[dict]:
    """Every line of a coordinator's job ledger (append-only JSONL, as the contract says)."""
    path = Path(coord.work_dir) / "jobs.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
