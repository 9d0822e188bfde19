"""The farm's coordinator: a priority queue of chunks over a pool of ComfyWorker actors.

One loop (run_until_idle) hands eligible chunks to workers with a free slot (a bounded number in
flight per worker: backpressure), collects results with ray.wait, and decides on failures:
InputError fails the job at once; TransientError (worker died, OOM, connection lost, timeout)
retries the chunk after an exponential backoff with jitter, preferring another worker; after
max_attempts the chunk and its job go to the dead-letter ledger, which retry() re-injects. A
worker that failed the same job twice is not given it again. Finished jobs are stitched,
QA-checked and signed once (finalize_job) on a side thread, so workers are never idle for it.

Scheduling order is (priority class, job submission order, chunk index): a rush job never waits
behind bulk work, and within a class jobs finish in the order they came.
"""
from __future__ import annotations

import dataclasses
import logging
import random
import statistics
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ray

from .errors import ChunkTimeout, FarmError, InputError, TransientError, error_class
from .prompts import build_chunk_prompt, farm_setting, load_workflow, roles, staged_files
from .state import JobRun, Slot, Task, spec_from_dict, spec_to_dict  # noqa: F401  (spec_*: for the CLI)

log = logging.getLogger("swapline_farm")
PRIORITY_RANK = {"rush": 0, "normal": 1, "bulk": 2}
EXCLUDE_AFTER = 2            # failures of one job on one worker before that worker never gets it again


