"""Farm benchmark (issue 17): throughput of one batch with 1 vs 2 local ComfyUI workers, and the
coordinator's overhead per chunk.

Method. One batch of ``jobs`` short clips (the shipped sample, first ``frames`` frames, each clip
a little brighter than the one before: different bytes, so neither the farm's content-addressed
chunk store nor a worker's stage cache can serve one job from another) through
``workflows/api/video_swap_builtin.json`` (builtin MTCNN + dlib, classical swapper: no model file).
The same batch runs twice in one process and one local Ray: with 1 worker, then with 2, each in
a fresh farm folder (its own chunk store, ledgers and ComfyUI base folders). Timed per run:

- ``startup_s``: Coordinator construction (Ray actors, ComfyUI servers up);
- ``wall_s``: first submit until ``run_until_idle`` returns (chunks, stitching, QA, signing:
  what a user waits for); ``frames_per_second`` = output frames of the batch / ``wall_s``;
- ``speedup_2_vs_1`` = fps(2 workers) / fps(1 worker). Target >= 1.7, judged only where the
  machine has at least 4 logical CPUs (2 per worker); the core count is recorded either way.

Coordinator overhead per chunk: the benchmark hands the coordinator a FarmMetrics whose
``chunk_started``/``chunk_finished`` hooks it calls when it launches a chunk and when it has
collected the result. Their interval minus the seconds the worker reports for the chunk itself
(``run_chunk``: prompt to outputs) is what scheduling, Ray transport and publishing the chunk cost;
``overhead_share`` = median overhead / median worker chunk time (target <= 0.05). One chunk in
flight per worker, so starts and finishes pair up in order per worker.

Run: ``python -m bench.farm [--smoke] [--doc]`` (out/bench/farm.json; with --doc
docs/measurements/farm.md), or as the ``farm`` section of ``scripts/bench.sh`` (``--skip-farm``
to leave it out). ``--smoke``: a tiny batch, JSON only (pages are only written from a full run).
"""
from __future__ import annotations

import os
import shutil
import statistics
import sys
import threading
import time
from collections import defaultdict, deque
from pathlib import Path

from .machine import load_average
from .paths import REPO, SAMPLE_CLIP, SOURCE_FACE, TARGET_REFERENCE, WORK, WORKFLOW
from .section import Section, Target, cli, f, table

MIN_CPUS_FOR_SPEEDUP = 4
COMFY = REPO / ".comfy" / "ComfyUI"
# Node ids of WORKFLOW: the clip loader, the source face image, the target reference image.
VIDEO_NODE, SOURCE_NODE, REFERENCE_NODE = "1", "2", "3"


def import_farm() -> dict:
    """The farm's modules, or a clear error when the distribution is not there."""
    sys.path.insert(0, str(REPO / "farm"))
    try:
        from swapline_farm import coordinator, jobs, ledger, metrics, store
    except ImportError as exc:
        raise RuntimeError(
            f"bench farm: the swapline-farm coordinator is not importable ({type(exc).__name__}: {exc}). It lives in "
            f"{REPO / 'farm'} (swapline_farm.coordinator, jobs, store, ledger, metrics) and needs ray and "
            "prometheus-client: pip install -e farm/ (or run from a checkout that has farm/), or skip this "
            "section with --skip-farm") from exc
    return {"Coordinator": coordinator.Coordinator, "JobSpec": jobs.JobSpec, "job_id": jobs.job_id,
            "ChunkStore": store.ChunkStore, "JobLedger": ledger.JobLedger,
            "DeadLetterLedger": ledger.DeadLetterLedger, "FarmMetrics": metrics.FarmMetrics}


def variant_clips(n: int, frames: int, out_dir: Path) -> list[Path]:
    """``n`` distinct clips of ``frames`` frames from the shipped sample (clip k: +2k grey levels)."""
    import numpy as np

    from swapline_core.video.read import iter_frames, probe
    from swapline_core.video.write import VideoWriter

    info = probe(SAMPLE_CLIP)
    src = [f for _, f in iter_frames(SAMPLE_CLIP, count=frames)]
    if len(src) < frames:
        raise ValueError(f"the sample clip {SAMPLE_CLIP} has {len(src)} frames; ask for at most that many")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(n):
        path = out_dir / f"farm_clip_{k}.mp4"
        with VideoWriter(path, fps=info.fps_fraction, crf=18, preset="veryfast") as w:
            for f in src:
                w.write(np.clip(f.astype(np.int16) + 2 * k, 0, 255).astype(np.uint8))
        paths.append(path)
    return paths


