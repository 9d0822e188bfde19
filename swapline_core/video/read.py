"""Streaming readers for everything Swapline accepts as a "video".

Kinds: container video (mp4/mov/webm/mkv/... via PyAV), animated images (gif, animated webp,
apng via Pillow: FFmpeg's webp decoder in PyAV 18 rejects animated webp), a folder of numbered
images, and a single still image (a one-frame video).

Memory stays constant: frames are decoded one at a time and handed out; only a small per-file
index (one int64 timestamp per frame) is kept, so frame numbers stay exact after seeking and
for variable frame rates. Frames are always RGB ``uint8`` arrays shaped (H, W, 3), already
rotated upright when the container carries a display rotation (phone videos).
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

IMAGE_EXTS = frozenset({".png", ".apng", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff"})
FOLDER_EXTS = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"})
# A folder of stills has no clock of its own; callers may override the rate when writing.
DEFAULT_FOLDER_FPS = Fraction(24)
# Browsers show GIF/WebP frames without a usable delay for 100 ms; match them.
_DEFAULT_FRAME_MS = 100
# Intervals deviating more than this share of the median (and more than ~1 clock tick, so
# millisecond rounding at high rates is not mistaken for VFR) mark a clip as variable rate.
_VFR_TOLERANCE = 0.2
# Seeking costs a keyframe decode; for short gaps decoding straight through is cheaper.
_SEEK_GAP = 48
_CACHE_SIZE = 64


class VideoReadError(Exception):
    """A clip could not be read (fully). ``frames_readable`` frames decoded before the fault."""

    def __init__(self, path: str | os.PathLike, problem: str, frames_readable: int | None = None):
        self.path = str(path)
        self.problem = problem
        self.frames_readable = frames_readable
        msg = f"{Path(path).name}: {problem}"
        if frames_readable == 0:
            msg += " (no frame could be read)"
        elif frames_readable is not None:
            msg += f" ({frames_readable} frame{'s' if frames_readable != 1 else ''} readable before that)"
        super().__init__(f"{msg} [{self.path}]")


class MissingMediaError(VideoReadError, FileNotFoundError):
    """Raised for paths that do not exist; also a ``FileNotFoundError``."""


@dataclass(frozen=True)
class VideoInfo:
    path: str
    kind: str                       # "video" | "animated_image" | "image_folder" | "image"
    width: int                      # as delivered by iter_frames (after display rotation)
    height: int
    fps: float                      # average rate
    fps_fraction: Fraction          # exact average rate (e.g. 30000/1001) for writers
    frame_count: int                # exact: counted from the stream, not the header
    duration: float                 # seconds, first frame start to last frame end
    has_audio: bool
    audio_codec: str | None
    audio_duration: float | None
    content_key: str                # sha256 of the bytes (folders: names and bytes of each file)
    variable_fps: bool = False
    codec: str | None = None        # video codec ("h264", "vp9", "webp", "gif", "png", ...)
    rotation: int = 0               # degrees applied to decoded frames to show them upright
    audio_start: float = 0.0        # audio's first sample relative to frame 0, seconds


@dataclass(frozen=True)
class _Index:
    """What probe learned that reading needs: frame timestamps or the still files."""
    pts: np.ndarray | None = None         # sorted presentation timestamps (video kind)
    time_base: Fraction | None = None
    first_time: float = 0.0               # seconds of frame 0 on the container clock
    files: tuple[str, ...] = ()           # image_folder members in natural order


_cache: OrderedDict[tuple, tuple[VideoInfo, _Index]] = OrderedDict()
_cache_lock = threading.Lock()     # ComfyUI may probe from its worker and server threads


def clear_probe_cache() -> None:
    with _cache_lock:
        _cache.clear()


def natural_key(name: str) -> list:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


def _stat_key(p: Path) -> tuple:
    if p.is_dir():
        parts = []
        for f in _folder_files(p):
            st = f.stat()
            parts.append((f.name, st.st_size, st.st_mtime_ns))
        return (str(p.resolve()), "dir", tuple(parts))
    st = p.stat()
    return (str(p.resolve()), st.st_size, st.st_mtime_ns)


def _folder_files(folder: Path) -> list[Path]:
    files = [f for f in folder.iterdir()
             if f.is_file() and f.suffix.lower() in FOLDER_EXTS and not f.name.startswith(".")]
    return sorted(files, key=lambda f: natural_key(f.name))


def _hash_files(files: Sequence[Path], with_names: bool) -> str:
    h = hashlib.sha256()
    for f in files:
        if with_names:
            h.update(f.name.encode("utf-8") + b"\0" + str(f.stat().st_size).encode() + b"\0")
        with open(f, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
    return h.hexdigest()


def checked_path(path: str | os.PathLike) -> Path:
    # Absolute (not resolved: symlinked media keeps its name) so infos survive a chdir.
    p = Path(os.path.abspath(path))
    if not p.exists():
        raise MissingMediaError(p, "file not found")
    if p.is_file() and p.stat().st_size == 0:
        raise VideoReadError(p, "file is empty (0 bytes)", 0)
    return p


# ---------------------------------------------------------------------------------- probe


def probe(path: str | os.PathLike) -> VideoInfo:
    """Describe a clip exactly; cached per (path, size, mtime), so repeat calls are free."""
    return probe_with_index(path)[0]


def probe_with_index(path: str | os.PathLike) -> tuple[VideoInfo, _Index]:
    p = checked_path(path)
    key = _stat_key(p)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    if p.is_dir():
        result = _probe_folder(p)
    elif p.suffix.lower() in IMAGE_EXTS:
        result = _probe_pillow(p)
    else:
        result = _probe_av(p)
    with _cache_lock:
        _cache[key] = result
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return result


def _rate_from_intervals(intervals: np.ndarray, tick: float,
                         declared: Fraction | None = None) -> tuple[Fraction, bool]:
    """Average rate (snapped to an exact one, see snap_rate) and whether it varies."""
    mean = float(intervals.mean())
    median = float(np.median(intervals))
    variable = bool(np.abs(intervals - median).max() > max(_VFR_TOLERANCE * median, 1.5 * tick))
    return snap_rate(1.0 / mean, declared), variable


def snap_rate(fps: float, declared: Fraction | None = None) -> Fraction:
    """The exact rate behind a measured one: the container's own, a standard NTSC/integer
    rate, or failing both the measurement in thousandths."""
    if declared and abs(float(declared) - fps) <= 0.001 * fps:
        return Fraction(declared)
    base = round(fps)
    cands = [Fraction(b * k, d) for b in (base, base + 1) if b > 0 for k, d in ((1, 1), (1000, 1001))]
    best = min(cands, key=lambda c: abs(float(c) - fps))
    if abs(float(best) - fps) <= 0.001 * fps:
        return best
    return Fraction(round(fps * 1000), 1000)


def _probe_folder(p: Path) -> tuple[VideoInfo, _Index]:
    from PIL import Image

    files = _folder_files(p)
    if not files:
        raise VideoReadError(p, f"folder holds no images ({', '.join(sorted(FOLDER_EXTS))})", 0)
    try:
        with Image.open(files[0]) as im:
            w, h = im.size
    except Exception as e:  # Pillow raises many types for bad files
        raise VideoReadError(files[0], f"cannot read first image of the folder: {e}", 0) from e
    n = len(files)
    info = VideoInfo(path=str(p), kind="image_folder", width=w, height=h,
                     fps=float(DEFAULT_FOLDER_FPS), fps_fraction=DEFAULT_FOLDER_FPS,
                     frame_count=n, duration=n / float(DEFAULT_FOLDER_FPS), has_audio=False,
                     audio_codec=None, audio_duration=None,
                     content_key=_hash_files(files, with_names=True), codec="images")
    return info, _Index(files=tuple(str(f) for f in files))


def _probe_pillow(p: Path) -> tuple[VideoInfo, _Index]:
    from PIL import Image

    durations = []
    try:
        with Image.open(p) as im:
            w, h = im.size
            fmt = (im.format or p.suffix.lstrip(".")).lower()
            n = int(getattr(im, "n_frames", 1))
            # Walking the frames validates the file and gives per-frame delays.
            for i in range(n):
                im.seek(i)
                im.load()
                durations.append(int(im.info.get("duration") or 0) or _DEFAULT_FRAME_MS)
    except Exception as e:
        raise VideoReadError(p, f"cannot decode image data: {e}", len(durations)) from e
    key = _hash_files([p], with_names=False)
    if n == 1:
        info = VideoInfo(path=str(p), kind="image", width=w, height=h,
                         fps=float(DEFAULT_FOLDER_FPS), fps_fraction=DEFAULT_FOLDER_FPS,
                         frame_count=1, duration=1 / float(DEFAULT_FOLDER_FPS), has_audio=False,
                         audio_codec=None, audio_duration=None, content_key=key, codec=fmt)
        return info, _Index()
    d = np.asarray(durations, dtype=np.float64) / 1000.0
    rate, variable = _rate_from_intervals(d, tick=0.01 if fmt == "gif" else 0.001)
    info = VideoInfo(path=str(p), kind="animated_image", width=w, height=h, fps=float(rate),
                     fps_fraction=rate, frame_count=n, duration=float(d.sum()), has_audio=False,
                     audio_codec=None, audio_duration=None, content_key=key,
                     variable_fps=variable, codec=fmt)
    return info, _Index()


def open_container(p: Path):
    import av

    try:
        return av.open(str(p), metadata_errors="ignore")
    except av.FFmpegError as e:
        raise VideoReadError(p, f"not a readable video (truncated or corrupt?): {e}", 0) from e


def _probe_av(p: Path) -> tuple[VideoInfo, _Index]:
    import av

    with open_container(p) as c:
        if not c.streams.video:
            raise VideoReadError(p, "contains no video frames (no video stream)", 0)
        vs = c.streams.video[0]
        aus = c.streams.audio[0] if c.streams.audio else None
        header_frames = vs.frames
        # Demuxing without decoding is cheap and, unlike the header, always right.
        pts: list[int] = []
        a_first = a_end = None
        damaged = None
        try:
            for pkt in c.demux([s for s in (vs, aus) if s is not None]):
                if pkt.size == 0 or pkt.is_discard:
                    continue
                if pkt.is_corrupt:
                    damaged = "a packet is cut short"
                    break
                if pkt.stream is vs:
                    ts = pkt.pts if pkt.pts is not None else pkt.dts
                    pts.append(ts if ts is not None else len(pts))
                elif pkt.pts is not None:
                    a_first = pkt.pts if a_first is None else min(a_first, pkt.pts)
                    end = pkt.pts + (pkt.duration or 0)
                    a_end = end if a_end is None else max(a_end, end)
        except av.FFmpegError as e:
            damaged = str(e)
        # Tell "header miscounts" (trust packets) from "data missing" (refuse).
        if damaged:
            raise VideoReadError(p, f"truncated or corrupt ({damaged}); the header lists "
                                 f"{header_frames or 'an unknown number of'} frames",
                                 _count_decodable(p))
        if not pts:
            raise VideoReadError(p, "contains no video frames", 0)
        tb = vs.time_base
        declared = vs.average_rate
        audio_codec = aus.codec_context.codec.canonical_name if aus is not None else None
        a_tb = aus.time_base if aus is not None else None

    pts_arr = np.sort(np.asarray(pts, dtype=np.int64))
    w, h, rotation = _first_frame_facts(p)
    if pts_arr.size > 1:
        intervals = np.diff(pts_arr).astype(np.float64) * float(tb)
        rate, variable = _rate_from_intervals(intervals, tick=float(tb), declared=declared)
        duration = float((pts_arr[-1] - pts_arr[0]) * tb) + float(np.median(intervals))
    else:
        rate, variable = snap_rate(float(declared or 25), declared), False
        duration = 1 / float(rate)
    if rotation % 180:
        w, h = h, w
    first_time = float(pts_arr[0] * tb)
    audio_duration = float((a_end - a_first) * a_tb) if a_first is not None else None
    info = VideoInfo(
        path=str(p), kind="video", width=w, height=h, fps=float(rate), fps_fraction=rate,
        frame_count=int(pts_arr.size), duration=duration, has_audio=a_first is not None,
        audio_codec=audio_codec if a_first is not None else None, audio_duration=audio_duration,
        content_key=_hash_files([p], with_names=False), variable_fps=variable,
        codec=vs.codec_context.codec.canonical_name, rotation=rotation,
        audio_start=float(a_first * a_tb) - first_time if a_first is not None else 0.0)
    return info, _Index(pts=pts_arr, time_base=tb, first_time=first_time)


def _first_frame_facts(p: Path) -> tuple[int, int, int]:
    """Decoded size and display rotation: the header's size can differ from what decodes."""
    import av

    with open_container(p) as c:
        try:
            for frame in c.decode(c.streams.video[0]):
                return frame.width, frame.height, _rotation_of(frame)
        except av.FFmpegError as e:
            raise VideoReadError(p, f"the first frame cannot be decoded: {e}", 0) from e
    raise VideoReadError(p, "the video stream decodes to no frames", 0)


def _count_decodable(p: Path) -> int:
    """Frames that decode before the first fault; only used to word an error exactly."""
    import av

    n = 0
    try:
        with open_container(p) as c:
            for _ in c.decode(c.streams.video[0]):
                n += 1
    except (av.FFmpegError, VideoReadError):
        pass
    return n


def _rotation_of(frame) -> int:
    # PyAV reports the display matrix angle counter-clockwise; np.rot90 turns the same way.
    r = round((getattr(frame, "rotation", 0) or 0) / 90.0) * 90
    return r % 360


# -------------------------------------------------------------------------------- reading


def frame_time(path: str | os.PathLike, index: int) -> float:
    """Presentation time of frame ``index`` in seconds after frame 0 (exact for VFR too)."""
    info, idx = probe_with_index(path)
    _check_index(info, index)
    if idx.pts is not None:
        return float((idx.pts[index] - idx.pts[0]) * idx.time_base)
    return index / info.fps


def constant_rate_shift(path: str | os.PathLike, start: int, count: int, stride: int, fps: float) -> float:
    """Largest |source time - i / fps| in seconds over the frames used: how far writing them at a
    constant ``fps`` moves a frame of a variable-frame-rate clip (0 for constant-rate sources)."""
    info, idx = probe_with_index(path)
    if not info.variable_fps or idx.pts is None or count <= 0 or fps <= 0:
        return 0.0
    used = np.arange(start, min(start + count * stride, info.frame_count), stride)
    src = (idx.pts[used] - idx.pts[used[0]]).astype(np.float64) * float(idx.time_base)
    return float(np.abs(src - np.arange(len(used)) / fps).max())


