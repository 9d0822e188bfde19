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
