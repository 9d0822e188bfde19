"""results.json -> results.md (markdown tables) and a short console summary."""
from __future__ import annotations

from .instrument import ROWS
from .quality.report import markdown as quality_md

STAGE_ROWS = [name for name, _ in ROWS] + ["other"]


def _f(v, nd: int = 2, suffix: str = "") -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{nd}f}{suffix}"
    return f"{v}{suffix}"


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def headline(results: dict) -> list[str]:
    v, t, m = results["video"], results["targets"], results["met"]
    return _table(["metric", "measured", "target", "met"], [
        ["video.speedup_vs_naive (built-in, 300 frames 1280x720)", _f(v["speedup_vs_naive"], 2, "x"),
         f">= {t['speedup_vs_naive']}", _f(m["speedup_vs_naive"])],
        ["video.peak_rss_ratio_long_vs_short (3000 vs 300 frames)", _f(v["peak_rss_ratio_long_vs_short"], 3),
         f"<= {t['peak_rss_ratio_long_vs_short']}", _f(m["peak_rss_ratio_long_vs_short"])],
        ["peak RSS MB (short / long)",
         f"{_f(v['peak_rss_mb']['short'], 0)} / {_f(v['peak_rss_mb']['long'], 0)}", "", ""],
        ["non-inference share, ours (built-in, 300 frames)", _f(v["non_inference_share"], 3), "", ""],
    ] + tiled_vae_rows(results.get("tiled_vae")) + _farm_rows(results.get("farm")))


def _farm_rows(f: dict | None) -> list[list]:
    from .farm import rows

    return rows(f)


def tiled_vae_rows(tv: dict | None) -> list[list]:
    if not tv:
        return []
    t, m = tv["targets"], tv.get("met") or {}
    w, h = tv["size"]
    return [
        [f"tiled_vae.psnr_vs_full_db ({w}x{h}; core tiled: {_f(tv.get('core_tiled_psnr_db'), 1)} dB)",
         _f(tv.get("psnr_vs_full_db"), 1), f">= {t['psnr_vs_full_db']}", _f(m.get("psnr_vs_full_db"))],
        ["tiled_vae.peak_mem_ratio_vs_full (full encode with SDPA)", _f(tv.get("peak_mem_ratio_vs_full"), 3),
         f"<= {t['peak_mem_ratio_vs_full']}", _f(m.get("peak_mem_ratio_vs_full"))],
        ["tiled_vae.time_ratio_vs_core_tiled (core VAEEncodeTiled 512/64)", _f(tv.get("time_ratio_vs_core_tiled"), 3),
         f"<= {t['time_ratio_vs_core_tiled']}", _f(m.get("time_ratio_vs_core_tiled"))],
    ]


def tiled_vae_table(tv: dict | None) -> list[str]:
    if not tv:
        return ["(not run)"]
    rows = [[k, _f(r.get("wall_s"), 1), _f(r.get("cpu_s"), 1), _f(r.get("peak_mb"), 0), _f(r.get("psnr_vs_full_db"), 2)]
            for k, r in tv["runs"].items()]
    out = _table(["method", "wall s", "cpu s", "peak MB (above idle)", "PSNR vs full dB"], rows)
    abl = (tv.get("ablation") or {}).get("steps") or []
    if abl:
        out += ["", "Ablation (what each step of exact tiling buys, PSNR vs the full encode):", ""]
        out += _table(["step", "PSNR dB", "gain dB"], [[a["step"], _f(a["psnr_db"], 2), _f(a.get("gain_db"), 2)]
                                                     for a in abl])
    return out


def speed_table(results: dict) -> list[str]:
    rows = []
    for key, r in results["video"]["speed_runs"].items():
        n, o = r["naive"], r["ours"]
        rows.append([key, f"{n['frames']}", f"{_f(n['wall_s_median'], 1)} ({len(n['runs_wall_s'])})",
                     f"{_f(o['wall_s_median'], 1)} ({len(o['runs_wall_s'])})",
                     f"**{_f(r['speedup_wall'], 2)}x**", f"{_f(r['speedup_cpu'], 2)}x",
                     f"{n['frames_swapped']} / {o['frames_swapped']}"])
    return _table(["case/clip", "frames", "naive s (runs)", "ours s (runs)", "speedup (wall)",
                   "speedup (cpu)", "frames swapped naive / ours"], rows)


def stage_table(results: dict) -> list[str]:
    stages = results["video"]["stages"]
    if not stages:
        return ["(no runs)"]
    keys = list(stages)
    rows = []
    for name in STAGE_ROWS:
        rows.append([name] + [_f(stages[k]["seconds"].get(name), 2) for k in keys])
    rows.append(["**total (wall)**"] + [_f(stages[k]["wall_s"], 2) for k in keys])
    rows.append(["fps"] + [_f(stages[k]["fps"], 2) for k in keys])
    rows.append(["model inference s"] + [_f(stages[k]["inference_s"], 2) for k in keys])
    rows.append(["share outside inference"] + [_f(stages[k]["non_inference_share"], 3) for k in keys])
    rows.append(["other = "] + ["; ".join(f"{a} {_f(b, 2)}" for a, b in stages[k]["other_detail"].items())
                                for k in keys])
    return _table(["stage (s)"] + keys, rows)


