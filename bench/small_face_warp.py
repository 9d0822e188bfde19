"""Does the alignment warp lose detail on small faces? (issue 13.6)

Aligned 128 crops of the sample faces taken from frames downscaled so the face is 24/40/64 px
tall, warped with bilinear (what align.warp_crops uses), bicubic and Lanczos, compared (PSNR, dB)
with the crop from the full-resolution frame. Run: python bench/small_face_warp.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devtools.tracking_clips import KLING, WAN, frames_of  # noqa: E402
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer  # noqa: E402
from swapline_core.faces import align  # noqa: E402

FLAGS = {"linear": cv2.INTER_LINEAR, "cubic": cv2.INTER_CUBIC, "lanczos": cv2.INTER_LANCZOS4}


def psnr(x: np.ndarray, y: np.ndarray) -> float:
    return float(10 * np.log10(255.0 ** 2 / np.mean((x.astype(float) - y.astype(float)) ** 2)))


def main() -> None:
    analyzer = BuiltinAnalyzer()
    results: dict[tuple[int, str], list[float]] = {}
    for frame in frames_of(KLING)[::8] + frames_of(WAN)[::8]:
        for face in analyzer.detect([frame])[0]:
            ref = cv2.warpAffine(frame, align.estimate_norm(face.kps, 128), (128, 128), flags=cv2.INTER_LINEAR)
            height = float(face.bbox[3] - face.bbox[1])
            for px in (24, 40, 64):
                s = px / height
                small = cv2.resize(frame, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
                m = align.estimate_norm(face.kps * s, 128)
                for name, flag in FLAGS.items():
                    crop = cv2.warpAffine(small, m, (128, 128), flags=flag, borderMode=cv2.BORDER_REPLICATE)
                    results.setdefault((px, name), []).append(psnr(crop, ref))
    for (px, name), v in sorted(results.items()):
        print(f"face {px:3d} px  {name:8s} PSNR {np.mean(v):.2f} dB over {len(v)} faces")


if __name__ == "__main__":
    main()
