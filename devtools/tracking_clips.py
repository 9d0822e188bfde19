"""Clips for the tracking tests, built from the real sample media (tests/.cache/media, MIT).

Each clip is written as a folder of numbered PNGs, which FrameSequence reads like a video.
"""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from swapline_core.video import read as video_read

MEDIA = Path(__file__).resolve().parent.parent / "tests" / ".cache" / "media"
KLING = MEDIA / "api_kling_avatar2-1.webp"          # one face (sunglasses), 56 frames 350x350
WAN = MEDIA / "video_wan2_1_infinitetalk-1.webp"    # two faces, 45 frames 350x350


def frames_of(path: Path, count: int | None = None) -> list[np.ndarray]:
    if not path.is_file():
        raise FileNotFoundError(f"{path.name} missing: run scripts/setup.sh to fetch the sample media")
    return [f for _, f in video_read.iter_frames(path, 0, count)]


def write_clip(folder: Path, frames: list[np.ndarray]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(frames):
        cv2.imwrite(str(folder / f"{i:05d}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR),
                    [cv2.IMWRITE_PNG_COMPRESSION, 1])
    return str(folder)


def texture(width: int, height: int, seed: int = 0) -> np.ndarray:
    """A static, face-free but textured background (so optical flow has something to lock on)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(40, 215, (height // 8 + 1, width // 8 + 1, 3), dtype=np.uint8)
    big = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
    return cv2.GaussianBlur(big, (0, 0), 2.0)


def face_spans(faces) -> list[int]:
    """Frame indices with at least one face."""
    return [fr.index for fr in faces.frames if fr.faces]
