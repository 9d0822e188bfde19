"""The coordinator wired to its observability and delivery, over the session's two real ComfyUI
workers: FarmMetrics counts what the farm did (read back as Prometheus text, in process and over
HTTP), and a job's webhook reaches a real HTTP receiver (signed, retried) with its output copied
to the destination."""
from __future__ import annotations

import dataclasses
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from farm_helpers import FARM, ledger_rows, make_job
from prometheus_client.parser import text_string_to_metric_families

from devtools.test_media import make_video


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, sorted label items): value} of a Prometheus text exposition."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(values: dict, name: str, **labels) -> float:
    """Sum of a sample over every label set that contains ``labels``."""
    return sum(v for (n, lab), v in values.items()
               if n == name and all(dict(lab).get(k) == w for k, w in labels.items()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_coordinator_metrics_count_what_happened(farm, passthrough, tmp_path):
    import swapline_farm
    from swapline_farm.metrics import FarmMetrics

    assert Path(swapline_farm.__file__).resolve().is_relative_to(FARM)        # this checkout's farm, not another
    metrics = FarmMetrics(price_per_worker_hour=3.6)
    good = [make_video(tmp_path / f"m{i}.mp4", n=n) for i, n in enumerate((9, 6))]     # 3 + 2 chunks of 4
    # one chunk that always times out (0.05 s allowed): with 2 attempts, 1 retry then a dead letter
    heavy = make_video(tmp_path / "heavy.mp4", n=118, w=640, h=480)
    coord = farm(metrics=metrics, max_attempts=2, chunk_frames=4)
    ok = [coord.submit(make_job(c, passthrough)) for c in good]
    poison = coord.submit(make_job(heavy, passthrough, settings={"farm.timeout_s": 0.05, "farm.chunk_frames": 200}))
    planned = sum(len(coord.jobs[j].chunks) for j in ok)
    assert planned == 5
    coord.run_until_idle(timeout_s=600)
    assert [coord.status(j)["state"] for j in ok] == ["done", "done"] and coord.status(poison)["state"] == "dead"

    v = samples(metrics.exposition().decode())
    assert total(v, "swapline_farm_chunks_started_total") == planned + 2          # + two poison attempts
    assert total(v, "swapline_farm_chunks_finished_total") == planned
    assert total(v, "swapline_farm_chunk_seconds_count") == planned
    assert total(v, "swapline_farm_frames_total") == 9 + 6                      # output frames, no pre-roll
    assert {d["worker"] for d in coord.dispatched} == {"w0", "w1"}
    for w in ("w0", "w1"):
        assert total(v, "swapline_farm_chunks_in_flight", worker=w) == 0
        assert total(v, "swapline_farm_worker_up", worker=w) == 1
        mine = [d for d in coord.dispatched if d["worker"] == w]
        assert total(v, "swapline_farm_chunks_started_total", worker=w) == len(mine)
    for prio in ("rush", "normal", "bulk"):
        assert total(v, "swapline_farm_queue_depth", priority=prio) == 0
    assert total(v, "swapline_farm_chunk_failures_total", error_class="ChunkTimeout") == 2
    assert total(v, "swapline_farm_retries_total", error_class="ChunkTimeout") == 1
    assert total(v, "swapline_farm_dead_letters_total", error_class="ChunkTimeout") == 1
    # QA is off in these pass-through jobs: both finished jobs count as "skipped"
    assert total(v, "swapline_farm_jobs_total", decision="skipped") == 2
    assert total(v, "swapline_farm_jobs_total") == 2
    assert total(v, "swapline_farm_job_worker_seconds_count") == 2
    worker_s = sum(coord.jobs[j].worker_seconds for j in ok)
    assert total(v, "swapline_farm_cost_total") == pytest.approx(worker_s / 3600 * 3.6, rel=1e-6)
    assert total(v, "swapline_farm_throughput_frames_per_second") > 0
    # per-stage seconds from the worker's ComfyUI "executing" events: every finished chunk ran
    # its Load Video and Save Video nodes, and the stages fit inside the chunk's wall time
    for stage in ("SwaplineLoadVideo", "SwaplineSaveVideo"):
        assert total(v, "swapline_farm_stage_seconds_count", stage=stage) == planned, stage
    assert 0 < total(v, "swapline_farm_stage_seconds_sum") <= total(v, "swapline_farm_chunk_seconds_sum")

    # the same numbers over HTTP, as Prometheus scrapes them
    port = free_port()
    server, thread = metrics.serve(port)
    try:
        r = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
        over_http = samples(r.text)
    finally:
        server.shutdown()
        thread.join(timeout=10)
    for name in ("swapline_farm_chunks_started_total", "swapline_farm_chunks_finished_total",
                 "swapline_farm_frames_total", "swapline_farm_dead_letters_total", "swapline_farm_jobs_total",
                 "swapline_farm_stage_seconds_count"):
        assert total(over_http, name) == total(v, name), name


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that answers 503 to its first call (a receiver being deployed), then 200."""
    calls: list = []

    def do_POST(self):  # noqa: N802  (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.calls.append({"body": body, "headers": dict(self.headers), "path": self.path})
        status = 503 if len(self.calls) == 1 else 200
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"try again" if status == 503 else b"ok")

    def log_message(self, *args):
        pass


def test_webhook_is_signed_retried_and_output_is_copied_to_destination(farm, passthrough, tmp_path, monkeypatch):
    from swapline_farm.cli import webhook_secret
    from swapline_farm.delivery import DELIVERY_HEADER, SIGNATURE_HEADER, verify

    monkeypatch.setenv("FARM_TEST_HOOK_SECRET", "correct horse battery staple")
    secret = webhook_secret({"webhook_secret_env": "FARM_TEST_HOOK_SECRET"})       # as `run` reads farm.yaml
    assert secret == b"correct horse battery staple"
    Receiver.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        dest = tmp_path / "delivered"
        clip = make_video(tmp_path / "hook.mp4", n=7)
        job = dataclasses.replace(make_job(clip, passthrough),
                                  webhook=f"http://127.0.0.1:{server.server_port}/hooks/farm?token=s3cr3tT0ken",
                                  destination=dest)
        coord = farm(webhook_secret=secret)
        coord.submit(job)
        coord.run_until_idle(timeout_s=600)
    finally:
        server.shutdown()
        thread.join(timeout=10)
    st = coord.status(job.job_id)
    assert st["state"] == "done", st
    calls = Receiver.calls
    assert len(calls) == 2 and calls[0]["path"] == "/hooks/farm?token=s3cr3tT0ken"
    assert calls[0]["body"] == calls[1]["body"]                                  # the retry repeats the call
    assert calls[0]["headers"][DELIVERY_HEADER] == calls[1]["headers"][DELIVERY_HEADER]
    for c in calls:
        assert verify(c["body"], c["headers"][SIGNATURE_HEADER], secret)
        assert not verify(c["body"], c["headers"][SIGNATURE_HEADER], b"another secret")
    payload = json.loads(calls[1]["body"])
    assert payload["job_id"] == job.job_id and payload["state"] == "done"
    copied = dest / Path(st["output"]).name
    assert payload["delivered"] == [str(copied)]
    assert copied.read_bytes() == Path(st["output"]).read_bytes()
    [row] = [r for r in ledger_rows(coord) if r["job_id"] == job.job_id and r.get("webhook")]
    hook = row["webhook"]
    assert hook["ok"] and [a["status"] for a in hook["attempts"]] == [503, 200]
    assert "s3cr3tT0ken" not in json.dumps(row) and b"correct horse" not in json.dumps(row).encode()   # redacted


def test_cli_webhook_secret_sources(tmp_path, monkeypatch):
    from swapline_farm.cli import webhook_secret
    from swapline_farm.errors import FarmError

    (tmp_path / "hook.secret").write_text("from-file\n")
    monkeypatch.delenv("SWAPLINE_FARM_WEBHOOK_SECRET", raising=False)
    assert webhook_secret({"webhook_secret_file": "hook.secret"}, tmp_path) == b"from-file"   # beside farm.yaml
    assert webhook_secret({"webhook_secret": "inline"}) == b"inline"
    assert webhook_secret({}) is None
    monkeypatch.setenv("SWAPLINE_FARM_WEBHOOK_SECRET", "from-env")
    assert webhook_secret({}) == b"from-env"
    with pytest.raises(FarmError, match="NOT_SET_HERE"):
        webhook_secret({"webhook_secret_env": "NOT_SET_HERE"})


def test_run_defaults_to_the_checkouts_comfyui():
    """`swapline-farm run manifest.yaml --workers 2` in a set-up checkout needs no --comfy."""
    from swapline_farm.cli import _checkout_comfy

    assert _checkout_comfy() == str(FARM.parent / ".comfy" / "ComfyUI")
