"""Delete by job (data-subject requests): a job's outputs, cache entries and saved face models go;
the audit log gains a tombstone line and is never rewritten.

What a job produced comes from its index (jobs.py) and, for jobs that predate the index, from
its audit log lines (the ``output`` file each signed job names). A cache entry another job also
used is kept and reported, so deleting one job never breaks another; deleting by source hash
deletes every job made from that source together, so entries shared only among them go too.

CLI (no ComfyUI needed; stop the server first or expect its node cache to be reset)::

    python -m swapline_core.provenance.delete --comfy-dir /path/to/ComfyUI \\
        --job-id 8f0c...  --requested-by "privacy@example.com" --request-id DSR-1234
    ... --source-sha256 <hash from a face model's metadata or the audit log's input_sha256>
    ... --face-model my_face.safetensors
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SwaplineError
from . import audit_log, jobs
from .retention import maintenance_lock, remove_path


class UnknownJobError(SwaplineError):
    pass


class JobRunningError(SwaplineError):
    pass


class DeletionIncompleteError(SwaplineError):
    """A removal failed halfway: the intent record says what was planned, nothing is lost from the
    record, and repeating the same request finishes the deletion."""


DELETION_STARTED = "deletion_started"


@dataclass
class Places:
    output_dir: Path
    cache_root: Path
    face_model_dirs: list[Path] = field(default_factory=list)

    def __post_init__(self):
        self.output_dir = Path(os.path.realpath(self.output_dir))
        self.cache_root = Path(os.path.realpath(self.cache_root))
        self.face_model_dirs = [Path(os.path.realpath(d)) for d in self.face_model_dirs]

    @classmethod
    def under_comfy(cls, base: str | os.PathLike) -> Places:
        """ComfyUI's default layout (--base-directory): output/, output/swapline_cache, models/swapline/faces."""
        base = Path(base)
        return cls(base / "output", base / "output" / "swapline_cache", [base / "models" / "swapline" / "faces"])


def _inside(path: Path, root: Path) -> bool:
    return path != root and os.path.commonpath([path, root]) == str(root)


def _output_file(places: Places, rel: str) -> Path | None:
    """An output file the job named, or None if the name leads anywhere it must not (outside the
    output folder, into the cache or job index, or the audit log itself)."""
    p = Path(os.path.realpath(places.output_dir / rel))
    if not _inside(p, places.output_dir) or _inside(p, places.cache_root):
        return None
    if p == audit_log.audit_log_path(places.output_dir) or _inside(p, jobs.jobs_dir(places.output_dir)):
        return None
    return p


def job_output_bytes(places: Places, idx: jobs.JobIndex) -> int:
    total = 0
    for rel in idx.outputs:
        p = _output_file(places, rel)
        if p is not None and p.is_file():
            total += p.stat().st_size
    return total


def delete_job(places: Places, job_id: str, *, requested_by: str, request_id: str | None,
               reason: str = "data-subject request", together: frozenset = frozenset()) -> dict:
    """Delete one job's files and append its tombstone; ``together``: jobs deleted in the same
    request (their use of a cache entry does not keep it).

    Refused while the job is queued or running (``jobs.active_jobs``). One deletion or sweep at a
    time (``retention.maintenance_lock``). An intent record goes into the audit log before anything
    is removed and the tombstone after, so a deletion that stops halfway is visible there; the
    job's index is removed last, so the same request run again resumes it."""
    with maintenance_lock(places.cache_root):
        return _delete_job(places, job_id, requested_by=requested_by, request_id=request_id, reason=reason,
                           together=together)


def _delete_job(places: Places, job_id: str, *, requested_by: str, request_id: str | None,
                reason: str, together: frozenset) -> dict:
    jobs.check_job_id(job_id)
    if job_id in jobs.active_jobs():
        raise JobRunningError(f"job '{job_id}' is running now: interrupt it or wait for it to finish, then delete it")
    if not requested_by:
        raise SwaplineError("say who requested the deletion (requested_by): it goes into the tombstone")
    index_file = jobs.index_path(places.output_dir, job_id)
    records = audit_log.job_records(places.output_dir, job_id)
    tomb = [r for r in records if r.get("kind") == audit_log.TOMBSTONE]
    if not index_file.is_file():
        if tomb:
            raise UnknownJobError(f"job '{job_id}' was already deleted ({tomb[-1].get('time_utc')}, request "
                                  f"{tomb[-1].get('request_id')!r}); nothing was deleted now")
        if not records:
            raise UnknownJobError(
                f"no Swapline job '{job_id}' is recorded in {places.output_dir}: neither "
                f"{jobs.JOBS_DIRNAME}/{job_id}.jsonl nor a line of {audit_log.AUDIT_FILENAME} names it. "
                "Check the id (the prompt id ComfyUI returned for the job). Nothing was deleted.")
    idx = jobs.read_index(index_file) if index_file.is_file() else jobs.JobIndex(job_id, index_file, 0.0)
    outputs = list(dict.fromkeys(idx.outputs + [r["output"] for r in records if isinstance(r.get("output"), str)]))
    deleted: dict[str, list] = {"outputs": [], "cache": [], "face_models": []}
    kept: dict[str, object] = {"cache_shared": {}, "refused": [], "already_gone": []}
    audit_log.append_record(audit_log.audit_log_path(places.output_dir), {
        "schema": audit_log.SCHEMA, "kind": DELETION_STARTED, "job_id": job_id, "time_utc": audit_log.utc_now(),
        "requested_by": requested_by, "request_id": request_id, "reason": reason,
        "planned": {"outputs": outputs, "cache": list(idx.cache),
                    "face_models": [os.path.basename(f) for f in idx.face_models]}})
    try:
        _remove(places, job_id, idx, outputs, together, deleted, kept)
    except OSError as exc:
        done = {k: len(v) for k, v in deleted.items()}
        raise DeletionIncompleteError(
            f"deleting job '{job_id}' stopped halfway: {type(exc).__name__}: {exc.strerror or exc} "
            f"({os.path.basename(str(exc.filename or ''))}). Removed so far: {done}. The audit log records "
            "the attempt; fix the cause (permissions, a file held open) and send the same request again to "
            "finish it") from None
    index_file.unlink(missing_ok=True)
    if not idx.cache and not idx.mtime:
        kept["note"] = "the job predates the job index: only the outputs its audit lines name were known"
    audit_log.append_tombstone(places.output_dir, job_id=job_id, deleted=deleted, requested_by=requested_by,
                               request_id=request_id, reason=reason, kept=kept)
    return {"job_id": job_id, "deleted": deleted, "kept": kept}


def _remove(places: Places, job_id: str, idx, outputs: list, together: frozenset, deleted: dict, kept: dict) -> None:
    for rel in outputs:
        p = _output_file(places, rel)
        if p is None:
            kept["refused"].append(rel)
        elif p.is_file():
            p.unlink()
            deleted["outputs"].append(rel)
        else:
            kept["already_gone"].append(rel)
    others: dict[str, set] = {}
    for other in jobs.all_indexes(places.output_dir):
        if other.job_id != job_id and other.job_id not in together:
            for e in other.cache:
                others.setdefault(e, set()).add(other.job_id)
    for rel in idx.cache:
        path = places.cache_root / rel
        if rel in others:
            kept["cache_shared"][rel] = sorted(others[rel])
        elif jobs.entry_of(places.cache_root, path) != rel:
            kept["refused"].append(rel)
        elif path.exists():
            remove_path(places.cache_root, path)
            deleted["cache"].append(rel)
    for fm in idx.face_models:
        if _delete_face_model(places, Path(fm)):
            deleted["face_models"].append(os.path.basename(fm))


def _delete_face_model(places: Places, path: Path) -> bool:
    p = Path(os.path.realpath(path))
    if p.suffix != ".safetensors" or not any(_inside(p, d) for d in places.face_model_dirs):
        return False
    if p.is_file():
        p.unlink()
        return True
    return False


