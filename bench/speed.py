"""The ``speed`` section: where the time of our streaming video path goes, stage by stage.

Per model setup (bench/cases.py) and clip: ``bench/ours.py`` (Track Faces, Swap Faces in Frames,
encoding) with every core function of a stage wrapped (bench/instrument.py, exclusive times,
bench/probe.py). Reported: CPU-seconds per frame of each stage (the process's, every thread),
wall seconds per stage, fps, the share of the wall that is not decode, model inference or encode
(the pipeline's own work: flow, masks, guards, paste, the chunk store), and the milliseconds the
mask stack takes per swapped face on the 1280x720 clip.

Models are loaded and warmed up (one frame through every model, and the encoder) before any
timing. A run under 20 s is repeated up to ``repeats`` times and the median run counts.
"""
from __future__ import annotations

import gc
import shutil
import statistics
import time
from pathlib import Path

from . import media, ours, stages
from .instrument import check_called, targets
from .machine import load_average
from .paths import SAMPLE_CLIP, WORK
from .probe import Probe
from .section import Section, f, table

REPEAT_UNDER_S = 20.0
ENCODE = {"crf": 18, "preset": "medium"}     # the shipped workflows' Save Video settings
HEADLINE = "builtin_mesh/gen300"              # the figures come from this run: the shipped built-in path


def clip_path(frames: int | None, size, log=print) -> Path:
    return SAMPLE_CLIP if frames is None else media.generated_clip(frames, log=log, size=tuple(size))


def warm_up(case, clip: Path, work: Path) -> None:
    """First calls pay lazy model loading and per-shape setup: do them untimed."""
    from swapline_core.video import read as video_read
    from swapline_core.video.write import VideoWriter

    frame = next(video_read.iter_frames(clip))[1]
    faces = case.analyzer.detect([frame])
    if faces[0]:
        if case.needs_landmarks:
            case.analyzer.landmarks68([frame], faces)
        case.analyzer.embed([frame], faces)
        case.swapper.swap([frame], [faces[0][:1]], case.source)
    work.mkdir(parents=True, exist_ok=True)
    with VideoWriter(work / "warmup.mp4", fps=15, **ENCODE) as w:
        for _ in range(4):
            w.write(frame)


def timed_run(case, clip: Path, work: Path) -> dict:
    probe = Probe()
    gc.collect()
    items = targets(case)
    with probe.patch(items):
        c0, t0 = time.process_time(), time.perf_counter()
        out = ours.run(case, clip, work, **ENCODE)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    shutil.rmtree(work, ignore_errors=True)
    check_called(items, probe.target_calls)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "probe": probe.to_json(), "cpu": probe.cpu_json(),
            "target_calls": dict(probe.target_calls), "load_average": load_average(), **out}


def measure(case, clip_name: str, clip: Path, work: Path, repeats: int, log=print) -> dict:
    warm_up(case, clip, work / "warmup")
    runs = []
    for rep in range(repeats):
        if rep and runs[0]["wall_s"] >= REPEAT_UNDER_S:
            break
        runs.append(timed_run(case, clip, work / "ours"))
        r = runs[-1]
        log(f"  {case.name}/{clip_name} run {rep + 1}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s cpu, "
            f"{r['frames']} frames, {r['frames_swapped']} swapped")
    wall = statistics.median(r["wall_s"] for r in runs)
    rep = min(runs, key=lambda r: abs(r["wall_s"] - wall))     # the median run's breakdown
    return {"case": case.name, "clip": clip_name, "clip_path": str(clip), "wall_s_median": round(wall, 3),
            "runs_wall_s": [r["wall_s"] for r in runs], "runs_cpu_s": [r["cpu_s"] for r in runs],
            "frames": rep["frames"], "frames_swapped": rep["frames_swapped"],
            "stages": stages.from_probe(rep["probe"], rep["wall_s"], rep["frames"], rep["cpu"]),
            "probe_seconds": rep["probe"], "target_calls": rep["target_calls"],
            "mask_ms_per_face": round(1000 * rep["probe"].get("masks", 0.0) / rep["frames_swapped"], 2)
            if rep["frames_swapped"] else None,
            "pipeline_reports": rep.get("reports"), "load_average": [r["load_average"] for r in runs],
            "notes": case.notes}


def run(clips: dict, clip_size, repeats: int, log=print) -> dict:
    """``clips``: name -> frames of a clip generated at ``clip_size`` (None: the shipped sample)."""
    from .cases import CASES

    paths = {name: clip_path(n, clip_size, log) for name, n in clips.items()}
    out = {"runs": {}, "errors": {}, "clip_size": list(clip_size), "encode": ENCODE}
    for case_name, build in CASES.items():
        log(f"speed: loading {case_name} models (untimed)")
        try:
            case = build()
        except Exception as exc:  # noqa: BLE001 - one broken setup must not cost the other's numbers
            out["errors"][case_name] = f"{type(exc).__name__}: {exc}"
            continue
        for clip_name, path in paths.items():
            key = f"{case_name}/{clip_name}"
            try:
                out["runs"][key] = measure(case, clip_name, path, WORK / "speed", repeats, log)
            except Exception as exc:  # noqa: BLE001
                out["errors"][key] = f"{type(exc).__name__}: {exc}"
    return out


def figures(data: dict) -> dict:
    r = data["runs"].get(HEADLINE) or {}
    st = r.get("stages") or {}
    return {"glue_share": st.get("glue_share"), "mask_ms_per_face_720p": r.get("mask_ms_per_face"),
            **{f"cpu_s_per_frame {k}": v for k, v in (st.get("cpu_s_per_frame") or {}).items() if v is not None}}


def body(data: dict) -> list[str]:
    runs = data["runs"]
    figs = figures(data)
    lines = [f"Figures of `{HEADLINE}` (the shipped built-in mesh analyzer and mesh swapper, 300 frames 1280x720): "
             f"share of the wall not decode, inference or encode {f(figs['glue_share'])}; masks "
             f"{f(figs['mask_ms_per_face_720p'], 1)} ms per face.", "", "## Runs", ""]
    lines += table(["case/clip", "frames", "wall s (runs)", "fps", "frames swapped", "masks ms / face"],
                   [[k, r["frames"], f"{f(r['wall_s_median'], 1)} ({len(r['runs_wall_s'])})",
                     f(r["stages"]["fps"], 2), r["frames_swapped"], f(r.get("mask_ms_per_face"), 1)]
                    for k, r in runs.items()])
    lines += ["", "## Per stage", "", "Exclusive wall seconds per stage, then CPU-seconds per frame. Model "
              "inference = detect + embed + landmarks + the swap model's session calls (the classical swapper has "
              "no model; the mesh swapper runs the mesh model inside its swap, counted there). Peak memory of a "
              "real server: [rss.md](rss.md).", ""]
    return lines + stages.markdown({k: r["stages"] for k, r in runs.items()}) + [""]


SECTION = Section(
    name="speed", page="bench.md",
    title="Video pipeline speed: measurements",
    about="Our streaming path (Track Faces, Swap Faces in Frames, encoding) per model setup and clip, every "
          "stage's core functions timed in place: CPU-seconds per frame per stage, the share of the wall that is "
          "not decode, inference or encode, and mask milliseconds per face at 720p. Method: `bench/speed.py` "
          "(module docstring) and `bench/README.md`.",
    run=run, figures=figures, body=body,
    full={"clips": {"sample48": None, "gen300": 300}, "clip_size": list(media.SIZE), "repeats": 3},
    smoke={"clips": {"gen4": 4}, "clip_size": [320, 180], "repeats": 1},
)
