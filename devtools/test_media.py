"""Synthetic test media with frame numbers stamped into the pixels (they survive lossy coding):
videos with optional audio, variable timestamps or rotation, and animated GIF/WebP."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from PIL import Image

NTSC = Fraction(30000, 1001)
BITS = 8          # frame numbers are stamped as 8 big black/white squares
CELL = 16


def stamp(i: int, w: int, h: int) -> np.ndarray:
    """A frame whose number survives lossy coding: bit squares on a mid-grey gradient."""
    img = np.empty((h, w, 3), np.uint8)
    img[:] = np.linspace(60, 190, w, dtype=np.uint8)[None, :, None]
    for b in range(BITS):
        img[0:CELL, b * CELL:(b + 1) * CELL] = 255 if (i >> b) & 1 else 0
    return img


def read_stamp(img: np.ndarray) -> int:
    return sum(1 << b for b in range(min(BITS, img.shape[1] // CELL))
               if img[2:CELL - 2, b * CELL + 2:(b + 1) * CELL - 2].mean() > 128)


def make_video(path, n=60, w=160, h=120, rate=NTSC, vcodec="libx264", acodec=None,
               audio_rate=48000, pts=None, time_base=None, rotation=None, options=None,
               burst_at=None, fmt=None, vopts=None, pix_fmt="yuv420p"):
    """Encode ``n`` stamped frames; optional audio is a quiet 220 Hz tone, or silence with a
    loud 1 kHz burst from ``burst_at`` seconds (to check sync)."""
    c = av.open(str(path), "w", format=fmt, options=options or {})
    vs = c.add_stream(vcodec, rate=rate, options=vopts or {})
    vs.width, vs.height, vs.pix_fmt = w, h, pix_fmt
    if time_base is not None:
        vs.codec_context.time_base = time_base
    if rotation is not None:
        vs.set_display_rotation(rotation)
    a = None
    if acodec:
        a = c.add_stream(acodec, rate=audio_rate)
        a.layout = "stereo"
    for i in range(n):
        f = av.VideoFrame.from_ndarray(stamp(i, w, h), format="rgb24")
        if pts is not None:
            f.pts, f.time_base = pts[i], time_base
        for p in vs.encode(f):
            c.mux(p)
    for p in vs.encode():
        c.mux(p)
    if a is not None:
        total = int(round(audio_rate * n / float(rate)))
        fs = a.codec_context.frame_size or 1024
        fmt_a = a.codec_context.format.name
        t = 0
        while t < total:
            k = min(fs, total - t)
            s = np.arange(t, t + k) / audio_rate
            x = (0.1 * np.sin(2 * np.pi * 220 * s)).astype(np.float32)
            if burst_at is not None:
                x = np.where(s >= burst_at, 0.8 * np.sin(2 * np.pi * 1000 * s), 0.0).astype(np.float32)
            frame = av.AudioFrame.from_ndarray(np.stack([x, x]), format="fltp", layout="stereo")
            frame.sample_rate, frame.pts = audio_rate, t
            if fmt_a != "fltp":
                frame = av.AudioResampler(format=fmt_a, layout="stereo", rate=audio_rate).resample(frame)[0]
                frame.pts = t
            for p in a.encode(frame):
                c.mux(p)
            t += k
        for p in a.encode():
            c.mux(p)
    c.close()
    return Path(path)


def make_animation(path, n=12, w=67, h=51, durations=100):
    frames = [Image.fromarray(stamp(i, max(w, BITS * CELL), max(h, CELL))[:h, :w]) for i in range(n)]
    kw = {"lossless": True} if str(path).endswith(".webp") else {}
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=durations, loop=0, **kw)
    return Path(path)
