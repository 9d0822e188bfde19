from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from devtools.test_media import make_video, read_stamp  # noqa: E402
from swapline_core.video.frames import FrameSequence, Layer, encode_diff_chunk  # noqa: E402
from swapline_core.video.store import ChunkStore  # noqa: E402
from swapline_core.video.trim import trim_leading  # noqa: E402


def _edited(seq: FrameSequence, root: Path) -> FrameSequence:
    """A layer that paints a white square whose size encodes the frame index (a stand-in stage)."""
    store = ChunkStore(root, "paint")
    for c, frames in seq.iter_chunks():
        after = []
        for i, f in zip(seq.chunk_range(c), frames):
            g = f.copy()
            g[-20:, : 2 + i] = 255
            after.append(g)
        store.save(c, encode_diff_chunk(frames, after))
    return seq.with_layer(Layer("paint", str(root), "paint", (("swapper", "/m/x.onnx", "abc"),)))


@pytest.mark.parametrize("chunk,drop", [(4, 3), (4, 4), (5, 7)])
def test_trim_keeps_changes_and_source_frames(tmp_path, chunk, drop):
    clip = make_video(tmp_path / "c.mp4", n=14)
    seq = _edited(FrameSequence.open(str(clip), 0, 14, 1, chunk), tmp_path / "store")
    full = [f for _, ch in seq.iter_chunks() for f in ch]
    out = trim_leading(seq, drop, str(tmp_path / "store"))
    assert out.count == 14 - drop and out.start == drop and out.chunk == chunk
    got = [f for _, ch in out.iter_chunks() for f in ch]
    assert len(got) == len(full) - drop
    for a, b in zip(got, full[drop:]):
        assert np.array_equal(a, b)
    assert [read_stamp(f) for f in out.original().iter_chunks().__next__()[1]][0] == drop
    assert out.model_files() == [("swapper", "/m/x.onnx", "abc")]


def test_trim_edge_cases(tmp_path):
    clip = make_video(tmp_path / "c.mp4", n=6)
    seq = FrameSequence.open(str(clip), 0, 6, 1, 4)
    assert trim_leading(seq, 0, str(tmp_path)) is seq
    plain = trim_leading(seq, 2, str(tmp_path))
    assert plain.layers == () and plain.start == 2 and plain.count == 4
    with pytest.raises(ValueError, match="leave nothing"):
        trim_leading(seq, 6, str(tmp_path))