def overhead_recorder(FarmMetrics):
    """A FarmMetrics that also pairs each chunk's launch and collection per worker."""

    class Recorder(FarmMetrics):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.started_at: dict[str, deque] = defaultdict(deque)
            self.samples: list[dict] = []
            self._mu = threading.Lock()

        def chunk_started(self, worker):
            with self._mu:
                self.started_at[worker].append(time.perf_counter())
            super().chunk_started(worker)

        def chunk_finished(self, worker, seconds, frames, stage_seconds=None):
            now = time.perf_counter()
            with self._mu:
                t0 = self.started_at[worker].popleft() if self.started_at[worker] else None
            if t0 is not None:
                self.samples.append({"worker": worker, "observed_s": now - t0, "worker_s": float(seconds),
                                     "frames": int(frames)})
            super().chunk_finished(worker, seconds, frames, stage_seconds)

        def chunk_failed(self, worker, error_class, retried):
            with self._mu:
                if self.started_at[worker]:
                    self.started_at[worker].popleft()
            super().chunk_failed(worker, error_class, retried)

    return Recorder


def make_jobs(farm: dict, clips: list[Path]) -> list:
    settings = {f"{REFERENCE_NODE}.image": str(TARGET_REFERENCE)}
    inputs = {"video": VIDEO_NODE, "source": SOURCE_NODE}
    return [farm["JobSpec"](job_id=farm["job_id"](c, (SOURCE_FACE,), WORKFLOW, settings), clip=c, faces=(SOURCE_FACE,),
                            workflow=WORKFLOW, inputs=inputs, settings=settings, priority="normal") for c in clips]


def run_once(farm: dict, n_workers: int, clips: list[Path], root: Path, chunk_frames: int, timeout_s: float,
             log=print) -> dict:
    from swapline_core.video.read import probe

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "models").mkdir()
    metrics = overhead_recorder(farm["FarmMetrics"])()
    t0 = time.perf_counter()
    coord = farm["Coordinator"](
        farm["ChunkStore"](str(root / "chunks")), farm["JobLedger"](root / "jobs.jsonl"),
        farm["DeadLetterLedger"](root / "dead_letters.jsonl"), metrics, workers=n_workers, max_attempts=2,
        comfy_path=str(COMFY), work_dir=str(root), out_dir=str(root / "outputs"), pack=str(REPO),
        models_dir=str(root / "models"), chunk_frames=chunk_frames, in_flight_per_worker=1)
    startup = time.perf_counter() - t0
    log(f"farm: {n_workers} worker(s) up in {startup:.1f} s; submitting {len(clips)} jobs")
    try:
        t1 = time.perf_counter()
        ids = [coord.submit(j) for j in make_jobs(farm, clips)]
        states = coord.run_until_idle(timeout_s=timeout_s)
        wall = time.perf_counter() - t1
        status = {j: coord.status(j) or {} for j in ids}
    finally:
        coord.shutdown()
    bad = {j: (s, (status.get(j) or {}).get("error")) for j, s in states.items() if s != "done"}
    if bad:
        raise RuntimeError(f"farm run with {n_workers} worker(s): jobs not done: {bad}")
    frames_in = sum(probe(c).frame_count for c in clips)
    frames_out = sum(probe(status[j]["output"]).frame_count for j in ids)
    if frames_out != frames_in:
        raise RuntimeError(f"farm run with {n_workers} worker(s): {frames_out} output frames for {frames_in} input")
    s = metrics.samples
    over = [x["observed_s"] - x["worker_s"] for x in s]
    return {"workers": n_workers, "startup_s": round(startup, 2), "wall_s": round(wall, 2), "frames": frames_out,
            "frames_per_second": round(frames_out / wall, 3), "chunks": len(s),
            "chunks_per_worker": {w: sum(1 for x in s if x["worker"] == w) for w in sorted({x["worker"] for x in s})},
            "chunk_seconds_median": round(statistics.median(x["worker_s"] for x in s), 3) if s else None,
            "overhead_per_chunk_s_median": round(statistics.median(over), 4) if over else None,
            "overhead_per_chunk_s_max": round(max(over), 4) if over else None,
            "worker_seconds": round(sum(x["worker_s"] for x in s), 2)}


