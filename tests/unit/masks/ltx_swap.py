"""The ltx clip (a woman in an ornamented headdress against the sky, video_ltx2_3_i2v) swapped by
the classical swapper without and with the mask stack: what the occluder rules judged on real
footage (test_chroma, test_texture) compare."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[3]
LTX = ROOT / "tests" / ".cache" / "media" / "video_ltx2_3_i2v-1.webp"
SOURCE = ROOT / "assets" / "samples" / "source_face.png"


def plain_and_stack(store: Path, start: int, count: int, landmarks: bool = False):
    """(frames, faces, {"plain": swapped frames, "stack": swapped frames}) for ``count`` frames
    from ``start``; ``landmarks``: the tracked faces also get their 68 points."""
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.faces import identity as face_model
    from swapline_core.masks import MaskOptions
    from swapline_core.swap.chunk import SwapOptions
    from swapline_core.video import stages as pipeline
    from swapline_core.video.frames import FrameSequence

    if not LTX.is_file():
        pytest.fail(f"{LTX} missing: run scripts/setup.sh (it fetches the sample clips into tests/.cache/media)")
    analyzer = BuiltinAnalyzer()
    source = face_model.build_from_images(analyzer, [np.array(Image.open(SOURCE).convert("RGB"))])
    seq = FrameSequence.open(str(LTX), start=start, count=count, chunk=count)
    faces, _ = pipeline.track_faces(seq, analyzer, str(store), pipeline.Hooks(), mode="largest", max_faces=1)
    frames = [f for _, ch in seq.iter_chunks() for f in ch]
    if landmarks:
        analyzer.landmarks68(frames, [fr.faces for fr in faces.frames])
    results = {}
    for name, masks in (("plain", MaskOptions(enabled=False)), ("stack", MaskOptions())):
        out, _ = pipeline.swap_frames(seq, faces, source, ClassicalSwapper(), analyzer, str(store), pipeline.Hooks(),
                                      SwapOptions(masks=masks))
        results[name] = [f for _, ch in out.iter_chunks() for f in ch]
    return frames, faces, results
