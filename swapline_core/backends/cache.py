"""The one global Swapline keeps: loaded models, keyed by file identity and settings.

ComfyUI re-runs a loader node whenever its inputs change; a clip processed chunk by chunk
must not reload a 500 MB model per chunk, and an edited file on disk must be picked up.
A model's identity is its path, size and mtime plus the sha256 of the bytes that were loaded:
provenance must name the weights that ran, not whatever file sits at that path at signing time
(issue 18: a swapper replaced while the server ran was recorded by the new file's hash).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

from ..provenance.hashing import sha256_file
from ..settings import model_cache_mb

T = TypeVar("T")
_CACHE: dict[tuple, object] = {}          # least recently used first
_SIZES: dict[tuple, int] = {}             # key -> bytes of the weight files it loaded
_LOCK = threading.Lock()
# Models are evicted by the bytes of their weight files (what an ONNX session or a torch module
# holds in memory, to within its runtime's overhead), least recently used first: eight slots held
# eight 500 MB swappers as readily as eight 1 MB mask models. The model just loaded always stays.
# SWAPLINE_MODEL_CACHE_MB overrides the budget (a quarter of physical RAM, at least 2 GiB).
MIN_BUDGET = 2 << 30
MAX_ENTRIES = 64                          # many tiny models: a bound on the bookkeeping only
_HASHES: dict[tuple, str] = {}  # (realpath, size, mtime_ns) -> sha256: hash a 500 MB file once


class _Building:
    """The lock a key's one build runs under, and how many callers hold it or wait for it."""
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


# key -> its build lock: two prompts (or two nodes' threads) asking for the same model at once wait
# for one load instead of each reading and holding a copy of its weights. The entry lives until its
# last caller leaves, not until the first build ends: dropped after a failed build, a waiter would
# rebuild under the old lock while a newcomer built under a new one (issue 50: two loads at once).
_BUILDING: dict[tuple, _Building] = {}


def file_identity(path: str) -> tuple:
    """(path, size, mtime_ns) of a file; for a folder (an analysis pack) every file's."""
    if not path or not os.path.exists(path):
        return (path, None)
    if os.path.isdir(path):
        entries = []
        for n in sorted(os.listdir(path)):
            st = os.stat(os.path.join(path, n))
            entries.append((n, st.st_size, st.st_mtime_ns))
        return (path, tuple(entries))
    st = os.stat(path)
    return (path, st.st_size, st.st_mtime_ns)


def budget_bytes() -> int:
    mb = model_cache_mb()     # a malformed value raises: never silently the default
    if mb is not None:
        return int(mb * (1 << 20))
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 4 * MIN_BUDGET
    return max(MIN_BUDGET, ram // 4)


def _weight_bytes(value: object, path: str) -> int:
    loaded = getattr(value, "loaded_models", None) or {}
    if loaded:
        return sum(int(v.get("size") or 0) for v in loaded.values())
    if path and os.path.isfile(path):
        return os.path.getsize(path)
    if path and os.path.isdir(path):
        return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())
    return 0


def _evict(keep: tuple) -> None:
    """Drop least recently used models until the rest fit the budget (call with _LOCK held)."""
    limit = budget_bytes()
    while len(_CACHE) > 1 and (sum(_SIZES.values()) > limit or len(_CACHE) > MAX_ENTRIES):
        old = next(k for k in _CACHE if k != keep)
        _CACHE.pop(old)
        _SIZES.pop(old, None)


def cache_state() -> dict:
    """What the cache holds: entries and bytes, against its budget (for reports and tests)."""
    with _LOCK:
        return {"entries": len(_CACHE), "bytes": sum(_SIZES.values()), "budget_bytes": budget_bytes()}


def file_sha256(path: str) -> str:
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


def _record_loaded(value: object, path: str, before: tuple) -> bool:
    """Hash every weight file ``value`` loaded; False if a file changed while it was loading."""
    files = list(value.model_files()) if hasattr(value, "model_files") else []
    if path and not os.path.isdir(path) and not any(p == path for _, p in files):
        files.append(("model", path))
    ids = {p: file_identity(p) for _, p in files}
    loaded = {p: {"sha256": file_sha256(p), "size": ids[p][1], "mtime_ns": ids[p][2]}
              for _, p in files if os.path.isfile(p)}
    if file_identity(path) != before or any(file_identity(p) != ids[p] for _, p in files):
        return False
    try:
        value.loaded_models = loaded  # type: ignore[attr-defined]
    except AttributeError:  # objects with __slots__ simply go without; loaded_model_files hashes then
        pass
    return True


def cached(kind: str, path: str, settings: tuple, build: Callable[[], T]) -> T:
    """The model for (kind, the file as it is now, settings), built by ``build`` at most once at a
    time per key: a second caller of the same key waits for the first build and gets its result."""
    before = file_identity(path)
    key = (kind, before, settings)
    with _LOCK:
        if key in _CACHE:
            _CACHE[key] = _CACHE.pop(key)      # most recently used last
            return _CACHE[key]  # type: ignore[return-value]
        building = _BUILDING.setdefault(key, _Building())
        building.users += 1
    # The global lock is not held while building (a load takes seconds; other models must not wait).
    try:
        with building.lock:
            with _LOCK:
                if key in _CACHE:       # built by the caller we waited for
                    return _CACHE[key]  # type: ignore[return-value]
            # first here, or the build we waited for failed: ours is the one build now
            return _build(kind, path, settings, build, before)
    finally:
        with _LOCK:
            building.users -= 1
            if not building.users:
                del _BUILDING[key]


def _build(kind: str, path: str, settings: tuple, build: Callable[[], T], before: tuple) -> T:
    key = (kind, before, settings)
    value = build()
    if not _record_loaded(value, path, before):
        # the file was being replaced while we read it: load what is there now, once
        before = file_identity(path)
        key = (kind, before, settings)
        value = build()
        if not _record_loaded(value, path, before):
            raise RuntimeError(f"model '{os.path.basename(path)}' kept changing on disk while it was loaded: "
                               "wait for the copy to finish and queue again")
    with _LOCK:
        _CACHE[key] = value
        _SIZES[key] = _weight_bytes(value, path)
        _evict(keep=key)
    return value


def loaded_model_files(obj) -> list[tuple[str, str, str]]:
    """(role, path, sha256 of the bytes loaded) of every weight file ``obj`` uses.

    The hash recorded when the model was loaded, never a fresh hash of what is on disk now.
    """
    loaded = getattr(obj, "loaded_models", {}) or {}
    out = []
    for role, path in (obj.model_files() if hasattr(obj, "model_files") else []):
        sha = loaded[path]["sha256"] if path in loaded else file_sha256(path)
        out.append((role, path, sha))
    return out
