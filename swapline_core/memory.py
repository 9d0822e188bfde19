"""Give freed frame memory back to the operating system.

A 4K chunk is ~25 MB per frame copy; after a job, glibc keeps the freed blocks in its arenas, so
a long-running ComfyUI server kept hundreds of MB more resident memory after one large job
(issue 18; bench/memory_after_large_frames.py measures it). malloc_trim hands them back.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

_LIBC = None


def release_memory() -> None:
    """Return free heap pages to the OS (glibc only; a no-op elsewhere)."""
    global _LIBC
    if not sys.platform.startswith("linux"):
        return
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):  # musl and others have no malloc_trim
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)
