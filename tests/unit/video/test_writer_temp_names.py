"""Writers to the same output path do not share a temporary file (issue 32, item 5).

Two prompts saving with the same prefix (or storing the same clip in the cache) can write the
same path at once: each writer has a temporary file of its own, so neither writes into the
other's, each finished file is complete, and an abort deletes only the aborting writer's file.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from devtools.test_media import read_stamp, stamp
from swapline_core import video as vio
from swapline_core.video import lossless
from swapline_core.video.frames import FrameSequence


def _stamps(path) -> list[int]:
    return [read_stamp(f) for _, f in vio.iter_frames(path)]


def test_two_writers_to_one_path_interleaved_both_finish_valid(tmp_path):
    out = tmp_path / "swapline" / "video_00001_.mp4"
    a = vio.VideoWriter(out, fps=10, crf=28, preset="ultrafast")
    b = vio.VideoWriter(out, fps=10, crf=28, preset="ultrafast")
    for i in range(12):                       # frame by frame, as two jobs' chunks interleave
        a.write(stamp(i, 160, 96))
        b.write(stamp(100 + i, 160, 96))
    a.close()
    first = tmp_path / "first.mp4"
    shutil.copy(out, first)
    for i in range(12, 20):
        b.write(stamp(100 + i, 160, 96))
    b.close()
    assert _stamps(first) == list(range(12))                   # a's file, complete
    assert _stamps(out) == [100 + i for i in range(20)]        # then b's, complete
    assert not list(out.parent.glob(".*partial*"))


def test_an_abort_leaves_the_other_writers_temp_alone(tmp_path):
    out = tmp_path / "video_00002_.mp4"
    a = vio.VideoWriter(out, fps=10, crf=28, preset="ultrafast")
    b = vio.VideoWriter(out, fps=10, crf=28, preset="ultrafast")
    for i in range(5):
        a.write(stamp(i, 160, 96))
        b.write(stamp(50 + i, 160, 96))
    a.abort()                                 # e.g. the first prompt was interrupted
    assert not a._tmp.exists() and b._tmp.exists()
    for i in range(5, 10):
        b.write(stamp(50 + i, 160, 96))
    b.close()
    assert _stamps(out) == [50 + i for i in range(10)]
    assert not list(tmp_path.glob(".*partial*"))


def _clip(first: int, n: int):
    return [np.full((24, 32, 3), first + i, np.uint8) for i in range(n)]


def test_lossless_writes_of_one_file_at_once(tmp_path):
    """One cache file written by two jobs at once: the second starts and finishes while the first
    is half way; both finish, and the file is complete (the last one's)."""
    path = tmp_path / "memory-video" / "key.nut"

    def first_job():
        for i, f in enumerate(_clip(10, 6)):
            if i == 3:
                assert lossless.write_lossless(path, _clip(100, 4), 24) == 4
                assert [int(f[0, 0, 0]) for _, ch in FrameSequence.open(str(path)).iter_chunks() for f in ch] \
                    == [100, 101, 102, 103]
            yield f

    assert lossless.write_lossless(path, first_job(), 24) == 6
    got = [int(f[0, 0, 0]) for _, ch in FrameSequence.open(str(path)).iter_chunks() for f in ch]
    assert got == list(range(10, 16))
    assert not list(path.parent.glob(".*partial*"))


def test_lossless_abort_leaves_the_other_write_alone(tmp_path):
    path = tmp_path / "key.nut"

    def failing():
        yield from _clip(100, 2)
        raise RuntimeError("interrupted")

    def first_job():
        for i, f in enumerate(_clip(10, 6)):
            if i == 3:
                with pytest.raises(RuntimeError, match="interrupted"):
                    lossless.write_lossless(path, failing(), 24)
            yield f

    assert lossless.write_lossless(path, first_job(), 24) == 6
    got = [int(f[0, 0, 0]) for _, ch in FrameSequence.open(str(path)).iter_chunks() for f in ch]
    assert got == list(range(10, 16))
    assert not list(tmp_path.glob(".*partial*"))


def test_write_image_temp_is_unique(tmp_path, monkeypatch):
    """Each still is written under a name of its own too (then renamed): the temporary names of
    two writes of one path differ."""
    seen = []
    real = vio.write.temp_path

    def spy(p):
        seen.append(real(p))
        return seen[-1]

    monkeypatch.setattr(vio.write, "temp_path", spy)
    for _ in range(2):
        vio.write_image(tmp_path / "x.png", stamp(1, 32, 16))
    assert len(set(seen)) == 2 and not list(tmp_path.glob(".*partial*"))