def _check_index(info: VideoInfo, index: int) -> None:
    if not 0 <= index < info.frame_count:
        raise IndexError(f"frame {index} is outside {Path(info.path).name} "
                         f"(frames 0..{info.frame_count - 1})")


def iter_frames(path: str | os.PathLike, start: int = 0, count: int | None = None,
                stride: int = 1) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(index, rgb)`` for frames start, start+stride, ... (at most ``count`` of them).

    ``count`` counts yielded frames, not source frames. Decoding faults raise VideoReadError
    after the frames that did decode were yielded.
    """
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    if count is not None and count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    info, idx = probe_with_index(path)
    if count == 0:
        return
    _check_index(info, start)
    stop = info.frame_count if count is None else min(info.frame_count, start + count * stride)
    wanted = range(start, stop, stride)
    if info.kind == "video":
        yield from _iter_video(Path(info.path), info, idx, wanted)
    elif info.kind == "image_folder":
        yield from _iter_folder(info, idx, wanted)
    else:
        yield from _iter_pillow(Path(info.path), info, wanted)


def iter_chunks(path: str | os.PathLike, start: int = 0, count: int | None = None,
                stride: int = 1, chunk: int = 16) -> Iterator[list[tuple[int, np.ndarray]]]:
    """Like iter_frames, grouped in lists of up to ``chunk`` frames for batched stages."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    batch: list[tuple[int, np.ndarray]] = []
    for item in iter_frames(path, start, count, stride):
        batch.append(item)
        if len(batch) == chunk:
            yield batch
            batch = []
    if batch:
        yield batch


