"""Join chunk MP4s into the job's one video by stream copy, and carry the original's audio once.

Why stream copy: re-encoding the joined frames would be a second generation of H.264 loss and
cost as much CPU as the swap's own encode; chunks are encoded by ``VideoWriter`` with identical
settings (same rate, size, crf/preset, ``mbtree=0``, closed GOPs starting with an IDR frame), so
their packets can simply be laid end to end: a decoder gives exactly the frames each chunk
decodes to on its own (tested pixel for pixel).

What is checked, per chunk, against the first: codec, size, pixel format, profile, frame rate,
B-frame delay and the codec's extradata (SPS/PPS): chunks that differ in any of these cannot
share one stream header, and the error names the chunk and the field. Each chunk must start
with a keyframe. Timestamps are rebased in order: every chunk's first frame follows the
previous chunk's last frame end, so frame count and timing are the chunks' exactly.

Audio is never chunked: it is muxed once from the *original* clip, aligned to ``start_frame``
and cut where the video ends, using the core writer's own audio path
(``swapline_core.video.write``: packet copy for AAC/MP3, AAC re-encode otherwise), so a farm
output's audio is what a single-server run writes. Audio tracks inside the chunks are ignored.
"""
from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

from swapline_core.video.probe import IMAGE_EXTS, open_container

# The core writer's audio tracks: reused, not copied, so both paths mux audio the same way.
from swapline_core.video.write import MP4_COPY_AUDIO, _AudioCopy, _AudioTranscode, audio_origin

_CHECKED = ("codec", "width", "height", "pix_fmt", "profile", "rate", "b_frame_delay", "extradata")


class StitchError(ValueError):
    """Chunks that cannot be joined (names the chunk and what differs), or a bad output."""


def _params(stream) -> dict:
    cc = stream.codec_context
    return {"codec": cc.codec.canonical_name if cc.codec else cc.name, "width": cc.width, "height": cc.height,
            "pix_fmt": cc.format.name if cc.format else None, "profile": cc.profile,
            "rate": stream.average_rate, "b_frame_delay": getattr(cc, "has_b_frames", None),
            "extradata": bytes(cc.extradata or b"")}


def _describe(name: str, value) -> str:
    if name == "extradata":
        return f"{len(value)} bytes (SPS/PPS)"
    return repr(value)


def check_chunks(chunk_files: list[Path]) -> list[dict]:
    """Codec parameters of every chunk; raises StitchError naming the first chunk that differs."""
    if not chunk_files:
        raise StitchError("no chunks to stitch")
    params = []
    for i, f in enumerate(chunk_files):
        f = Path(f)
        if not f.is_file():
            raise StitchError(f"chunk {i} ('{f}') does not exist")
        with open_container(f) as c:
            if not c.streams.video:
                raise StitchError(f"chunk {i} ('{f.name}') has no video stream")
            p = _params(c.streams.video[0])
        params.append(p)
        if i:
            for k in _CHECKED:
                if p[k] != params[0][k]:
                    raise StitchError(
                        f"chunk {i} ('{f.name}') differs from chunk 0 ('{Path(chunk_files[0]).name}') in {k}: "
                        f"{_describe(k, p[k])} vs {_describe(k, params[0][k])}; chunks joined without "
                        "re-encoding must come from the same encoder settings (same workflow and settings)")
    return params


def _open_audio(original: Path, out, start_frame: int):
    """The core writer's audio track for ``original`` on container ``out``, or (None, None)."""
    if original.is_dir() or original.suffix.lower() in IMAGE_EXTS:
        return None, None               # stills and animated images carry no sound
    codec, t0 = audio_origin(original, start_frame, None)
    if codec is None:
        return None, None
    cls = _AudioCopy if codec in MP4_COPY_AUDIO else _AudioTranscode
    return cls(original, out, t0), cls.mode


