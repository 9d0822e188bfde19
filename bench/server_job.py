"""The ``server_job`` section: the shipped job as a studio runs it, timed from the nodes' own reports.

``workflows/api/video_swap_builtin.json`` unchanged (QA on every frame, signing as shipped) on a
fresh real ComfyUI server over HTTP (bench/rss.py's runner), per clip: a 1280x720 clip generated
from the sample (the face fitted to the frame height: ~330 px tall, the size of a talking head
in 720p) and the shipped 350x350 sample. Reported per run: wall seconds and fps, the per-stage
table (Track/Swap nodes' StageReports, the QA report's own seconds, WebSocket node times), the
QA share of the wall time, the tracker's detector seconds per detector frame (what issue 31 saw
grow to ~7 s at 720p), and the server's peak RSS.
"""
from __future__ import annotations

from pathlib import Path

QA_EVERY_FRAME = 1


def summarize(r: dict) -> dict:
    """The figures issue 31 asks for, from one run of rss.run_workflow."""
    st = r["stages"]
    sec = st["seconds"]
    tracker = r.get("tracker") or {}
    det_frames = tracker.get("detector_frames") or 0
    wall = r["wall_s"]
    qa = sec.get("QA")
    return {"frames": r["frames"], "wall_s": wall, "fps": st["fps"],
            "qa_s": qa, "qa_share": round(qa / wall, 4) if qa is not None and wall > 0 else None,
            "qa_detail": st.get("qa_detail"),
            "detect_s": sec.get("detect"), "detector_frames": det_frames,
            "detect_s_per_detector_frame": round(sec["detect"] / det_frames, 3) if det_frames else None,
            "stage_seconds": sec, "peak_rss_mb": r["peak_rss_mb"], "idle_rss_mb": r["idle_rss_mb"],
            "qa_decision": (r.get("qa") or {}).get("decision")}


def run(clips: dict[str, Path], work: Path, *, log=print, server=None) -> dict:
    """{label: summary} for each clip; ``server`` as in rss.run_workflow (the CI smoke's shared one)."""
    from . import rss

    out = {}
    for label, clip in clips.items():
        log(f"server_job: {label} ({clip.name}), QA every frame, signed, as shipped")
        r = rss.run_workflow(f"job-{label}", clip, work, log=log, server=server, qa_sample_every=QA_EVERY_FRAME)
        out[label] = {**summarize(r), "clip": r["clip"]}
        s = out[label]
        log(f"server_job: {label}: {s['wall_s']:.1f} s, {s['fps']:.2f} fps, QA {s['qa_share']} of the wall, "
            f"detector {s['detect_s_per_detector_frame']} s per detector frame, peak {s['peak_rss_mb']:.0f} MB")
    return out


def table(section: dict | None) -> list[str]:
    if not section:
        return ["(not run)"]
    rows = ["| clip | frames | wall s | fps | QA s (share) | detect s / detector frame (frames) | peak RSS MB |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for label, s in section.items():
        rows.append(f"| {label} | {s['frames']} | {s['wall_s']:.1f} | {s['fps']:.3f} | "
                    f"{s['qa_s'] if s['qa_s'] is None else round(s['qa_s'], 1)} ({s['qa_share']}) | "
                    f"{s['detect_s_per_detector_frame']} ({s['detector_frames']}) | {s['peak_rss_mb']:.0f} |")
    return rows
