"""Our streaming path, as the video nodes run it: Track Faces (detector every 8th frame,
optical flow between), Swap Faces in Frames (chunked, patch layers on disk), then encoding the
result through VideoWriter, reading the clip from its file at every stage."""
from __future__ import annotations

import shutil
from pathlib import Path


def run(case, clip: Path, work: Path, *, crf: int, preset: str, chunk: int = 16,
        detect_every: int = 8, progress=lambda n: None) -> dict:
    from swapline_core.video import read as video_read
    from swapline_core.video import stages as pipeline
    from swapline_core.video.frames import FrameSequence
    from swapline_core.video.write import VideoWriter

    shutil.rmtree(work, ignore_errors=True)   # a fresh chunk store: nothing to resume from
    work.mkdir(parents=True)
    store = str(work / "swapline_cache")
    seq = FrameSequence.open(str(clip), chunk=chunk)
    hooks = pipeline.Hooks(progress=progress)
    faces, track = pipeline.track_faces(
        seq, case.analyzer, store, hooks, mode="identity", reference=case.reference.embedding,
        threshold=case.threshold, max_faces=1, detect_every=detect_every, max_missing=12, smoothing=0.5)
    swapped, swap = pipeline.swap_frames(seq, faces, case.source, case.swapper, case.analyzer, store, hooks)
    with VideoWriter(work / "ours.mp4", fps=video_read.probe(clip).fps_fraction, crf=crf, preset=preset) as w:
        for _, frames in swapped.iter_chunks():
            for frame in frames:
                w.write(frame)
    return {"frames": w.frames_written,
            "frames_swapped": sum(1 for fr in faces.frames if fr.faces),
            "reports": {"track": track.to_json(), "swap": swap.to_json()}}
