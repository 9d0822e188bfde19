"""speedup_vs_naive: wall time of the naive per-frame baseline over ours, same clip, same models.

Models are loaded and warmed up (one frame through every model, and the encoder) before any
timing. Runs alternate naive/ours so background load hits both alike; a path whose first run
took under 20 s is repeated to 3 runs and its median is used. CPU time (all threads of this
process) is reported next to wall time as a check against other load on the machine.
"""
from __future__ import annotations

import gc
import shutil
import statistics
import time
from pathlib import Path

from . import naive, ours, stages
from .instrument import check_called, targets
from .machine import load_average
from .probe import Probe

REPEAT_UNDER_S = 20.0
REPEATS = 3


def warm_up(case, clip: Path, work: Path, crf: int, preset: str) -> None:
    """First calls pay lazy model loading and per-shape setup: do them untimed, for both paths."""
    from swapline_core.video import read as video_read
    from swapline_core.video.write import VideoWriter

    frame = next(video_read.iter_frames(clip))[1]
    out, _ = naive.process_frame(case, frame)
    faces = case.analyzer.detect([frame])
    if case.needs_landmarks:
        case.analyzer.landmarks68([frame], faces)
    work.mkdir(parents=True, exist_ok=True)
    with VideoWriter(work / "warmup.mp4", fps=15, crf=crf, preset=preset) as w:
        for _ in range(4):
            w.write(out)


class Progress:
    """Frames done, logged at most once a minute (ours counts each stage's frames)."""

    def __init__(self, label: str, log, every_s: float = 60.0):
        self.label, self.log, self.every_s = label, log, every_s
        self.done, self.t0 = 0, time.perf_counter()
        self.last = self.t0

    def __call__(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self.last >= self.every_s:
            self.last = now
            self.log(f"    {self.label}: {self.done} frames processed after {now - self.t0:.0f} s")


def timed_run(kind: str, case, clip: Path, work: Path, crf: int, preset: str, log=print) -> dict:
    probe = Probe()
    progress = Progress(f"{case.name} {kind}", log)
    gc.collect()
    items = targets(case, kind, naive if kind == "naive" else None)
    with probe.patch(items):
        c0, t0 = time.process_time(), time.perf_counter()
        if kind == "naive":
            out = naive.run(case, clip, work, crf=crf, preset=preset, progress=progress)
        else:
            out = ours.run(case, clip, work, crf=crf, preset=preset, progress=progress)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    shutil.rmtree(work, ignore_errors=True)
    check_called(items, probe.target_calls, kind)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "probe": probe.to_json(),
            "target_calls": dict(probe.target_calls),
            "load_average": load_average(), **out}


def compare(case, clip_name: str, clip: Path, work: Path, *, crf: int, preset: str, log=print,
            repeats: int = REPEATS) -> dict:
    """``repeats``: at most this many runs per path (the smoke check runs each once)."""
    warm_up(case, clip, work / "warmup", crf, preset)
    runs: dict[str, list[dict]] = {"naive": [], "ours": []}
    for rep in range(repeats):
        for kind in ("naive", "ours"):
            if rep and runs[kind][0]["wall_s"] >= REPEAT_UNDER_S:
                continue
            r = timed_run(kind, case, clip, work / kind, crf, preset, log)
            runs[kind].append(r)
            log(f"  {case.name}/{clip_name} {kind:5s} run {rep + 1}: {r['wall_s']:.1f} s wall, "
                f"{r['cpu_s']:.1f} s cpu, {r['frames']} frames, {r['frames_swapped']} swapped")
    summary = {}
    for kind, rs in runs.items():
        wall = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        rep = min(rs, key=lambda r: abs(r["wall_s"] - wall))     # the median run's breakdown
        summary[kind] = {"wall_s_median": round(wall, 3), "cpu_s_median": round(cpu, 3),
                         "runs_wall_s": [r["wall_s"] for r in rs], "runs_cpu_s": [r["cpu_s"] for r in rs],
                         "frames": rep["frames"], "frames_swapped": rep["frames_swapped"],
                         "stages": stages.from_probe(rep["probe"], rep["wall_s"], rep["frames"]),
                         "probe_seconds": rep["probe"], "target_calls": rep["target_calls"],
                         "load_average": [r["load_average"] for r in rs]}
        if "reports" in rep:
            summary[kind]["pipeline_reports"] = rep["reports"]
    n, o = summary["naive"], summary["ours"]
    return {"case": case.name, "clip": clip_name, "clip_path": str(clip), "encode": {"crf": crf, "preset": preset},
            "speedup_wall": round(n["wall_s_median"] / o["wall_s_median"], 3),
            "speedup_cpu": round(n["cpu_s_median"] / o["cpu_s_median"], 3),
            "naive": n, "ours": o, "notes": case.notes}
