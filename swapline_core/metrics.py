"""Process-wide Prometheus counters of this ComfyUI process: stage times, frames, QA, stage cache.

The pack's ``/swapline/metrics`` route (nodes/metrics_route.py) serves :func:`exposition`, so a
single ComfyUI server is observable without the farm. The stages record themselves through two
decorators, :func:`observe_stage` (track, swap, restore, refine: anything returning a
``StageReport``) and :func:`observe_qa` (the QA gate's ``run_qa``), so the stage code stays as it
is; recording never raises into a job (a metrics bug must not fail a swap).

prometheus-client is a pack requirement, but an install that skipped it must still run every
node: without it recording is a no-op and :func:`exposition` says how to fix it.
"""
from __future__ import annotations

import functools
import logging
import threading
import time

log = logging.getLogger("swapline")

try:
    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
except ImportError:  # pragma: no cover - exercised only on installs without the requirement
    CollectorRegistry = None
    CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"

MISSING = (b"# prometheus-client is not installed in this ComfyUI's Python: no Swapline metrics.\n"
           b"# Fix: pip install -r custom_nodes/<swapline folder>/requirements.txt, then restart ComfyUI.\n")
# Stage runs take from well under a second (a cached re-run) to hours (a feature-length clip).
STAGE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, float("inf"))


class PackMetrics:
    """The counters of one process. Its own CollectorRegistry, not prometheus_client's global
    REGISTRY: other packs (or ComfyUI itself) may register metrics there, and a name clash would
    break their import or ours; the farm's FarmMetrics keeps its own registry for the same reason."""

    def __init__(self):
        self.available = CollectorRegistry is not None
        if not self.available:
            return
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.stage_runs = Counter("swapline_stage_runs", "Stage runs (track, swap, restore, refine, qa), cached "
                                  "or not", ["stage"], registry=r)
        self.stage_errors = Counter("swapline_stage_errors", "Stage runs that raised, by exception class",
                                    ["stage", "error"], registry=r)
        self.stage_seconds = Histogram("swapline_stage_seconds", "Wall time of one stage run over a whole clip",
                                       ["stage"], buckets=STAGE_BUCKETS, registry=r)
        self.step_seconds = Counter("swapline_stage_step_seconds", "Seconds spent per step of a stage (decode, "
                                    "detect, swap, paste, store, ...) as the stage reports them",
                                    ["stage", "step"], registry=r)
        self.frames = Counter("swapline_frames_processed", "Frames covered by stage runs (resumed chunks "
                              "included)", ["stage"], registry=r)
        self.cache_hits = Counter("swapline_stage_cache_hits", "Chunks loaded from the stage cache instead of "
                                  "computed", ["stage"], registry=r)
        self.cache_misses = Counter("swapline_stage_cache_misses", "Chunks computed (not in the stage cache)",
                                    ["stage"], registry=r)
        self.qa_decisions = Counter("swapline_qa_decisions", "QA gate decisions per clip", ["decision"],
                                    registry=r)
        self.qa_frames = Counter("swapline_qa_frames", "QA gate frame verdicts (ok, fail, no_face, skipped)",
                                 ["status"], registry=r)

    def record_stage(self, stage: str, seconds: float, frames: int, chunks_total: int, chunks_resumed: int,
                     steps: dict | None = None) -> None:
        if not self.available:
            return
        self.stage_runs.labels(stage).inc()
        self.stage_seconds.labels(stage).observe(seconds)
        self.frames.labels(stage).inc(frames)
        self.cache_hits.labels(stage).inc(chunks_resumed)
        self.cache_misses.labels(stage).inc(max(0, chunks_total - chunks_resumed))
        for step, s in (steps or {}).items():
            self.step_seconds.labels(stage, step).inc(max(0.0, float(s)))

    def record_error(self, stage: str, exc: BaseException) -> None:
        if self.available:
            self.stage_errors.labels(stage, type(exc).__name__).inc()

    def record_qa(self, report: dict) -> None:
        if not self.available:
            return
        self.qa_decisions.labels(str(report.get("decision"))).inc()
        counts: dict[str, int] = {}
        for rec in report.get("frames", ()):
            counts[str(rec.get("status"))] = counts.get(str(rec.get("status")), 0) + 1
        for status, n in counts.items():
            self.qa_frames.labels(status).inc(n)

    def exposition(self) -> bytes:
        return generate_latest(self.registry) if self.available else MISSING


# The one process-wide instance, deliberately global: ComfyUI runs every prompt of a server in one
# process and the route must count all of them, across node executions that share no state; one
# ComfyUI process is exactly what one scrape describes. Everything else in the pack passes state
# explicitly.
_LOCK = threading.Lock()
_METRICS: PackMetrics | None = None


def pack_metrics() -> PackMetrics:
    global _METRICS
    with _LOCK:
        if _METRICS is None:
            _METRICS = PackMetrics()
        return _METRICS


def exposition() -> bytes:
    """Prometheus text format of everything recorded in this process."""
    return pack_metrics().exposition()


def _safely(record) -> None:
    """Run ``record()`` (arguments are evaluated inside it, so an odd input cannot raise here either)."""
    try:
        record()
    except Exception as exc:  # noqa: BLE001 - observability must never fail the job it observes
        log.warning("[Swapline] metrics not recorded: %s: %s", type(exc).__name__, exc)


def _report_in(result):
    items = result if isinstance(result, tuple) else (result,)
    return next((x for x in items if hasattr(x, "chunks_resumed") and hasattr(x, "seconds")), None)


def observe_stage(name: str | None = None):
    """Decorator for stage functions ``fn(seq, ...)`` whose result holds a StageReport: records
    the stage's wall time, frames (``seq.count``), cache hits/misses (chunks) and step seconds.
    ``name=None``: the stage is the function's ``stage`` argument (``patch_stage(seq, faces, stage, ...)``)."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(seq, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                result = fn(seq, *args, **kwargs)
            except Exception as exc:
                stage = name or kwargs.get("stage") or (args[1] if len(args) > 1 else fn.__name__)
                _safely(lambda e=exc: pack_metrics().record_error(str(stage), e))
                raise
            rep = _report_in(result)
            if rep is not None:
                seconds = time.perf_counter() - t0
                _safely(lambda: pack_metrics().record_stage(name or rep.stage, seconds, int(seq.count),
                                                            int(rep.chunks_total), int(rep.chunks_resumed),
                                                            dict(rep.seconds)))
            return result
        return wrapper
    return decorate


def observe_qa(fn):
    """Decorator for ``run_qa(seq_original, seq_swapped, ...)``: the QA stage's time, frames, cache
    hits (resumed chunks), step seconds, its decision and frame verdicts."""
    @functools.wraps(fn)
    def wrapper(seq_original, seq_swapped, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            rep = fn(seq_original, seq_swapped, *args, **kwargs)
        except Exception as exc:
            _safely(lambda e=exc: pack_metrics().record_error("qa", e))
            raise
        seconds = time.perf_counter() - t0
        _safely(lambda: pack_metrics().record_stage("qa", seconds, int(seq_swapped.count), int(seq_swapped.n_chunks),
                                                    int(rep.get("chunks_resumed", 0)), rep.get("seconds")))
        _safely(lambda: pack_metrics().record_qa(rep))
        return rep
    return wrapper
