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

T = TypeVar("T")
_CACHE: dict[tuple, object] = {}
_LOCK = threading.Lock()
MAX_ENTRIES = 8
_HASHES: dict[tuple, str] = {}  # (realpath, size, mtime_ns) -> sha256: hash a 500 MB file once
# key -> the lock its one build runs under: two prompts (or two nodes' threads) asking for the same
# model at once wait for one load instead of each reading and holding a copy of its weights.
_BUILDING: dict[tuple, threading.Lock] = {}


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
            return _CACHE[key]  # type: ignore[return-value]
        building = _BUILDING.setdefault(key, threading.Lock())
    # The global lock is not held while building (a load takes seconds; other models must not wait).
    with building:
        try:
            with _LOCK:
                if key in _CACHE:       # built by the caller we waited for
                    return _CACHE[key]  # type: ignore[return-value]
            return _build(kind, path, settings, build, before)
        finally:
            with _LOCK:
                if _BUILDING.get(key) is building:
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
        if len(_CACHE) >= MAX_ENTRIES:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = value
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
