"""Retention: the policy file, the cache sweep (age, size, LRU) and the lease that keeps a running
job's chunks, tested with a real stage paused in the middle of its run."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from swapline_core.provenance import jobs, retention
from swapline_core.provenance.delete import Places
from swapline_core.video import stages
from swapline_core.video.frames import FrameSequence
from swapline_core.video.store import ChunkStore, stage_key
from swapline_core.video.write import write_image

DAY = 86400


def _age(path: Path, days: float) -> None:
    """Make an entry look unused for ``days`` (every file in it, and the folder)."""
    t = time.time() - days * DAY
    for dirpath, _, files in os.walk(path):
        for f in files:
            os.utime(os.path.join(dirpath, f), (t, t))
        os.utime(dirpath, (t, t))


def _entry(cache: Path, name: str, nbytes: int = 1000, days: float = 0.0) -> Path:
    store = ChunkStore(cache, stage_key(name), {"stage": name})
    # random bytes: the store deflates, and the sizes here must stay what they say
    store.save(0, {"x": np.random.default_rng(nbytes).integers(0, 256, nbytes, np.uint8)})
    _age(store.dir, days)
    return store.dir


def _clip(folder: Path, n: int = 24) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        write_image(str(folder / f"{i:06d}.png"), rng.integers(0, 255, (32, 48, 3), np.uint8))
    return folder


# -- policy -------------------------------------------------------------------------------------
def test_defaults_bound_the_cache_and_leave_outputs_alone(tmp_path):
    pol = retention.load_policy(tmp_path)          # no file: the defaults
    assert pol.cache.max_age_days == 7 and pol.cache.max_size_gb == 20
    assert pol.outputs.max_age_days is None and pol.outputs.max_size_gb is None
    path = retention.policy_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"cache": {"max_size_gb": 1.5}, "outputs": {"max_age_days": 30}}))
    pol = retention.load_policy(tmp_path)
    assert (pol.cache.max_age_days, pol.cache.max_size_gb, pol.outputs.max_age_days) == (7, 1.5, 30)


@pytest.mark.parametrize("data, words", [
    ({"cache": {"max_age": 3}}, "max_age_days"),
    ({"chache": {}}, "unknown setting"),
    ({"cache": {"max_size_gb": -1}}, ">= 0"),
    ({"lease_hours": None}, "lease_hours"),
    ([], "JSON object"),
])
def test_bad_policy_is_refused_with_the_file_named(tmp_path, data, words):
    path = retention.policy_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    with pytest.raises(retention.RetentionConfigError) as e:
        retention.load_policy(tmp_path)
    assert words in str(e.value) and str(path) in str(e.value)


# -- sweep ----------------------------------------------------------------------------------------
def test_sweep_removes_old_entries_then_least_recently_used_beyond_size(tmp_path):
    cache, out = tmp_path / "out" / "swapline_cache", tmp_path / "out"
    old = _entry(cache, "old", days=10)
    mid = _entry(cache, "mid", 4000, days=3)
    new = _entry(cache, "new", 4000, days=2)
    kind = cache / "memory-video" / f"{stage_key('m')}.nut"
    kind.parent.mkdir()
    kind.write_bytes(b"v" * 500)
    _age(kind, 1)
    fresh = _entry(cache, "fresh", 4000)           # modified just now: never removed
    pol = retention.Policy(cache=retention.Limits(7, 10000 / retention.GB))
    before = retention.cache_report(cache, out, pol)
    assert before["entries"] == 5
    r = retention.sweep_cache(cache, out, pol)
    # 10 days old -> removed for age; then oldest first until <= 10000 bytes: mid goes, new stays
    assert r["removed"] == [old.name, mid.name]
    assert not old.exists() and not mid.exists() and new.exists() and kind.exists() and fresh.exists()
    assert r["bytes_left"] <= 10000 and r["freed_bytes"] > 4000
    assert not any(p.name.startswith(".trash") for p in cache.iterdir())


def test_a_running_job_keeps_its_chunks_while_everything_else_is_reclaimed(tmp_path):
    out = tmp_path / "out"
    cache = out / "swapline_cache"
    clip = _clip(cache / "image-frames" / stage_key("clip"))
    stale = _entry(cache, "stale", days=30)
    seq = FrameSequence.open(str(clip), chunk=8)
    edited = [np.full((32, 48, 3), 7, np.uint8) for _ in range(seq.count)]
    paused, resume, done = threading.Event(), threading.Event(), {}

    def check_interrupt():
        if not paused.is_set() and stages_seen():
            paused.set()
            resume.wait(30)

    def stages_seen():
        return any(p.name != "image-frames" and p != stale for p in cache.iterdir() if not p.name.startswith("."))

    def job():
        with jobs.bound(jobs.JobContext("job-running", out, cache)):
            seq_in_job = FrameSequence.open(str(clip), chunk=8)     # the job reads its clip from the cache
            done["seq"] = stages.overlay_images(seq_in_job, edited, str(cache),
                                                stages.Hooks(check_interrupt=check_interrupt))

    t = threading.Thread(target=job)
    t.start()
    assert paused.wait(30), "the stage never started"
    (running_dir,) = [p for p in cache.iterdir() if jobs.is_stage_name(p.name) and p != stale]
    # Everything the job uses looks a month old: only its lease can save it now.
    _age(running_dir, 30)
    _age(clip, 30)
    pol = retention.Policy(min_idle_minutes=0)
    r = retention.sweep_cache(cache, out, pol, reclaim_all=True)
    assert r["removed"] == [stale.name]
    assert sorted(r["kept_in_use"]) == sorted([running_dir.name, f"image-frames/{clip.name}"])
    resume.set()
    t.join(30)
    result = done["seq"]
    frames = [f for _, chunk in result.iter_chunks() for f in chunk]
    assert len(frames) == seq.count and all((f == 7).all() for f in frames)
    idx = jobs.read_index(jobs.index_path(out, "job-running"))
    assert set(idx.cache) == {running_dir.name, f"image-frames/{clip.name}"}


def test_lease_expires_and_outside_a_job_nothing_is_recorded(tmp_path):
    out = tmp_path / "out"
    cache = out / "swapline_cache"
    with jobs.bound(jobs.JobContext("job-old", out, cache)):
        d = _entry(cache, "a")
    plain = _entry(cache, "b")                            # no job bound: no index line
    assert jobs.read_index(jobs.index_path(out, "job-old")).cache == [d.name]
    assert [i.job_id for i in jobs.all_indexes(out)] == ["job-old"]
    _age(d, 1)
    _age(plain, 1)
    pol = retention.Policy(min_idle_minutes=0, lease_hours=48)
    assert retention.sweep_cache(cache, out, pol, reclaim_all=True)["removed"] == [plain.name]
    old = time.time() - 3 * DAY
    os.utime(jobs.index_path(out, "job-old"), (old, old))  # the job's last sign of life: 3 days ago
    assert retention.sweep_cache(cache, out, pol, reclaim_all=True)["removed"] == [d.name]


def test_output_retention_is_off_by_default_and_deletes_whole_old_jobs_when_set(tmp_path):
    out = tmp_path / "out"
    places = Places(out, out / "swapline_cache")
    for name in ("job-1", "job-2"):
        with jobs.bound(jobs.JobContext(name, out, places.cache_root)):
            (out / f"{name}.mp4").write_bytes(b"x" * 100)
            jobs.note_output(f"{name}.mp4")
    old = time.time() - 40 * DAY
    os.utime(jobs.index_path(out, "job-1"), (old, old))
    assert retention.sweep_outputs(places, retention.Policy()) == {"deleted_jobs": []}
    assert (out / "job-1.mp4").exists()
    pol = retention.Policy(outputs=retention.Limits(max_age_days=30))
    assert retention.sweep_outputs(places, pol) == {"deleted_jobs": ["job-1"]}
    assert not (out / "job-1.mp4").exists() and (out / "job-2.mp4").exists()
    tomb = [json.loads(line) for line in (out / "swapline_audit.jsonl").read_text().splitlines()]
    assert tomb[-1]["kind"] == "tombstone" and tomb[-1]["reason"] == "max_age_days"
    assert tomb[-1]["requested_by"] == "retention policy"


def test_each_fact_is_written_once_per_job_across_its_nodes(tmp_path):
    out = tmp_path / "out"
    cache = out / "swapline_cache"
    for _node in range(3):                  # three nodes of one job each use the same entry
        with jobs.bound(jobs.context_for("job-x", out, cache)):
            _entry(cache, "same")
    assert jobs.context_for("job-x", out, cache) is jobs.context_for("job-x", out, cache)
    lines = jobs.index_path(out, "job-x").read_text().splitlines()
    assert len(lines) == 1 and jobs.active_jobs() == set()


def test_a_chunk_removed_under_a_sequence_is_a_clear_error(tmp_path):
    cache = tmp_path / "swapline_cache"
    d = _entry(cache, "gone")
    store = ChunkStore(cache, d.name)
    retention.remove_path(cache, d)
    with pytest.raises(Exception, match="gone from the stage cache.*run the workflow again"):
        store.load(0)
