"""Per-frame work spread over threads.

The per-face steps of the classical swap, the paste and QA's pixel metrics are numpy and OpenCV
calls that release the GIL, but each is too small for OpenCV's own threads to keep two cores
busy (a 720p job ran at ~1.2 cores). Frames are independent there, so they go to a few
threads; results come back in order and are the same as a serial loop's (tests compare them).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
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


_END = object()


def read_ahead(items: Iterable[T], enabled: bool = True) -> Iterator[T]:
    """``items``, with the next one produced on a thread while the caller works on this one (a
    chunk decoded while the one before it is evaluated: decoding and decompressing release the
    GIL). One item ahead, so memory grows by one item; an exception comes out where its item
    would have. The source is only ever advanced from that one thread. ``enabled=False``: the
    items in turn (an item too large to hold twice)."""
    if not enabled:
        yield from items
        return
    it = iter(items)
    with ThreadPoolExecutor(1, thread_name_prefix="swapline-read-ahead") as pool:
        pending = pool.submit(next, it, _END)
        try:
            while True:
                item = pending.result()
                if item is _END:
                    return
                pending = pool.submit(next, it, _END)
                yield item
        finally:
            # the caller stopped early (an interrupt, an error): let the pending read finish
            # before the source is closed, never while it runs
            pending.exception()
            close = getattr(it, "close", None)
            if close is not None:
                close()
