"""Stitching: chunks encoded by the core's VideoWriter, joined by stream copy, audio muxed once."""
from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from swapline_farm.plan import plan_chunks
from swapline_farm.stitch import StitchError, stitch

from devtools.test_media import make_video
from devtools.tracking_clips import KLING
from swapline_core.video import read as video_read
from swapline_core.video.write import VideoWriter

REPO = Path(__file__).resolve().parents[2]
CLIP = REPO / "assets" / "samples" / "kling_avatar_clip.mp4"       # H.264 + AAC, 48 frames at 15 fps


def encode_chunks(clip: Path, folder: Path, chunk_frames: int, scale_chunk: int | None = None,
                  audio: bool = False, **settings) -> list[Path]:
    """What workers deliver: each chunk's frames written by VideoWriter with the same settings."""
    info = video_read.probe(clip)
    files = []
    folder.mkdir(parents=True, exist_ok=True)
    for ch in plan_chunks(clip, chunk_frames, preroll=4, job_id="t", cuts=[]):
        path = folder / f"chunk_{ch.index:03d}.mp4"
        with VideoWriter(path, info.fps_fraction, crf=settings.get("crf", 20),
                         preset=settings.get("preset", "veryfast")) as w:
            if audio:
                w.add_audio_from(clip, start_frame=ch.start)
            for _, frame in video_read.iter_frames(clip, ch.start, ch.count):
                if ch.index == scale_chunk:
                    frame = np.ascontiguousarray(frame[: frame.shape[0] // 2 * 2 - 2])   # another size
                w.write(frame)
        files.append(path)
    return files


def decoded(path: Path) -> list[np.ndarray]:
    return [f for _, f in video_read.iter_frames(path)]


def audio_duration(path: Path) -> float | None:
    video_read.clear_probe_cache()
    return video_read.probe(path).audio_duration


def check_video(out: Path, chunks: list[Path]) -> None:
    expected = [f for c in chunks for f in decoded(c)]
    got = decoded(out)
    assert len(got) == len(expected)
    # stream copy: every frame decodes to exactly the chunk's frame, seams included
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))
    with av.open(str(out)) as c:
        vs = c.streams.video[0]
        pts = sorted(p.pts for p in c.demux(vs) if p.size)
    step = np.diff(pts)
    assert len(set(step.tolist())) == 1                     # evenly spaced: no jump or overlap at a seam


def test_stitch_is_bit_exact_and_carries_aac_once(tmp_path):
    info = video_read.probe(CLIP)
    chunks = encode_chunks(CLIP, tmp_path / "chunks", 16)
    assert len(chunks) == 3
    out = tmp_path / "out" / "job.mp4"
    res = stitch(chunks, CLIP, out, expected_frames=info.frame_count)
    assert res == {"frames": 48, "chunks": 3, "chunk_frames": [16, 16, 16], "audio": "copy",
                   "duration": pytest.approx(48 / 15)}
    check_video(out, chunks)
    stitched = video_read.probe(out)
    assert stitched.frame_count == info.frame_count and stitched.fps_fraction == info.fps_fraction
    assert stitched.audio_codec == "aac"
    assert abs(audio_duration(out) - info.audio_duration) <= 1 / info.fps
    with av.open(str(out)) as c:
        assert len(c.streams.audio) == 1                    # muxed once, not once per chunk
    assert not list(out.parent.glob(".*"))                  # no partial file left


def test_opus_audio_becomes_aac(tmp_path):
    src = make_video(tmp_path / "src.mkv", n=40, w=160, h=120, rate=25, acodec="libopus")
    assert video_read.probe(src).audio_codec == "opus"
    chunks = encode_chunks(src, tmp_path / "chunks", 12, audio=True)     # chunk audio is ignored
    out = tmp_path / "job.mp4"
    res = stitch(chunks, src, out, expected_frames=40)
    assert res["audio"] == "aac" and res["frames"] == 40 and res["chunks"] == 4
    check_video(out, chunks)
    assert abs(audio_duration(out) - 40 / 25) <= 1 / 25
    with av.open(str(out)) as c:
        assert len(c.streams.audio) == 1


