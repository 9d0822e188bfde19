"""The baseline: what the popular ComfyUI face-swap node does, frame by frame, batch 1.

For every frame: run the detector, analyse every detected face fully (68-point landmarks where
the analyzer has them, and the identity embedding), choose the face by identity, swap it, paste
it back with full-frame float32 buffers (the whole frame converted to float, a full-frame mask,
a full-frame blend), then encode. It uses the same core functions as our pipeline (detector,
embedder, landmarks, selection, swapper, colour match, VideoWriter) with the same models and
settings; only the per-frame-everything structure differs. Frames are streamed from the file
(the popular node gets the whole clip as one float32 IMAGE tensor, which is slower and larger:
this baseline is the generous version of it).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np


def analyse(analyzer, frame: np.ndarray) -> list:
    faces = analyzer.detect([frame])[0]
    if faces and analyzer.supports_landmarks:
        analyzer.landmarks68([frame], [faces])
    if faces and analyzer.embedding_dim:
        analyzer.embed([frame], [faces])   # dlib's embedder reuses the landmarks just computed
    return faces


def choose(case, faces: list) -> list:
    from swapline_core.faces.select import select

    chosen, _ = select(faces, "identity", case.reference.embedding, case.threshold, max_faces=1)
    return [faces[i] for i in chosen]


def paste_full_frame(frame: np.ndarray, patches, color: bool = True) -> np.ndarray:
    from swapline_core.faces.paste import color_match

    h, w = frame.shape[:2]
    out = frame.astype(np.float32)
    for p in patches:
        x0, y0, x1, y1 = p.region
        if x1 <= x0 or y1 <= y0:
            continue
        px = color_match(p.pixels, out[y0:y1, x0:x1], p.mask) if color else p.pixels
        full_pixels = out.copy()
        full_pixels[y0:y1, x0:x1] = px
        full_mask = np.zeros((h, w, 1), np.float32)
        full_mask[y0:y1, x0:x1, 0] = p.mask
        out = out * (1.0 - full_mask) + full_pixels * full_mask
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def process_frame(case, frame: np.ndarray) -> tuple[np.ndarray, bool]:
    # choose/paste_full_frame are looked up as module globals at call time, so the probe's
    # patches on this module (bench/instrument.py) time them.
    targets = choose(case, analyse(case.analyzer, frame))
    if not targets:
        return frame, False
    patches = case.swapper.swap([frame], [targets], case.source)[0]
    return paste_full_frame(frame, patches, color=True), True


def run(case, clip: Path, work: Path, *, crf: int, preset: str, progress=lambda n: None) -> dict:
    from swapline_core.video import read as video_read
    from swapline_core.video.write import VideoWriter

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    swapped = 0
    with VideoWriter(work / "naive.mp4", fps=video_read.probe(clip).fps_fraction, crf=crf, preset=preset) as w:
        for _, frame in video_read.iter_frames(clip):
            frame, did = process_frame(case, frame)
            swapped += did
            w.write(frame)
            progress(1)
    return {"frames": w.frames_written, "frames_swapped": swapped}
