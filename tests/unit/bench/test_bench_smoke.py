"""The benchmark's smoke form (``python -m bench.run --smoke``, what ``scripts/bench.sh --smoke``
runs): every registered section (bench/section.py) through the one protocol on its smoke inputs,
so a refactor of the core or of the bench cannot break ``scripts/bench.sh`` unnoticed (issue 31:
the speed section patched functions that had moved, and no speed figure was measured for days).

One run in a child process (the farm section starts Ray and ComfyUI workers, which must not mix
with this pytest process), under its own output root (SWAPLINE_BENCH_OUT), so a real run's
out/bench is left alone. The rss and server_job sections instead run here through the same
``section.execute``: rss on the test session's ComfyUI server (tests/conftest.py ``comfy``, shared
with the integration tests) rather than two servers of its own. The generalization, soak and
gpu_check sections run through it in their own tests (``RUN_ELSEWHERE``); every registered section
is one of the two. Each test checks one section: present, no error, numbers finite and > 0. The
numbers are not measurements.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import section

REPO = Path(__file__).resolve().parents[3]
SMOKE_TIMEOUT_S = 900
CASES = ("builtin_mesh", "builtin", "insightface_synthetic")
# section -> the test that runs it through section.execute instead of the child run below
RUN_ELSEWHERE = {"rss": "test_rss_section", "server_job": "test_server_job_section",
                 "generalization": "test_generalization_smoke.py", "soak": "test_soak_smoke.py",
                 "gpu_check": "test_gpu_check.py"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bench-smoke")
    env = dict(os.environ, SWAPLINE_BENCH_OUT=str(out), DO_NOT_TRACK="1", PYTHONUNBUFFERED="1")
    skips = [f"--skip-{n.replace('_', '-')}" for n in RUN_ELSEWHERE if not section.registry()[n].opt_in]
    proc = subprocess.run([sys.executable, "-m", "bench.run", "--smoke", *skips], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S, check=False)
    log = proc.stdout + proc.stderr
    path = out / "results.json"
    assert path.is_file(), f"bench --smoke wrote no results.json (exit {proc.returncode}):\n{log[-6000:]}"
    results = json.loads(path.read_text())
    return {"results": results, "rc": proc.returncode, "log": log, "out": out}


def data(smoke: dict, name: str) -> dict:
    rec = smoke["results"]["sections"].get(name)
    assert rec, section_error(smoke, name) or f"no {name} record"
    return rec["data"]


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


def check_record(rec: dict, s) -> None:
    """What the protocol gives for every section: its smoke inputs, its data, each target checked."""
    assert rec["section"] == s.name and rec["smoke"] is True and set(s.smoke) <= set(rec["inputs"])
    assert isinstance(rec["data"], dict) and rec["data"]
    assert [t["figure"] for t in rec["targets"]] == [t.figure for t in s.targets]
    assert all(t["met"] in (True, False, None) for t in rec["targets"])
    assert s.body(rec["data"]) is not None


def test_run_completes_without_errors_and_leaves_the_docs(smoke):
    r = smoke["results"]
    assert r["complete"] and r["settings"]["smoke"], smoke["log"][-3000:]
    assert not r["errors"], section_error(smoke, "")
    assert smoke["rc"] == 0, smoke["log"][-3000:]
    assert (smoke["out"] / "results.md").is_file()
    assert "docs/measurements" not in smoke["log"].replace("docs/measurements untouched", "")


def test_every_registered_section_runs_through_the_protocol(smoke):
    sections = section.registry()
    ran = smoke["results"]["sections"]
    assert set(ran) | set(RUN_ELSEWHERE) == set(sections), set(sections) - set(ran) - set(RUN_ELSEWHERE)
    assert not set(ran) & set(RUN_ELSEWHERE)
    for name, rec in ran.items():
        check_record(rec, sections[name])
        assert rec["inputs"] == sections[name].smoke, name
    md = (smoke["out"] / "results.md").read_text()
    assert all(f"# {sections[n].title}" in md for n in ran)


def test_speed_section(smoke):
    from bench.instrument import OTHER_LABELS, ROWS
    from bench.speed import SECTION

    assert not section_error(smoke, "speed"), section_error(smoke, "speed")
    runs = data(smoke, "speed")["runs"]
    (clip, frames), = SECTION.smoke["clips"].items()
    for case in CASES:
        key = f"{case}/{clip}"
        run = runs.get(key)
        assert run, f"no speed run {key}; have {sorted(runs)}"
        assert run["frames"] == frames, (key, run["frames"])
        positive(run["wall_s_median"], f"{key} wall")
        st = run["stages"]
        positive(st["fps"], f"{key} fps")
        # every timed stage got wall and CPU time: the instrumentation found them. Wall time from
        # the probe's own seconds (4 decimals): the stage table's 3 decimals round a 4-frame
        # paste of a few small patches to 0.0
        rows = dict(ROWS)
        for stage in ("decode", "detect", "swap", "paste", "encode"):
            positive(sum(run["probe_seconds"].get(k, 0.0) for k in rows[stage]), f"{key} stage {stage}")
            positive(st["cpu_s_per_frame"][stage], f"{key} CPU s per frame {stage}")
        assert 0 < st["glue_share"] < 1, st["glue_share"]
        positive(run["mask_ms_per_face"], f"{key} mask ms per face")
        # bench/speed.py fails a run whose required targets were never called; this is that the
        # check ran and recorded its counts
        assert run["target_calls"] and all(isinstance(n, int) for n in run["target_calls"].values())
        for label in ("flow", "store", "replay", "masks", "guards"):
            assert label in OTHER_LABELS
            positive(run["probe_seconds"].get(label, 0.0), f"{key} other_detail {label}")


def test_rss_section(comfy, tmp_path, monkeypatch):
    from bench import media
    from bench.rss import SECTION

    monkeypatch.setattr(media, "MEDIA", tmp_path)
    rec = section.execute(SECTION, smoke=True, log=lambda *a: None, server=comfy)
    check_record(rec, SECTION)
    d = rec["data"]
    for label, frames in SECTION.smoke["frames"].items():
        run = d["runs"].get(label)
        assert run, f"no server run {label}"
        assert run["frames"] == frames
        positive(run["peak_rss_mb"], f"rss {label} peak")
        positive(run["wall_s"], f"rss {label} wall")
        positive(run["stages"]["fps"], f"rss {label} fps")
        positive(run["stages"]["seconds"]["detect"], f"rss {label} detect")
        positive(run["stages"]["seconds"]["encode"], f"rss {label} encode")
    positive(d["peak_rss_ratio_long_vs_short"], "peak_rss_ratio_long_vs_short")
    assert rec["targets"][0]["measured"] == d["peak_rss_ratio_long_vs_short"]


def test_server_job_section(tmp_path, monkeypatch):
    """Two runs, each on a fresh server as the full run's three (a shared server would serve the
    second from its caches): the median-run path the figures come from."""
    from bench import media, paths, server_job
    from bench.server_job import SECTION

    monkeypatch.setattr(media, "MEDIA", tmp_path)
    monkeypatch.setattr(paths, "WORK", tmp_path / "work")
    rec = section.execute(SECTION, {"repeats": 2}, smoke=True, log=lambda *a: None)
    check_record(rec, SECTION)
    for label, n in SECTION.smoke["clips"].items():
        s = rec["data"][label]
        assert s["frames"] == n
        assert len(s["runs"]) == 2 and s["qa_share"] == min(r["qa_share"] for r in s["runs"])   # lower median of 2
        for key in ("wall_s", "fps", "qa_s", "qa_share", "detect_s", "detect_s_per_detector_frame", "peak_rss_mb",
                    "stage_cache_mb_per_frame"):
            positive(s[key], f"server_job {label} {key}")
        assert 0 < s["qa_share"] < 1 and s["detector_frames"] >= 1
        assert s["qa_detail"] and s["qa_detail"]["detect"] > 0        # the QA report's own seconds
        positive(s["other_detail"]["masks + guards"], f"server_job {label} masks + guards")   # "other" explained
    assert any(line.startswith(f"| {label} |") for line in server_job.body(rec["data"])
               for label in SECTION.smoke["clips"])


def test_quality_section(smoke):
    from bench.quality.run import TARGETS

    q = data(smoke, "quality")
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
    tv = data(smoke, "tiled_vae")
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
    f = data(smoke, "farm")
    for n in ("1", "2"):
        run = f["runs"][n]
        assert run["frames"] == f["jobs"] * f["frames_per_job"]
        positive(run["frames_per_second"], f"farm {n} workers fps")
        positive(run["chunk_seconds_median"], f"farm {n} workers chunk s")
    positive(f["speedup_2_vs_1"], "farm speedup_2_vs_1")
    finite_or_none(f["overhead_share"], "farm overhead_share")


def test_qa_agreement_section(smoke):
    q = data(smoke, "qa_agreement")
    # the shipped built-in path's labelled faces, the classical path's beside them, both rounds
    from bench.qa_labels.agreement import SHIPPED_PATH
    from bench.qa_labels.labels import RELABEL, ROUNDS, SOURCE_ROUNDS

    assert q["path"] == SHIPPED_PATH and q["faces"] >= 400 and q["clips"] >= 14
    assert q["other_paths"]["classical"]["faces"] >= 1000
    # what a viewer accepts of the shipped path, read on the same faces as its gate figures
    w = q["accepted_whole"]
    assert w["faces"] == q["faces"] and 0 <= w["good_sources"]["accepted"] <= 1
    assert sum(v["all"]["faces"] for v in w["per_clip"].values()) == q["faces"] and len(w["per_clip"]) == q["clips"]
    assert set(q["accepted_side_by_side"]) == set(ROUNDS.values()) | set(SOURCE_ROUNDS) | set(RELABEL)
    assert SHIPPED_PATH in q["accepted_side_by_side"][ROUNDS[SHIPPED_PATH]]
    assert {"classical", "mesh4"} <= set(q["accepted_side_by_side"][ROUNDS["mesh4"]])
    for gate in ("shipped", "loco"):
        s = q[gate]
        assert s["faces"] == q["faces"] and 0 <= s["passed"] <= s["faces"]
        finite_or_none(s["precision"], f"{gate} precision")
        finite_or_none(s["recall"], f"{gate} recall")
    assert set(q["per_clip"]) and all(set(v) == {"shipped", "loco"} for v in q["per_clip"].values())
    assert {"per shot", "per frame"} <= set(q["policies"])
    # the page renders from these results (the smoke writes no page)
    from bench.qa_labels.report import SECTION

    rec = smoke["results"]["sections"]["qa_agreement"]
    text = section.page(SECTION, rec, smoke["results"]["run"])
    assert "## Targets" in text and "leave-one-clip-out" in text and "- Commit: " in text