class Coordinator:
    def __init__(self, store, ledger, dead_letters, metrics=None, workers=2, max_attempts: int = 3, *,
                 comfy_path: str | None = None, work_dir: str = "swapline-farm", out_dir: str | None = None,
                 chunk_frames: int = 32, preroll: int = 8, in_flight_per_worker: int = 1,
                 timeout_factor: float = 5.0, timeout_floor_s: float = 60.0, first_timeout_s: float = 900.0,
                 backoff_base_s: float = 1.0, backoff_max_s: float = 60.0, signing: dict | None = None,
                 qa: dict | None = None,
                 webhook_secret: bytes | None = None, pack: str | None = None, models_dir: str | None = None,
                 gpus_per_worker: int | None = None, worker_extra_args=(), health_interval_s: float = 5.0):
        self.store, self.ledger, self.dead_letters, self.metrics = store, ledger, dead_letters, metrics
        self.max_attempts = max_attempts
        self.work_dir = Path(work_dir).resolve()
        self.out_dir = Path(out_dir).resolve() if out_dir else self.work_dir / "outputs"
        self.chunk_frames, self.preroll = chunk_frames, preroll
        self.in_flight_per_worker = max(1, in_flight_per_worker)
        self.timeout_factor, self.timeout_floor_s = timeout_factor, timeout_floor_s
        self.first_timeout_s = first_timeout_s
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self.signing, self.webhook_secret, self.qa = signing, webhook_secret, qa
        self.health_interval_s = health_interval_s
        self.jobs: dict[str, JobRun] = {}
        self.queue: list[Task] = []
        self.inflight: dict = {}                    # ray ref -> (task, slot, started, timeout)
        self.finishing: dict = {}                   # future -> job id
        self.dispatched: list[dict] = []            # every chunk start, in order (tests, logs)
        self.seconds_per_frame: deque = deque(maxlen=200)
        self._seq = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="farm-finalize")
        self._last_health = 0.0
        self.slots: list[Slot] = []
        if isinstance(workers, int):
            self._start_workers(workers, comfy_path, pack, models_dir, gpus_per_worker, worker_extra_args)
        else:
            for i, handle in enumerate(workers):
                self.slots.append(Slot(f"w{i}", handle))
        for slot in self.slots:
            self._metric("worker_state", slot.name, True)

    # -- workers -----------------------------------------------------------------------------
    def _start_workers(self, n, comfy_path, pack, models_dir, gpus, extra_args) -> None:
        from .worker import ComfyWorker

        if not comfy_path:
            raise InputError("starting workers needs comfy_path: the folder of a ComfyUI with the Swapline pack")
        if gpus is None:
            gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
        opts = {"num_gpus": gpus, "num_cpus": 0 if gpus else 1, "max_restarts": 3, "max_task_retries": 0}
        handles = []
        for i in range(n):
            name = f"w{i}"
            handles.append((name, ComfyWorker.options(**opts).remote(
                str(comfy_path), 0, list(extra_args), str(self.work_dir / "workers" / name), pack, models_dir, name)))
        ray.get([h.health.remote() for _, h in handles])      # every ComfyUI is up (or its error raises here)
        self.slots = [Slot(name, h) for name, h in handles]

    def worker_health(self) -> list[dict]:
        refs = [s.handle.health.remote() for s in self.slots]
        out = []
        for slot, ref in zip(self.slots, refs):
            try:
                h = ray.get(ref, timeout=15)
            except Exception as exc:  # actor dead or restarting: down until it answers again
                h = {"name": slot.name, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
            # A dead process or actor is down at once; a busy ComfyUI may answer HTTP late (its server
            # shares the process with the executing prompt), so only three misses in a row count.
            slot.misses = 0 if h.get("ok") else slot.misses + 1
            up = bool(h.get("alive")) and bool(h.get("ready")) and slot.misses < 3
            if up != slot.up:
                log.warning("worker %s is %s", slot.name, "up" if up else "down")
                self._metric("worker_state", slot.name, up)
            slot.up = up
            out.append(h)
        return out

    def shutdown(self) -> None:
        for slot in self.slots:
            try:
                ray.get(slot.handle.stop.remote(), timeout=30)
            except Exception:
                pass
            ray.kill(slot.handle, no_restart=True)
        self._pool.shutdown(wait=True)

    # -- jobs --------------------------------------------------------------------------------
    def submit(self, job) -> str:
        """Queue a job; the same job (same content-derived id) is never queued twice, and a job the
        ledger already has as done is not run again."""
        jid = job.job_id
        if jid in self.jobs and self.jobs[jid].state not in ("cancelled", "failed"):
            return jid
        if job.priority not in PRIORITY_RANK:
            raise InputError(f"job {jid}: priority '{job.priority}' is not one of {', '.join(PRIORITY_RANK)}")
        prev = self.ledger.state(jid)
        workflow = load_workflow(job.workflow)
        # a hand-made JobSpec may leave roles out: name them (the data plane reads job.inputs["video"])
        found = {k: v for k, v in roles(workflow, job).items() if v is not None}
        job = dataclasses.replace(job, inputs={**found, **dict(job.inputs or {})})
        chunks = self._plan(job, workflow)
        build_chunk_prompt(workflow, job, chunks[0])            # a bad workflow mapping fails here, not on a worker
        run = JobRun(job, self._seq, workflow, chunks, staged_files(job, workflow))
        self._seq += 1
        self.jobs[jid] = run
        if prev and prev.get("state") == "done" and prev.get("output") and Path(prev["output"]).exists():
            run.state, run.result = "done", {k: prev.get(k) for k in ("output", "signed", "qa")}
            return jid
        if not prev or prev.get("state") != "submitted":     # `swapline-farm submit` wrote it
            self.ledger.record(jid, "submitted", spec=spec_to_dict(job), chunks=len(chunks), priority=job.priority)
        for c in chunks:
            if self.store.has(c.chunk_id):                       # finished by an earlier run: content-addressed
                run.done[c.index] = self.store.path_for(c.chunk_id)
            else:
                self.queue.append(Task(jid, c, PRIORITY_RANK[job.priority], run.seq))
        self._queue_metrics()
        if len(run.done) == len(chunks):
            self._finish(run)
        return jid

    def _plan(self, job, workflow: dict) -> list:
        from .plan import plan_chunks

        frames = int(farm_setting(job, "chunk_frames", self.chunk_frames))
        preroll = int(farm_setting(job, "preroll", self.preroll))
        # the frame range the workflow's Load Video reads (with the job's settings): only that is planned
        video = {**workflow[roles(workflow, job)["video"]]["inputs"],
                 **{k.split(".", 1)[1]: v for k, v in job.settings.items()
                    if k.startswith(roles(workflow, job)["video"] + ".")}}
        span = {k: int(video.get(k) or 0) for k in ("start", "count") if int(video.get(k) or 0)}
        chunks = plan_chunks(Path(job.clip), frames, preroll, **span)
        return [dataclasses.replace(c, job_id=job.job_id) for c in chunks]

    def status(self, job_id: str) -> dict | None:
        run = self.jobs.get(job_id)
        if run is None:
            return self.ledger.state(job_id)
        attempts = {t.chunk.index: t.attempts for t in self.queue if t.job_id == job_id and t.attempts}
        return {"job_id": job_id, "state": run.state, "priority": run.spec.priority, "chunks": len(run.chunks),
                "chunks_done": len(run.done), "worker_seconds": round(run.worker_seconds, 3), "error": run.error,
                "excluded_workers": sorted(w for w, n in run.failures.items() if n >= EXCLUDE_AFTER),
                "retrying": attempts, **(run.result or {})}

    def retry(self, job_id: str) -> int:
        """Re-inject a job's dead-lettered chunks (and a failed job's missing ones); how many were queued."""
        run = self.jobs.get(job_id)
        if run is None:
            prev = self.ledger.state(job_id)
            if not prev or "spec" not in prev:
                raise InputError(f"job {job_id} is not known to this farm (no 'submitted' line in the job ledger)")
            self.submit(spec_from_dict(prev["spec"]))
            run = self.jobs[job_id]
        queued = {t.chunk.index for t in self.queue if t.job_id == job_id}
        queued |= {t.chunk.index for t, *_ in self.inflight.values() if t.job_id == job_id}
        by_id = {c.chunk_id: c for c in run.chunks}
        count = 0
        for entry in self.dead_letters.pending(job_id):
            self.dead_letters.mark_retried(job_id, entry["chunk_id"])
        run.failures.clear()                          # a manual retry gives every worker another chance
        for c in by_id.values():
            if c.index not in run.done and c.index not in queued:
                self.queue.append(Task(job_id, c, PRIORITY_RANK[run.spec.priority], run.seq))
                count += 1
        if count or run.state in ("dead", "failed"):
            run.state, run.error = "queued", None
            self.ledger.record(job_id, "submitted", retried=count)     # the ledger's states: queued again
        self._queue_metrics()
        return count

    def cancel(self, job_id: str) -> bool:
        run = self.jobs.get(job_id)
        if run is None or run.state in ("done", "cancelled"):
            return False
        run.state = "cancelled"
        self.queue = [t for t in self.queue if t.job_id != job_id]
        if (self.ledger.state(job_id) or {}).get("state") != "cancelled":
            self.ledger.record(job_id, "cancelled")
        self._queue_metrics()
        return True

    # -- the loop ----------------------------------------------------------------------------
    def run_until_idle(self, timeout_s: float | None = None, poll_s: float = 0.2) -> dict:
        """Schedule until nothing is queued, running or finishing; {job id: state}."""
        end = None if timeout_s is None else time.time() + timeout_s
        while self.queue or self.inflight or self.finishing:
            if end is not None and time.time() > end:
                raise TimeoutError(f"farm not idle after {timeout_s}s: {len(self.queue)} queued, "
                                   f"{len(self.inflight)} running, {len(self.finishing)} finishing")
            if time.time() - self._last_health > self.health_interval_s:
                self._last_health = time.time()
                self.worker_health()
                self._sync_cancellations()
            self._dead_letter_unplaceable()
            self._dispatch()
            self._collect(poll_s)
            self._reap_finishing()
        return {jid: run.state for jid, run in self.jobs.items()}

    def _sync_cancellations(self) -> None:
        """`swapline-farm cancel` from another shell only appends to the ledger: honour it here."""
        live = {jid for jid, run in self.jobs.items() if run.state in ("queued", "running", "dead")}
        if live:
            for row in self.ledger.jobs():
                if row.get("job_id") in live and row.get("state") == "cancelled":
                    self.cancel(row["job_id"])

    def _eligible(self, run: JobRun, slot: Slot) -> bool:
        return slot.up and run.failures[slot.name] < EXCLUDE_AFTER

    def _pick(self, slot: Slot, now: float) -> Task | None:
        for task in sorted(self.queue, key=Task.order):
            run = self.jobs[task.job_id]
            if task.not_before > now or not self._eligible(run, slot):
                continue
            # a retried chunk goes to another worker where one could take it
            if task.last_worker == slot.name and any(
                    s is not slot and self._eligible(run, s) for s in self.slots):
                continue
            return task
        return None

    def _dispatch(self) -> None:
        now = time.time()
        for slot in sorted(self.slots, key=lambda s: s.in_flight):
            while slot.up and slot.in_flight < self.in_flight_per_worker:
                task = self._pick(slot, now)
                if task is None:
                    break
                self.queue.remove(task)
                self._launch(task, slot)
        self._queue_metrics()

    def _launch(self, task: Task, slot: Slot) -> None:
        run = self.jobs[task.job_id]
        try:
            prompt = build_chunk_prompt(run.workflow, run.spec, task.chunk)
        except InputError as exc:
            self._fail(run, exc, slot.name)
            return
        timeout = self._timeout(run, task.chunk)
        # the worker publishes into the (shared) store itself: its output file is on its machine
        ref = slot.handle.run_chunk.remote(prompt, timeout, run.files, (self.store, task.chunk.chunk_id))
        slot.in_flight += 1
        slot.peak = max(slot.peak, slot.in_flight)
        self.inflight[ref] = (task, slot, time.time(), timeout)
        self.dispatched.append({"job_id": task.job_id, "chunk": task.chunk.index, "worker": slot.name,
                                "attempt": len(task.attempts) + 1, "time": time.time()})
        if run.state in ("queued",):
            run.state, run.started_at = "running", time.time()
            self.ledger.record(task.job_id, "running")
        self._metric("chunk_started", slot.name)

    def _timeout(self, run: JobRun, chunk) -> float:
        """Per-job override, else factor x the median seconds per frame so far x the chunk's frames."""
        given = farm_setting(run.spec, "timeout_s")
        if given is not None:
            return float(given)
        if len(self.seconds_per_frame) < 3:
            return self.first_timeout_s
        spf = statistics.median(self.seconds_per_frame)
        return max(self.timeout_floor_s, self.timeout_factor * spf * (chunk.count + chunk.preroll))

    def _collect(self, poll_s: float) -> None:
        if not self.inflight:
            time.sleep(poll_s if self.queue else 0)
            return
        ready, _ = ray.wait(list(self.inflight), num_returns=len(self.inflight), timeout=poll_s)
        now = time.time()
        for ref in list(self.inflight):
            task, slot, started, timeout = self.inflight[ref]
            if ref not in ready:
                # the worker enforces the timeout itself; this catches a worker that stopped answering
                if now - started > timeout + 120:
                    del self.inflight[ref]
                    slot.in_flight -= 1
                    slot.handle.restart.remote()
                    self._transient(task, slot, ChunkTimeout(f"{slot.name} did not answer {now - started:.0f}s "
                                                             "after the chunk started; restarting it"))
                continue
            del self.inflight[ref]
            slot.in_flight -= 1
            try:
                result = ray.get(ref)
            except Exception as exc:
                self._failed(task, slot, _unwrap(exc))
            else:
                self._succeeded(task, slot, result)

    def _succeeded(self, task: Task, slot: Slot, result: dict) -> None:
        run = self.jobs[task.job_id]
        c = task.chunk
        frames = c.count + c.preroll
        self.seconds_per_frame.append(result["seconds"] / max(frames, 1))
        run.worker_seconds += result["seconds"]
        self._metric("chunk_finished", slot.name, result["seconds"], c.count, result.get("stage_seconds") or None)
        if run.state in ("cancelled", "failed"):
            return
        stored = (result.get("stored") or [self.store.publish(c.chunk_id, Path(result["outputs"][0]))])[0]
        run.done[c.index] = stored
        self.ledger.record(task.job_id, "chunk_done", chunk=c.index, chunk_id=c.chunk_id, worker=slot.name,
                           seconds=round(result["seconds"], 3), attempts=len(task.attempts) + 1)
        if len(run.done) == len(run.chunks) and run.state != "dead":
            self._finish(run)

    def _failed(self, task: Task, slot: Slot, exc: BaseException) -> None:
        run = self.jobs[task.job_id]
        if run.state in ("cancelled", "failed"):
            self._metric("chunk_failed", slot.name, error_class(exc), False)    # every started chunk ends once
            return
        if isinstance(exc, InputError):
            self._metric("chunk_failed", slot.name, error_class(exc), False)
            self._fail(run, exc, slot.name)
            return
        if not isinstance(exc, FarmError):
            exc = TransientError(f"{slot.name}: {type(exc).__name__}: {exc}")
        if not isinstance(exc, ChunkTimeout):
            slot.up = False                           # its ComfyUI or actor failed: no work until health says up
            self._last_health = 0.0
        self._transient(task, slot, exc)

    def _transient(self, task: Task, slot: Slot, exc: FarmError) -> None:
        run = self.jobs[task.job_id]
        task.attempts.append({"attempt": len(task.attempts) + 1, "worker": slot.name, "class": error_class(exc),
                              "error": str(exc)[:4000], "time": time.time()})
        run.failures[slot.name] += 1
        task.last_worker = slot.name
        if len(task.attempts) >= self.max_attempts:
            self._metric("chunk_failed", slot.name, error_class(exc), False)
            self._dead_letter(run, task, error_class(exc))
            return
        n = len(task.attempts)
        delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** (n - 1)) * random.uniform(0.5, 1.5)
        task.not_before = time.time() + delay
        self.queue.append(task)
        self._metric("chunk_failed", slot.name, error_class(exc), True)
        log.warning("chunk %s of job %s failed on %s (%s), retry %d in %.1fs", task.chunk.index, run.spec.job_id,
                    slot.name, exc, n + 1, delay)

    def _dead_letter(self, run: JobRun, task: Task, cls: str) -> None:
        self.dead_letters.append(run.spec.job_id, task.chunk.chunk_id, task.attempts)
        self._metric("dead_letter", cls)
        run.state = "dead"
        run.error = task.attempts[-1]["error"] if task.attempts else "no worker may run it"
        self.ledger.record(run.spec.job_id, "dead", chunk=task.chunk.index, chunk_id=task.chunk.chunk_id,
                           attempts=len(task.attempts), error=run.error)

    def _dead_letter_unplaceable(self) -> None:
        """A chunk no live worker may take any more (each failed its job twice) cannot wait forever."""
        if not any(s.up for s in self.slots):
            return
        for task in list(self.queue):
            run = self.jobs[task.job_id]
            if not any(self._eligible(run, s) for s in self.slots if s.up) and \
                    all(run.failures[s.name] >= EXCLUDE_AFTER for s in self.slots):
                self.queue.remove(task)
                task.attempts.append({"attempt": len(task.attempts) + 1, "worker": None, "class": "NoEligibleWorker",
                                      "error": "every worker failed this job twice", "time": time.time()})
                self._dead_letter(run, task, "NoEligibleWorker")

    def _fail(self, run: JobRun, exc: BaseException, worker: str | None) -> None:
        run.state, run.error = "failed", str(exc)
        self.queue = [t for t in self.queue if t.job_id != run.spec.job_id]
        details = getattr(exc, "details", {}) or {}
        self.ledger.record(run.spec.job_id, "failed", error=str(exc)[:4000], error_class=error_class(exc),
                           worker=worker, details={k: details.get(k) for k in
                                                   ("node_id", "node_type", "exception_type", "exception_message")})
        self._deliver(run, {"job_id": run.spec.job_id, "state": "failed", "error": str(exc)[:4000]})

    # -- finishing ---------------------------------------------------------------------------
    def _finish(self, run: JobRun) -> None:
        run.state = "finishing"
        self.finishing[self._pool.submit(self._finalize, run)] = run.spec.job_id

    def _finalize(self, run: JobRun) -> dict:
        from .finalize import finalize_job
        from .stitch import stitch

        jid = run.spec.job_id
        folder = self.work_dir / "stitch"
        folder.mkdir(parents=True, exist_ok=True)
        stitched = folder / f"{jid}.mp4"
        info = stitch([Path(run.done[i]) for i in range(len(run.chunks))], Path(run.spec.clip), stitched,
                      start_frame=run.chunks[0].start, expected_frames=sum(c.count for c in run.chunks))
        extra = {} if self.qa is None else {"qa": self.qa}          # e.g. {"enabled": False}: no whole-clip QA
        result = finalize_job(run.spec, stitched, self.out_dir / jid, self.signing, **extra)
        return {**result, "stitch": info}

    def _reap_finishing(self) -> None:
        for fut in [f for f in self.finishing if f.done()]:
            run = self.jobs[self.finishing.pop(fut)]
            try:
                result = fut.result()
            except Exception as exc:
                self._fail(run, exc, None)
                continue
            run.state, run.result = "done", result
            qa = result.get("qa") or {}
            decision = result.get("qa_decision") or qa.get("decision")
            self.ledger.record(run.spec.job_id, "done", output=str(result.get("output")),
                               signed=result.get("signed"), qa_decision=decision,
                               worker_seconds=round(run.worker_seconds, 3))
            self._metric("job_finished", run.spec.job_id, decision or "none",
                         list(result.get("identity_scores") or qa.get("identity_scores") or []), run.worker_seconds)
            self._deliver(run, {"job_id": run.spec.job_id, "state": "done", "output": str(result.get("output")),
                                "signed": result.get("signed"), "qa_decision": decision})

    def _deliver(self, run: JobRun, payload: dict) -> None:
        spec = run.spec
        if not (spec.webhook or (spec.destination and payload.get("state") == "done")):
            return
        from . import delivery

        try:
            if spec.destination and payload.get("output"):
                payload["delivered"] = [str(p) for p in delivery.copy_outputs([Path(payload["output"])],
                                                                              Path(spec.destination))]
            if spec.webhook:
                payload["webhook"] = delivery.deliver_webhook(spec.webhook, payload, self.webhook_secret)
            info = {k: payload.get(k) for k in ("delivered", "webhook")}
        except Exception as exc:  # the job's output stands; a failed delivery is recorded, not fatal
            info = {"delivery_error": f"{type(exc).__name__}: {exc}"}
        self.ledger.record(spec.job_id, payload["state"], **info)

    # -- metrics -----------------------------------------------------------------------------
    def _metric(self, name: str, *args) -> None:
        if self.metrics is not None:
            getattr(self.metrics, name)(*args)

    def _queue_metrics(self) -> None:
        if self.metrics is None:
            return
        depth = Counter(t.rank for t in self.queue)
        for prio, rank in PRIORITY_RANK.items():
            self.metrics.queue_depth(prio, depth[rank])


def _unwrap(exc: BaseException) -> BaseException:
    """Ray wraps an actor's exception in RayTaskError; the farm decides on the original."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc
