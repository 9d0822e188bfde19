"""The benchmark's smoke form (``python -m bench.run --smoke``, what ``scripts/bench.sh --smoke``
runs): every section (speed, rss, server_job, quality, tiled_vae, farm; generalization in
test_generalization_smoke.py) on tiny inputs, so a refactor of the
core or of the bench cannot break ``scripts/bench.sh`` unnoticed (issue 31: the speed section
patched functions that had moved, and no speed figure was measured for days).

One run in a child process (the farm section starts Ray and ComfyUI workers, which must not mix
with this pytest process), under its own output root (SWAPLINE_BENCH_OUT), so a real run's
out/bench is left alone. The RSS section instead runs here, in-process, on the test session's
ComfyUI server (tests/conftest.py ``comfy``, shared with the integration tests) rather than two
servers of its own: the same bench code, less the ~25 s start of each server. Each test checks one
section: present, no error, numbers finite and > 0. The numbers are not measurements.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SMOKE_TIMEOUT_S = 900
CASES = ("builtin", "insightface_synthetic")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bench-smoke")
    env = dict(os.environ, SWAPLINE_BENCH_OUT=str(out), DO_NOT_TRACK="1", PYTHONUNBUFFERED="1")
    # rss and server_job run below on the shared server; generalization has its own smoke
    # (test_generalization_smoke.py)
    proc = subprocess.run([sys.executable, "-m", "bench.run", "--smoke", "--skip-rss", "--skip-server-job",
                           "--skip-generalization"],
                          cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S, check=False)
    log = proc.stdout + proc.stderr
    path = out / "results.json"
    assert path.is_file(), f"bench --smoke wrote no results.json (exit {proc.returncode}):\n{log[-6000:]}"
    results = json.loads(path.read_text())
    return {"results": results, "rc": proc.returncode, "log": log, "out": out}


def positive(value, what: str) -> float:
    assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{what} = {value!r}, not a number"
    assert math.isfinite(value) and value > 0, f"{what} = {value!r}, not finite and > 0"
    return value


def finite_or_none(value, what: str) -> None:
    if value is not None:
        assert isinstance(value, (int, float)) and math.isfinite(value), f"{what} = {value!r}"


def section_error(smoke: dict, prefix: str) -> str:
    errs = {k: v for k, v in smoke["results"]["errors"].items() if k.startswith(prefix)}
    return "" if not errs else f"section errors {json.dumps(errs, indent=1)[:4000]}\nlog tail:\n{smoke['log'][-3000:]}"


def test_run_completes_without_errors_and_leaves_the_docs(smoke):
    r = smoke["results"]
    assert r["complete"] and r["settings"]["smoke"], smoke["log"][-3000:]
    assert not r["errors"], section_error(smoke, "")
    assert smoke["rc"] == 0, smoke["log"][-3000:]
    assert (smoke["out"] / "results.md").is_file()
    assert "docs/measurements" not in smoke["log"].replace("docs/measurements untouched", "")


def test_speed_section(smoke):
    from bench.instrument import OTHER_LABELS
    from bench.run import SMOKE

    r = smoke["results"]
    assert not section_error(smoke, "speed"), section_error(smoke, "speed")
    video = r["video"]
    (clip, frames), = SMOKE.speed_clips.items()
    for case in CASES:
        key = f"{case}/{clip}"
        run = video["speed_runs"].get(key)
        assert run, f"no speed run {key}; have {sorted(video['speed_runs'])}"
        positive(run["speedup_wall"], f"{key} speedup_wall")
        positive(run["speedup_cpu"], f"{key} speedup_cpu")
        for kind in ("naive", "ours"):
            k = run[kind]
            assert k["frames"] == frames, (key, kind, k["frames"])
            positive(k["wall_s_median"], f"{key} {kind} wall")
            st = k["stages"]
            positive(st["fps"], f"{key} {kind} fps")
            # every timed stage both paths go through got time: the instrumentation found them
            for stage in ("decode", "detect", "swap", "paste", "encode"):
                positive(st["seconds"][stage], f"{key} {kind} stage {stage}")
            # bench/speed.py fails a run whose required targets were never called; this is that
            # the check ran and recorded its counts
            assert k["target_calls"] and all(isinstance(n, int) for n in k["target_calls"].values())
        ours = run["ours"]["stages"]
        for label in ("flow", "store", "replay", "masks", "guards"):
            assert label in OTHER_LABELS
            positive(ours["other_detail"][label], f"{key} ours other_detail {label}")
        assert video["stages"][f"ours {key}"]["fps"] > 0


def test_rss_section(comfy, tmp_path, monkeypatch):
    from bench import media, run

    monkeypatch.setattr(media, "MEDIA", tmp_path)
    results = run.new_results(run.parse(["--smoke"]))
    short, long_ = run.SMOKE.rss_frames
    clips = {"short": run.clip(run.SMOKE, short), "long": run.clip(run.SMOKE, long_)}
    run.run_rss(results, clips, save=lambda: None, server=comfy)
    assert not results["errors"], json.dumps(results["errors"], indent=1)[:4000]
    video = results["video"]
    for label, frames in (("short", short), ("long", long_)):
        run = video["server_runs"].get(label)
        assert run, f"no server run {label}"
        assert run["frames"] == frames
        positive(run["peak_rss_mb"], f"rss {label} peak")
        positive(run["wall_s"], f"rss {label} wall")
        positive(run["stages"]["fps"], f"rss {label} fps")
        positive(run["stages"]["seconds"]["detect"], f"rss {label} detect")
        positive(run["stages"]["seconds"]["encode"], f"rss {label} encode")
    positive(video["peak_rss_ratio_long_vs_short"], "peak_rss_ratio_long_vs_short")


def test_server_job_section(tmp_path, monkeypatch):
    """Two runs, each on a fresh server as the full run's three (a shared server would serve the
    second from its caches): the median-run path the figures come from."""
    from bench import media, report, run

    monkeypatch.setattr(media, "MEDIA", tmp_path)
    monkeypatch.setattr(run, "WORK", tmp_path / "work")
    results = run.new_results(run.parse(["--smoke"]))
    clips = {name: run.clip(run.SMOKE, n) for name, n in run.SMOKE.server_job.items()}
    run.run_server_job(results, clips, save=lambda: None, repeats=2)
    assert not results["errors"], json.dumps(results["errors"], indent=1)[:4000]
    for label, n in run.SMOKE.server_job.items():
        s = results["server_job"][label]
        assert s["frames"] == n
        assert len(s["runs"]) == 2 and s["qa_share"] == min(r["qa_share"] for r in s["runs"])   # lower median of 2
        for key in ("wall_s", "fps", "qa_s", "qa_share", "detect_s", "detect_s_per_detector_frame", "peak_rss_mb",
                    "stage_cache_mb_per_frame"):
            positive(s[key], f"server_job {label} {key}")
        assert 0 < s["qa_share"] < 1 and s["detector_frames"] >= 1
        assert s["qa_detail"] and s["qa_detail"]["detect"] > 0        # the QA report's own seconds
        positive(s["other_detail"]["masks + guards"], f"server_job {label} masks + guards")   # "other" explained
    assert any(line.startswith(f"| {label} |") for line in report.markdown(results).splitlines()
               for label in run.SMOKE.server_job)


def test_quality_section(smoke):
    from bench.quality.run import TARGETS

    q = smoke["results"]["quality"]
    assert q, section_error(smoke, "quality") or "no quality results"
    assert set(TARGETS) <= set(q["metrics"]), sorted(q["metrics"])
    for name, value in q["metrics"].items():
        finite_or_none(value, f"quality {name}")
    for case in ("speech", "occluder_bar", "occluder_sunglasses", "occluder_skin_hand", "small_faces", "hard_cut",
                 "identity_no_glasses"):
        row = q["cases"].get(case)
        assert row, f"no quality case {case}; have {sorted(q['cases'])}"
        positive(row["seconds"]["track"], f"quality {case} track s")
        positive(row["seconds"]["swap"], f"quality {case} swap s")
    for step in ("swap", "masks", "paste"):
        positive(q["swap_stage_seconds"].get(step), f"quality swap stage {step}")
    positive(q["metrics"]["cut_track_resets"], "cut_track_resets (the cut is found and resets the tracks)")
    assert (smoke["out"] / "quality_speech.png").is_file()


def test_tiled_vae_section(smoke):
    tv = smoke["results"]["tiled_vae"]
    assert tv, section_error(smoke, "tiled_vae") or "no tiled_vae results"
    assert not tv["errors"], tv["errors"]
    for method in ("full", "core_tiled", "ours"):
        run = tv["runs"][method]
        positive(run["wall_s"], f"tiled_vae {method} wall")
        positive(run["peak_mb"], f"tiled_vae {method} peak")
    for key in ("psnr_vs_full_db", "core_tiled_psnr_db", "peak_mem_ratio_vs_full", "time_ratio_vs_core_tiled"):
        positive(tv[key], f"tiled_vae {key}")
    steps = tv["ablation"]["steps"]
    assert steps and all(math.isfinite(s["psnr_db"]) for s in steps)


def test_farm_section(smoke):
    f = smoke["results"]["farm"]
    assert f, section_error(smoke, "farm") or "no farm results"
    for n in ("1", "2"):
        run = f["runs"][n]
        assert run["frames"] == f["jobs"] * f["frames_per_job"]
        positive(run["frames_per_second"], f"farm {n} workers fps")
        positive(run["chunk_seconds_median"], f"farm {n} workers chunk s")
    positive(f["speedup_2_vs_1"], "farm speedup_2_vs_1")
    finite_or_none(f["overhead_share"], "farm overhead_share")


def test_qa_agreement_section(smoke):
    q = smoke["results"]["qa_agreement"]
    assert q, section_error(smoke, "qa_agreement") or "no qa_agreement results"
    assert q["faces"] >= 1000 and q["clips"] >= 14
    for gate in ("shipped", "loco"):
        s = q[gate]
        assert s["faces"] == q["faces"] and 0 <= s["passed"] <= s["faces"]
        finite_or_none(s["precision"], f"{gate} precision")
        finite_or_none(s["recall"], f"{gate} recall")
    assert set(q["per_clip"]) and all(set(v) == {"shipped", "loco"} for v in q["per_clip"].values())
    assert {"per shot", "per frame"} <= set(q["policies"])
    # the doc renders from these results (the smoke writes no doc)
    from bench.qa_labels import report as qa_report

    text = qa_report.doc(q, smoke["results"]["machine"], smoke["results"]["run"])
    assert "## Targets" in text and "leave-one-clip-out" in text
