"""swapline_core.metrics: a real stage loop (patch_stage on the sample clip) is counted once per
run, with its frames, chunks computed vs loaded from the stage cache and step seconds; errors are
counted by class; the text parses as Prometheus exposition. The registry is process-wide, so each
test compares values before and after its own runs."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from swapline_core import metrics
from swapline_core.types import FaceSet, FrameFaces
from swapline_core.video import stages
from swapline_core.video.frames import FrameSequence

CLIP = REPO / "assets" / "samples" / "kling_avatar_clip.mp4"


def samples() -> dict[tuple, float]:
    out = {}
    for fam in text_string_to_metric_families(metrics.exposition().decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def delta(before: dict, after: dict, name: str, **labels) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def _run(seq, root, stage="unit_copy", fail_at=None):
    faces = FaceSet([FrameFaces(i, [], seq.width, seq.height) for i in range(seq.count)])

    def compute(frames, chunk_faces, report, first):
        if fail_at is not None and first >= fail_at:
            raise RuntimeError("chunk failed")
        report.seconds["work"] += 0.001
        return [[] for _ in frames], list(frames)

    return stages.patch_stage(seq, faces, stage, "k-" + stage, {}, str(root), stages.Hooks(), compute)


def test_stage_runs_frames_and_cache_are_counted(tmp_path):
    seq = FrameSequence.open(str(CLIP), count=20, chunk=8)          # 3 chunks: 8 + 8 + 4
    before = samples()
    _run(seq, tmp_path)
    first = samples()
    assert delta(before, first, "swapline_stage_runs_total", stage="unit_copy") == 1
    assert delta(before, first, "swapline_frames_processed_total", stage="unit_copy") == 20
    assert delta(before, first, "swapline_stage_cache_misses_total", stage="unit_copy") == 3
    assert delta(before, first, "swapline_stage_cache_hits_total", stage="unit_copy") == 0
    assert delta(before, first, "swapline_stage_seconds_count", stage="unit_copy") == 1
    assert delta(before, first, "swapline_stage_step_seconds_total", stage="unit_copy", step="work") == \
        pytest.approx(0.003)
    assert delta(before, first, "swapline_stage_step_seconds_total", stage="unit_copy", step="store") > 0

    _run(seq, tmp_path)                                               # same key: every chunk cached
    second = samples()
    assert delta(first, second, "swapline_stage_runs_total", stage="unit_copy") == 1
    assert delta(first, second, "swapline_stage_cache_hits_total", stage="unit_copy") == 3
    assert delta(first, second, "swapline_stage_cache_misses_total", stage="unit_copy") == 0
    assert delta(first, second, "swapline_frames_processed_total", stage="unit_copy") == 20


def test_a_failing_stage_is_counted_by_error_class_and_still_raises(tmp_path):
    seq = FrameSequence.open(str(CLIP), count=16, chunk=8)
    before = samples()
    with pytest.raises(RuntimeError, match="chunk failed"):
        _run(seq, tmp_path, stage="unit_fail", fail_at=8)
    after = samples()
    assert delta(before, after, "swapline_stage_errors_total", stage="unit_fail", error="RuntimeError") == 1
    assert delta(before, after, "swapline_stage_runs_total", stage="unit_fail") == 0


def test_qa_decisions_and_frame_verdicts():
    m = metrics.pack_metrics()
    before = samples()
    m.record_qa({"decision": "fail", "frames": [{"status": "ok"}, {"status": "fail"}, {"status": "ok"},
                                                 {"status": "skipped"}]})
    after = samples()
    assert delta(before, after, "swapline_qa_decisions_total", decision="fail") == 1
    assert delta(before, after, "swapline_qa_frames_total", status="ok") == 2
    assert delta(before, after, "swapline_qa_frames_total", status="fail") == 1
    assert delta(before, after, "swapline_qa_frames_total", status="skipped") == 1


def test_the_registry_is_the_packs_own():
    from prometheus_client import REGISTRY

    assert metrics.pack_metrics().registry is not REGISTRY
    assert "swapline_stage_runs" not in {m.name for m in REGISTRY.collect()}


def test_recording_never_breaks_the_stage(caplog):
    """An input the metrics cannot read (no frame count) is logged, and the stage's result returned."""
    report = stages.StageReport("odd", "k", chunks_total=1)

    @metrics.observe_stage()
    def odd_stage(seq, faces, stage):
        return "result", report

    assert odd_stage(object(), None, "odd") == ("result", report)
    assert "metrics not recorded" in caplog.text
