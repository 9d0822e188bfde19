"""Entry point: ``python -m bench.run [--smoke] [--quick] [--skip-SECTION ...] [--soak]``.

Writes out/bench/results.json and out/bench/results.md (see bench/README.md). Results are
rewritten after every step, so an interrupted run keeps what it measured (marked incomplete).
``--smoke`` runs every section's code path on tiny inputs (tests/unit/bench/test_bench_smoke.py
runs it in CI); its numbers mean nothing and never reach docs/measurements.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from . import measurements, media, report
from .machine import load_average, machine_info
from .paths import OUT, QUALITY_MEDIA, REPO, SAMPLE_CLIP, WORK

TARGETS = {"speedup_vs_naive": 5, "peak_rss_ratio_long_vs_short": 1.5}
HEADLINE = "builtin/gen300"          # speedup_vs_naive and non_inference_share come from here
SHORT_FRAMES, LONG_FRAMES = 300, 3000
TILED_VAE_SIZE, TILED_VAE_ABLATION = (1920, 1080), (1280, 720)
ENCODE = {"crf": 18, "preset": "medium"}   # the shipped workflows' Save Video settings

_T0 = time.perf_counter()


@dataclass(frozen=True)
class Plan:
    """Input sizes of one run. ``speed_clips``: name -> frames of a generated clip of
    ``clip_size`` (None: the shipped sample as is)."""
    speed_clips: dict
    clip_size: tuple[int, int]
    rss_frames: tuple[int, int]                  # short, long
    repeats: int                                 # at most, per path and clip (bench/speed.py)
    quality_frames: int | None                   # frames per quality clip (None: all)
    tiled_vae: tuple[tuple[int, int], tuple[int, int] | None]   # size, ablation size
    farm: dict = field(default_factory=dict)     # bench.farm.run keywords
    docs: bool = True                            # a complete run rewrites docs/measurements
    server_job: dict = field(default_factory=dict)   # label -> frames of a generated clip (None: the sample)
    server_job_repeats: int = 1                      # runs per clip (bench/server_job.py: median QA share)


FULL = Plan({"sample48": None, "gen300": SHORT_FRAMES}, media.SIZE, (SHORT_FRAMES, LONG_FRAMES), 3, None,
            (TILED_VAE_SIZE, TILED_VAE_ABLATION), server_job={"gen300_720p": SHORT_FRAMES, "sample48": None},
            server_job_repeats=3)
# Seconds per section on 2 cores, enough to go through every function the full run does (the
# speed section's instrumentation checks each timed function really ran). The tiled VAE frame is
# its children's warm-up size: each child's start-up (torch, ComfyUI, the VAE) is most of the
# section's time. The farm keeps 1 and 2 workers (the speedup path).
SMOKE = Plan({"gen4": 4}, (320, 180), (4, 8), 1, 4, ((64, 64), (64, 64)),
             {"jobs": 2, "frames": 4, "chunk_frames": 2}, docs=False,
             server_job={"gen6": 6})   # not the rss clips: a shared server would serve cached tracks


def log(msg: str) -> None:
    print(f"[bench {time.perf_counter() - _T0:7.1f}s] {msg}", flush=True)


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="scripts/bench.sh", description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true",
                    help="every section on tiny inputs, seconds each (CI); results only, docs untouched")
    ap.add_argument("--quick", action="store_true", help=f"skip the {LONG_FRAMES}-frame server run")
    ap.add_argument("--skip-rss", action="store_true", help="skip the ComfyUI server peak-RSS runs")
    ap.add_argument("--skip-speed", action="store_true", help="skip the naive-vs-ours speed comparison")
    ap.add_argument("--skip-quality", action="store_true",
                    help="skip the swap-quality section (known-truth occluder, speech, small-face and cut cases)")
    ap.add_argument("--skip-tiled-vae", action="store_true",
                    help="skip the 1920x1080 tiled VAE encode comparison (ours vs core VAEEncode / VAEEncodeTiled)")
    ap.add_argument("--skip-farm", action="store_true",
                    help="skip the farm section (same batch through swapline-farm with 1 vs 2 local ComfyUI workers)")
    ap.add_argument("--skip-server-job", action="store_true",
                    help="skip the shipped job as a studio runs it (QA every frame, signed): 720p and the sample")
    ap.add_argument("--skip-qa-agreement", action="store_true",
                    help="skip the QA gate against the labelled faces (bench/qa_labels, seconds)")
    ap.add_argument("--skip-generalization", action="store_true",
                    help="skip the development set x sources through the shipped workflow (bench/generalization)")
    ap.add_argument("--soak", action="store_true",
                    help="also run the soak: 220 mixed prompts on one server with sweeps, deletes, interrupts "
                         "(bench/soak.py, ~15 min; docs/measurements/soak.md)")
    return ap.parse_args(argv)


def new_results(args) -> dict:
    return {
        "machine": machine_info(),
        "run": measurements.stamp(),
        "settings": {"smoke": getattr(args, "smoke", False), "quick": args.quick, "skip_rss": args.skip_rss,
                     "skip_speed": args.skip_speed,
                     "skip_tiled_vae": args.skip_tiled_vae, "skip_quality": args.skip_quality,
                     "skip_farm": getattr(args, "skip_farm", False),
                     "encode": ENCODE, "detect_every": 8, "chunk": 16,
                     "clips": clip_names(SMOKE if getattr(args, "smoke", False) else FULL)},
        "video": {"speedup_vs_naive": None, "speedup_vs_naive_by_case": {},
                  "speedup_vs_naive_cpu_by_case": {}, "peak_rss_ratio_long_vs_short": None,
                  "peak_rss_mb": {"short": None, "long": None}, "stages": {}, "fps": {},
                  "non_inference_share": None, "non_inference_share_by_run": {},
                  "speed_runs": {}, "server_runs": {}},
        "tiled_vae": None,
        "server_job": None,
        "quality": None,
        "farm": None,
        "targets": dict(TARGETS),
        "met": {"speedup_vs_naive": None, "peak_rss_ratio_long_vs_short": None, "tiled_vae": None},
        "errors": {},
        "complete": False,
    }


def clip_names(plan: Plan) -> dict:
    w, h = plan.clip_size
    frames = {**plan.speed_clips, **{f"gen{n}": n for n in plan.rss_frames}}
    return {name: str(SAMPLE_CLIP.relative_to(REPO)) if n is None else f"{n} frames {w}x{h} generated from the sample"
            for name, n in frames.items()}


def record_stages(video: dict, key: str, table: dict) -> None:
    video["stages"][key] = table
    video["fps"][key] = table["fps"]
    video["non_inference_share_by_run"][key] = table["non_inference_share"]


def run_speed(results: dict, clips: dict, save, repeats: int = FULL.repeats) -> None:
    from . import speed
    from .cases import CASES

    video = results["video"]
    for case_name, build in CASES.items():
        log(f"speed: loading {case_name} models (untimed)")
        try:
            case = build()
        except Exception as exc:      # one broken setup must not cost the other's numbers
            results["errors"][f"speed {case_name}"] = _error(exc)
            save()
            continue
        for clip_name, clip in clips.items():
            key = f"{case_name}/{clip_name}"
            log(f"speed: {key}")
            try:
                r = speed.compare(case, clip_name, clip, WORK / "speed", log=log, repeats=repeats, **ENCODE)
            except Exception as exc:
                results["errors"][f"speed {key}"] = _error(exc)
                save()
                continue
            video["speed_runs"][key] = r
            video["speedup_vs_naive_by_case"][key] = r["speedup_wall"]
            video["speedup_vs_naive_cpu_by_case"][key] = r["speedup_cpu"]
            record_stages(video, f"ours {key}", r["ours"]["stages"])
            record_stages(video, f"naive {key}", r["naive"]["stages"])
            log(f"speed: {key}: naive {r['naive']['wall_s_median']:.1f} s, ours {r['ours']['wall_s_median']:.1f} s "
                f"-> {r['speedup_wall']:.2f}x wall ({r['speedup_cpu']:.2f}x cpu)")
            save()
    if HEADLINE in video["speedup_vs_naive_by_case"]:
        video["speedup_vs_naive"] = video["speedup_vs_naive_by_case"][HEADLINE]
        video["non_inference_share"] = video["non_inference_share_by_run"][f"ours {HEADLINE}"]
        results["met"]["speedup_vs_naive"] = video["speedup_vs_naive"] >= TARGETS["speedup_vs_naive"]


def run_rss(results: dict, clips: dict, save, server=None) -> None:
    """``server``: an already running ComfyServer for every clip (the CI smoke test's), else a
    fresh one per clip."""
    from . import rss

    video = results["video"]
    for label, clip in clips.items():
        log(f"rss: {label} clip ({clip.name}) through a fresh ComfyUI server")
        try:
            r = rss.run_workflow(label, clip, WORK, log=log, server=server)
        except Exception as exc:
            results["errors"][f"rss {label}"] = _error(exc)
            save()
            continue
        video["server_runs"][label] = r
        video["peak_rss_mb"][label] = r["peak_rss_mb"]
        record_stages(video, f"server {label} ({r['frames']} frames)", r["stages"])
        log(f"rss: {label}: peak {r['peak_rss_mb']:.0f} MB (idle {r['idle_rss_mb']:.0f} MB), "
            f"{r['wall_s']:.1f} s, {r['stages']['fps']:.2f} fps")
        save()
    short, long_ = video["peak_rss_mb"]["short"], video["peak_rss_mb"]["long"]
    if short and long_:
        video["peak_rss_ratio_long_vs_short"] = round(long_ / short, 3)
        results["met"]["peak_rss_ratio_long_vs_short"] = (
            video["peak_rss_ratio_long_vs_short"] <= TARGETS["peak_rss_ratio_long_vs_short"])


def run_server_job(results: dict, clips: dict, save, server=None, repeats: int = 1) -> None:
    from . import server_job

    try:
        results["server_job"] = server_job.run(clips, WORK, log=log, server=server, repeats=repeats)
    except Exception as exc:  # noqa: BLE001 - keep the other sections
        results["errors"]["server_job"] = _error(exc)
    save()


def run_tiled_vae(results: dict, save, sizes=FULL.tiled_vae) -> None:
    """Each method in its own child process (bench/tiled_vae.py): exact peak memory per method."""
    from . import tiled_vae

    try:
        res = tiled_vae.run(sizes[0], ablation_size=sizes[1], log=log)
    except Exception as exc:  # noqa: BLE001 - keep the other sections
        results["errors"]["tiled_vae"] = _error(exc)
        return
    results["tiled_vae"] = res
    results["met"]["tiled_vae"] = res.get("met")
    for method, err in res["errors"].items():
        results["errors"][f"tiled_vae {method}"] = err
    save()


def run_quality(results: dict, save, frames_limit: int | None = None) -> None:
    """Known-truth swap-quality cases (bench/quality): real stages, independent scorer."""
    from .quality import run as quality

    try:
        # strips to out/bench (WORK is wiped at the end of the run)
        results["quality"] = quality.evaluate(QUALITY_MEDIA, WORK / "quality", log=log, strip_dir=OUT,
                                              frames_limit=frames_limit)
        results["met"]["quality"] = all(v is True for v in results["quality"]["met"].values())
    except Exception as exc:  # noqa: BLE001 - keep the other sections
        results["errors"]["quality"] = _error(exc)
    save()


def run_farm(results: dict, save, sizes: dict | None = None) -> None:
    """swapline-farm: throughput with 1 vs 2 local workers, coordinator overhead (bench/farm.py)."""
    from . import farm

    try:
        results["farm"] = farm.run(log=log, **(sizes or {}))
        results["met"]["farm"] = results["farm"]["met"]
    except Exception as exc:  # noqa: BLE001 - keep the other sections
        results["errors"]["farm"] = _error(exc)
    save()


def run_generalization(results: dict, save, smoke: bool) -> None:
    """The development set x sources through the shipped workflow (bench/generalization, issue 30)."""
    from . import generalization

    try:
        results["generalization"] = generalization.run(smoke=smoke)
    except Exception as exc:  # noqa: BLE001 - keep the other sections
        results["errors"]["generalization"] = _error(exc)
    save()


def run_qa_agreement(results: dict, save, smoke: bool) -> None:
    """The QA gate's verdicts against the faces labelled by eye, leave-one-clip-out (issue 48). The
    smoke runs the same code on the committed set: it is pure computation on committed files."""
    from .qa_labels import agreement

    try:
        results["qa_agreement"] = agreement.measure()
    except Exception as exc:  # noqa: BLE001 - keep the other sections
        results["errors"]["qa_agreement"] = _error(exc)
    save()


def run_soak(results: dict, save, smoke: bool) -> None:
    """One server under a mixed queue with sweeps, deletes and interrupts (bench/soak.py, issue 32)."""
    from . import soak

    size = soak.SMOKE if smoke else soak.FULL
    try:
        results["soak"] = soak.run(size["images"], size["videos"], WORK / "soak", log=log,
                                   maint_every=size["maint_every"])
        results["met"]["soak"] = all(results["soak"]["targets_met"].values())
    except Exception as exc:  # noqa: BLE001 - keep the other sections
        results["errors"]["soak"] = _error(exc)
    save()


def clip(plan: Plan, frames: int | None) -> Path:
    return SAMPLE_CLIP if frames is None else media.generated_clip(frames, log=log, size=plan.clip_size)


def _error(exc: BaseException) -> str:
    log(f"ERROR: {type(exc).__name__}: {exc}")
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()[-4000:] + \
        "\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])


def main(argv=None) -> int:
    args = parse(argv)
    plan = SMOKE if args.smoke else FULL
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(WORK, ignore_errors=True)
    results = new_results(args)

    def save() -> None:
        results["seconds_total"] = round(time.perf_counter() - _T0, 1)
        results["machine"]["load_average_at_end"] = load_average()
        (OUT / "results.json").write_text(json.dumps(results, indent=1))
        (OUT / "results.md").write_text(report.markdown(results))

    log(f"machine: {results['machine']['cpu_count']} CPUs, load {results['machine']['load_average_at_start']}")
    if args.smoke:
        log("smoke check: tiny inputs, numbers are not measurements (docs/measurements untouched)")
    if not args.skip_speed:
        run_speed(results, {name: clip(plan, n) for name, n in plan.speed_clips.items()}, save, plan.repeats)
    if not args.skip_rss:
        short, long_ = plan.rss_frames
        clips = {"short": clip(plan, short)}
        if not args.quick:
            clips["long"] = clip(plan, long_)
        run_rss(results, clips, save)
    if not args.skip_server_job:
        run_server_job(results, {name: clip(plan, n) for name, n in plan.server_job.items()}, save,
                       repeats=plan.server_job_repeats)
    if not args.skip_quality:
        run_quality(results, save, plan.quality_frames)
    if not args.skip_tiled_vae:
        run_tiled_vae(results, save, plan.tiled_vae)
    if not args.skip_farm:
        run_farm(results, save, plan.farm)
    if not args.skip_generalization:
        run_generalization(results, save, args.smoke)
    if not args.skip_qa_agreement:
        run_qa_agreement(results, save, args.smoke)
    if args.soak:
        run_soak(results, save, args.smoke)
    results["complete"] = True
    save()
    shutil.rmtree(WORK, ignore_errors=True)
    log(f"wrote {OUT / 'results.json'} and {OUT / 'results.md'}")
    for path in measurements.write(results) if plan.docs else ():   # only a complete full run updates the docs
        log(f"wrote {path}")
    if plan.docs and "generalization" in results:
        from . import generalization

        log(f"wrote {generalization.write_doc(results['generalization'])}")
        from .generalization.report import publish

        log(f"wrote {publish(results['generalization'], Path(results['generalization']['strips']))}")
    if plan.docs and results.get("qa_agreement"):
        from .qa_labels import report as qa_report

        log(f"wrote {qa_report.write(results['qa_agreement'], results['machine'], results['run'])}")
    if plan.docs and results.get("soak"):
        from . import soak

        path = measurements.DOCS / "soak.md"
        path.write_text(soak.doc(results["soak"], results["machine"], results["run"]))
        log(f"wrote {path}")
    print(report.summary(results), flush=True)
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
