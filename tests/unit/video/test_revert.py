"""revert_frames: the original pixels back on exactly the frames asked, every other frame kept,
the frame count unchanged, and nothing decoded to make the layer (it lists the frames)."""
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
    assert decoded == []                      # the layer lists the frames: no pixels to read
    assert sum(done) == 14
    got = [f for _, ch in out.iter_chunks() for f in ch]
    assert len(got) == 14
    for i, f in enumerate(got):
        assert np.array_equal(f, originals[i] if i in reverted else painted[i]), i
    # the pre-/post-roll reader gives the same frames
    picks = [0, 5, 6, 9, 13]
    for i, f in zip(picks, out.read_frames(picks)):
        assert np.array_equal(f, originals[i] if i in reverted else painted[i]), i
    # a layer painted on top of the revert applies to the original pixels there
    over = ChunkStore(tmp_path / "store", "over")
    for c, frames in out.iter_chunks():
        after = [f.copy() for f in frames]
        for g in after:
            g[:10, :10] = 7
        over.save(c, vframes.encode_diff_chunk(frames, after))
    top = [f for _, ch in out.with_layer(Layer("over", str(tmp_path / "store"), "over")).iter_chunks() for f in ch]
    for i, f in enumerate(top):
        want = (originals[i] if i in reverted else painted[i]).copy()
        want[:10, :10] = 7
        assert np.array_equal(f, want), i
    again = revert_frames(seq, reverted, str(tmp_path / "store"), Hooks())
    assert again.key == out.key


def test_a_revert_chunk_needs_the_frames_before_any_layer():
    frame = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="before any layer"):
        vframes.apply_layer_chunk([frame], vframes.encode_revert_chunk(1, [0]))
    assert vframes.apply_layer_chunk([frame + 1], vframes.encode_revert_chunk(1, [0]), [frame])[0] is frame


def test_an_interrupted_revert_completes_when_run_again(tmp_path):
    clip = make_video(tmp_path / "c.mp4", n=14)
    seq = _painted(FrameSequence.open(str(clip), 0, 14, 1, 4), tmp_path / "store")
    calls = []

    def stop_on_second():
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        revert_frames(seq, set(range(14)), str(tmp_path / "store"), Hooks(check_interrupt=stop_on_second))
    done = []
    out = revert_frames(seq, set(range(14)), str(tmp_path / "store"), Hooks(progress=done.append))
    assert sum(done) == 14
    originals = [f for _, ch in seq.original().iter_chunks() for f in ch]
    got = [f for _, ch in out.iter_chunks() for f in ch]
    assert all(np.array_equal(a, b) for a, b in zip(got, originals)) and len(got) == 14


def test_layers_under_a_wholly_reverted_chunk_are_not_read(tmp_path, monkeypatch):
    clip = make_video(tmp_path / "c.mp4", n=14)
    seq = _painted(FrameSequence.open(str(clip), 0, 14, 1, 4), tmp_path / "store")
    out = revert_frames(seq, set(range(8)) | {9}, str(tmp_path / "store"), Hooks())
    loaded = []
    real = ChunkStore.load
    monkeypatch.setattr(ChunkStore, "load", lambda self, c, *a: (loaded.append((self.key, c)) or real(self, c, *a)))
    got = [f for _, ch in out.iter_chunks() for f in ch]
    # chunks 0 and 1 are put back whole: the paint layer is read for chunks 2 and 3 only
    assert sorted(c for k, c in loaded if k == "paint") == [2, 3]
    originals = [f for _, ch in seq.original().iter_chunks() for f in ch]
    assert all(np.array_equal(got[i], originals[i]) for i in list(range(8)) + [9])
    assert not np.array_equal(got[8], originals[8]) and len(got) == 14
