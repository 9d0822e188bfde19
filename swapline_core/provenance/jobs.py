"""Job index and cache leases: what each job produced and used, so it can be found and deleted.

One append-only file per job, ``<output_dir>/swapline_jobs/<job_id>.jsonl``, one JSON line per
fact: a cache entry it used (``cache``, relative to the cache root), a file it wrote under the
output folder (``output``), a face model file it saved (``face_model``), the source-image hashes
of the face models it ran with (``sources``). Why a file per job and not a line in the audit log:
deleting a job removes its index with its files, while the audit log is never rewritten.

The index doubles as the job's *lease* on its cache entries: it is touched whenever the job
starts a node or uses an entry, and the retention sweeper never removes an entry named by an
index touched within the lease window, nor one used by a job running in this process. Binding a
job is done by the ComfyUI layer (``bound``); the core records through ``note_*``, which do
nothing outside a job, so core code and tests run unchanged without one.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SwaplineError

JOBS_DIRNAME = "swapline_jobs"
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar("swapline_job", default=None)
_active_lock = threading.Lock()
_active: dict[str, int] = {}          # job id -> nodes of it running now in this process
# The host's queue (ComfyUI: prompts queued or running), set by the ComfyUI layer: a prompt is a
# job from queueing to its last output, not only while one of its Swapline nodes executes (a
# delete between two nodes removed the cache the next node was about to read).
_queue_probe: list = []


def check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not _JOB_ID.match(job_id):
        raise SwaplineError(f"job id {job_id!r} is not a valid job id (letters, digits, '-', '_', '.'; "
                            "the prompt id ComfyUI returned for the job)")
    return job_id


def jobs_dir(output_dir: str | os.PathLike) -> Path:
    return Path(output_dir) / JOBS_DIRNAME


def index_path(output_dir: str | os.PathLike, job_id: str) -> Path:
    return jobs_dir(output_dir) / f"{check_job_id(job_id)}.jsonl"


@dataclass
class JobContext:
    job_id: str
    output_dir: Path
    cache_root: Path
    _seen: set = field(default_factory=set)

    def __post_init__(self):
        check_job_id(self.job_id)
        self.output_dir = Path(os.path.realpath(self.output_dir))
        self.cache_root = Path(os.path.realpath(self.cache_root))

    @property
    def index(self) -> Path:
        return index_path(self.output_dir, self.job_id)

    def record(self, **fact) -> None:
        """Append one fact once per job (the index only grows while the job runs)."""
        token = json.dumps(fact, sort_keys=True)
        if token in self._seen:
            self.touch()
            return
        self._seen.add(token)
        self.index.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps({"t": time.time(), **fact}, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.index, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def touch(self) -> None:
        """Renew the lease: the index's mtime is the job's last sign of life."""
        self.index.parent.mkdir(parents=True, exist_ok=True)
        with open(self.index, "ab"):
            pass
        os.utime(self.index)

    def cache_entry(self, path: str | os.PathLike) -> str | None:
        return entry_of(self.cache_root, path)


_last: JobContext | None = None


def context_for(job_id: str, output_dir: str | os.PathLike, cache_root: str | os.PathLike) -> JobContext:
    """The job's context, the same object for every node of the running job, so each fact is
    written to its index once."""
    global _last
    with _active_lock:
        ctx = _last
        if (ctx is None or ctx.job_id != job_id or ctx.output_dir != Path(os.path.realpath(output_dir))
                or ctx.cache_root != Path(os.path.realpath(cache_root))):
            ctx = _last = JobContext(job_id, output_dir, cache_root)
        return ctx


def entry_of(cache_root: str | os.PathLike, path: str | os.PathLike) -> str | None:
    """The cache entry ``path`` belongs to, relative to the root ("<key>" for a stage folder,
    "<kind>/<name>" for the kinds of folder that hold many entries), or None outside the cache."""
    root, p = os.path.realpath(cache_root), os.path.realpath(path)
    if p == root or os.path.commonpath([p, root]) != root:
        return None
    parts = Path(os.path.relpath(p, root)).parts
    if is_stage_name(parts[0]) or len(parts) == 1:
        return parts[0]
    return f"{parts[0]}/{parts[1]}"


def is_stage_name(name: str) -> bool:
    """Stage folders are named by a 24-hex-digit key (video.store.stage_key)."""
    return len(name) == 24 and all(c in "0123456789abcdef" for c in name)


def current() -> JobContext | None:
    return _current.get()


@contextlib.contextmanager
def bound(ctx: JobContext | None):
    """Run the block as part of job ``ctx`` (None: no job, nothing is recorded)."""
    if ctx is None:
        yield None
        return
    token = _current.set(ctx)
    with _active_lock:
        _active[ctx.job_id] = _active.get(ctx.job_id, 0) + 1
    try:
        ctx.touch()
        yield ctx
    finally:
        with _active_lock:
            _active[ctx.job_id] -= 1
            if not _active[ctx.job_id]:
                del _active[ctx.job_id]
        _current.reset(token)


def set_queue_probe(probe) -> None:
    """``probe()`` returns the ids of jobs queued or running in the host (None: no host queue)."""
    with _active_lock:
        _queue_probe[:] = [probe] if probe is not None else []


def active_jobs() -> set[str]:
    """Jobs that must not be deleted now: running a node in this process, or queued or running in
    the host's queue. A queue that cannot be read is an error, not an empty queue."""
    with _active_lock:
        out = set(_active)
        probes = list(_queue_probe)
    for probe in probes:
        try:
            out |= {str(j) for j in probe()}
        except Exception as exc:
            raise SwaplineError(f"cannot read the server's queue to tell which jobs are running ({exc}); "
                                "nothing was deleted, try again") from exc
    return out