def test_animated_source_has_no_audio(tmp_path):
    chunks = encode_chunks(KLING, tmp_path / "chunks", 20)
    res = stitch(chunks, KLING, tmp_path / "job.mp4", expected_frames=56)
    assert res["audio"] is None and res["chunk_frames"] == [20, 20, 16]
    check_video(tmp_path / "job.mp4", chunks)


def test_refuses_chunks_that_differ_and_names_the_chunk(tmp_path):
    chunks = encode_chunks(CLIP, tmp_path / "chunks", 16, scale_chunk=1)
    out = tmp_path / "job.mp4"
    with pytest.raises(StitchError, match=r"chunk 1 \('chunk_001.mp4'\) differs from chunk 0 .* in height"):
        stitch(chunks, CLIP, out)
    assert not out.exists()
    # an encoder with other settings (another preset changes the B-frame layout and the SPS/PPS)
    other = encode_chunks(CLIP, tmp_path / "other", 16, preset="ultrafast")
    with pytest.raises(StitchError, match=r"chunk 1 \('chunk_001.mp4'\) differs"):
        stitch([encode_chunks(CLIP, tmp_path / "a", 16)[0], other[1]], CLIP, out)


def test_refuses_missing_frames_and_bad_names(tmp_path):
    chunks = encode_chunks(CLIP, tmp_path / "chunks", 16)
    out = tmp_path / "job.mp4"
    with pytest.raises(StitchError, match="hold 32 frames"):
        stitch([chunks[0], chunks[2]], CLIP, out, expected_frames=48)
    assert not out.exists() and not list(tmp_path.glob(".job*"))
    with pytest.raises(StitchError, match="must be .mp4"):
        stitch(chunks, CLIP, tmp_path / "job.mkv")
    with pytest.raises(StitchError, match="no chunks"):
        stitch([], CLIP, out)
    with pytest.raises(StitchError, match="does not exist"):
        stitch([tmp_path / "nope.mp4"], CLIP, out)


def _audio_packets(path: Path) -> list[tuple[int, bytes]]:
    with av.open(str(path)) as c:
        return [(p.pts, bytes(p)) for p in c.demux(c.streams.audio[0]) if p.size]


def test_audio_of_a_range_equals_a_single_writer_run(tmp_path):
    """Frames 16..47 in two chunks, stitched with start_frame=16: the audio packets are exactly
    those one VideoWriter writes for the same range (what a single-server run delivers)."""
    single = tmp_path / "single.mp4"
    with VideoWriter(single, 15, crf=20, preset="veryfast") as w:
        w.add_audio_from(CLIP, start_frame=16)
        for _, frame in video_read.iter_frames(CLIP, 16, 32):
            w.write(frame)
    chunks = []
    for i, start in enumerate((16, 32)):
        chunks.append(tmp_path / f"c{i}.mp4")
        with VideoWriter(chunks[-1], 15, crf=20, preset="veryfast") as w:
            for _, frame in video_read.iter_frames(CLIP, start, 16):
                w.write(frame)
    out = tmp_path / "job.mp4"
    assert stitch(chunks, CLIP, out, start_frame=16, expected_frames=32)["audio"] == "copy"
    assert _audio_packets(out) == _audio_packets(single)


def _min_psnr(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    worst = 99.0
    for x, y in zip(a, b):
        mse = float(((x.astype(np.float64) - y.astype(np.float64)) ** 2).mean())
        worst = min(worst, 99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse))
    return worst


def test_chunked_encode_costs_no_quality_against_one_encode(tmp_path):
    """The stitched clip is not bit-identical to one continuous encode (each chunk starts a new
    GOP), but it is as close to the source frames as that encode is: the tolerance is the
    codec's own, not an extra generation."""
    source = decoded(CLIP)
    single = tmp_path / "single.mp4"
    with VideoWriter(single, 15, crf=18, preset="veryfast") as w:
        for frame in source:
            w.write(frame)
    chunks = encode_chunks(CLIP, tmp_path / "chunks", 16, crf=18)
    stitch(chunks, CLIP, tmp_path / "job.mp4")
    farm, one = _min_psnr(decoded(tmp_path / "job.mp4"), source), _min_psnr(decoded(single), source)
    assert farm >= one - 0.5, (farm, one)
