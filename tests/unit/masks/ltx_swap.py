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


def swap_composited(store: Path, draw, start: int, count: int, variants: dict | None = None, clip: Path = LTX):
    """``clip``'s (default: ltx) frames ``start``..``start + count`` with an occluder drawn from each
    frame's own 68 points (``draw(k, frame, landmarks) -> (composited frame, exact mask)``), tracked and swapped by the
    classical swapper with the mask stack; ``variants`` {name: context manager factory} swap again
    inside each (e.g. with a rule switched off). Returns (frames, masks, faces found, {name: results}),
    "stack" being the shipped stack."""
    from contextlib import nullcontext

    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.faces import identity as face_model
    from swapline_core.masks import MaskOptions
    from swapline_core.swap.chunk import SwapOptions
    from swapline_core.video import stages as pipeline
    from swapline_core.video.frames import FrameSequence

    if not clip.is_file():
        pytest.fail(f"{clip} missing: run scripts/setup.sh (it fetches the sample clips into tests/.cache/media)")
    analyzer = BuiltinAnalyzer()
    clean = [f for _, ch in FrameSequence.open(str(clip), start=start, count=count, chunk=count).iter_chunks()
             for f in ch]
    found = [fs[:1] for fs in analyzer.detect(clean)]
    assert all(found), f"{clip.name}'s frames {start}-{start + count - 1} should each show a face"
    analyzer.landmarks68(clean, found)
    frames, masks = zip(*(draw(k, f, fs[0].landmarks) for k, (f, fs) in enumerate(zip(clean, found))))
    video = store / "composited.webp"
    ims = [Image.fromarray(f) for f in frames]
    ims[0].save(video, save_all=True, append_images=ims[1:], lossless=True, quality=100, duration=66, loop=0)
    source = face_model.build_from_images(analyzer, [np.array(Image.open(SOURCE).convert("RGB"))])
    seq = FrameSequence.open(str(video), count=count, chunk=count)
    faces, _ = pipeline.track_faces(seq, analyzer, str(store / "track"), pipeline.Hooks(), mode="largest", max_faces=1)
    out = {}
    for name, ctx in {"stack": nullcontext, **(variants or {})}.items():
        with ctx():
            res, _ = pipeline.swap_frames(seq, faces, source, ClassicalSwapper(), analyzer, str(store / name),
                                          pipeline.Hooks(), SwapOptions(masks=MaskOptions()))
        out[name] = [f for _, ch in res.iter_chunks() for f in ch]
    return list(frames), list(masks), found, out
