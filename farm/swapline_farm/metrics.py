"""Prometheus metrics of the farm coordinator (issue 17, "Observability").

One :class:`FarmMetrics` per coordinator, on its own ``CollectorRegistry`` (never
prometheus_client's global one: two coordinators in one process, e.g. tests or a notebook, would
otherwise clash on names, and the pack's ComfyUI metrics keep their own registry too).

What a pipeline engineer gets, all named ``swapline_farm_*``:

- latency histograms per chunk (``chunk_seconds``) and per stage (``stage_seconds{stage}``), with
  buckets fine enough that Prometheus' ``histogram_quantile`` gives p50/p95/p99;
- ``queue_depth{priority}``, ``chunks_in_flight{worker}``, ``worker_up{worker}``;
- ``chunk_failures_total``, ``retries_total`` and ``dead_letters_total`` by ``error_class``;
- ``frames_total{worker}``, ``frames_per_second{worker}`` (last chunk) and
  ``throughput_frames_per_second`` (farm-wide, frames finished over wall time since the first
  chunk started);
- ``jobs_total{decision}`` (QA), ``identity_score`` histogram, ``job_worker_seconds`` and the
  estimated cost (``job_cost`` histogram, ``cost_total``): worker-seconds x the configured price
  per worker-hour (``price_per_worker_hour`` gauge; the currency is whatever the price is in).

Per-job values (cost, worker-seconds) are returned by :meth:`FarmMetrics.job_finished` and kept
by job id in :meth:`FarmMetrics.job_cost`, not exported as a ``job_id`` label: one series per
job would grow without bound.
"""
from __future__ import annotations

import threading
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["FarmMetrics", "CONTENT_TYPE_LATEST", "CHUNK_BUCKETS", "STAGE_BUCKETS", "IDENTITY_BUCKETS"]

PRIORITIES = ("rush", "normal", "bulk")
# A chunk is a few seconds of video: seconds (GPU, small chunk) to an hour (CPU, large chunk).
CHUNK_BUCKETS = (0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 450, 600, 900, 1200,
                 1800, 3600, float("inf"))
STAGE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800,
                 float("inf"))
# Identity similarity of the swapped face to the source (cosine, -1..1; calibrated pass limits
# sit between 0.2 and 0.9 depending on the recognizer): steps of 0.05 over the range that matters;
# negative scores fall in le="0" (a negative bucket bound would drop the _sum series from the text).
IDENTITY_BUCKETS = (0.0, *[round(0.05 * k, 2) for k in range(1, 21)], float("inf"))
WORKER_SECONDS_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400,
                          float("inf"))
KEEP_JOB_COSTS = 100_000
COST_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, float("inf"))


class FarmMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, price_per_worker_hour: float = 0.0,
                 clock=time.monotonic):
        if price_per_worker_hour < 0:
            raise ValueError(f"price_per_worker_hour is {price_per_worker_hour}; it must be >= 0 "
                             "(0 when no cost should be estimated)")
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.price_per_worker_hour = float(price_per_worker_hour)
        self._clock = clock
        self._lock = threading.Lock()
        self._first_start: float | None = None
        self._frames_done = 0
        self._up: dict[str, bool] = {}
        self._job_costs: dict[str, dict] = {}
        self._build(self.registry)
        self.price.set(self.price_per_worker_hour)

    def _build(self, r: CollectorRegistry) -> None:
        p = "swapline_farm_"
        self.queue = Gauge(p + "queue_depth", "Chunks waiting to be scheduled, per priority class", ["priority"],
                           registry=r)
        self.in_flight = Gauge(p + "chunks_in_flight", "Chunks running now, per worker", ["worker"], registry=r)
        self.started = Counter(p + "chunks_started", "Chunks handed to a worker", ["worker"], registry=r)
        self.finished = Counter(p + "chunks_finished", "Chunks a worker finished", ["worker"], registry=r)
        self.chunk_seconds = Histogram(p + "chunk_seconds", "Wall time of one chunk on a worker",
                                       buckets=CHUNK_BUCKETS, registry=r)
        self.stage_seconds = Histogram(p + "stage_seconds", "Time of one stage (node) within a chunk", ["stage"],
                                       buckets=STAGE_BUCKETS, registry=r)
        self.busy = Counter(p + "worker_busy_seconds", "Seconds a worker spent on finished chunks", ["worker"],
                            registry=r)
        self.frames = Counter(p + "frames", "Output frames of finished chunks", ["worker"], registry=r)
        self.fps = Gauge(p + "frames_per_second", "Frames per second of the worker's last finished chunk",
                         ["worker"], registry=r)
        self.throughput = Gauge(p + "throughput_frames_per_second", "Frames finished by all workers over wall "
                                "time since the first chunk started", registry=r)
        self.failures = Counter(p + "chunk_failures", "Failed chunk attempts, by error class", ["error_class"],
                                registry=r)
        self.retries = Counter(p + "retries", "Failed chunk attempts that were queued again, by error class",
                               ["error_class"], registry=r)
        self.dead = Counter(p + "dead_letters", "Chunks sent to the dead-letter ledger, by the last error class",
                            ["error_class"], registry=r)
        self.up = Gauge(p + "worker_up", "1 while the worker's ComfyUI is healthy, 0 while it is down",
                        ["worker"], registry=r)
        self.downs = Counter(p + "worker_down_events", "Times a worker went from up to down", ["worker"],
                             registry=r)
        self.jobs = Counter(p + "jobs", "Finished jobs, by QA decision", ["decision"], registry=r)
        self.identity = Histogram(p + "identity_score", "Identity similarity of swapped faces to the source, "
                                  "per evaluated face of finished jobs", buckets=IDENTITY_BUCKETS, registry=r)
        self.job_seconds = Histogram(p + "job_worker_seconds", "Worker-seconds spent per finished job",
                                     buckets=WORKER_SECONDS_BUCKETS, registry=r)
        self.cost_per_job = Histogram(p + "job_cost", "Estimated cost per finished job (worker-seconds x price per "
                                  "worker-hour)", buckets=COST_BUCKETS, registry=r)
        self.cost = Counter(p + "cost", "Estimated cost of all finished jobs", registry=r)
        self.price = Gauge(p + "price_per_worker_hour", "Configured price of one worker-hour", registry=r)

    # -- recording (called by the coordinator) ---------------------------------------------------
    def queue_depth(self, priority: str, n: int) -> None:
        if priority not in PRIORITIES:
            raise ValueError(f"unknown priority {priority!r}; expected one of {PRIORITIES}")
        self.queue.labels(priority).set(n)

    def chunk_started(self, worker: str) -> None:
        """In-flight +1. Every started chunk ends in exactly one chunk_finished or chunk_failed."""
        with self._lock:
            if self._first_start is None:
                self._first_start = self._clock()
        self.in_flight.labels(worker).inc()
        self.started.labels(worker).inc()

    def chunk_finished(self, worker: str, seconds: float, frames: int,
                       stage_seconds: dict[str, float] | None = None) -> None:
        self.in_flight.labels(worker).dec()
        self.finished.labels(worker).inc()
        self.chunk_seconds.observe(seconds)
        self.busy.labels(worker).inc(max(0.0, seconds))
        self.frames.labels(worker).inc(frames)
        if seconds > 0:
            self.fps.labels(worker).set(frames / seconds)
        for stage, s in (stage_seconds or {}).items():
            self.stage_seconds.labels(stage).observe(s)
        with self._lock:
            self._frames_done += frames
            elapsed = self._clock() - self._first_start if self._first_start is not None else 0.0
            if elapsed > 0:
                self.throughput.set(self._frames_done / elapsed)

    def chunk_failed(self, worker: str, error_class: str, retried: bool) -> None:
        self.in_flight.labels(worker).dec()
        self.failures.labels(error_class).inc()
        if retried:
            self.retries.labels(error_class).inc()

    def dead_letter(self, error_class: str) -> None:
        self.dead.labels(error_class).inc()

    def worker_state(self, worker: str, up: bool) -> None:
        with self._lock:
            was = self._up.get(worker)
            self._up[worker] = bool(up)
        if was and not up:
            self.downs.labels(worker).inc()
        self.up.labels(worker).set(1 if up else 0)

    def job_finished(self, job_id: str, decision: str, identity_scores: list[float],
                     worker_seconds: float) -> dict:
        """Count the job by QA decision, add its identity scores (None/NaN, a face not measured,
        are left out) and estimate its cost; returns ``{"job_id", "worker_seconds", "cost"}``."""
        self.jobs.labels(decision).inc()
        for s in identity_scores:
            if s is not None and s == s:
                self.identity.observe(float(s))
        cost = worker_seconds / 3600.0 * self.price_per_worker_hour
        self.job_seconds.observe(worker_seconds)
        self.cost_per_job.observe(cost)
        self.cost.inc(cost)
        out = {"job_id": job_id, "worker_seconds": float(worker_seconds), "cost": cost,
               "price_per_worker_hour": self.price_per_worker_hour}
        with self._lock:
            self._job_costs[job_id] = out
            while len(self._job_costs) > KEEP_JOB_COSTS:      # a coordinator may run for months
                self._job_costs.pop(next(iter(self._job_costs)))
        return out

    def job_cost(self, job_id: str) -> dict | None:
        """What :meth:`job_finished` returned for this job (None before it finished)."""
        with self._lock:
            return self._job_costs.get(job_id)

    # -- exposition ------------------------------------------------------------------------------
    def exposition(self) -> bytes:
        """Everything above in Prometheus text format."""
        return generate_latest(self.registry)

    def serve(self, port: int, addr: str = "127.0.0.1"):
        """Serve ``/metrics`` over HTTP on a background thread (prometheus_client's server); returns
        ``(server, thread)``, ``server.shutdown()`` stops it. ``addr="0.0.0.0"`` lets a Prometheus on
        another host scrape it (on a cluster, the coordinator's pod)."""
        return start_http_server(port, addr=addr, registry=self.registry)
