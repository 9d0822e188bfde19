"""The one global Swapline keeps: loaded models, keyed by file path, mtime and settings.

ComfyUI re-runs a loader node whenever its inputs change; a clip processed chunk by chunk
must not reload a 500 MB model per chunk, and an edited file on disk must be picked up.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_CACHE: dict[tuple, object] = {}
_LOCK = threading.Lock()
MAX_ENTRIES = 8


def _stamp(path: str) -> tuple:
    if not path or not os.path.exists(path):
        return (path, None)
    if os.path.isdir(path):
        return (path, tuple(sorted((n, os.path.getmtime(os.path.join(path, n))) for n in os.listdir(path))))
    st = os.stat(path)
    return (path, st.st_mtime_ns, st.st_size)


def cached(kind: str, path: str, settings: tuple, build: Callable[[], T]) -> T:
    key = (kind, _stamp(path), settings)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]  # type: ignore[return-value]
    value = build()
    with _LOCK:
        if len(_CACHE) >= MAX_ENTRIES:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = value
    return value
