"""Streaming writers: H.264 MP4 (with the source's audio carried over) and still images.

Frames go to the encoder one at a time and audio is interleaved as the video advances, so
memory stays constant for any clip length. Output goes to a hidden temporary file first and is
renamed on success, so a crash or exception never leaves a half-written file under the name.
"""
from __future__ import annotations

import os
import uuid
from fractions import Fraction
from pathlib import Path

import numpy as np

from .probe import IMAGE_EXTS, checked_path, open_container, probe_with_index, snap_rate
from .read import frame_time

# Codecs an MP4/MOV plays everywhere without re-encoding. Opus/Vorbis/PCM/etc. become AAC.
MP4_COPY_AUDIO = frozenset({"aac", "mp3"})
AAC_BITRATE = 192_000
_CONTAINERS = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov"}


def temp_path(path: str | os.PathLike) -> Path:
    """A hidden temporary name next to ``path`` that is this writer's alone (pid and a random part).
    Two jobs writing the same output (the same prefix and counter, or the same cache key) then never
    share one: neither overwrites the other's partial file, and an abort deletes only its own. Same
    folder as ``path``, so the final rename is atomic."""
    p = Path(path)
    return p.with_name(f".{p.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.partial{p.suffix}")


def as_fraction(fps) -> Fraction:
    if isinstance(fps, Fraction):
        return fps
    if isinstance(fps, int):
        return Fraction(fps)
    # Floats like 29.97 mean 30000/1001; Fraction(29.97) would be a 52-bit monster.
    return snap_rate(float(fps))


class VideoWriter:
    """H.264 (yuv420p, BT.709 limited range) MP4/MOV writer, one frame at a time.

    yuv420p needs even sizes: odd widths/heights are padded by one pixel on the right/bottom
    by repeating the edge (``padded`` records it; decoders then deliver the even size).

        with VideoWriter(out, fps=info.fps_fraction, crf=18, preset="medium") as w:
            w.add_audio_from(src, start_frame=first_index)   # before the first frame
            for _, rgb in frames:
                w.write(rgb)
    """

    def __init__(self, path: str | os.PathLike, fps, *, crf: int = 18, preset: str = "medium",
                 codec: str = "libx264", faststart: bool = True,
                 codec_options: dict[str, str] | None = None):
        self.path = Path(path)
        fmt = _CONTAINERS.get(self.path.suffix.lower())
        if fmt is None:
            raise ValueError(f"{self.path.name}: output must end in {', '.join(_CONTAINERS)}")
        self.fps = as_fraction(fps)
        if self.fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        if not 0 <= int(crf) <= 51:
            raise ValueError(f"crf must be within 0..51, got {crf}")
        self.crf, self.preset, self.codec = int(crf), str(preset), codec
        self.frames_written = 0
        self.width = self.height = None        # of the frames given (before padding)
        self.padded = (0, 0)                   # pixels added (right, bottom)
        self.audio_mode: str | None = None     # "copy" | "aac" | None
        self._codec_options = dict(codec_options or {})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = temp_path(self.path)
        import av

        opts = {"movflags": "+faststart"} if faststart else {}
        self._out = av.open(str(self._tmp), "w", format=fmt, options=opts)
        self._vs = None
        self._audio = None
        self._closed = False

    # -- audio ---------------------------------------------------------------------------

    def add_audio_from(self, source: str | os.PathLike, start_frame: int | None = None,
                       start_time: float | None = None) -> bool:
        """Carry ``source``'s audio, aligned so output time 0 is source frame ``start_frame``
        (or ``start_time`` seconds after its frame 0); it is cut where the video ends.

        ``source`` may also be an audio-only file (wav, m4a, ...): then only ``start_time``
        applies, counted from the file's start. Copies the packets when the codec suits MP4
        (aac, mp3), otherwise re-encodes to AAC. Returns False (adding nothing) when the source
        has no audio. Must precede write().
        """
        if self._vs is not None:
            raise RuntimeError("add_audio_from() must be called before the first write()")
        if self._audio is not None:
            raise RuntimeError("audio was already added")
        src = Path(source)
        if src.is_dir() or src.suffix.lower() in IMAGE_EXTS:
            return False                         # stills and animated images carry no sound
        codec, t0 = audio_origin(src, start_frame, start_time)
        if codec is None:
            return False
        cls = _AudioCopy if codec in MP4_COPY_AUDIO else _AudioTranscode
        self._audio = cls(src, self._out, t0)
        self.audio_mode = cls.mode
        return True

    # -- video ---------------------------------------------------------------------------

    def _open_video(self, h: int, w: int) -> None:
        import av

        self.height, self.width = h, w
        self.padded = (w % 2, h % 2)
        options = {"crf": str(self.crf), "preset": self.preset}
        if self.codec == "libx264":
            # x264's macroblock-tree rate control made identical inputs encode to different
            # pixels from run to run (PyAV 18.1's libx264, any thread count); without it the
            # output is reproducible, so a resumed job writes the same video as an uninterrupted one.
            options["x264-params"] = "mbtree=0"
        vs = self._out.add_stream(self.codec, rate=self.fps, options={**options, **self._codec_options})
        vs.width, vs.height = w + self.padded[0], h + self.padded[1]
        vs.pix_fmt = "yuv420p"
        vs.time_base = Fraction(1) / self.fps
        cc = vs.codec_context
        # Tag what we convert with, so players and our reader undo the same matrix.
        cc.colorspace = cc.color_primaries = cc.color_trc = 1     # BT.709
        cc.color_range = 1                                         # limited ("tv")
        try:
            cc.open()
        except av.FFmpegError as e:
            raise ValueError(f"{self.codec} rejected the settings (crf={self.crf}, "
                             f"preset={self.preset!r}): {e}") from e
        self._vs = vs

    def write(self, rgb: np.ndarray) -> None:
        import av

        if self._closed:
            raise RuntimeError("write() after close()")
        if not (isinstance(rgb, np.ndarray) and rgb.dtype == np.uint8 and rgb.ndim == 3
                and rgb.shape[2] == 3):
            raise TypeError(f"frames must be uint8 arrays shaped (H, W, 3); got "
                            f"{getattr(rgb, 'dtype', type(rgb))} {getattr(rgb, 'shape', '')}")
        h, w = rgb.shape[:2]
        if self._vs is None:
            self._open_video(h, w)
        elif (h, w) != (self.height, self.width):
            raise ValueError(f"frame {self.frames_written} is {w}x{h}; this video is "
                             f"{self.width}x{self.height}")
        if self.padded != (0, 0):
            rgb = np.pad(rgb, ((0, self.padded[1]), (0, self.padded[0]), (0, 0)), mode="edge")
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame = frame.reformat(format="yuv420p", dst_colorspace="itu709", dst_color_range="MPEG")
        frame.pts = self.frames_written
        # Not self._vs.time_base: the muxer swaps that for its own clock once the header is out.
        frame.time_base = Fraction(1) / self.fps
        for pkt in self._vs.encode(frame):
            self._out.mux(pkt)
        self.frames_written += 1
        if self._audio is not None:
            # Audio follows the video clock (never ahead: the end is unknown until close()),
            # which keeps the file interleaved and the muxer's queue short.
            self._audio.feed_until(float(self.frames_written / self.fps))

    @property
    def duration(self) -> float:
        return float(self.frames_written / self.fps)

    # -- finish --------------------------------------------------------------------------

    def close(self) -> Path:
        if self._closed:
            return self.path
        if self._vs is None:
            self.abort()
            raise ValueError(f"{self.path.name}: no frames were written")
        try:
            for pkt in self._vs.encode():
                self._out.mux(pkt)
            if self._audio is not None:
                self._audio.finish(float(self.frames_written / self.fps))
            self._out.close()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Drop the output: close everything and delete this writer's partial file (only its own:
        another writer to the same path keeps going)."""
        import av

        if self._audio is not None:
            self._audio.close()
        try:
            self._out.close()
        except (av.FFmpegError, OSError, ValueError):
            pass            # a half-initialised muxer may refuse to write its trailer
        self._closed = True
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()


def audio_origin(src: Path, start_frame: int | None,
                  start_time: float | None) -> tuple[str | None, float]:
    """The audio codec of ``src`` and the source-clock time (s) that becomes output time 0."""
    with open_container(checked_path(src)) as c:
        if not c.streams.audio:
            return None, 0.0
        codec = c.streams.audio[0].codec_context.codec.canonical_name
        has_video = bool(c.streams.video)
        origin = (c.start_time or 0) / 1_000_000      # container clock, microseconds
    if has_video:
        # Align with the video frames, not the container's zero: frame 0 may start late.
        _, index = probe_with_index(src)
        origin = index.first_time
        offset = frame_time(src, start_frame) if start_frame is not None else float(start_time or 0.0)
    elif start_frame is not None:
        raise ValueError(f"{src.name} has no video frames; give start_time instead of start_frame")
    else:
        offset = float(start_time or 0.0)
    return codec, origin + offset


class _AudioCopy:
    """Remux the source's packets, shifted so ``t0`` lands at 0; whole packets only, so the
    ends are accurate to one audio frame (~21-26 ms)."""
    mode = "copy"

    def __init__(self, src: Path, out, t0: float):
        self._src = open_container(src)
        self._ins = self._src.streams.audio[0]
        self._os = out.add_stream_from_template(self._ins)
        self._os.codec_context.codec_tag = "\0\0\0\0"   # let the MP4 muxer pick its tag
        tb = self._ins.time_base
        self._t0 = round(t0 / tb)                 # in source ticks
        self._tb = tb
        if t0 > 0:
            self._src.seek(max(0, self._t0 - round(1 / tb)), stream=self._ins, backward=True)
        self._packets = self._demux()
        self._next = next(self._packets, None)

    def _demux(self):
        for pkt in self._src.demux(self._ins):
            if pkt.size and pkt.pts is not None:
                yield pkt

    def feed_until(self, t: float) -> None:
        """Mux packets that start before output time ``t`` (and end after 0)."""
        limit = self._t0 + t / self._tb
        while self._next is not None and self._next.pts < limit:
            pkt, self._next = self._next, next(self._packets, None)
            if pkt.pts + (pkt.duration or 0) <= self._t0:
                continue                          # wholly before the cut-in point
            pkt.pts -= self._t0
            pkt.dts = pkt.pts
            pkt.stream = self._os
            self._os.container.mux(pkt)

    def finish(self, end: float) -> None:
        self.feed_until(end)
        self.close()

    def close(self) -> None:
        self._src.close()


class _AudioTranscode:
    """Decode, cut sample-exactly to [t0, t0 + video duration) and encode AAC."""
    mode = "aac"

    def __init__(self, src: Path, out, t0: float):
        import av

        self._src = open_container(src)
        ins = self._src.streams.audio[0]
        self._ins = ins
        rate = ins.codec_context.sample_rate or 48000
        layout = "stereo" if (ins.codec_context.channels or 2) >= 2 else "mono"
        self._rate, self._layout = rate, layout
        self._os = out.add_stream("aac", rate=rate)
        self._os.layout = layout
        self._os.bit_rate = AAC_BITRATE
        self._os.codec_context.open()
        self._frame_size = self._os.codec_context.frame_size or 1024
        self._resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate)
        self._t0 = t0
        if t0 > 0:
            self._src.seek(max(0, int((t0 - 1.0) / ins.time_base)), stream=ins, backward=True)
        self._frames = self._src.decode(ins)
        self._channels = 2 if layout == "stereo" else 1
        self._pending = np.zeros((self._channels, 0), np.float32)
        self._pending_start = 0        # output sample index of _pending[:, 0]
        self._written = 0              # output samples sent to the encoder
        self._exhausted = False

    def _pull(self) -> bool:
        """Decode one more chunk into _pending (output-sample aligned); False at the end."""
        import av

        while True:
            try:
                frame = next(self._frames, None)
            except av.FFmpegError:
                frame = None           # damaged tail: keep what decoded, end the track there
            if frame is None:
                self._exhausted = True
                return False
            start = None
            if frame.pts is not None and frame.time_base is not None:
                start = round((float(frame.pts * frame.time_base) - self._t0) * self._rate)
            for rf in self._resampler.resample(frame):
                data = rf.to_ndarray().reshape(self._channels, -1)
                self._append(data, start)
                start = None
            return True

    def _append(self, data: np.ndarray, start: int | None) -> None:
        end_pending = self._pending_start + self._pending.shape[1]
        if start is None:
            start = end_pending
        # Overlap with what we hold (or anything before the cut-in at 0) is dropped.
        if start < end_pending:
            data = data[:, end_pending - start:]
            start = end_pending
        if start > end_pending:                   # a gap (late audio start): fill silence
            gap = np.zeros((data.shape[0], start - end_pending), np.float32)
            data = np.concatenate([gap, data], axis=1)
        self._pending = np.concatenate([self._pending, data], axis=1)

    def _encode(self, data: np.ndarray) -> None:
        import av

        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(data), format="fltp",
                                           layout=self._layout)
        frame.sample_rate = self._rate
        frame.pts = self._written
        frame.time_base = Fraction(1, self._rate)
        self._written += data.shape[1]
        for pkt in self._os.encode(frame):
            self._os.container.mux(pkt)

    def feed_until(self, t: float, final: bool = False) -> None:
        target = round(t * self._rate)
        fs = self._frame_size
        while True:
            avail = self._pending_start + self._pending.shape[1]
            if avail >= target or self._exhausted or not self._pull():
                break
        # The encoder takes whole frames except the very last one.
        while self._pending.shape[1] >= fs and self._written + fs <= target:
            self._encode(self._pending[:, :fs])
            self._pending = self._pending[:, fs:]
            self._pending_start += fs
        if final:
            rest = max(0, min(self._pending.shape[1], target - self._written))
            if rest:
                self._encode(self._pending[:, :rest])
            for pkt in self._os.encode(None):
                self._os.container.mux(pkt)

    def finish(self, end: float) -> None:
        self.feed_until(end, final=True)
        self.close()

    def close(self) -> None:
        self._src.close()


def write_image(path: str | os.PathLike, rgb: np.ndarray, quality: int = 95) -> Path:
    """Save an RGB uint8 (H, W, 3) array as PNG or JPEG (chosen by the file extension)."""
    from PIL import Image

    p = Path(path)
    fmt = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}.get(p.suffix.lower())
    if fmt is None:
        raise ValueError(f"{p.name}: image output must be .png, .jpg or .jpeg")
    if not (isinstance(rgb, np.ndarray) and rgb.dtype == np.uint8 and rgb.ndim == 3
            and rgb.shape[2] == 3):
        raise TypeError("images must be uint8 arrays shaped (H, W, 3)")
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(p)
    opts = {"quality": int(quality)} if fmt == "JPEG" else {"compress_level": 6}
    try:
        Image.fromarray(rgb).save(tmp, format=fmt, **opts)
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)
    return p


__all__ = ["AAC_BITRATE", "MP4_COPY_AUDIO", "VideoWriter", "temp_path", "write_image"]
