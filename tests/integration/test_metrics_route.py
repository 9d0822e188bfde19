"""GET /swapline/metrics on a real ComfyUI after the shipped builtin video workflow: the text parses
as Prometheus exposition and counts what ran (stage runs, frames, chunks computed vs loaded from
the stage cache, step seconds as the nodes report them, the QA decision and frame verdicts).

A fresh server of its own (empty models folder: the builtin workflow needs no model file), so the
counts start at zero and no other test's cached chunks are hit."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from devtools.comfy_harness import ComfyServer
from devtools.media import SAMPLES

REPO = Path(__file__).resolve().parents[2]
FRAMES, CHUNK = 16, 8                       # two chunks per stage


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("metrics-base")
    models = tmp_path_factory.mktemp("metrics-models")
    srv = ComfyServer(base, models).start()
    inp = base / "input"
    shutil.copy(SAMPLES / "kling_avatar_clip.mp4", inp / "swapline_sample_clip.mp4")
    shutil.copy(SAMPLES / "source_face.png", inp / "swapline_source_face.png")
    shutil.copy(SAMPLES / "target_reference.png", inp / "swapline_target_reference.png")
    yield srv
    srv.stop()


def scrape(server: ComfyServer, path: str = "/swapline/metrics") -> dict[tuple, float]:
    r = requests.get(server.url + path, timeout=30)
    r.raise_for_status()
    assert r.headers["Content-Type"].startswith("text/plain"), r.headers
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def v(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def prompt(prefix: str) -> dict:
    p = json.loads((REPO / "workflows" / "api" / "video_swap_builtin.json").read_text())
    load = next(n for n in p.values() if n["class_type"] == "SwaplineLoadVideo")
    load["inputs"].update(count=FRAMES, chunk=CHUNK)
    for n in p.values():
        if n["class_type"] in ("SwaplineQAGate", "SwaplineC2PASink"):
            n["inputs"]["filename_prefix"] = prefix
    return p


def ui(hist: dict, key: str) -> dict:
    return next(d[key][0] for d in hist["outputs"].values() if key in d)


def test_metrics_route_counts_what_ran(server):
    before = scrape(server)
    assert v(before, "swapline_stage_runs_total", stage="track") == 0
    assert scrape(server, "/api/swapline/metrics").keys() == before.keys()      # ComfyUI's /api twin

    hist = server.run(prompt("swapline/metrics_a"))
    first = scrape(server)
    for stage in ("track", "swap", "qa"):
        assert v(first, "swapline_stage_runs_total", stage=stage) == 1, stage
        assert v(first, "swapline_stage_seconds_count", stage=stage) == 1, stage
        assert v(first, "swapline_frames_processed_total", stage=stage) == FRAMES, stage
        assert v(first, "swapline_stage_cache_misses_total", stage=stage) == FRAMES // CHUNK, stage
        assert v(first, "swapline_stage_cache_hits_total", stage=stage) == 0, stage
    # step seconds are the ones the Track Faces node reports in its ui output
    track = ui(hist, "swapline_track")
    steps = track["seconds"]
    assert {"detect", "embed"} <= steps.keys(), steps
    for step, secs in steps.items():
        assert v(first, "swapline_stage_step_seconds_total", stage="track", step=step) == \
            pytest.approx(secs, abs=1e-3), step
    assert v(first, "swapline_stage_step_seconds_total", stage="swap", step="decode") > 0

    qa_file = server.base_dir / "output" / ui(hist, "swapline_qa")["report_file"]
    report = json.loads(qa_file.read_text())
    assert v(first, "swapline_qa_decisions_total", decision=report["decision"]) == 1
    assert sum(val for (n, _), val in first.items() if n == "swapline_qa_decisions_total") == 1
    for status, n in Counter(rec["status"] for rec in report["frames"]).items():
        assert v(first, "swapline_qa_frames_total", status=status) == n, status

    # Same job, other output names: ComfyUI re-runs only the QA gate and the sink; QA finds both
    # chunks in its stage cache, and track/swap (not executed) count nothing more.
    server.run(prompt("swapline/metrics_b"))
    second = scrape(server)
    assert v(second, "swapline_stage_runs_total", stage="qa") == 2
    assert v(second, "swapline_stage_cache_hits_total", stage="qa") == FRAMES // CHUNK
    assert v(second, "swapline_stage_cache_misses_total", stage="qa") == FRAMES // CHUNK
    assert v(second, "swapline_frames_processed_total", stage="qa") == 2 * FRAMES
    for stage in ("track", "swap"):
        assert v(second, "swapline_stage_runs_total", stage=stage) == 1, stage
    assert sum(val for (n, _), val in second.items() if n == "swapline_qa_decisions_total") == 2
