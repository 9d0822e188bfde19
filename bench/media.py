"""Benchmark clips: the shipped sample, and longer 1280x720 clips generated from its frames.

Each 350x350 sample frame is fitted into a 1280x720 canvas (scaled to 720x720, centred; the
sides hold a dark, heavily blurred copy of the frame, like a pillarboxed phone video, so the
encoder sees real content rather than flat black), and the 48 frames are looped ping-pong
(0..47, 46..1, 0..) to the wanted length, then encoded as H.264 (crf 23, veryfast) with
VideoWriter. Clips are cached in out/bench/media, keyed by the sample's content and GEN_VERSION.
"""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from .paths import MEDIA, SAMPLE_CLIP

GEN_VERSION = 1
WIDTH, HEIGHT = 1280, 720
SIZE = (WIDTH, HEIGHT)
CRF, PRESET = 23, "veryfast"


def sample_frames() -> list[np.ndarray]:
    from swapline_core.video.read import iter_frames

    return [f for _, f in iter_frames(SAMPLE_CLIP)]


def fit_to_canvas(frame: np.ndarray, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    h, w = frame.shape[:2]
    scale = min(width / w, height / h)
    fw, fh = int(round(w * scale)), int(round(h * scale))
    fg = cv2.resize(frame, (fw, fh), interpolation=cv2.INTER_CUBIC if scale > 1 else cv2.INTER_AREA)
    cover = max(width / w, height / h)
    cw, ch = int(np.ceil(w * cover)), int(np.ceil(h * cover))
    bg = cv2.resize(frame, (cw, ch), interpolation=cv2.INTER_LINEAR)
    y, x = (ch - height) // 2, (cw - width) // 2
    bg = cv2.GaussianBlur(bg[y:y + height, x:x + width], (0, 0), 25)
    canvas = (bg.astype(np.float32) * 0.35).astype(np.uint8)
    y0, x0 = (height - fh) // 2, (width - fw) // 2
    canvas[y0:y0 + fh, x0:x0 + fw] = fg
    return canvas


def pingpong(n_frames: int, n_source: int) -> list[int]:
    cycle = list(range(n_source)) + list(range(n_source - 2, 0, -1))
    return [cycle[i % len(cycle)] for i in range(n_frames)]


def generated_clip(n_frames: int, log=print, size: tuple[int, int] = SIZE) -> Path:
    """The cached n-frame clip (1280x720 unless ``size``), generating it when missing or stale."""
    from swapline_core.video.read import probe
    from swapline_core.video.write import VideoWriter

    width, height = size
    info = probe(SAMPLE_CLIP)
    meta = {"version": GEN_VERSION, "frames": n_frames, "size": [width, height], "crf": CRF,
            "preset": PRESET, "sample": info.content_key, "fps": str(info.fps_fraction)}
    path = MEDIA / f"gen_{n_frames}f_{width}x{height}.mp4"
    sidecar = path.with_suffix(".json")
    if path.is_file() and sidecar.is_file() and json.loads(sidecar.read_text()) == meta:
        return path
    log(f"generating {path.name} ({n_frames} frames, {width}x{height}, crf {CRF} {PRESET})")
    MEDIA.mkdir(parents=True, exist_ok=True)
    canvases = [fit_to_canvas(f, width, height) for f in sample_frames()]
    with VideoWriter(path, fps=info.fps_fraction, crf=CRF, preset=PRESET) as w:
        for i in pingpong(n_frames, len(canvases)):
            w.write(canvases[i])
    sidecar.write_text(json.dumps(meta, indent=1))
    return path
