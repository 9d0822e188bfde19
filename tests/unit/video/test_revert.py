"""revert_frames: the original pixels back on exactly the frames asked, every other frame kept,
the frame count unchanged, and only the chunks holding a reverted frame decoded."""
import numpy as np
import pytest

from devtools.test_media import make_video
from swapline_core.video import frames as vframes
from swapline_core.video.frames import FrameSequence, Layer, encode_diff_chunk
from swapline_core.video.stages import Hooks, revert_frames
from swapline_core.video.store import ChunkStore


def _painted(seq: FrameSequence, root) -> FrameSequence:
    store = ChunkStore(root, "paint")
    for c, frames in seq.iter_chunks():
        after = []
        for f in frames:
            g = f.copy()
            g[-20:, :30] = 255
            after.append(g)
        store.save(c, encode_diff_chunk(frames, after))
    return seq.with_layer(Layer("paint", str(root), "paint"))


@pytest.mark.parametrize("reverted", [{5, 6, 7}, set(range(14)), {0, 13}])
def test_revert_puts_originals_back_on_those_frames_only(tmp_path, monkeypatch, reverted):
    clip = make_video(tmp_path / "c.mp4", n=14)
    seq = _painted(FrameSequence.open(str(clip), 0, 14, 1, 4), tmp_path / "store")
    painted = [f for _, ch in seq.iter_chunks() for f in ch]
    originals = [f for _, ch in seq.original().iter_chunks() for f in ch]
    assert not any(np.array_equal(a, b) for a, b in zip(painted, originals))

    decoded = []
    real = vframes.video_read.iter_chunks
    monkeypatch.setattr(vframes.video_read, "iter_chunks",
                        lambda *a, **k: (decoded.append(a[1]) or real(*a, **k)))
    done = []
    out = revert_frames(seq, reverted, str(tmp_path / "store"), Hooks(progress=done.append))
    monkeypatch.undo()
    # one decode, from the first chunk holding a reverted frame
    assert decoded == [min(reverted) // 4 * 4]
    assert sum(done) == 14
    got = [f for _, ch in out.iter_chunks() for f in ch]
    assert len(got) == 14
    for i, f in enumerate(got):
        assert np.array_equal(f, originals[i] if i in reverted else painted[i]), i
    # resumed: nothing decoded again
    decoded.clear()
    monkeypatch.setattr(vframes.video_read, "iter_chunks",
                        lambda *a, **k: (decoded.append(a[1]) or real(*a, **k)))
    again = revert_frames(seq, reverted, str(tmp_path / "store"), Hooks())
    assert decoded == [] and again.key == out.key


def test_an_interrupted_revert_resumes_at_the_chunk_it_had_not_stored(tmp_path, monkeypatch):
    clip = make_video(tmp_path / "c.mp4", n=14)
    seq = _painted(FrameSequence.open(str(clip), 0, 14, 1, 4), tmp_path / "store")
    calls = []

    def stop_on_second():
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        revert_frames(seq, set(range(14)), str(tmp_path / "store"), Hooks(check_interrupt=stop_on_second))
    decoded, done = [], []
    real = vframes.video_read.iter_chunks
    monkeypatch.setattr(vframes.video_read, "iter_chunks",
                        lambda *a, **k: (decoded.append(a[1]) or real(*a, **k)))
    out = revert_frames(seq, set(range(14)), str(tmp_path / "store"), Hooks(progress=done.append))
    assert decoded == [4] and sum(done) == 14
    originals = [f for _, ch in seq.original().iter_chunks() for f in ch]
    got = [f for _, ch in out.iter_chunks() for f in ch]
    assert all(np.array_equal(a, b) for a, b in zip(got, originals)) and len(got) == 14