def note_cache_use(path: str | os.PathLike) -> None:
    """A cache entry is being used: mark it recently used (the sweeper removes least recently
    used entries first) and, inside a job, record it in the job's index (its lease)."""
    with contextlib.suppress(OSError):
        os.utime(path)
    ctx = _current.get()
    if ctx is None:
        return
    entry = ctx.cache_entry(path)
    if entry is not None:
        ctx.record(cache=entry)


def note_path(path: str | os.PathLike) -> None:
    """``path`` is being read: if it lies in the running job's cache, it is one of its entries.
    (Anything else, e.g. the user's input clip, is left alone: not even its mtime changes.)"""
    ctx = _current.get()
    entry = ctx.cache_entry(path) if ctx is not None else None
    if entry is not None:
        with contextlib.suppress(OSError):
            os.utime(ctx.cache_root / entry)
        ctx.record(cache=entry)


def note_face_model(path: str | os.PathLike) -> None:
    ctx = _current.get()
    if ctx is not None:
        ctx.record(face_model=os.path.realpath(path))


def note_output(relpath: str) -> None:
    """A file the job wrote, relative to the output folder."""
    ctx = _current.get()
    if ctx is not None:
        ctx.record(output=relpath.replace(os.sep, "/"))


def note_sources(values) -> None:
    """Record the source-image hashes of every face model among ``values`` (duck-typed: the
    ``source_sha256`` list a face model's metadata carries)."""
    ctx = _current.get()
    if ctx is None:
        return
    for v in values:
        meta = getattr(v, "metadata", None)
        hashes = meta.get("source_sha256") if isinstance(meta, dict) else None
        if isinstance(hashes, list) and hashes:
            ctx.record(sources=sorted(str(h) for h in hashes))


@dataclass
class JobIndex:
    job_id: str
    path: Path
    mtime: float
    cache: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    face_models: list[str] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)


def read_index(path: str | os.PathLike) -> JobIndex:
    path = Path(path)
    idx = JobIndex(path.stem, path, path.stat().st_mtime)
    for raw in path.read_bytes().split(b"\n"):
        try:
            fact = json.loads(raw) if raw.strip() else None
        except ValueError:
            continue             # a torn line from a crash: the rest of the index still counts
        if not isinstance(fact, dict):
            continue
        for key, dest in (("cache", idx.cache), ("output", idx.outputs), ("face_model", idx.face_models)):
            if isinstance(fact.get(key), str) and fact[key] not in dest:
                dest.append(fact[key])
        if isinstance(fact.get("sources"), list):
            idx.sources.update(str(h) for h in fact["sources"])
    return idx


def all_indexes(output_dir: str | os.PathLike) -> list[JobIndex]:
    folder = jobs_dir(output_dir)
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.glob("*.jsonl")):
        with contextlib.suppress(OSError):
            out.append(read_index(p))
    return out


def leased_entries(output_dir: str | os.PathLike, lease_s: float, now: float | None = None) -> dict[str, set[str]]:
    """Cache entry -> the jobs holding a lease on it (index touched within ``lease_s``, or a
    job running in this process)."""
    now = time.time() if now is None else now
    running = active_jobs()
    out: dict[str, set[str]] = {}
    folder = jobs_dir(output_dir)
    for p in sorted(folder.glob("*.jsonl")) if folder.is_dir() else ():
        try:   # only fresh indexes are read: the sweeper asks again before every removal
            if p.stem in running or now - p.stat().st_mtime < lease_s:
                for e in read_index(p).cache:
                    out.setdefault(e, set()).add(p.stem)
        except OSError:
            continue
    return out
