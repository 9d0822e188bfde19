"""Delete by job / by source: the job's outputs, cache entries and face models go, other jobs'
files stay, the audit log only grows (a tombstone), an unknown id deletes nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from swapline_core.errors import SwaplineError
from swapline_core.faces import identity
from swapline_core.provenance import audit_log, jobs
from swapline_core.provenance import delete as dl
from swapline_core.types import SourceIdentity
from swapline_core.video import stages
from swapline_core.video.frames import FrameSequence
from swapline_core.video.store import stage_key
from swapline_core.video.write import write_image


def _tree(root: Path) -> dict[str, bytes]:
    # the maintenance lock (one sweep or deletion at a time) is nobody's data
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".swapline-maintenance.lock"}


def _source(value: int) -> SourceIdentity:
    img = np.full((64, 64, 3), value, np.uint8)
    return SourceIdentity(embedding=np.ones(512, np.float32) / np.sqrt(512), recognizer="test", image=img,
                          metadata={"source_sha256": [identity.image_hash(img)]})


def _run_job(env, job_id: str, value: int, save_model: bool) -> set[str]:
    """A job as the nodes run one: reads the shared target clip from the cache, overlays frames
    derived from its source, writes an output and a QA report, maybe saves the face model, and
    is logged in the audit log. Returns the files it added (relative to the ComfyUI base)."""
    before = set(_tree(env["base"]))
    src = _source(value)
    with jobs.bound(jobs.JobContext(job_id, env["out"], env["cache"])):
        jobs.note_sources([src])
        seq = FrameSequence.open(str(env["clip"]), chunk=4)
        images = [np.full((24, 32, 3), value, np.uint8) for _ in range(seq.count)]
        stages.overlay_images(seq, images, str(env["cache"]), stages.Hooks())
        for rel in (f"swapline/{job_id}_00001_.mp4", f"swapline/{job_id}_00001_qa.json"):
            (env["out"] / rel).parent.mkdir(parents=True, exist_ok=True)
            (env["out"] / rel).write_bytes(f"{job_id}:{value}".encode())
            jobs.note_output(rel)
        if save_model:
            identity.save(src, str(env["faces"] / f"{job_id}.safetensors"))
    audit_log.append_job(env["out"], job_id=job_id, input_sha256="t" * 64, output_sha256="o" * 64, models=[],
                         settings={}, qa_decision="pass", signer_fingerprint=None,
                         output=f"swapline/{job_id}_00001_.mp4")
    return set(_tree(env["base"])) - before - {"output/swapline_audit.jsonl"}


@pytest.fixture()
def env(tmp_path):
    base = tmp_path / "comfy"
    out, faces = base / "output", base / "models" / "swapline" / "faces"
    cache = out / "swapline_cache"
    clip = cache / "image-frames" / stage_key("target")
    for d in (clip, faces):
        d.mkdir(parents=True)
    for i in range(8):
        write_image(str(clip / f"{i:06d}.png"), np.full((24, 32, 3), 100 + i, np.uint8))
    (out / "someone_elses.png").write_bytes(b"not swapline's")
    e = {"base": base, "out": out, "cache": cache, "clip": clip, "faces": faces,
         "places": dl.Places.under_comfy(base)}
    e["a"] = _run_job(e, "job-a", 10, save_model=True)
    e["b"] = _run_job(e, "job-b", 20, save_model=True)
    return e


def test_delete_job_removes_its_files_keeps_the_others_and_only_appends_a_tombstone(env):
    log = audit_log.audit_log_path(env["out"])
    log_before, tree_before = log.read_bytes(), _tree(env["base"])
    result = dl.delete_job(env["places"], "job-a", requested_by="dpo@example.com", request_id="DSR-1")
    after = _tree(env["base"])
    shared = f"image-frames/{env['clip'].name}"
    # every file job A added is gone (the clip both jobs read was there before either ran)
    assert not [f for f in env["a"] if f in after]
    # job B's files, the shared clip and foreign files are byte-for-byte unchanged
    for f, data in tree_before.items():
        if f not in env["a"] and f != "output/swapline_audit.jsonl":
            assert after[f] == data, f
    assert result["kept"]["cache_shared"] == {shared: ["job-b"]}
    assert sorted(result["deleted"]["outputs"]) == ["swapline/job-a_00001_.mp4", "swapline/job-a_00001_qa.json"]
    assert result["deleted"]["face_models"] == ["job-a.safetensors"] and len(result["deleted"]["cache"]) == 1
    data = log.read_bytes()
    # two lines appended: the intent before anything was removed, the tombstone after
    assert data.startswith(log_before) and data.count(b"\n") == log_before.count(b"\n") + 2
    intent = json.loads(data.splitlines()[-2])
    assert intent["kind"] == "deletion_started" and intent["job_id"] == "job-a" and intent["request_id"] == "DSR-1"
    assert sorted(intent["planned"]["outputs"]) == sorted(result["deleted"]["outputs"])
    tomb = json.loads(data.splitlines()[-1])
    assert tomb["kind"] == "tombstone" and tomb["job_id"] == "job-a" and tomb["request_id"] == "DSR-1"
    assert tomb["requested_by"] == "dpo@example.com" and tomb["deleted"] == result["deleted"]
    with pytest.raises(dl.UnknownJobError, match="already deleted"):
        dl.delete_job(env["places"], "job-a", requested_by="x", request_id=None)


def test_unknown_job_id_is_a_clear_error_and_deletes_nothing(env):
    before = _tree(env["base"])
    with pytest.raises(dl.UnknownJobError) as e:
        dl.delete_job(env["places"], "no-such-job", requested_by="x", request_id=None)
    assert "no-such-job" in str(e.value) and "Nothing was deleted" in str(e.value)
    with pytest.raises(Exception, match="not a valid job id"):
        dl.delete_job(env["places"], "../job-a", requested_by="x", request_id=None)
    with pytest.raises(dl.UnknownJobError, match="Nothing was deleted"):
        dl.delete_by_source(env["places"], "f" * 64, requested_by="x", request_id=None)
    assert _tree(env["base"]) == before


def test_delete_by_source_leaves_nothing_derived_from_it(env):
    src = _source(20).metadata["source_sha256"][0]
    before = _tree(env["base"])
    result = dl.delete_by_source(env["places"], src, requested_by="dpo", request_id="DSR-2")
    assert [j["job_id"] for j in result["jobs"]] == ["job-b"]
    after = _tree(env["base"])
    assert not [f for f in env["b"] if f in after]
    for f in env["a"]:
        assert after[f] == before[f]
    # nothing under output/ holds job B's pixels (value 20) or names it, apart from the audit log
    for f, data in after.items():
        if f.endswith("swapline_audit.jsonl"):
            continue
        assert b"job-b" not in data, f


def test_jobs_that_predate_the_index_are_deleted_from_their_audit_lines(env):
    jobs.index_path(env["out"], "job-b").unlink()           # as if recorded before the index existed
    result = dl.delete_job(env["places"], "job-b", requested_by="x", request_id=None)
    assert result["deleted"]["outputs"] == ["swapline/job-b_00001_.mp4"]
    assert "predates" in result["kept"]["note"]


def test_an_output_name_pointing_outside_or_at_the_audit_log_is_refused(env):
    idx = jobs.index_path(env["out"], "job-a")
    with open(idx, "a") as f:
        for bad in ("../../outside.txt", "swapline_audit.jsonl", "someone/../swapline_audit.jsonl"):
            f.write(json.dumps({"output": bad}) + "\n")
    (env["base"].parent / "outside.txt").write_text("keep")
    log_before = audit_log.audit_log_path(env["out"]).read_bytes()
    result = dl.delete_job(env["places"], "job-a", requested_by="x", request_id=None)
    assert len(result["kept"]["refused"]) == 3
    assert (env["base"].parent / "outside.txt").exists()
    assert audit_log.audit_log_path(env["out"]).read_bytes().startswith(log_before)


def test_cli(env, capsys):
    base = str(env["base"])
    assert dl.main(["--comfy-dir", base, "--job-id", "nope", "--requested-by", "me"]) == 2
    assert "Nothing was deleted" in capsys.readouterr().err
    assert dl.main(["--comfy-dir", base, "--face-model", "job-b", "--requested-by", "me",
                    "--request-id", "T-9"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["face_model"] == "job-b.safetensors"
    assert not (env["faces"] / "job-b.safetensors").exists() and (env["faces"] / "job-a.safetensors").exists()
    assert not os.path.exists(env["out"] / "swapline" / "job-b_00001_.mp4")


def test_a_job_running_in_this_process_is_not_deleted(env):
    before = _tree(env["base"])
    with jobs.bound(jobs.JobContext("job-b", env["out"], env["cache"])):
        with pytest.raises(dl.JobRunningError, match="running now"):
            dl.delete_job(env["places"], "job-b", requested_by="x", request_id=None)
    after = _tree(env["base"])
    assert {f: d for f, d in after.items() if "swapline_jobs" not in f} == \
        {f: d for f, d in before.items() if "swapline_jobs" not in f}


def test_a_job_queued_or_running_in_the_server_is_not_deleted(env):
    """The host's queue counts (ComfyUI: from queueing to the last output), not only a Swapline
    node executing right now: between two nodes of a prompt the job is still running."""
    before = _tree(env["base"])
    jobs.set_queue_probe(lambda: {"job-b"})
    try:
        with pytest.raises(dl.JobRunningError, match="running now"):
            dl.delete_job(env["places"], "job-b", requested_by="x", request_id=None)
        assert _tree(env["base"]) == before
        jobs.set_queue_probe(lambda: 1 / 0)       # a queue that cannot be read deletes nothing
        with pytest.raises(SwaplineError, match="cannot read the server's queue"):
            dl.delete_job(env["places"], "job-b", requested_by="x", request_id=None)
        assert _tree(env["base"]) == before
    finally:
        jobs.set_queue_probe(None)
    dl.delete_job(env["places"], "job-b", requested_by="x", request_id=None)


def test_a_deletion_that_fails_halfway_is_recorded_and_resumes(env, monkeypatch):
    real_unlink = Path.unlink
    calls = []

    def flaky(self, *a, **kw):
        calls.append(self.name)
        if self.name == "job-a_00001_qa.json" and calls.count(self.name) == 1:
            raise PermissionError(13, "Permission denied", str(self))
        return real_unlink(self, *a, **kw)

    monkeypatch.setattr(Path, "unlink", flaky)
    with pytest.raises(dl.DeletionIncompleteError, match="stopped halfway") as err:
        dl.delete_job(env["places"], "job-a", requested_by="dpo", request_id="DSR-2")
    assert "Permission denied" in str(err.value) and "send the same request again" in str(err.value)
    records = audit_log.job_records(env["out"], "job-a")
    assert records[-1]["kind"] == "deletion_started"                   # the attempt is on record
    assert jobs.index_path(env["out"], "job-a").is_file()               # and can be resumed
    result = dl.delete_job(env["places"], "job-a", requested_by="dpo", request_id="DSR-2")
    assert "swapline/job-a_00001_qa.json" in result["deleted"]["outputs"]
    assert [r.get("kind") for r in audit_log.job_records(env["out"], "job-a")][-3:] == [
        "deletion_started", "deletion_started", "tombstone"]
    assert not [f for f in env["a"] if f in _tree(env["base"])]


def test_sweeps_and_deletions_run_one_at_a_time(env):
    from swapline_core.provenance import retention

    order = []
    inside = threading.Event()

    def hold():
        with retention.maintenance_lock(env["cache"]):
            order.append("first in")
            inside.set()
            time.sleep(0.5)
            order.append("first out")

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(5)
    dl.delete_job(env["places"], "job-a", requested_by="x", request_id=None)   # waits for the holder
    order.append("delete done")
    t.join(5)
    assert order == ["first in", "first out", "delete done"]
    # another process holding the lock is waited for too (flock), and a stuck holder times out
    code = ("import fcntl, sys, time; f = open(sys.argv[1], 'a+b'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('locked', flush=True); time.sleep(3)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(env["cache"] / retention.LOCK_NAME)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(SwaplineError, match="try again later"):
            with retention.maintenance_lock(env["cache"], timeout_s=0.5):
                pass
        t0 = time.monotonic()
        with retention.maintenance_lock(env["cache"], timeout_s=30):
            waited = time.monotonic() - t0
        assert waited > 1.0
    finally:
        proc.wait(10)
