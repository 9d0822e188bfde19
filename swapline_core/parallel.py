"""Per-frame work spread over threads.

The per-face steps of the classical swap, the paste and QA's pixel metrics are numpy and OpenCV
calls that release the GIL, but each is too small for OpenCV's own threads to keep two cores
busy (a 720p job ran at ~1.2 cores). Frames are independent there, so they go to a few
threads; results come back in order and are the same as a serial loop's (tests compare them).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# One more thread than cores: measured on 2 cores, 3 threads beat 2 (a thread waiting on the
# GIL between two OpenCV calls leaves a core idle). More than 4 gains nothing on these sizes.
MAX_WORKERS = 4


def default_workers() -> int:
    return max(1, min(MAX_WORKERS, (os.cpu_count() or 1) + 1))


def map_frames(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None) -> list[R]:
    """``[fn(x) for x in items]``, on up to ``workers`` threads; the first exception is raised."""
    items = list(items)
    n = default_workers() if workers is None else max(1, int(workers))
    if n == 1 or len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(min(n, len(items)), thread_name_prefix="swapline-frames") as pool:
        return list(pool.map(fn, items))
