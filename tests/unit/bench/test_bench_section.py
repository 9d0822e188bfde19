"""bench/section.py: every section declares itself through one protocol, and one writer makes every
docs/measurements page with the same stamp (command, date, machine, commit) and target table."""
from __future__ import annotations

import pytest

from bench import run, section

STAMP = {"command": "scripts/bench.sh --quick", "date": "2026-11-30 17:00 UTC",
         "machine": {"cpu_count": 8, "cpu_model": "Test CPU", "memory_gb": 16.0, "python": "3.11.7",
                     "git_commit": "abc1234", "git_dirty": True, "load_average_at_start": [1.0, 1.0, 1.0]}}


def _record(name: str, data: dict) -> dict:
    s = section.registry()[name]
    return {"section": name, "smoke": False, "inputs": s.full, "data": data, "targets": section.check(s, data)}


def _tiled_vae() -> dict:
    runs = {"full": {"wall_s": 10.0, "cpu_s": 19.0, "peak_mb": 3000.0},
            "core_tiled": {"wall_s": 40.0, "cpu_s": 70.0, "peak_mb": 900.0, "psnr_vs_full_db": 27.71},
            "ours": {"wall_s": 9.5, "cpu_s": 17.0, "peak_mb": 800.0, "psnr_vs_full_db": 76.34}}
    return {"size": [64, 48], "vae": "test VAE", "runs": runs, "errors": {}, "psnr_vs_full_db": 76.34,
            "core_tiled_psnr_db": 27.71, "peak_mem_ratio_vs_full": 0.267, "time_ratio_vs_core_tiled": 0.6,
            "ablation": {"tile": 512, "overlap": 64, "steps": [{"step": "per tile", "psnr_db": 26.0},
                                                              {"step": "+ stats", "psnr_db": 39.0, "gain_db": 13.0}]}}


def _farm(cpus: int = 8) -> dict:
    run1 = {"workers": 1, "startup_s": 9.1, "wall_s": 80.0, "frames": 192, "frames_per_second": 2.4, "chunks": 12,
            "chunks_per_worker": {"w0": 12}, "chunk_seconds_median": 5.5, "overhead_per_chunk_s_median": 0.06,
            "overhead_per_chunk_s_max": 0.2, "worker_seconds": 66.0}
    run2 = {**run1, "workers": 2, "wall_s": 46.0, "frames_per_second": 4.174, "chunks_per_worker": {"w0": 6, "w1": 6},
            "overhead_per_chunk_s_median": 0.08}
    return {"cpu_count": cpus, "cpu_count_physical": 4, "jobs": 4, "frames_per_job": 48, "chunk_frames": 16,
            "workflow": "workflows/api/video_swap_builtin.json", "runs": {"1": run1, "2": run2},
            "speedup_2_vs_1": 1.739, "overhead_per_chunk_s": 0.07, "overhead_share": 0.0127,
            "load_average_at_start": [1.0, 1.0, 1.0], "load_average_at_end": [2.0, 1.5, 1.0]}


def test_every_registered_section_declares_the_protocol():
    sections = section.registry()
    assert len(sections) == len(section.MODULES)
    for name, s in sections.items():
        assert s.name == name and s.title and s.about and callable(s.run) and callable(s.body)
        assert isinstance(s.smoke, dict) and isinstance(s.full, dict)
        assert all(t.op in section.OPS for t in s.targets)
        args = run.parse(["--smoke"], sections)
        flag = f"skip_{name}" if not s.opt_in else name
        assert hasattr(args, flag), flag
    assert len({s.page_name for s in sections.values()}) == len(sections)      # one writer per page


def test_page_states_command_date_machine_commit_and_targets(tmp_path, monkeypatch):
    monkeypatch.setattr(section, "DOCS", tmp_path)
    s = section.registry()["tiled_vae"]
    path = section.write(s, _record("tiled_vae", _tiled_vae()), STAMP)
    assert path.endswith("tiled_vae.md")
    page = (tmp_path / "tiled_vae.md").read_text()
    for text in ("# Tiled VAE encode: measurements", "- Command: `scripts/bench.sh --quick`",
                 "- Date: 2026-11-30 17:00 UTC", "- Machine: 8 CPUs (Test CPU)", "- Commit: abc1234 (uncommitted",
                 "## Targets", "| target | measured | met |", "| `psnr_vs_full_db` >= 40", "| 76.340 | yes |",
                 "| `time_ratio_vs_core_tiled` <= 0.5", "| 0.600 | no |", "+ stats", "39.00"):
        assert text in page, text


def test_a_target_that_cannot_be_judged_says_why():
    recs = {cpus: {t["figure"]: t for t in _record("farm", _farm(cpus))["targets"]} for cpus in (2, 8)}
    assert recs[8]["speedup_2_vs_1"]["met"] is True and recs[8]["overhead_share"]["met"] is True
    few = recs[2]["speedup_2_vs_1"]
    assert few["met"] is None and few["note"] == "2 CPUs < 4" and few["measured"] == 1.739
    assert "n/a (2 CPUs < 4)" in "\n".join(section.target_table(list(recs[2].values())))
    missing = section.check(section.registry()["tiled_vae"], {**_tiled_vae(), "psnr_vs_full_db": None})
    assert missing[0]["met"] is None and missing[0]["note"] == "not measured"


def test_a_smoke_record_writes_no_page(tmp_path, monkeypatch):
    monkeypatch.setattr(section, "DOCS", tmp_path)
    rec = {**_record("farm", _farm()), "smoke": True}
    with pytest.raises(ValueError, match="smoke"):
        section.write(section.registry()["farm"], rec, STAMP)
    assert not list(tmp_path.iterdir())


def test_results_md_renders_each_section_that_ran():
    results = {"run": STAMP, "sections": {"farm": _record("farm", _farm()), "tiled_vae": _record("tiled_vae",
                                                                                                _tiled_vae())},
               "errors": {"speed": "RuntimeError: boom"}, "complete": True, "seconds_total": 1.0}
    md = run.markdown(results)
    assert "| 2 | 46.0 | 192 | 4.174 |" in md and "`overhead_share` <= 0.05" in md and "+ stats" in md
    assert "RuntimeError: boom" in md and "- Commit: abc1234" in md


def test_server_job_page(tmp_path, monkeypatch):
    monkeypatch.setattr(section, "DOCS", tmp_path)
    stages = {"decode": 1.7, "detect": 3.8, "embed": 0.4, "align/landmarks": 0.7, "swap": 7.6, "paste": 0.8,
              "restore": None, "QA": 20.2, "encode": 10.2, "other": 11.2}
    data = {"gen300_720p": {
        "frames": 300, "wall_s": 56.61, "fps": 5.299, "qa_s": 20.16, "qa_share": 0.3561,
        "qa_detail": {"decode": 2.2, "detect": 6.1, "embed": 4.7, "pixels": 6.5}, "detect_s": 3.8,
        "detector_frames": 38, "detect_s_per_detector_frame": 0.101, "stage_seconds": stages,
        "other_detail": {"masks + guards": 7.2}, "peak_rss_mb": 1885.8, "idle_rss_mb": 915.0,
        "stage_cache_mb_per_frame": 0.0906, "qa_decision": "fail", "delivered_swapped_frames": 300}}
    section.write(section.registry()["server_job"], _record("server_job", data), STAMP)
    page = (tmp_path / "server_job.md").read_text()
    for text in ("| gen300_720p | 300 | 56.6 | 5.299 | 20.2 (0.3561)", "pixels 6.5 s", "masks + guards 7.2 s",
                 "None: this section reports figures"):
        assert text in page, text
