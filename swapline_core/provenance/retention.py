"""Retention policy: the stage cache (and, if asked, Swapline's outputs) stop growing forever.

Why it lives in provenance/ and not video/: it decides what data derived from people is kept and
for how long, it works from the job index (jobs.py) and deletes whole jobs through the same code
as a data-subject request (delete.py), with a tombstone in the audit log; the chunk store is
only one of the places it cleans.

Policy file: ``<ComfyUI user dir>/swapline/retention.json`` (next to signing.json; outside
``user/default``, which ComfyUI's /userdata API lets any browser client rewrite). Defaults:

- cache: entries unused for 7 days are removed, and the least recently used beyond 20 GB. The
  cache is only for resuming and re-running; everything in it can be recomputed, and it holds
  face crops of real people that should not outlive their use.
- outputs: off. They are the deliverables; deleting them is the operator's explicit choice.
- never removed: an entry named by a job whose index was touched within ``lease_hours`` (a job
  running now or recently), any job running in this process, or an entry modified within
  ``min_idle_minutes`` (a job that has not recorded it yet, e.g. another process writing).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import SwaplineError
from . import jobs

GB = 1024 ** 3
DAY = 86400.0


class RetentionConfigError(SwaplineError):
    pass


@dataclass
class Limits:
    max_age_days: float | None = None
    max_size_gb: float | None = None


@dataclass
class Policy:
    cache: Limits = field(default_factory=lambda: Limits(7.0, 20.0))
    outputs: Limits = field(default_factory=Limits)
    lease_hours: float = 24.0
    min_idle_minutes: float = 30.0

    def to_json(self) -> dict:
        return asdict(self)


def policy_path(user_dir: str | os.PathLike) -> Path:
    return Path(user_dir) / "swapline" / "retention.json"


def load_policy(user_dir: str | os.PathLike) -> Policy:
    """The policy in the user directory, the defaults where there is none."""
    path = policy_path(user_dir)
    if not path.is_file():
        return Policy()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RetentionConfigError(f"{path}: not readable JSON ({exc}); fix or delete it "
                                   "(without it the defaults apply)") from exc
    return parse_policy(data, str(path))


def parse_policy(data, where: str = "retention policy") -> Policy:
    if not isinstance(data, dict):
        raise RetentionConfigError(f"{where}: must be a JSON object")
    known = {"cache", "outputs", "lease_hours", "min_idle_minutes"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise RetentionConfigError(f"{where}: unknown setting(s) {unknown}; known: {sorted(known)}")
    policy = Policy()
    for part in ("cache", "outputs"):
        if part in data:
            sub = data[part]
            if not isinstance(sub, dict) or set(sub) - {"max_age_days", "max_size_gb"}:
                raise RetentionConfigError(f"{where}: '{part}' must be an object with max_age_days and/or "
                                           "max_size_gb (a number, or null for no limit)")
            setattr(policy, part, Limits(*(_number(sub.get(k, getattr(getattr(policy, part), k)), f"{where}: "
                                                   f"{part}.{k}", allow_none=True)
                                          for k in ("max_age_days", "max_size_gb"))))
    for k in ("lease_hours", "min_idle_minutes"):
        if k in data:
            setattr(policy, k, _number(data[k], f"{where}: {k}", allow_none=False))
    return policy


def _number(value, what: str, allow_none: bool):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise RetentionConfigError(f"{what} must be a number >= 0{' or null' if allow_none else ''}, got {value!r}")
    return float(value)


@dataclass
class Entry:
    rel: str            # relative to the cache root, as recorded in job indexes
    path: Path
    size: int
    last_used: float


def cache_entries(cache_root: str | os.PathLike) -> list[Entry]:
    """Stage folders (<key>/) and the entries of kind folders (image-frames/<key>/, memory-video/<key>.nut)."""
    root = Path(cache_root)
    if not root.is_dir():
        return []
    out = []
    for child in sorted(root.iterdir()):
        if child.name.startswith("."):
            continue
        if child.is_dir() and not jobs.is_stage_name(child.name):
            out += [_entry(root, p) for p in sorted(child.iterdir()) if not p.name.startswith(".")]
        else:
            out.append(_entry(root, child))
    return out


def _entry(root: Path, path: Path) -> Entry:
    st = path.stat()
    size, last = (st.st_size if not path.is_dir() else 0), st.st_mtime
    if path.is_dir():
        for dirpath, _, files in os.walk(path):
            for f in files:
                try:
                    fs = os.stat(os.path.join(dirpath, f))
                except OSError:
                    continue       # removed while we looked (a finished temp file)
                size += fs.st_size
                last = max(last, fs.st_mtime)
    return Entry(path.relative_to(root).as_posix(), path, size, last)


def cache_report(cache_root: str | os.PathLike, output_dir: str | os.PathLike, policy: Policy,
                 now: float | None = None) -> dict:
    now = time.time() if now is None else now
    entries = cache_entries(cache_root)
    leased = jobs.leased_entries(output_dir, policy.lease_hours * 3600, now)
    return {"entries": len(entries), "bytes": sum(e.size for e in entries),
            "leased_entries": sum(1 for e in entries if e.rel in leased),
            "oldest_unused_days": round((now - min((e.last_used for e in entries), default=now)) / DAY, 2),
            "policy": policy.to_json()}


def sweep_cache(cache_root: str | os.PathLike, output_dir: str | os.PathLike, policy: Policy, *,
                now: float | None = None, reclaim_all: bool = False) -> dict:
    """Remove cache entries past the age or size limit (``reclaim_all``: every entry that may be
    removed), least recently used first; leased and recently modified entries are never touched."""
    with maintenance_lock(cache_root):
        return _sweep_cache(Path(cache_root), output_dir, policy, time.time() if now is None else now, reclaim_all)


def _sweep_cache(root: Path, output_dir, policy: Policy, now: float, reclaim_all: bool) -> dict:
    entries = cache_entries(root)
    limits = policy.cache
    lease_s = policy.lease_hours * 3600

    def protected(e: Entry) -> bool:
        return (e.rel in jobs.leased_entries(output_dir, lease_s, now)
                or now - e.last_used < policy.min_idle_minutes * 60)

    removed, kept_leased, freed = [], [], 0
    total = sum(e.size for e in entries)
    for e in sorted(entries, key=lambda e: e.last_used):
        too_old = limits.max_age_days is not None and now - e.last_used > limits.max_age_days * DAY
        too_big = limits.max_size_gb is not None and total > limits.max_size_gb * GB
        if not (reclaim_all or too_old or too_big):
            continue
        # checked again right before each removal: a job may have taken a lease meanwhile
        if protected(e):
            kept_leased.append(e.rel)
            continue
        remove_path(root, e.path)
        removed.append(e.rel)
        freed += e.size
        total -= e.size
    return {"removed": removed, "freed_bytes": freed, "kept_in_use": kept_leased, "bytes_left": total,
            "entries_left": len(entries) - len(removed)}


LOCK_NAME = ".swapline-maintenance.lock"


@contextlib.contextmanager
def maintenance_lock(cache_root: str | os.PathLike, timeout_s: float = 600.0):
    """One sweep or deletion at a time across threads and processes (ComfyUI's route threads,
    the sweep after each job, the delete CLI): an exclusive lock on a file in the cache root."""
    if getattr(_held, "depth", 0):          # a sweep deleting whole jobs: already ours
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    root = Path(cache_root)
    root.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    # Threads of this process queue on the thread lock; other processes on the file lock.
    while not _thread_lock.acquire(timeout=0.5):
        _check(deadline, root, timeout_s)
    try:
        with open(root / LOCK_NAME, "a+b") as f:
            while not _try_lock(f):
                _check(deadline, root, timeout_s)
                time.sleep(0.05)
            _held.depth = 1
            try:
                yield
            finally:
                _held.depth = 0
                _unlock(f)
    finally:
        _thread_lock.release()


_thread_lock = threading.Lock()
_held = threading.local()


def _check(deadline: float, root: Path, timeout_s: float) -> None:
    if time.monotonic() > deadline:
        raise SwaplineError(f"another Swapline sweep or deletion has held {root / LOCK_NAME} for "
                            f"{timeout_s:.0f} s; nothing was removed, try again later")


def _try_lock(f) -> bool:
    try:
        import fcntl
    except ImportError:                     # Windows
        import msvcrt
        try:
            msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _unlock(f) -> None:
    try:
        import fcntl
    except ImportError:
        import msvcrt
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
        return
    fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def remove_path(root: Path, path: Path) -> None:
    """Remove a file or folder; a folder is first renamed away so no reader sees it half-deleted."""
    if path.is_dir() and not path.is_symlink():
        trash = root / f".trash-{uuid.uuid4().hex}"
        os.replace(path, trash)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep_outputs(places, policy: Policy, *, now: float | None = None) -> dict:
    """Delete whole jobs (outputs, cache entries, face models; a tombstone each) past the output
    limits, oldest first. Off unless the policy sets a limit; only Swapline's recorded jobs."""
    limits = policy.outputs
    if limits.max_age_days is None and limits.max_size_gb is None:
        return {"deleted_jobs": []}
    with maintenance_lock(places.cache_root):
        return _sweep_outputs(places, policy, time.time() if now is None else now)


def _sweep_outputs(places, policy: Policy, now: float) -> dict:
    from .delete import delete_job, job_output_bytes

    limits = policy.outputs
    lease_s = policy.lease_hours * 3600
    running = jobs.active_jobs()
    idxs = sorted(jobs.all_indexes(places.output_dir), key=lambda i: i.mtime)
    sizes = {i.job_id: job_output_bytes(places, i) for i in idxs}
    total = sum(sizes.values())
    deleted = []
    for idx in idxs:
        if idx.job_id in running or now - idx.mtime < lease_s:
            continue
        too_old = limits.max_age_days is not None and now - idx.mtime > limits.max_age_days * DAY
        too_big = limits.max_size_gb is not None and total > limits.max_size_gb * GB
        if too_old or too_big:
            delete_job(places, idx.job_id, requested_by="retention policy", request_id=None,
                       reason="max_age_days" if too_old else "max_size_gb")
            deleted.append(idx.job_id)
            total -= sizes[idx.job_id]
    return {"deleted_jobs": deleted}
