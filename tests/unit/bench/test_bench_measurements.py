"""bench/measurements.py: the measurement pages are written from a run's results, with the run's
command, date and machine, and a section that did not run leaves its page alone."""
from __future__ import annotations

import argparse

from bench import measurements, run


def _results(**skip) -> dict:
    args = argparse.Namespace(quick=True, skip_rss=skip.get("rss", False), skip_speed=skip.get("speed", False),
                              skip_tiled_vae=skip.get("tiled_vae", False), skip_quality=skip.get("quality", True))
    return run.new_results(args)


def _tiled_vae() -> dict:
    runs = {"full": {"wall_s": 10.0, "cpu_s": 19.0, "peak_mb": 3000.0},
            "core_tiled": {"wall_s": 40.0, "cpu_s": 70.0, "peak_mb": 900.0, "psnr_vs_full_db": 27.71},
            "ours": {"wall_s": 9.5, "cpu_s": 17.0, "peak_mb": 800.0, "psnr_vs_full_db": 76.34}}
    return {"size": [64, 48], "vae": "test VAE", "runs": runs, "errors": {},
            "targets": {"psnr_vs_full_db": 40.0, "peak_mem_ratio_vs_full": 0.35, "time_ratio_vs_core_tiled": 0.5},
            "met": {"psnr_vs_full_db": True}, "psnr_vs_full_db": 76.34, "core_tiled_psnr_db": 27.71,
            "peak_mem_ratio_vs_full": 0.267, "time_ratio_vs_core_tiled": 0.238,
            "ablation": {"tile": 512, "overlap": 64, "steps": [{"step": "per tile", "psnr_db": 26.0},
                                                              {"step": "+ stats", "psnr_db": 39.0, "gain_db": 13.0}]}}


def test_complete_run_writes_both_pages(tmp_path, monkeypatch):
    monkeypatch.setattr(measurements, "DOCS", tmp_path)
    res = _results()
    res["tiled_vae"] = _tiled_vae()
    res["run"] = {"command": "scripts/bench.sh --quick", "date": "2026-11-30 17:00 UTC"}
    written = measurements.write(res)
    assert written == ["docs/measurements/tiled_vae.md", "docs/measurements/bench.md"]
    tv = (tmp_path / "tiled_vae.md").read_text()
    for text in ("`scripts/bench.sh --quick`", "2026-11-30 17:00 UTC", "76.3", "27.7", "0.267", "+ stats", "39.00"):
        assert text in tv, text
    assert f"git {res['machine']['git_commit']}" in tv
    assert "`scripts/bench.sh --quick`" in (tmp_path / "bench.md").read_text()


def test_sections_that_did_not_run_leave_their_page(tmp_path, monkeypatch):
    monkeypatch.setattr(measurements, "DOCS", tmp_path)
    (tmp_path / "bench.md").write_text("kept")
    res = _results(speed=True, rss=True)
    res["tiled_vae"] = _tiled_vae()
    assert measurements.write(res) == ["docs/measurements/tiled_vae.md"]
    assert (tmp_path / "bench.md").read_text() == "kept"


def _farm() -> dict:
    run1 = {"workers": 1, "startup_s": 9.1, "wall_s": 80.0, "frames": 192, "frames_per_second": 2.4, "chunks": 12,
            "chunks_per_worker": {"w0": 12}, "chunk_seconds_median": 5.5, "overhead_per_chunk_s_median": 0.06,
            "overhead_per_chunk_s_max": 0.2, "worker_seconds": 66.0}
    run2 = {**run1, "workers": 2, "wall_s": 46.0, "frames_per_second": 4.174, "chunks_per_worker": {"w0": 6, "w1": 6},
            "overhead_per_chunk_s_median": 0.08}
    return {"cpu_count": 8, "cpu_count_physical": 4, "jobs": 4, "frames_per_job": 48, "chunk_frames": 16,
            "workflow": "workflows/api/video_swap_builtin.json", "runs": {"1": run1, "2": run2},
            "speedup_2_vs_1": 1.739, "overhead_per_chunk_s": 0.07, "overhead_share": 0.0127,
            "targets": {"speedup_2_vs_1": 1.7, "overhead_share": 0.05},
            "met": {"speedup_2_vs_1": True, "overhead_share": True},
            "load_average_at_start": [1.0, 1.0, 1.0], "load_average_at_end": [2.0, 1.5, 1.0]}


def test_farm_section_writes_its_page_and_report_rows(tmp_path, monkeypatch):
    from bench import report

    monkeypatch.setattr(measurements, "DOCS", tmp_path)
    res = _results(speed=True, rss=True, tiled_vae=True)
    res["farm"] = _farm()
    res["run"] = {"command": "scripts/bench.sh --skip-speed --skip-rss", "date": "2026-11-30 20:00 UTC"}
    assert measurements.write(res) == ["docs/measurements/farm.md"]
    page = (tmp_path / "farm.md").read_text()
    for text in ("farm.speedup_2_vs_1 (8 CPUs)", "1.74x", "0.013", "| 2 | 46.0 | 192 | 4.174 |",
                 "2026-11-30 20:00 UTC"):
        assert text in page, text
    md = report.markdown(res)
    assert "farm.speedup_2_vs_1" in md and "| 1 | 80.0 |" in md
    assert "farm: speedup_2_vs_1=1.74" in report.summary(res)
    few = {**_farm(), "cpu_count": 2, "met": {"speedup_2_vs_1": None, "overhead_share": True}}
    assert "not judged: 2 CPUs" in "\n".join(report.headline({**res, "farm": few}))


def test_server_job_section_writes_its_page(tmp_path, monkeypatch):
    # a full run measured the section but left docs/measurements/server_job.md from an older run
    monkeypatch.setattr(measurements, "DOCS", tmp_path)
    res = _results(speed=True, rss=True, tiled_vae=True)
    stages = {"decode": 1.7, "detect": 3.8, "embed": 0.4, "align/landmarks": 0.7, "swap": 7.6, "paste": 0.8,
              "restore": None, "QA": 20.2, "encode": 10.2, "other": 11.2}
    res["server_job"] = {"gen300_720p": {
        "frames": 300, "wall_s": 56.61, "fps": 5.299, "qa_s": 20.16, "qa_share": 0.3561,
        "qa_detail": {"decode": 2.2, "detect": 6.1, "embed": 4.7, "pixels": 6.5}, "detect_s": 3.8,
        "detector_frames": 38, "detect_s_per_detector_frame": 0.101, "stage_seconds": stages,
        "other_detail": {"masks + guards": 7.2}, "peak_rss_mb": 1885.8, "idle_rss_mb": 915.0,
        "stage_cache_mb_per_frame": 0.0906, "qa_decision": "fail", "delivered_swapped_frames": 300}}
    res["run"] = {"command": "scripts/bench.sh", "date": "2026-12-04 23:20 UTC"}
    assert measurements.write(res) == ["docs/measurements/server_job.md"]
    page = (tmp_path / "server_job.md").read_text()
    for text in ("`scripts/bench.sh`", "2026-12-04 23:20 UTC", "| gen300_720p | 300 | 56.6 | 5.299 | 20.2 (0.3561)",
                 "pixels 6.5 s", "masks + guards 7.2 s"):
        assert text in page, text
