"""The coordinator with a real local Ray and two real ComfyUI workers (CPU): scheduling, retries,
dead letters, priorities, idempotency. Jobs use a pass-through workflow on small stamped clips
(each frame carries its number), so every check is on real outputs and stays cheap."""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import ray
from farm_helpers import REPO, SAMPLES, ledger_rows, make_job
from PIL import Image

from devtools.test_media import make_video, read_stamp
from swapline_core.video.read import iter_frames


def stamps(path) -> list[int]:
    return [read_stamp(f) for _, f in iter_frames(Path(path))]


def test_batch_over_two_workers_is_chunked_stitched_and_idempotent(farm, passthrough, tmp_path):
    clips = [make_video(tmp_path / f"c{i}.mp4", n=10 + i) for i in range(3)]
    coord = farm()
    ids = [coord.submit(make_job(c, passthrough)) for c in clips]
    assert coord.submit(make_job(clips[0], passthrough)) == ids[0]          # same content, same job
    assert len(coord.jobs) == 3 and len(coord.queue) == 3 + 3 + 3           # 10-12 frames in chunks of 4
    states = coord.run_until_idle(timeout_s=600)
    assert set(states.values()) == {"done"}, [coord.status(j)["error"] for j in ids]
    assert {d["worker"] for d in coord.dispatched} == {"w0", "w1"}            # both workers took chunks
    assert [s.peak for s in coord.slots] == [1, 1]         # backpressure: one chunk in flight per worker
    for clip, jid in zip(clips, ids):
        out = coord.status(jid)["output"]
        n = 10 + clips.index(clip)
        assert stamps(out) == list(range(n))          # pre-roll dropped, chunks in order, no gap or overlap
    submitted = [r for r in ledger_rows(coord) if r["state"] == "submitted"]
    assert len(submitted) == 3

    # The same manifest again, in a new coordinator over the same ledger and store: nothing runs.
    again = farm()
    assert [again.submit(make_job(c, passthrough)) for c in clips] == ids
    again.run_until_idle(timeout_s=60)
    assert again.dispatched == [] and all(again.status(j)["state"] == "done" for j in ids)


def test_rush_job_starts_before_ten_earlier_bulk_jobs(farm, passthrough, tmp_path):
    clip = make_video(tmp_path / "short.mp4", n=4)
    coord = farm(chunk_frames=8)
    bulk = [coord.submit(make_job(clip, passthrough, priority="bulk", key=f"bulk-{i}")) for i in range(10)]
    rush = coord.submit(make_job(clip, passthrough, priority="rush", key="rush"))
    assert len(set(bulk)) == 10
    coord.run_until_idle(timeout_s=600)
    assert coord.dispatched[0]["job_id"] == rush
    order = [d["job_id"] for d in coord.dispatched]
    assert order[1:] == bulk                       # bulk jobs then run in the order they came
    assert all(coord.status(j)["state"] == "done" for j in bulk + [rush])


def test_poison_chunk_is_dead_lettered_after_n_attempts_and_retry_reinjects_it(farm, passthrough, tmp_path):
    good = [make_video(tmp_path / f"g{i}.mp4", n=6) for i in range(2)]
    # several seconds of encoding: an interrupt always lands before it could finish (and be cached)
    heavy = make_video(tmp_path / "heavy.mp4", n=120, w=640, h=480)
    coord = farm(max_attempts=3, chunk_frames=8)
    # A chunk that always fails transiently: its job allows 0.05 s per chunk, so every attempt times out.
    poison = coord.submit(make_job(heavy, passthrough, settings={"farm.timeout_s": 0.05, "farm.chunk_frames": 200}))
    ok = [coord.submit(make_job(c, passthrough)) for c in good]
    coord.run_until_idle(timeout_s=600)
    assert all(coord.status(j)["state"] == "done" for j in ok)
    assert coord.status(poison)["state"] == "dead"
    [entry] = coord.dead_letters.pending(poison)
    attempts = entry["attempts"]
    assert [a["class"] for a in attempts] == ["ChunkTimeout"] * 3
    assert attempts[0]["worker"] != attempts[1]["worker"]        # a retry goes to another worker
    # exponential backoff with jitter between attempts: base 0.2 s x 2^(n-1) x 0.5..1.5
    gaps = [attempts[i + 1]["time"] - attempts[i]["time"] for i in range(2)]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2, gaps
    assert [r["state"] for r in ledger_rows(coord) if r["job_id"] == poison][-1] == "dead"

    before = sum(d["job_id"] == poison for d in coord.dispatched)
    assert coord.retry(poison) == 1
    assert coord.dead_letters.pending(poison) == []              # marked retried (append-only)
    coord.run_until_idle(timeout_s=600)
    assert sum(d["job_id"] == poison for d in coord.dispatched) > before   # it ran again
    assert len(coord.dead_letters.pending(poison)) == 1         # and, still poisoned, is dead again


