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

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

# Probing lives in .probe; its public names stay importable from here (one import point for
# readers: nodes, bench and tests use ``video.read``).
from .probe import (
    DEFAULT_FOLDER_FPS,
    FOLDER_EXTS,
    IMAGE_EXTS,
    FrameIndex,
    MissingMediaError,
    VideoInfo,
    VideoReadError,
    checked_path,
    clear_probe_cache,
    natural_key,
    open_container,
    probe,
    probe_with_index,
    snap_rate,
)

__all__ = ["DEFAULT_FOLDER_FPS", "FOLDER_EXTS", "IMAGE_EXTS", "FrameIndex", "MissingMediaError", "VideoInfo",
           "VideoReadError", "checked_path", "clear_probe_cache", "frame_time", "iter_chunks", "iter_frames",
           "natural_key", "open_container", "probe", "probe_with_index", "read_frames", "snap_rate"]

# Seeking costs a keyframe decode; for short gaps decoding straight through is cheaper.
_SEEK_GAP = 48

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


def _iter_video(p: Path, info: VideoInfo, idx: FrameIndex, wanted: range) -> Iterator[tuple[int, np.ndarray]]:
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


def _iter_folder(info: VideoInfo, idx: FrameIndex, wanted: range) -> Iterator[tuple[int, np.ndarray]]:
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
