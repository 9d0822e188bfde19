"""Ledgers: append-only JSONL (never rewritten), safe under concurrent appends, torn lines skipped."""
from __future__ import annotations

import json
import threading

import pytest
from swapline_farm.ledger import DeadLetterLedger, JobLedger


def test_job_states_fold(tmp_path):
    led = JobLedger(tmp_path / "jobs.jsonl")
    assert led.state("a") is None and led.jobs() == []
    led.record("a", "submitted", priority="rush", clip="a.mp4")
    led.record("b", "submitted", priority="bulk")
    led.record("a", "running", chunks=3)
    led.record("a", "chunk_done", chunk_id="c1")
    led.record("a", "chunk_done", chunk_id="c2")
    led.record("a", "chunk_done", chunk_id="c1")            # a duplicate completion counts once
    st = led.state("a")
    assert st["state"] == "running" and st["chunks_done"] == ["c1", "c2"]
    assert st["priority"] == "rush" and st["chunks"] == 3 and st["clip"] == "a.mp4"
    led.record("a", "done", output="out/a.mp4")
    st = led.state("a")
    assert st["state"] == "done" and st["output"] == "out/a.mp4"
    assert [h["state"] for h in st["history"]] == ["submitted", "running", "done"]
    assert [j["job_id"] for j in led.jobs()] == ["a", "b"] and led.jobs()[1]["state"] == "submitted"
    # another ledger object (another process) reads the same history
    assert JobLedger(tmp_path / "jobs.jsonl").state("a") == led.state("a")
    with pytest.raises(ValueError, match="unknown job state"):
        led.record("a", "exploded")
    with pytest.raises(ValueError, match="set by the ledger"):
        led.record("a", "failed", time_utc="x")


def test_never_rewritten(tmp_path):
    path = tmp_path / "jobs.jsonl"
    led = JobLedger(path)
    led.record("a", "submitted")
    before = path.read_bytes()
    led.record("a", "cancelled", reason="user")
    after = path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == 2
    assert [json.loads(x)["state"] for x in after.splitlines()] == ["submitted", "cancelled"]


def test_concurrent_appends_from_threads(tmp_path):
    path = tmp_path / "jobs.jsonl"
    ledgers = [JobLedger(path), JobLedger(path)]            # two objects on one file share the lock
    big = "x" * 5000                                         # lines longer than a pipe buffer's atomic size

    def work(t):
        for i in range(60):
            ledgers[t % 2].record(f"job{t}", "chunk_done", chunk_id=f"{t}-{i}", pad=big)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 8 * 60
    assert all(json.loads(x)["pad"] == big for x in lines)  # every line whole, none interleaved
    fresh = JobLedger(path)
    assert all(len(fresh.state(f"job{t}")["chunks_done"]) == 60 for t in range(8))
    assert fresh.bad_lines == 0


def test_torn_line_is_skipped_and_does_not_swallow_the_next(tmp_path):
    path = tmp_path / "jobs.jsonl"
    led = JobLedger(path)
    led.record("a", "submitted")
    with open(path, "ab") as f:
        f.write(b'{"job_id": "a", "state": "do')             # a writer killed mid-line
    led.record("a", "failed", error="boom")
    fresh = JobLedger(path)
    assert fresh.state("a")["state"] == "failed" and fresh.bad_lines == 1


def test_dead_letters(tmp_path):
    dl = DeadLetterLedger(tmp_path / "dead.jsonl")
    attempts = [{"attempt": 1, "worker": "w0", "error": "TransientError: worker died"},
                {"attempt": 2, "worker": "w1", "error": "ChunkTimeout: 31 s > 5x median"}]
    dl.append("job1", "c1", attempts)
    dl.append("job2", "c9", attempts[:1])
    assert [e["chunk_id"] for e in dl.pending()] == ["c1", "c9"]
    assert dl.pending("job1")[0]["attempts"] == attempts
    dl.mark_retried("job1", "c1")
    assert [e["job_id"] for e in dl.pending()] == ["job2"] and dl.pending("job1") == []
    with pytest.raises(KeyError, match="no pending dead letter"):
        dl.mark_retried("job1", "c1")                        # already re-injected
    dl.append("job1", "c1", attempts)                        # it died again after the retry
    assert [e["chunk_id"] for e in dl.pending("job1")] == ["c1"]
    assert len(dl.entries()) == 3                            # every dead letter stays in the history
    lines = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_bytes().splitlines()]
    assert [x["kind"] for x in lines] == ["dead", "dead", "retried", "dead"]
    with pytest.raises(ValueError, match="every attempt"):
        dl.append("job3", "c1", [])