def rss_table(results: dict) -> list[str]:
    rows = []
    for label, r in results["video"]["server_runs"].items():
        rows.append([label, r["frames"], _f(r["wall_s"], 1), _f(r["stages"]["fps"], 2),
                     _f(r["stages"].get("fps_pipeline_nodes"), 2), _f(r["idle_rss_mb"], 0),
                     _f(r["peak_rss_mb"], 0), r["frames_with_face"],
                     (r.get("tracker") or {}).get("detector_frames")])
    return _table(["clip", "frames", "prompt wall s", "fps (prompt)", "fps (track..encode nodes)",
                   "idle RSS MB", "peak RSS MB", "frames with face", "detector frames"], rows)


def machine_line(m: dict) -> str:
    return (f"{m['cpu_count']} CPUs ({m.get('cpu_model')}), {m['memory_gb']} GB, Python {m['python']}, "
            f"torch {m['torch']} ({m['torch_threads']} threads), onnxruntime {m['onnxruntime']}, "
            f"OpenCV {m['opencv']}, PyAV {m['av']}; git {m['git_commit']}{' (dirty)' if m['git_dirty'] else ''}; "
            f"load average at start {m['load_average_at_start']}, at end {m.get('load_average_at_end')}")


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = ["# Swapline benchmark results", ""]
    if not results.get("complete"):
        lines += ["**Incomplete run** (interrupted or still running).", ""]
    lines += [f"Machine: {machine_line(m)}; total {results.get('seconds_total')} s.", ""]
    lines += ["## Targets", ""] + headline(results) + [""]
    lines += ["## Speed: naive per-frame baseline vs ours (same clip, models, encoder settings)", "",
              "Medians over the runs shown (a path is repeated 3x when its first run is under 20 s). "
              "Model loading and first-call warm-up are excluded from both. Encoding: "
              f"crf {results['settings']['encode']['crf']}, preset {results['settings']['encode']['preset']}.", ""]
    lines += speed_table(results) + [""]
    lines += ["## Peak RSS: ComfyUI server running workflows/api/video_swap_builtin.json", "",
              "RSS of the server process and its children, sampled every 0.1 s while the prompt runs; "
              "a fresh server per clip.", ""]
    lines += rss_table(results) + [""]
    from .server_job import table as server_job_table

    lines += ["## The shipped job as a studio runs it (bench/server_job.py)", "",
              "workflows/api/video_swap_builtin.json unchanged (QA on every frame, C2PA signing) on a fresh "
              "ComfyUI server over HTTP. QA share = the QA Gate node's wall time / the job's; detect s per "
              "detector frame = the Track Faces node's detector seconds / the frames it ran the detector on "
              "(backfill and re-detection included).", ""]
    lines += server_job_table(results.get("server_job")) + [""]
    lines += ["## Per-stage time", "",
              "Seconds per stage (exclusive). `ours`/`naive` columns come from instrumenting the same core "
              "functions in both paths (bench/instrument.py). `server` columns come from the Track/Swap "
              "nodes' reports, the QA Gate's report and WebSocket node times: QA there is the QA Gate node "
              "(decodes original + swapped frames, re-runs detector + embedder on both), encode is the "
              "Save Video / C2PA Sink node (decode + patch-layer replay + H.264 encode + signing). "
              "Model inference = detect + embed + landmarks + swap model calls (+ QA's detect/embed); "
              "the classical swapper has no model, so its swap time counts as outside inference.", ""]
    lines += stage_table(results) + [""]
    lines += ["## Tiled VAE encode (bench/tiled_vae.py)", "",
              "SD1.5-architecture VAE with random weights, CPU float32, one frame; each method in a fresh "
              "child process; peak = the process high-water mark during the call.", ""]
    lines += tiled_vae_table(results.get("tiled_vae")) + [""]
    from .farm import table as farm_table

    lines += ["## Farm: 1 vs 2 local ComfyUI workers (bench/farm.py)", ""] + farm_table(results.get("farm")) + [""]
    lines += ["## Swap quality on known-truth cases (bench/quality)", ""] + quality_md(results.get("quality")) + [""]
    if results["errors"]:
        lines += ["## Errors", ""]
        for k, e in results["errors"].items():
            lines += [f"- **{k}**:", "", "```", e.strip(), "```"]
        lines.append("")
    return "\n".join(lines)


def summary(results: dict) -> str:
    v = results["video"]
    parts = [f"speedup_vs_naive={_f(v['speedup_vs_naive'], 2)}",
             "by case: " + ", ".join(f"{k}={_f(x, 2)}" for k, x in v["speedup_vs_naive_by_case"].items()),
             f"peak_rss_ratio_long_vs_short={_f(v['peak_rss_ratio_long_vs_short'], 3)} "
             f"(MB {v['peak_rss_mb']})",
             f"met={results['met']}"]
    tv = results.get("tiled_vae")
    if tv:
        parts.insert(3, f"tiled_vae: psnr_vs_full_db={_f(tv.get('psnr_vs_full_db'), 1)} "
                        f"peak_mem_ratio_vs_full={_f(tv.get('peak_mem_ratio_vs_full'), 3)} "
                        f"time_ratio_vs_core_tiled={_f(tv.get('time_ratio_vs_core_tiled'), 3)}")
    fm = results.get("farm")
    if fm:
        parts.insert(-1, f"farm: speedup_2_vs_1={_f(fm.get('speedup_2_vs_1'), 2)} ({fm['cpu_count']} CPUs) "
                         f"overhead_share={_f(fm.get('overhead_share'), 3)}")
    if results["errors"]:
        parts.append(f"errors in: {', '.join(results['errors'])}")
    return "[bench] " + "\n[bench] ".join(parts)
