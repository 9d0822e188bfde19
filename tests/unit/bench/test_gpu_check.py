"""``scripts/gpu_check.sh --cpu-fallback`` (issue 33): the GPU check's whole code path on CPU, so it
cannot rot between the rare runs on a lent GPU: the six stand-ins exported and timed through the
pack's session code at batch 1 and 2, and ``workflows/api/video_swap.json`` run end to end through
a real ComfyUI server in its three variants (swap only, + GFPGAN, QA every frame) on a tiny clip.
The numbers are not measurements; the test checks they exist and are sane."""
from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TIMEOUT_S = 1500


def test_gpu_check_cpu_fallback_runs_every_section(tmp_path):
    out = tmp_path / "gpu_check"
    env = dict(os.environ, SWAPLINE_BENCH_OUT=str(tmp_path / "bench"), DO_NOT_TRACK="1", PYTHONUNBUFFERED="1")
    proc = subprocess.run(["scripts/gpu_check.sh", "--cpu-fallback", "--out", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    r = json.loads((out / "gpu_check.json").read_text())
    assert r["mode"] == "cpu-fallback" and r["batches"] == [1, 2]
    names = {s["name"] for s in r["standins"]}
    assert names == {"arcface_r50", "scrfd_10g_kps", "inswapper_128", "ghost_aei_256", "gfpgan_v1_4", "gpen_bfr_512"}
    for s in r["standins"]:
        assert 0.99 <= s["params_ratio"] <= 1.01, s
        assert s["gflops"] > 0
    for m in r["models"]:
        assert m["providers"][0] == "CPUExecutionProvider"
        assert all(math.isfinite(v) and v > 0 for v in m["ms_per_item"].values()), m
        assert m["largest_batch_run"] == (1 if m["batch_fixed_by_graph"] else 2)
    e2e = r["end_to_end"]
    assert set(e2e) == {"sample8/swap", "sample8/swap+gfpgan", "sample8/swap+qa"}
    for k, v in e2e.items():
        assert v["frames"] == 8 and v["fps"] > 0, (k, v)
        session = v["swap_inference"]["swapper:inswapper_128.onnx"]      # the swap stage's own report
        assert session["providers"][0] == "CPUExecutionProvider" and session["largest_batch_run"] >= 1
        assert v["server_gpu_peak_mb"] is None          # no GPU: no figure rather than a made-up 0
    assert e2e["sample8/swap+qa"]["qa_share"] > 0
    assert e2e["sample8/swap"]["qa_share"] is None
    page = (out / "gpu.md").read_text()
    assert "No GPU was available" in page and "inswapper_128" in page
