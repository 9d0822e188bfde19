"""Bridges between in-memory clips (ComfyUI IMAGE + AUDIO, core VIDEO components) and the
file-backed FrameSequence: a lossless NUT file (FFV1 RGB + float PCM) written once, and the audio of a
sequence's frame range as a sample array.

FFV1 in bgr0 is bit-exact for 8-bit RGB, so a frame sequence opened on the file decodes to the
very pixels it was given; the audio is kept as float PCM, bit-exact. NUT rather than Matroska:
Matroska stores times in milliseconds, so a short 15 fps clip measures as 14.985 fps; NUT keeps
the exact rate. Used by the VHS/core-VIDEO interop nodes.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import numpy as np

from .read import checked_path, open_container
from .write import as_fraction, audio_origin, temp_path


def write_lossless(path: str | os.PathLike, frames: Iterable[np.ndarray], fps,
                   audio: tuple[np.ndarray, int] | None = None) -> int:
    """Write RGB uint8 frames (and optional audio: float samples (channels, n) in [-1, 1] and
    the sample rate) to an FFV1/PCM NUT file (path should end in .nut); returns the frame count. Written to a
    temporary name of its own and renamed, so a file at ``path`` is always complete."""
    import av

    path = Path(path)
    fps = as_fraction(fps)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)       # this call's own: a concurrent write of the same file keeps its own
    n = 0
    try:
        with av.open(str(tmp), "w", format="nut") as out:
            vs = out.add_stream("ffv1", rate=fps)
            vs.pix_fmt = "bgr0"
            vs.time_base = Fraction(1, 1) / fps
            as_ = None
            if audio is not None:
                samples, rate = audio
                samples = np.ascontiguousarray(np.clip(np.asarray(samples, np.float32), -1.0, 1.0))
                if samples.ndim != 2 or samples.shape[0] not in (1, 2):
                    raise ValueError(f"audio must be (channels, samples) with 1 or 2 channels, got {samples.shape}")
                as_ = out.add_stream("pcm_f32le", rate=int(rate))
                as_.layout = "stereo" if samples.shape[0] == 2 else "mono"
                as_.format = "flt"
            for rgb in frames:
                if n == 0:
                    vs.height, vs.width = rgb.shape[:2]
                frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[..., :3]), format="rgb24")
                frame = frame.reformat(format="bgr0")
                frame.pts = n
                out.mux(vs.encode(frame))
                n += 1
            if n == 0:
                raise ValueError("no frames to write")
            out.mux(vs.encode(None))
            if as_ is not None and samples.shape[1]:
                step = 4096
                for s in range(0, samples.shape[1], step):
                    block = np.ascontiguousarray(samples[:, s:s + step].T.reshape(1, -1))
                    af = av.AudioFrame.from_ndarray(block, format="flt", layout=as_.layout.name)
                    af.sample_rate = int(rate)
                    af.pts = s
                    out.mux(as_.encode(af))
                out.mux(as_.encode(None))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return n


def read_audio(path: str | os.PathLike, start_frame: int, duration: float) -> tuple[np.ndarray, int] | None:
    """The audio that plays with ``duration`` seconds of ``path`` from video frame ``start_frame``,
    as float32 (channels, samples) and its sample rate; None when the file has no audio."""
    import av

    src = checked_path(path)
    codec, t0 = audio_origin(src, start_frame, None)
    if codec is None:
        return None
    with open_container(src) as c:
        ins = c.streams.audio[0]
        rate = ins.codec_context.sample_rate or 48000
        layout = "stereo" if (ins.codec_context.channels or 2) >= 2 else "mono"
        channels = 2 if layout == "stereo" else 1
        resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate)
        want = round(duration * rate)
        out = np.zeros((channels, want), np.float32)
        if t0 > 0:
            c.seek(max(0, int((t0 - 1.0) / ins.time_base)), stream=ins, backward=True)
        # Anchor on the first decoded frame's time, then count samples: container timestamps
        # (e.g. Matroska's 1 ms) can be too coarse to place each frame to the sample.
        first = None
        for frame in c.decode(ins):
            if first is None:
                if frame.time is None:
                    continue
                first = round((frame.time - t0) * rate)  # output index of this frame's sample 0
            if first >= want:
                break
            for rf in resampler.resample(frame):
                data = rf.to_ndarray().reshape(channels, -1)
                lo, hi = max(0, -first), min(data.shape[1], want - first)
                if hi > lo:
                    out[:, first + lo:first + hi] = data[:, lo:hi]
                first += data.shape[1]
    return out, rate
