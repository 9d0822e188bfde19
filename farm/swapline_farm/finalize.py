"""Finalize a stitched job (farm-exec's minimal version: no QA, no signing; the lead takes
farm-data's on merge)."""
from __future__ import annotations

import shutil
from pathlib import Path


def finalize_job(job, stitched: Path, out_dir: Path, signing: dict | None, **_) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / f"{job.job_id}.mp4"
    shutil.copyfile(stitched, dest)
    return {"output": str(dest), "qa": None, "signed": False}