def face_model_sources(path: str | os.PathLike) -> list[str]:
    """The ``source_sha256`` list in a face model's safetensors metadata (header only, no tensors)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100_000_000:
            raise SwaplineError(f"{path}: not a safetensors face model (header of {n} bytes)")
        header = json.loads(f.read(n))
    meta = json.loads((header.get("__metadata__") or {}).get("metadata", "{}"))
    return [str(h) for h in meta.get("source_sha256", [])] if isinstance(meta, dict) else []


def _face_models(places: Places) -> list[Path]:
    return [p for d in places.face_model_dirs if d.is_dir() for p in sorted(d.rglob("*.safetensors"))]


def delete_by_source(places: Places, sha256: str, *, requested_by: str, request_id: str | None,
                     reason: str = "data-subject request") -> dict:
    """Every job made from this source (a face model's source image hash, or a target's
    input_sha256 in the audit log) and every saved face model built from it."""
    with maintenance_lock(places.cache_root):
        return _delete_by_source(places, sha256, requested_by=requested_by, request_id=request_id, reason=reason)


def _delete_by_source(places: Places, sha256: str, *, requested_by: str, request_id: str | None,
                      reason: str) -> dict:
    sha256 = sha256.strip().lower()
    ids = [i.job_id for i in jobs.all_indexes(places.output_dir) if sha256 in i.sources]
    done = {r.get("job_id") for r in audit_log.job_records(places.output_dir) if r.get("kind") == audit_log.TOMBSTONE}
    ids += [r["job_id"] for r in audit_log.job_records(places.output_dir)
            if sha256 in (r.get("input_sha256"), r.get("target_sha256")) and isinstance(r.get("job_id"), str)
            and (r["job_id"] not in done or jobs.index_path(places.output_dir, r["job_id"]).is_file())]
    ids = list(dict.fromkeys(ids))
    models = [p for p in _face_models(places) if sha256 in _sources_or_none(p)]
    if not ids and not models:
        raise UnknownJobError(f"no job and no saved face model in {places.output_dir} or "
                              f"{[str(d) for d in places.face_model_dirs]} is recorded as made from source "
                              f"{sha256}. Nothing was deleted.")
    together = frozenset(ids)
    results = [delete_job(places, j, requested_by=requested_by, request_id=request_id, reason=reason,
                          together=together) for j in ids]
    removed = [p.name for p in models if _delete_face_model(places, p)]
    if removed:
        audit_log.append_tombstone(places.output_dir, job_id=None, deleted={"face_models": removed},
                                   requested_by=requested_by, request_id=request_id, reason=reason,
                                   source_sha256=sha256)
    return {"source_sha256": sha256, "jobs": results, "face_models": removed}


def _sources_or_none(path: Path) -> list[str]:
    try:
        return face_model_sources(path)
    except (OSError, ValueError, SwaplineError, struct.error):
        return []          # not ours or damaged: never matched, never deleted


def delete_by_face_model(places: Places, name: str, **kw) -> dict:
    """A saved face model (file name in a face model folder): everything made from its sources."""
    with maintenance_lock(places.cache_root):
        return _delete_by_face_model(places, name, **kw)


def _delete_by_face_model(places: Places, name: str, **kw) -> dict:
    matches = [p for p in _face_models(places) if p.name in (name, f"{name}.safetensors")]
    if not matches:
        raise UnknownJobError(f"no face model '{name}' in {[str(d) for d in places.face_model_dirs]}. "
                              "Nothing was deleted.")
    out = {"face_model": matches[0].name, "sources": []}
    for sha in face_model_sources(matches[0]):
        try:
            out["sources"].append(delete_by_source(places, sha, **kw))
        except UnknownJobError:
            continue           # the model itself is removed below
    if matches[0].exists() and _delete_face_model(places, matches[0]):
        audit_log.append_tombstone(places.output_dir, job_id=None, deleted={"face_models": [matches[0].name]},
                                   requested_by=kw["requested_by"], request_id=kw.get("request_id"),
                                   reason=kw.get("reason", "data-subject request"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m swapline_core.provenance.delete", description=__doc__.split("\n")[0])
    ap.add_argument("--comfy-dir", help="ComfyUI base directory (output/, models/swapline/faces under it)")
    ap.add_argument("--output-dir", help="ComfyUI's output folder (instead of --comfy-dir)")
    ap.add_argument("--cache-dir", help="the stage cache (default <output>/swapline_cache)")
    ap.add_argument("--face-models-dir", action="append", default=[], help="a face model folder (repeatable)")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--job-id")
    what.add_argument("--source-sha256")
    what.add_argument("--face-model")
    ap.add_argument("--requested-by", required=True, help="who asked (recorded in the tombstone)")
    ap.add_argument("--request-id", help="the request's reference, e.g. a ticket number")
    ap.add_argument("--reason", default="data-subject request")
    a = ap.parse_args(argv)
    if not (a.comfy_dir or a.output_dir):
        ap.error("give --comfy-dir or --output-dir")
    out = Path(a.output_dir) if a.output_dir else Path(a.comfy_dir) / "output"
    faces = a.face_models_dir or ([Path(a.comfy_dir) / "models" / "swapline" / "faces"] if a.comfy_dir else [])
    places = Places(out, Path(a.cache_dir) if a.cache_dir else out / "swapline_cache", faces)
    if not places.output_dir.is_dir():
        print(f"error: output folder {places.output_dir} does not exist: give ComfyUI's base folder "
              "(--comfy-dir) or its output folder (--output-dir). Nothing was deleted.", file=sys.stderr)
        return 2
    kw = {"requested_by": a.requested_by, "request_id": a.request_id, "reason": a.reason}
    try:
        if a.job_id:
            result = delete_job(places, a.job_id, **kw)
        elif a.source_sha256:
            result = delete_by_source(places, a.source_sha256, **kw)
        else:
            result = delete_by_face_model(places, a.face_model, **kw)
    except SwaplineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
