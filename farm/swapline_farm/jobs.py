"""Job specs (farm-exec's minimal version of farm-data's module; the lead takes farm-data's on merge)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

PRIORITIES = ("rush", "normal", "bulk")


def _sha(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def job_id(clip, faces, workflow, settings, idempotency_key=None) -> str:
    if idempotency_key:
        return hashlib.sha256(f"key:{idempotency_key}".encode()).hexdigest()[:32]
    parts = [_sha(clip), [_sha(f) for f in faces], json.loads(Path(workflow).read_text()), settings]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    clip: Path
    faces: tuple
    workflow: Path
    inputs: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    priority: str = "normal"
    webhook: str | None = None
    destination: Path | None = None
    idempotency_key: str | None = None


def load_manifest(path) -> list[JobSpec]:
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    base = Path(path).parent
    defaults = data.get("defaults", {})
    out = []
    for raw in data["jobs"]:
        j = {**defaults, **raw}
        clip = (base / j["clip"]).resolve()
        faces = tuple((base / f).resolve() for f in (j.get("faces") or [j["face"]] if "face" in j else j["faces"]))
        wf = (base / j["workflow"]).resolve()
        # a setting naming a file next to the manifest (e.g. a LoadImage's image) becomes an absolute path
        settings = {k: str((base / v).resolve()) if isinstance(v, str) and (base / v).is_file() else v
                    for k, v in (j.get("settings") or {}).items()}
        out.append(JobSpec(job_id(clip, faces, wf, settings, j.get("idempotency_key")), clip, faces, wf,
                           dict(j.get("inputs") or {}), settings, j.get("priority", "normal"), j.get("webhook"),
                           Path(j["destination"]) if j.get("destination") else None, j.get("idempotency_key")))
    return out
