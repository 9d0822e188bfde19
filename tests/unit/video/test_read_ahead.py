"""Frames decoded ahead of a chunk (FrameSequence.iter_chunks' ``ahead``): the same chunks, the
post-roll served from them while the chunk is processed, and decoding faults where they were."""
import itertools

import numpy as np
import pytest

from devtools.test_media import make_video
from swapline_core.video import frames as F
from swapline_core.video.frames import FrameSequence


def _frames(n, bad=None):
    for i in range(n):
        if i == bad:
            raise RuntimeError(f"bad frame {i}")
        yield i, np.full((2, 2, 3), i, np.uint8)


def _plain(n, chunk, bad):
    out, batch = [], []
    try:
        for item in _frames(n, bad):
            batch.append(item[0])
            if len(batch) == chunk:
                out.append(batch)
                batch = []
        if batch:
            out.append(batch)
    except RuntimeError as e:
        out.append(str(e))
    return out


def _ahead(n, chunk, ahead, bad):
    out = []
    last = n if bad is None else min(n, bad)
    try:
        for batch in F._chunks_ahead("clip", _frames(n, bad), chunk, ahead):
            out.append([i for i, _ in batch])
            end = batch[-1][0] + 1
            # while the chunk is out, the frames after it (up to ``ahead``) wait in _AHEAD
            assert sorted(i for _, i in F._AHEAD) == list(range(end, min(last, end + ahead)))
    except RuntimeError as e:
        out.append(str(e))
    assert not F._AHEAD
    return out


@pytest.mark.parametrize("chunk,ahead", [(1, 1), (4, 6), (16, 8), (4, 20)])
def test_chunks_ahead_same_chunks_and_faults(chunk, ahead):
    for n, bad in itertools.product(range(0, 26), (None, 0, 3, 4, 15, 16, 21)):
        assert _ahead(n, chunk, ahead, bad) == _plain(n, chunk, bad), (n, bad)


def test_abandoned_iteration_leaves_nothing():
    g = F._chunks_ahead("clip", _frames(40), 16, 8)
    next(g)
    assert len(F._AHEAD) == 8
    g.close()
    assert not F._AHEAD


def test_sequence_read_ahead_serves_post_roll(tmp_path):
    clip = make_video(tmp_path / "c.mp4", n=11)
    seq = FrameSequence.open(str(clip), 0, 11, 1, 4)
    plain = [f for _, ch in seq.iter_chunks() for f in ch]
    got = []
    for c, ch in seq.iter_chunks(ahead=3):
        got += ch
        roll = [i for i in range(4 * c + 4, 4 * c + 7) if i < 11]
        if roll:
            assert all((seq.path, i) in F._AHEAD for i in roll)
            served = seq.read_frames(roll)
            for i, f in zip(roll, served):
                assert np.array_equal(f, plain[i])
                f[:] = 0                                   # a copy: the next chunk is not touched
    assert not F._AHEAD
    assert len(got) == len(plain) and all(np.array_equal(a, b) for a, b in zip(got, plain))


def test_chunk_pairs_decode_once_and_match_both_views(tmp_path, monkeypatch):
    """FrameSequence.iter_chunk_pairs (QA's original and swapped views): the frames of
    ``original().iter_chunks()`` and ``iter_chunks()`` from one decode, from any first chunk; the
    original frames are not changed by the layers (two stacked here, as after swap + restore)."""
    from swapline_core.video import stages

    clip = make_video(tmp_path / "c.mp4", n=11)
    seq = FrameSequence.open(str(clip), 0, 11, 1, 4)
    plain = [f for _, ch in seq.iter_chunks() for f in ch]
    layered = seq
    for value in (255, 7):
        edited = [f.copy() for f in plain]
        for i in range(0, 11, 3):
            edited[i][10:30, 20:50] = value
        layered = stages.overlay_images(layered, edited, str(tmp_path / "store"), stages.Hooks())
    want = [f for _, ch in layered.iter_chunks() for f in ch]
    assert any(not np.array_equal(a, b) for a, b in zip(want, plain))
    decodes = []
    real = F.video_read.iter_chunks
    monkeypatch.setattr(F.video_read, "iter_chunks", lambda *a, **k: decodes.append(a) or real(*a, **k))
    for first in (0, 1, 2):
        got = list(layered.iter_chunk_pairs(first))
        assert [c for c, _, _ in got] == list(range(first, 3))
        orig = [f for _, o, _ in got for f in o]
        new = [f for _, _, s in got for f in s]
        assert all(np.array_equal(a, b) for a, b in zip(orig, plain[4 * first:]))
        assert all(np.array_equal(a, b) for a, b in zip(new, want[4 * first:]))
    assert len(decodes) == 3          # one decode per call, not one per view
