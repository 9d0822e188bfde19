"""Chunk plans on the real sample clips and a generated longer clip with two hard cuts."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from swapline_farm.plan import ChunkSpec, boundaries, detect_cuts, plan_chunks, preroll_for

from devtools.tracking_clips import KLING, WAN, frames_of
from swapline_core.video import read as video_read
from swapline_core.video.write import VideoWriter

REPO = Path(__file__).resolve().parents[2]
SAMPLES = [KLING, WAN, REPO / "assets" / "samples" / "kling_avatar_clip.mp4"]


def check_tiling(chunks: list[ChunkSpec], n: int, cuts=()) -> None:
    assert chunks[0].start == 0 and [c.index for c in chunks] == list(range(len(chunks)))
    for a, b in zip(chunks, chunks[1:]):
        assert b.start == a.start + a.count                     # no gap, no overlap
    assert sum(c.count for c in chunks) == n and all(c.count > 0 for c in chunks)
    for c in chunks:
        assert 0 <= c.preroll <= c.start
        # preroll + first output frame lie in one shot: no cut c with first < cut <= start
        assert not any(c.first < cut <= c.start for cut in cuts), (c, cuts)


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory):
    """157 frames, 350x350 H.264: kling (56) | wan (45) | kling reversed (56): cuts at 56 and 101."""
    frames = frames_of(KLING) + frames_of(WAN) + frames_of(KLING)[::-1]
    path = tmp_path_factory.mktemp("long") / "long.mp4"
    with VideoWriter(path, 15, crf=23, preset="veryfast") as w:
        for f in frames:
            w.write(f)
    return path


@pytest.mark.parametrize("clip", SAMPLES, ids=lambda p: p.name)
def test_sample_clips_tile_exactly(clip):
    n = video_read.probe(clip).frame_count
    assert detect_cuts(clip) == []                              # one shot each
    for size in (1, 7, 16, 24, n, n + 10):
        chunks = plan_chunks(clip, size, preroll=8, job_id="j", cuts=[])
        check_tiling(chunks, n)
        assert all(c.preroll == min(8, c.start) for c in chunks)   # no cut: full preroll
    # the scan itself agrees with the explicit empty cut list
    assert plan_chunks(clip, 16, job_id="j") == plan_chunks(clip, 16, job_id="j", cuts=[])


def test_long_clip_boundaries_move_to_cuts(long_clip):
    n = video_read.probe(long_clip).frame_count
    assert n == 157
    cuts = detect_cuts(long_clip)
    assert cuts == [56, 101]
    chunks = plan_chunks(long_clip, 24, preroll=8, job_id="job")
    check_tiling(chunks, n, cuts)
    starts = [c.start for c in chunks]
    assert len(chunks) >= 4
    assert 101 in starts                      # 72 + 24 = 96 would have been the boundary; the cut is 5 away
    assert chunks[starts.index(101)].preroll == 0
    # chunk size 48: both cuts are within 48/4 of a nominal boundary; the last 8 frames join a chunk
    big = plan_chunks(long_clip, 48, preroll=8, job_id="job", cuts=cuts)
    assert [(c.start, c.count, c.preroll) for c in big] == [(0, 56, 0), (56, 45, 0), (101, 56, 0)]
    # without cut alignment boundaries stay nominal, but preroll still stops at the cut
    plain = plan_chunks(long_clip, 32, preroll=8, cut_aligned=False, job_id="job", cuts=cuts)
    assert [c.start for c in plain] == [0, 32, 64, 96, 128]
    check_tiling(plain, n, cuts)
    assert plain[2].preroll == 8 and plain[3].preroll == 8    # 56..63 and 88..95 hold no cut
    plain16 = plan_chunks(long_clip, 20, preroll=8, cut_aligned=False, job_id="job", cuts=cuts)
    at60 = next(c for c in plain16 if c.start == 60)
    assert at60.preroll == 4                                  # 56..59: the shot starts at 56


def test_boundaries_properties_random():
    rng = random.Random(7)
    for _ in range(400):
        n = rng.randint(1, 400)
        size = rng.randint(1, 80)
        cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(0, 6)))) if n > 1 else []
        b = boundaries(n, size, cuts)
        assert b[0] == 0 and b[-1] == n and all(x < y for x, y in zip(b, b[1:]))
        window = size // 4
        for s, e in zip(b, b[1:]):
            # a boundary moves by at most the cut window; a short tail joins the last chunk
            assert e - s <= size + window
            assert e == n or e - s >= size - window
        chunks = plan_chunks(Path("unused"), size, preroll=rng.randint(0, 12), job_id="r", cuts=cuts, frame_count=n)
        check_tiling(chunks, n, cuts)


def test_preroll_and_ids():
    assert preroll_for(0, 8, []) == 0
    assert preroll_for(5, 8, []) == 5
    assert preroll_for(40, 8, [36]) == 4 and preroll_for(40, 8, [40]) == 0 and preroll_for(40, 8, [32]) == 8
    a, b = ChunkSpec("j", 0, 0, 16, 0), ChunkSpec("j", 0, 0, 16, 4)
    assert a.chunk_id == ChunkSpec("j", 3, 0, 16, 0).chunk_id != b.chunk_id != ChunkSpec("k", 0, 0, 16, 4).chunk_id
    assert len(a.chunk_id) == 16 and ChunkSpec.from_json(b.to_json()) == b
    with pytest.raises(ValueError, match="chunk_frames"):
        plan_chunks(KLING, 0)
    with pytest.raises(ValueError, match="preroll"):
        plan_chunks(KLING, 8, preroll=-1)


def test_a_frame_range_is_planned_on_its_own(long_clip):
    """A job reading frames 40..129 (its video node's start/count): chunks tile the range, the
    cuts inside it are found, and no preroll reaches before 40 (a single run starts cold there)."""
    chunks = plan_chunks(long_clip, 20, preroll=8, job_id="r", start=40, count=90)
    assert chunks[0].start == 40 and chunks[0].preroll == 0
    assert sum(c.count for c in chunks) == 90 and chunks[-1].end == 130
    assert 56 in [c.start for c in chunks] and 101 in [c.start for c in chunks]
    assert all(c.first >= 40 for c in chunks)
    check_tiling([ChunkSpec(c.job_id, c.index, c.start - 40, c.count, c.preroll) for c in chunks], 90,
                 [56 - 40, 101 - 40])
    assert detect_cuts(long_clip, start=40, count=90) == [56, 101]
    assert [c.count for c in plan_chunks(long_clip, 100, job_id="r", start=150, cuts=[])] == [7]
    with pytest.raises(ValueError, match="outside"):
        plan_chunks(long_clip, 8, start=157, cuts=[])
