"""Per-frame work on threads (swapline_core.parallel) gives exactly what a serial loop gives.

The classical swap, the mask stack (skin views, fits, parts, wires), the paste and QA's pixel
metrics run frames on a few threads; their output must not depend on it: patches, pasted frames
and QA records are compared byte for byte with one worker, on real frames of the kling clip and
the shipped source.
"""
from __future__ import annotations

import pickle
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from swapline_core import parallel


def test_map_frames_keeps_order_and_uses_threads():
    seen = set()

    def fn(x):
        seen.add(threading.get_ident())
        return x * x

    assert parallel.map_frames(fn, range(40), workers=3) == [x * x for x in range(40)]
    assert len(seen) >= 1 and threading.get_ident() not in seen
    seen.clear()
    assert parallel.map_frames(fn, range(5), workers=1) == [0, 1, 4, 9, 16]
    assert seen == {threading.get_ident()}
    assert parallel.map_frames(fn, [], workers=3) == []
    assert 1 <= parallel.default_workers() <= parallel.MAX_WORKERS


def test_map_frames_raises_the_frames_error():
    def fn(x):
        if x == 7:
            raise ValueError("frame 7 is bad")
        return x

    with pytest.raises(ValueError, match="frame 7 is bad"):
        parallel.map_frames(fn, range(12), workers=3)


def _swap_and_paste(frames, faces, src, analyzer):
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.masks import MaskOptions
    from swapline_core.swap.chunk import SwapOptions, swap_chunk

    res = swap_chunk(ClassicalSwapper(), analyzer, frames, [[f] for f in faces], src, SwapOptions(masks=MaskOptions()))
    return res.frames, [[(p.region, p.pixels, p.mask) for p in ps] for ps in res.patches]


def test_swap_and_paste_on_threads_equal_serial(kling_target, sample_source, builtin_analyzer, monkeypatch):
    frames, faces = kling_target
    src = sample_source("source_face_colour.png")
    # Eight frames (the four, mirrored too), so every worker gets more than one.
    frames = frames + [np.ascontiguousarray(f[:, ::-1]) for f in frames]
    faces = faces + [None] * 4
    an = builtin_analyzer
    flipped = an.detect(frames[4:])
    an.landmarks68(frames[4:], flipped)
    faces[4:] = [fs[0] for fs in flipped]
    monkeypatch.setattr(parallel, "default_workers", lambda: 3)
    out_t, patches_t = _swap_and_paste(frames, faces, src, builtin_analyzer)
    monkeypatch.setattr(parallel, "default_workers", lambda: 1)
    out_s, patches_s = _swap_and_paste(frames, faces, src, builtin_analyzer)
    assert len(out_t) == len(out_s) == 8
    for a, b in zip(out_t, out_s):
        assert np.array_equal(a, b)
    assert pickle.dumps(patches_t) == pickle.dumps(patches_s)
    assert any(not np.array_equal(a, f) for a, f in zip(out_s, frames))     # something was swapped


def test_qa_records_on_threads_equal_serial(kling_target, sample_source, builtin_analyzer, monkeypatch):
    from swapline_core.qa import gate

    frames, faces = kling_target
    src = sample_source("source_face_colour.png")
    swapped, _ = _swap_and_paste(frames, faces, src, builtin_analyzer)
    tracked = [[f.copy(landmarks=None)] for f in faces]
    monkeypatch.setattr(parallel, "default_workers", lambda: 3)
    rec_t = gate.evaluate_chunk(builtin_analyzer, frames, swapped, tracked, src)
    monkeypatch.setattr(parallel, "default_workers", lambda: 1)
    rec_s = gate.evaluate_chunk(builtin_analyzer, frames, swapped, tracked, src)
    assert [r["status"] for r in rec_s] == ["ok"] * 4
    assert all(f["seam_ratio"] is not None and f["mouth_profile_result"] is not None for r in rec_s for f in r["faces"])
    assert pickle.dumps(rec_t) == pickle.dumps(rec_s)


def test_read_ahead_reads_the_next_item_on_one_other_thread_and_keeps_order():
    readers = []

    def source():
        for i in range(5):
            readers.append(threading.current_thread().name)
            yield i

    assert list(parallel.read_ahead(source())) == [0, 1, 2, 3, 4]
    assert len(set(readers)) == 1 and readers[0] != threading.current_thread().name


def test_read_ahead_raises_where_the_bad_item_was_and_closes_the_source_when_stopped():
    def failing():
        yield 0
        yield 1
        raise ValueError("chunk 2 is corrupt")

    got = []
    with pytest.raises(ValueError, match="chunk 2"):
        for x in parallel.read_ahead(failing()):
            got.append(x)
    assert got == [0, 1]                  # every item before the fault came out first

    closed = []

    def endless():
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.append(True)

    it = parallel.read_ahead(endless())
    assert [next(it), next(it)] == [0, 1]
    it.close()                            # a consumer stopping early (an interrupt)
    assert closed == [True]


def test_read_ahead_only_where_the_extra_chunk_fits():
    from swapline_core.video.frames import FrameSequence

    def seq(w, h):
        return FrameSequence("clip.mp4", 0, 300, 1, 25.0, w, h, False, "k")

    assert seq(1280, 720).reads_ahead(views=2) and seq(1920, 1080).reads_ahead(views=2)
    assert not seq(3840, 2160).reads_ahead()             # a 16-frame 4K chunk is ~400 MB of RGB
    readers = []

    def source():
        for i in range(3):
            readers.append(threading.current_thread().name)
            yield i

    assert list(parallel.read_ahead(source(), enabled=False)) == [0, 1, 2]
    assert set(readers) == {threading.current_thread().name}     # read in turn, on the caller's thread