def read_frames(path: str | os.PathLike, indices: Sequence[int]) -> list[np.ndarray]:
    """Random access to a few frames, returned in the order asked (repeats allowed)."""
    info = probe(path)
    for i in indices:
        _check_index(info, i)
    got: dict[int, np.ndarray] = {}
    wanted = sorted({int(i) for i in indices})
    # Runs of nearby frames share one seek; far-apart ones each get their own.
    runs: list[list[int]] = []
    for i in wanted:
        if runs and i - runs[-1][-1] <= _SEEK_GAP:
            runs[-1].append(i)
        else:
            runs.append([i])
    for run in runs:
        keep = set(run)
        for i, frame in iter_frames(path, start=run[0], count=run[-1] - run[0] + 1):
            if i in keep:
                got[i] = frame
    return [got[int(i)] for i in indices]


def _to_rgb(frame, rotation: int) -> np.ndarray:
    rgb = frame.to_ndarray(format="rgb24")
    if rotation:
        rgb = np.ascontiguousarray(np.rot90(rgb, k=rotation // 90))
    return rgb


def _iter_video(p: Path, info: VideoInfo, idx: _Index, wanted: range) -> Iterator[tuple[int, np.ndarray]]:
    import av

    start, last = wanted.start, wanted[-1]
    produced = 0
    seek = start > 0
    while True:
        with open_container(p) as c:
            vs = c.streams.video[0]
            vs.thread_type = "AUTO"
            pos = 0
            if seek:
                c.seek(int(idx.pts[start]), stream=vs, backward=True, any_frame=False)
                pos = None
            try:
                for frame in c.decode(vs):
                    if pos is None:
                        # After a seek, the first frame's timestamp says where we landed.
                        pos = int(np.searchsorted(idx.pts, frame.pts)) if frame.pts is not None else -1
                        if pos < 0 or pos > start or pos >= len(idx.pts) or idx.pts[pos] != frame.pts:
                            break       # imprecise seek: fall back to decoding from frame 0
                    i = pos
                    pos += 1
                    if i < start or (i - start) % wanted.step:
                        continue
                    produced += 1
                    yield i, _to_rgb(frame, info.rotation)
                    if i >= last:
                        return
                else:
                    raise VideoReadError(p, f"stream ended early, before frame {pos or 0} of "
                                         f"{info.frame_count}", pos or 0)
            except av.FFmpegError as e:
                raise VideoReadError(p, f"decoding failed at frame {pos or 0}: {e}", pos or 0) from e
        if not seek:
            raise VideoReadError(p, "no frames could be decoded", 0)
        seek = False


def _iter_pillow(p: Path, info: VideoInfo, wanted: range) -> Iterator[tuple[int, np.ndarray]]:
    from PIL import Image

    with Image.open(p) as im:
        for i in wanted:
            try:
                im.seek(i)
                rgb = _pil_to_rgb(im)
            except Exception as e:
                raise VideoReadError(p, f"decoding failed at frame {i}: {e}", i) from e
            yield i, rgb


def _pil_to_rgb(im) -> np.ndarray:
    from PIL import Image

    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        # Colour under fully transparent pixels is undefined; composite on black for stable output.
        rgba = im.convert("RGBA")
        black = Image.new("RGBA", rgba.size, (0, 0, 0, 255))
        return np.asarray(Image.alpha_composite(black, rgba).convert("RGB"))
    return np.asarray(im.convert("RGB"))


def _iter_folder(info: VideoInfo, idx: _Index, wanted: range) -> Iterator[tuple[int, np.ndarray]]:
    from PIL import Image

    for i in wanted:
        f = idx.files[i]
        try:
            with Image.open(f) as im:
                rgb = _pil_to_rgb(im)
        except Exception as e:
            raise VideoReadError(f, f"cannot read frame {i} of the folder: {e}", i) from e
        if rgb.shape[:2] != (info.height, info.width):
            raise VideoReadError(f, f"frame {i} is {rgb.shape[1]}x{rgb.shape[0]} but the folder's "
                                 f"first image is {info.width}x{info.height}", i)
        yield i, rgb
