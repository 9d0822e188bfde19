"""The soak section's smoke form (``python -m bench.soak --smoke``): every case of the full soak
(valid and face-less images, a missing file, a source without a face, a valid, a missing, a corrupt
and an interrupted video) on a fresh real ComfyUI server, with cache reads, sweeps and deletes in
between. The same code path as the full section; here every case must come out as it should."""
from __future__ import annotations

from bench import section, soak

EXPECTED = {"image/valid": "completed", "image/no_face_target": "completed", "image/missing_file": "refused",
            "image/no_face_source": "node_error", "video/valid": "completed", "video/missing_file": "refused",
            "video/corrupt_video": "node_error", "video/interrupt": "interrupted"}


def test_soak_smoke_every_case_as_it_should(tmp_path):
    rec = section.execute(soak.SECTION, {"work": str(tmp_path / "soak")}, smoke=True, log=lambda *a: None)
    res = rec["data"]       # through bench.run's protocol; RSS growth over 10 prompts means nothing
    assert all(t["met"] for t in rec["targets"] if t["figure"] != "rss_growth"), rec["targets"]
    assert res["failed"] == 0, res["failures"]
    assert res["frames_lost"] == 0
    assert set(res["by_case"]) == set(EXPECTED), res["by_case"]
    for case, want in EXPECTED.items():
        assert set(res["by_case"][case]) == {want}, (case, res["by_case"][case])
    m = res["maintenance"]
    assert res["maintenance_errors"] == 0, m["errors"]
    assert m["sweeps"] >= 3 and m["deleted"] >= 1 and m["refused_while_queued"] >= 1, m
    assert res["rss_first_quarter_mb"] > 100 and res["latency_s"]["image"]["p50"] > 0
