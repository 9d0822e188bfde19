"""Issue 16 over HTTP: two real jobs, one deleted through POST /swapline/jobs/delete. Its outputs,
cache entries and saved face model go, the other job's files stay byte for byte, the audit log
only grows (a tombstone), an unknown id is a 404 that deletes nothing."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows" / "api" / "video_swap_builtin.json"   # the cheapest video workflow: no model files


def _job(source: str, prefix: str, save_as: str | None = None) -> dict:
    wf = copy.deepcopy(json.loads(WORKFLOW.read_text()))
    wf["1"]["inputs"]["count"] = 6
    wf["2"]["inputs"]["image"] = source
    for node in wf.values():
        if "filename_prefix" in node["inputs"]:
            node["inputs"]["filename_prefix"] = prefix
    if save_as:
        wf["90"] = {"class_type": "SwaplineSaveFaceModel", "inputs": {"face_model": ["5", 0], "name": save_as}}
    return wf


def _files(root: Path) -> dict[str, bytes]:
    # the server's own log grows with every request, and the maintenance lock (one sweep or
    # deletion at a time) is the server's too: neither is a job's file
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in ("comfyui.log", ".swapline-maintenance.lock")}


def _outputs(server, hist) -> list[Path]:
    items = [i for node in hist["outputs"].values() for i in node.get("images", []) if i.get("type") == "output"]
    return [server.output_path(i) for i in items]


def _unique_source(server) -> str:
    """Job B's source: the target reference with one pixel changed, so its hash is B's alone. Other
    tests on this session's server ran with the shipped images, and a deletion by source hash
    rightly removes every job of that source."""
    import numpy as np
    from PIL import Image

    from devtools.media import SAMPLES

    img = np.array(Image.open(SAMPLES / "target_reference.png").convert("RGB"))
    img[0, 0] = (img[0, 0].astype(np.int16) + 1) % 256
    Image.fromarray(img).save(server.base_dir / "input" / "swapline_dsr_subject_b.png")
    return "swapline_dsr_subject_b.png"


def test_delete_one_of_two_jobs_over_http(staged):
    out = staged.base_dir / "output"
    faces = staged.models_dir / "swapline" / "faces"
    before_a = _files(staged.base_dir)
    hist_a = staged.run(_job("swapline_source_face.png", "swapline/dsr_a", save_as="dsr_subject_a"))
    after_a = _files(staged.base_dir)
    hist_b = staged.run(_job(_unique_source(staged), "swapline/dsr_b"))
    job_a, job_b = hist_a["_prompt_id"], hist_b["_prompt_id"]
    made_by_a = {f for f in set(after_a) - set(before_a)                # user/ holds the dev signer
                 if f.startswith("output/") and f != "output/swapline_audit.jsonl"}

    index_a = [json.loads(x) for x in (out / "swapline_jobs" / f"{job_a}.jsonl").read_text().splitlines()]
    index_b = [json.loads(x) for x in (out / "swapline_jobs" / f"{job_b}.jsonl").read_text().splitlines()]
    cache_a = {f["cache"] for f in index_a if "cache" in f}
    cache_b = {f["cache"] for f in index_b if "cache" in f}
    outputs_a = {f["output"] for f in index_a if "output" in f}
    facts_a = [json.dumps({k: v for k, v in f.items() if k != "t"}, sort_keys=True) for f in index_a]
    assert len(facts_a) == len(set(facts_a))          # one line per fact, however many nodes saw it
    assert cache_a and cache_b and (faces / "dsr_subject_a.safetensors").is_file()
    # the job index found every file the job showed (video, QA plot) and the QA report beside them
    assert {p.relative_to(out).as_posix() for p in _outputs(staged, hist_a)} <= outputs_a
    assert any(o.endswith("_qa.json") for o in outputs_a) and any(o.endswith(".mp4") for o in outputs_a)

    status = requests.get(staged.url + "/swapline/cache", timeout=30).json()
    assert status["entries"] >= len(cache_a | cache_b) and status["bytes"] > 0

    log = out / "swapline_audit.jsonl"
    log_before, tree_before = log.read_bytes(), _files(staged.base_dir)
    r = requests.post(staged.url + "/swapline/jobs/delete", timeout=60,
                      json={"job_id": "no-such-job", "requested_by": "dpo@example.com"})
    assert r.status_code == 404 and "no-such-job" in r.json()["error"]
    assert _files(staged.base_dir) == tree_before

    r = requests.post(staged.url + "/swapline/jobs/delete", timeout=60,
                      json={"job_id": job_a, "requested_by": "dpo@example.com", "request_id": "DSR-7"})
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["deleted"]["face_models"] == ["dsr_subject_a.safetensors"]
    after = _files(staged.base_dir)
    shared = set(result["kept"]["cache_shared"])
    assert shared <= cache_b
    # nothing job A made is left under output/ or the cache, except entries job B uses too
    left = [f for f in made_by_a if f in after]
    assert all(any(f.startswith(f"output/swapline_cache/{e}/") or f == f"output/swapline_cache/{e}"
                   for e in shared) for f in left), left
    assert not (faces / "dsr_subject_a.safetensors").exists()
    for p in _outputs(staged, hist_a):
        assert not p.exists(), p
    # job B: every file byte for byte as before
    for f, data in tree_before.items():
        if f not in made_by_a and f != "output/swapline_audit.jsonl":
            assert after.get(f) == data, f
    for e in cache_b:
        assert (out / "swapline_cache" / e).exists(), e
    data = log.read_bytes()
    # the intent before anything was removed, the tombstone after
    assert data.startswith(log_before) and data.count(b"\n") == log_before.count(b"\n") + 2
    assert json.loads(data.splitlines()[-2])["kind"] == "deletion_started"
    tomb = json.loads(data.splitlines()[-1])
    assert (tomb["kind"], tomb["job_id"], tomb["request_id"]) == ("tombstone", job_a, "DSR-7")

    # Delete job B by its source hash, then run its workflow again: ComfyUI still holds B's node
    # outputs (frame sequences over the removed chunks), so this only works because the route
    # reset ComfyUI's node cache.
    (source_b,) = {h for f in index_b for h in f.get("sources", [])}
    r = requests.post(staged.url + "/swapline/jobs/delete", timeout=60,
                      json={"source_sha256": source_b, "requested_by": "dpo@example.com", "request_id": "DSR-8"})
    assert r.status_code == 200, r.text
    assert [j["job_id"] for j in r.json()["jobs"]] == [job_b]
    for p in _outputs(staged, hist_b):
        assert not p.exists(), p
    hist_c = staged.run(_job("swapline_dsr_subject_b.png", "swapline/dsr_c"))
    assert all(p.exists() for p in _outputs(staged, hist_c))
    r = requests.post(staged.url + "/swapline/cache/sweep", json={"reclaim_all": True}, timeout=60)
    assert r.status_code == 200 and {"removed", "kept_in_use", "bytes_left"} <= set(r.json())
    index_c = (out / "swapline_jobs" / f"{hist_c['_prompt_id']}.jsonl").read_text().splitlines()
    for e in {json.loads(x).get("cache") for x in index_c} - {None}:
        assert (out / "swapline_cache" / e).exists(), e       # a job that just ran holds its lease


def test_a_queued_or_running_job_cannot_be_deleted_and_sweeps_run_one_at_a_time(staged):
    """Issue 32 item 4 over HTTP: a delete for a prompt that is queued or running (between two of
    its nodes included) is refused with 409 and the prompt's outputs come out whole; two sweeps
    sent at once both answer, one after the other, and never remove the same entry twice."""
    import threading

    ws = staged.connect()
    try:
        pid = staged.queue(_job("swapline_source_face.png", "swapline/dsr_running"))
        r = requests.post(staged.url + "/swapline/jobs/delete", timeout=60,
                          json={"job_id": pid, "requested_by": "dpo@example.com"})
        assert r.status_code == 409 and "running now" in r.json()["error"], r.text
        staged.follow(ws, pid)
    finally:
        ws.close()
    hist = staged.history(pid)
    outputs = _outputs(staged, hist)
    assert outputs and all(p.is_file() and p.stat().st_size > 0 for p in outputs)
    assert (staged.base_dir / "output" / "swapline_jobs" / f"{pid}.jsonl").is_file()

    results = []

    def sweep():
        results.append(requests.post(staged.url + "/swapline/cache/sweep", timeout=120, json={"reclaim_all": True}))

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)
    assert [r.status_code for r in results] == [200, 200], [r.text for r in results]
    removed = [e for r in results for e in r.json()["removed"]]
    assert len(removed) == len(set(removed)), removed

    # once it has finished, the same request deletes it
    r = requests.post(staged.url + "/swapline/jobs/delete", timeout=60,
                      json={"job_id": pid, "requested_by": "dpo@example.com"})
    assert r.status_code == 200, r.text
    assert not any(p.exists() for p in outputs)
