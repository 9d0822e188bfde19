"""FarmMetrics: the exposition parses as Prometheus text and counts exactly what was recorded;
histogram buckets give usable quantiles; serve() answers over real HTTP."""
from __future__ import annotations

import math
import socket
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

FARM = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(FARM), str(FARM.parent)]

from swapline_farm.metrics import FarmMetrics  # noqa: E402


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def parse(text: bytes) -> dict[tuple, float]:
    out = {}
    for fam in text_string_to_metric_families(text.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def quantile(samples, name, q, **labels) -> float:
    """Prometheus' histogram_quantile on one scrape (linear within the bucket)."""
    buckets = sorted(((float(dict(lab)["le"]), v) for (n, lab), v in samples.items()
                      if n == name + "_bucket" and {k: x for k, x in lab if k != "le"} == labels))
    total = buckets[-1][1]
    rank, prev_le, prev_n = q * total, 0.0, 0.0
    for le, n in buckets:
        if n >= rank:
            if math.isinf(le):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_n) / max(n - prev_n, 1e-12)
        prev_le, prev_n = le, n
    return prev_le


@pytest.fixture
def farm():
    clock = Clock()
    return FarmMetrics(price_per_worker_hour=3.6, clock=clock), clock


def test_counts_equal_what_was_recorded(farm):
    m, clock = farm
    m.queue_depth("rush", 2)
    m.queue_depth("bulk", 10)
    m.queue_depth("bulk", 7)                 # a gauge: the last value counts
    for w in ("w0", "w1", "w0"):
        m.worker_state(w, True)
    m.chunk_started("w0")
    m.chunk_started("w1")
    m.chunk_started("w0")
    clock.t += 10
    m.chunk_finished("w0", 4.0, 16, {"SwaplineTrackFaces": 1.5, "SwaplineSwapFrames": 2.0})
    m.chunk_failed("w1", "TransientError", retried=True)
    m.worker_state("w1", False)
    m.chunk_failed("w0", "ChunkTimeout", retried=True)
    m.chunk_started("w0")
    clock.t += 10
    m.chunk_finished("w0", 5.0, 8, {"SwaplineTrackFaces": 1.0})
    m.chunk_started("w0")
    m.chunk_failed("w0", "TransientError", retried=False)
    m.dead_letter("TransientError")
    m.chunk_started("w0")                    # still running at scrape time
    s = parse(m.exposition())

    assert value(s, "swapline_farm_queue_depth", priority="rush") == 2
    assert value(s, "swapline_farm_queue_depth", priority="bulk") == 7
    assert value(s, "swapline_farm_chunks_in_flight", worker="w0") == 1
    assert value(s, "swapline_farm_chunks_in_flight", worker="w1") == 0
    assert value(s, "swapline_farm_chunks_started_total", worker="w0") == 5
    assert value(s, "swapline_farm_chunks_finished_total", worker="w0") == 2
    assert value(s, "swapline_farm_chunk_seconds_count") == 2
    assert value(s, "swapline_farm_chunk_seconds_sum") == 9.0
    assert value(s, "swapline_farm_stage_seconds_count", stage="SwaplineTrackFaces") == 2
    assert value(s, "swapline_farm_stage_seconds_sum", stage="SwaplineTrackFaces") == 2.5
    assert value(s, "swapline_farm_stage_seconds_count", stage="SwaplineSwapFrames") == 1
    assert value(s, "swapline_farm_frames_total", worker="w0") == 24
    assert value(s, "swapline_farm_frames_per_second", worker="w0") == 8 / 5.0
    assert value(s, "swapline_farm_throughput_frames_per_second") == 24 / 20.0
    assert value(s, "swapline_farm_worker_busy_seconds_total", worker="w0") == 9.0
    assert value(s, "swapline_farm_chunk_failures_total", error_class="TransientError") == 2
    assert value(s, "swapline_farm_chunk_failures_total", error_class="ChunkTimeout") == 1
    assert value(s, "swapline_farm_retries_total", error_class="TransientError") == 1
    assert value(s, "swapline_farm_retries_total", error_class="ChunkTimeout") == 1
    assert value(s, "swapline_farm_dead_letters_total", error_class="TransientError") == 1
    assert value(s, "swapline_farm_worker_up", worker="w0") == 1
    assert value(s, "swapline_farm_worker_up", worker="w1") == 0
    assert value(s, "swapline_farm_worker_down_events_total", worker="w1") == 1
    assert ("swapline_farm_worker_down_events_total", (("worker", "w0"),)) not in s


def test_jobs_identity_scores_and_cost(farm):
    m, _ = farm
    a = m.job_finished("job-a", "pass", [0.8, 0.82, float("nan"), None, 0.9], worker_seconds=3600)
    b = m.job_finished("job-b", "fail", [0.1, -0.2], worker_seconds=1800)
    assert a["cost"] == pytest.approx(3.6) and b["cost"] == pytest.approx(1.8)
    assert m.job_cost("job-a") == a and m.job_cost("nope") is None
    s = parse(m.exposition())
    assert value(s, "swapline_farm_jobs_total", decision="pass") == 1
    assert value(s, "swapline_farm_jobs_total", decision="fail") == 1
    assert value(s, "swapline_farm_identity_score_count") == 5      # NaN / None: face not measured
    assert value(s, "swapline_farm_identity_score_sum") == pytest.approx(0.8 + 0.82 + 0.9 + 0.1 - 0.2)
    assert value(s, "swapline_farm_identity_score_bucket", le="0.0") == 1
    assert value(s, "swapline_farm_identity_score_bucket", le="0.15") == 2
    assert value(s, "swapline_farm_job_worker_seconds_sum") == 5400
    assert value(s, "swapline_farm_job_cost_sum") == pytest.approx(5.4)
    assert value(s, "swapline_farm_cost_total") == pytest.approx(5.4)
    assert value(s, "swapline_farm_price_per_worker_hour") == 3.6


def test_latency_quantiles_are_derivable():
    m = FarmMetrics()
    for k in range(100):                     # 1 .. 100 s chunk times
        m.chunk_started("w")
        m.chunk_finished("w", float(k + 1), 1)
    s = parse(m.exposition())
    # Linear interpolation inside a bucket: within one bucket width of the exact value.
    assert 45 <= quantile(s, "swapline_farm_chunk_seconds", 0.50) <= 60
    assert 90 <= quantile(s, "swapline_farm_chunk_seconds", 0.95) <= 120
    assert 90 <= quantile(s, "swapline_farm_chunk_seconds", 0.99) <= 120


def test_own_registry_and_bad_input():
    a, b = FarmMetrics(), FarmMetrics()      # two coordinators in one process do not clash
    a.chunk_started("w")
    assert a.registry is not REGISTRY and a.registry is not b.registry
    assert "swapline_farm_chunks_started_total" not in {s.name for f in REGISTRY.collect() for s in f.samples}
    assert ("swapline_farm_chunks_started_total", (("worker", "w"),)) not in parse(b.exposition())
    shared = CollectorRegistry()
    assert FarmMetrics(registry=shared).registry is shared
    with pytest.raises(ValueError, match="priority"):
        a.queue_depth("urgent", 1)
    with pytest.raises(ValueError, match="price_per_worker_hour"):
        FarmMetrics(price_per_worker_hour=-1)


def test_serve_answers_over_http():
    m = FarmMetrics()
    m.dead_letter("InputError")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server, thread = m.serve(port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            body = r.read()
            assert r.headers["Content-Type"].startswith("text/plain")
    finally:
        server.shutdown()
        thread.join(10)
    assert value(parse(body), "swapline_farm_dead_letters_total", error_class="InputError") == 1