def stitch(chunk_files: list[Path], original_clip: Path, out: Path, *, start_frame: int = 0,
           expected_frames: int | None = None, audio: bool = True) -> dict:
    """Concatenate ``chunk_files`` (in order) into ``out`` (.mp4) by stream copy; mux the audio of
    ``original_clip`` once, from source frame ``start_frame``.

    Returns ``{"frames", "chunks", "chunk_frames", "audio" ("copy" | "aac" | None), "duration"}``.
    ``expected_frames``: refuse (and write nothing) when the chunks hold another number of frames.
    The output appears atomically (temp file + rename) and only when complete.
    """
    import av

    chunk_files = [Path(f) for f in chunk_files]
    out = Path(out)
    if out.suffix.lower() not in (".mp4", ".m4v", ".mov"):
        raise StitchError(f"{out.name}: the stitched output must be .mp4, .m4v or .mov")
    params = check_chunks(chunk_files)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial{out.suffix}")
    oc = av.open(str(tmp), "w", format="mov" if out.suffix.lower() == ".mov" else "mp4",
                 options={"movflags": "+faststart"})
    track = None
    try:
        first = open_container(chunk_files[0])
        try:
            ivs0 = first.streams.video[0]
            ovs = oc.add_stream_from_template(ivs0)
            tb = ivs0.time_base
            ovs.time_base = tb
        finally:
            first.close()
        track, mode = _open_audio(Path(original_clip), oc, start_frame) if audio else (None, None)
        frame_ticks = Fraction(1) / (params[0]["rate"] * tb) if params[0]["rate"] else None
        offset, last_dts, counts = 0, None, []
        for i, f in enumerate(chunk_files):
            n, offset, last_dts = _copy_chunk(i, f, oc, ovs, tb, offset, last_dts, frame_ticks, track)
            counts.append(n)
        total = sum(counts)
        if expected_frames is not None and total != int(expected_frames):
            raise StitchError(f"the {len(counts)} chunks hold {total} frames ({counts}) but the clip has "
                              f"{expected_frames}: a chunk is missing frames, refusing to deliver a shorter video")
        duration = float(offset * tb)
        if track is not None:
            track.finish(duration)
            track = None
        oc.close()
    except BaseException:
        if track is not None:
            track.close()
        try:
            oc.close()
        except (av.FFmpegError, OSError, ValueError):
            pass                    # a half-written muxer may refuse its trailer
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)
    return {"frames": total, "chunks": len(counts), "chunk_frames": counts, "audio": mode,
            "duration": round(duration, 6)}


def _copy_chunk(i: int, f: Path, oc, ovs, tb: Fraction, offset: int, last_dts: int | None,
                frame_ticks: Fraction | None, track) -> tuple[int, int, int | None]:
    """Mux one chunk's video packets shifted to start at ``offset``; returns (frames, new offset,
    last dts). Audio is fed up to the video's end as it advances (keeps the file interleaved)."""
    with open_container(f) as c:
        ivs = c.streams.video[0]
        scale = ivs.time_base / tb            # 1 unless a muxer picked another timescale
        packets = [p for p in c.demux(ivs) if p.size and p.pts is not None]
        if not packets:
            raise StitchError(f"chunk {i} ('{f.name}') holds no video packets")
        if not packets[0].is_keyframe:
            raise StitchError(f"chunk {i} ('{f.name}') does not start with a keyframe: it cannot be joined "
                              "without re-encoding (was it cut from a longer stream?)")
        t0 = min(p.pts for p in packets)
        end = offset
        for p in packets:
            dur = p.duration or (frame_ticks / scale if frame_ticks else 0)
            pts = _ticks((p.pts - t0) * scale, i, f) + offset
            dts = _ticks(((p.dts if p.dts is not None else p.pts) - t0) * scale, i, f) + offset
            if last_dts is not None and dts <= last_dts:
                raise StitchError(f"chunk {i} ('{f.name}'): decode timestamps would run backwards at the "
                                  "seam (different B-frame delay than the previous chunk?)")
            p.pts, p.dts, p.duration = pts, dts, _ticks(dur * scale, i, f)
            p.time_base = tb
            p.stream = ovs
            oc.mux(p)
            last_dts = dts
            end = max(end, pts + p.duration)
            if track is not None:
                track.feed_until(float(end * tb))
        return len(packets), end, last_dts


def _ticks(value, i: int, f: Path) -> int:
    v = Fraction(value)
    if v.denominator != 1:
        raise StitchError(f"chunk {i} ('{f.name}'): its timestamps do not fit the first chunk's clock "
                          "(different frame rate or time base)")
    return int(v)