def test_worker_that_failed_a_job_twice_never_gets_it_again(farm, passthrough, tmp_path):
    heavy = make_video(tmp_path / "heavy.mp4", n=121, w=640, h=480)      # not the poison test's job
    coord = farm(max_attempts=6, chunk_frames=8)
    jid = coord.submit(make_job(heavy, passthrough, settings={"farm.timeout_s": 0.05, "farm.chunk_frames": 200}))
    coord.run_until_idle(timeout_s=600)
    [entry] = coord.dead_letters.pending(jid)
    workers = [a["worker"] for a in entry["attempts"]]
    # two failures on each worker, then no worker may take it: dead-lettered before max_attempts
    assert sorted(workers[:4]) == ["w0", "w0", "w1", "w1"]
    assert entry["attempts"][-1]["class"] == "NoEligibleWorker" and len(workers) == 5
    assert coord.status(jid)["excluded_workers"] == ["w0", "w1"]


def test_input_error_fails_the_job_at_once_with_the_nodes_message(farm, tmp_path):
    wf = json.loads((REPO / "workflows" / "api" / "video_swap_builtin.json").read_text())
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(wf))
    blank = tmp_path / "blank.png"
    Image.fromarray(np.full((200, 200, 3), 128, np.uint8)).save(blank)
    clip = make_video(tmp_path / "c.mp4", n=4)
    coord = farm(chunk_frames=8)
    jid = coord.submit(make_job(clip, path, faces=[blank], settings={"3.image": str(SAMPLES / "target_reference.png")}))
    coord.run_until_idle(timeout_s=600)
    st = coord.status(jid)
    assert st["state"] == "failed"
    assert sum(d["job_id"] == jid for d in coord.dispatched) == 1       # never retried
    failed = [r for r in ledger_rows(coord) if r["job_id"] == jid and r["state"] == "failed"][0]
    assert failed["details"]["node_type"] == "SwaplineBuildFaceModel", failed
    assert coord.dead_letters.pending(jid) == []


def test_workers_answer_health_while_busy(workers):
    ref = workers[0].health.remote()
    h = ray.get(ref, timeout=30)
    assert h["ok"] and h["alive"] and h["name"] == "w0"
    assert time.time() > 0


def test_chunk_timeout_follows_the_median_with_a_floor(tmp_path, passthrough):
    """The adaptive limit alone (no workers needed): factor x median seconds per frame x frames."""
    from swapline_farm.coordinator import Coordinator, JobRun
    from swapline_farm.ledger import DeadLetterLedger, JobLedger
    from swapline_farm.plan import ChunkSpec
    from swapline_farm.store import ChunkStore

    coord = Coordinator(ChunkStore(str(tmp_path / "s")), JobLedger(tmp_path / "j"), DeadLetterLedger(tmp_path / "d"),
                        None, workers=[], timeout_factor=5.0, timeout_floor_s=10.0, first_timeout_s=900.0)
    job = make_job(make_video(tmp_path / "c.mp4", n=4), passthrough)
    run = JobRun(job, 0, {}, [], {})
    chunk = ChunkSpec(job.job_id, 1, 32, 32, 8)
    assert coord._timeout(run, chunk) == 900.0                     # too few chunks seen yet
    coord.seconds_per_frame.extend([0.5, 0.4, 10.0])                # one outlier does not move the median
    assert coord._timeout(run, chunk) == 5.0 * 0.5 * 40
    coord.seconds_per_frame.clear()
    coord.seconds_per_frame.extend([0.01] * 3)
    assert coord._timeout(run, chunk) == 10.0                      # the floor
    fixed = dataclasses.replace(job, settings={"farm.timeout_s": 7})
    assert coord._timeout(JobRun(fixed, 0, {}, [], {}), chunk) == 7.0