def run(jobs: int = 4, frames: int = 48, chunk_frames: int = 16, workers=(1, 2), timeout_s: float = 3600,
        log=print) -> dict:
    """Both runs; raises RuntimeError (clear message) when the farm is missing or a run fails."""
    import psutil

    farm = import_farm()
    import ray

    root = WORK / "farm"
    clips = variant_clips(jobs, frames, root / "clips")
    cpus = os.cpu_count() or 1
    started_ray = not ray.is_initialized()
    if started_ray:
        # Ray's worker processes (the ComfyWorker actors) import swapline_farm and the core too
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO / "farm"), str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        ray.init(num_cpus=max(cpus, max(workers)), include_dashboard=False, log_to_driver=False)
    res = {"cpu_count": cpus, "cpu_count_physical": psutil.cpu_count(logical=False), "jobs": jobs,
           "frames_per_job": frames, "chunk_frames": chunk_frames, "workflow": str(WORKFLOW.relative_to(REPO)),
           "load_average_at_start": load_average(), "runs": {}}
    try:
        for n in workers:
            log(f"farm: batch of {jobs} x {frames} frames with {n} worker(s)")
            res["runs"][str(n)] = run_once(farm, n, clips, root / f"run_{n}w", chunk_frames, timeout_s, log)
            r = res["runs"][str(n)]
            log(f"farm: {n} worker(s): {r['wall_s']} s, {r['frames_per_second']} frames/s, overhead/chunk "
                f"{r['overhead_per_chunk_s_median']} s (median)")
    finally:
        if started_ray:
            ray.shutdown()
    res["load_average_at_end"] = load_average()
    one, two = res["runs"].get("1"), res["runs"].get("2")
    res["speedup_2_vs_1"] = round(two["frames_per_second"] / one["frames_per_second"], 3) if one and two else None
    runs = [r for r in res["runs"].values() if r["overhead_per_chunk_s_median"] is not None]
    if runs:
        over = statistics.median(r["overhead_per_chunk_s_median"] for r in runs)
        chunk = statistics.median(r["chunk_seconds_median"] for r in runs)
        res["overhead_per_chunk_s"] = round(over, 4)
        res["overhead_share"] = round(over / chunk, 4) if chunk else None
    return res


def body(fm: dict) -> list[str]:
    head = ["workers", "wall s", "frames", "frames/s", "chunks", "chunk s (median)", "overhead/chunk s (median)",
            "overhead/chunk s (max)", "startup s"]
    return ["## Per run", "", *table(head, [[n, r["wall_s"], r["frames"], r["frames_per_second"], r["chunks"],
                                             r["chunk_seconds_median"], r["overhead_per_chunk_s_median"],
                                             r["overhead_per_chunk_s_max"], r["startup_s"]]
                                            for n, r in fm["runs"].items()]), "",
            f"Median coordinator overhead {f(fm.get('overhead_per_chunk_s'))} s per chunk. Load average "
            f"{fm.get('load_average_at_start')} at start, {fm.get('load_average_at_end')} at end, on "
            f"{fm['cpu_count']} logical CPUs ({fm.get('cpu_count_physical')} physical).", "",
            f"The speedup target needs at least {MIN_CPUS_FOR_SPEEDUP} *free* cores (two per CPU worker: each "
            "ComfyUI decodes, analyses, swaps and encodes on its own cores). With fewer logical CPUs it is not "
            "judged; with other load on the machine (the load average above) the two workers share what is left, so "
            "the speedup measured here is a lower bound of what a dedicated machine gives."]


def _few_cpus(fm: dict) -> str | None:
    n = fm.get("cpu_count") or 0
    return f"{n} CPUs < {MIN_CPUS_FOR_SPEEDUP}" if n < MIN_CPUS_FOR_SPEEDUP else None


SECTION = Section(
    name="farm", title="Farm throughput and coordinator overhead: measurements",
    about=lambda fm: (f"The same batch ({fm['jobs']} clips x {fm['frames_per_job']} frames, chunks of "
                      f"{fm['chunk_frames']} frames, `{fm['workflow']}`) through swapline-farm with 1 and then 2 "
                      "local CPU ComfyUI workers in one run. Method: `bench/farm.py` (module docstring)."),
    run=run, body=body,
    targets=(Target("speedup_2_vs_1", ">=", 1.7, "frames/s with 2 workers / with 1", unjudged=_few_cpus),
             Target("overhead_share", "<=", 0.05, "median coordinator overhead per chunk / median chunk time")),
    full={"jobs": 4, "frames": 48, "chunk_frames": 16},
    smoke={"jobs": 2, "frames": 4, "chunk_frames": 2},     # keeps 1 and 2 workers (the speedup path)
)

if __name__ == "__main__":
    raise SystemExit(cli(SECTION, module="bench.farm"))
