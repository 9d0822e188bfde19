"""Append-only JSONL ledgers: job state transitions and dead letters.

Nothing in a ledger is ever rewritten: a state change, a dead letter and its re-injection are
each a new line, so the file is the history and survives any crash. Writing reuses the audit
log's rules (``swapline_core.provenance.audit_log.append_record``): each line is one
``os.write`` on an ``O_APPEND`` descriptor (the kernel places it at the end even with several
writer processes) followed by fsync, and a torn last line from a killed writer is skipped on
read and never swallows the next record. A process-wide lock per file additionally serialises
threads of one process (the coordinator's), so the "does the file end in a newline" check and
the write happen together.

Reading is incremental: each ledger remembers how far it has parsed and only reads what was
appended since (also by other processes), so ``state()`` stays cheap on long-running farms.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from swapline_core.provenance.audit_log import append_record, utc_now

JOB_STATES = ("submitted", "running", "chunk_done", "done", "failed", "dead", "cancelled")
FINAL_STATES = frozenset({"done", "failed", "dead", "cancelled"})

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    # One lock per file for the whole process: two ledger objects on one file must not interleave.
    with _locks_guard:
        return _locks.setdefault(str(path), threading.Lock())


class _JsonlLog:
    def __init__(self, path):
        self.path = Path(os.path.abspath(path))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_for(self.path)
        self._read_lock = threading.Lock()
        self._offset = 0
        self._records: list[dict] = []
        self.bad_lines = 0                  # unparseable lines skipped (torn writes)

    def _append(self, record: dict) -> None:
        with self._lock:
            append_record(self.path, record)

    def _refresh(self) -> list[dict]:
        """All records so far, reading only the bytes appended since the last call."""
        with self._read_lock:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self._offset)
                    data = f.read()
            except FileNotFoundError:
                return list(self._records)
            end = data.rfind(b"\n")
            if end < 0:
                return list(self._records)      # nothing complete yet (or a torn tail)
            for raw in data[:end].split(b"\n"):
                if not raw.strip():
                    continue
                try:
                    rec = json.loads(raw)
                except ValueError:
                    self.bad_lines += 1
                    continue
                if isinstance(rec, dict):
                    self._records.append(rec)
                    self._on_record(rec)
            self._offset += end + 1
            return list(self._records)

    def _on_record(self, rec: dict) -> None:
        pass

    def records(self) -> list[dict]:
        """Every line, in file order."""
        return self._refresh()


class DeadLetterLedger(_JsonlLog):
    """Chunks (or whole jobs, ``chunk_id=None``) that failed every attempt, with each attempt's error.

    A dead letter is *pending* until a ``retried`` line for the same (job, chunk) follows it; a
    chunk that dies again after a retry gets a new dead line and is pending again.
    """

    def append(self, job_id, chunk_id, attempts: list[dict]) -> None:
        if not attempts:
            raise ValueError("a dead letter records every attempt's error; got no attempts")
        self._append({"kind": "dead", "job_id": str(job_id), "chunk_id": chunk_id,
                      "time_utc": utc_now(), "attempts": [dict(a) for a in attempts]})

    def entries(self) -> list[dict]:
        """Every dead letter ever written (retried or not), oldest first."""
        return [r for r in self._refresh() if r.get("kind") == "dead"]

    def pending(self, job_id=None) -> list[dict]:
        """Dead letters not yet re-injected (optionally of one job), oldest first."""
        open_: dict[tuple, dict] = {}
        for r in self._refresh():
            k = (r.get("job_id"), r.get("chunk_id"))
            if r.get("kind") == "dead":
                open_[k] = r
            elif r.get("kind") == "retried":
                open_.pop(k, None)
        out = list(open_.values())
        return [r for r in out if job_id is None or r["job_id"] == str(job_id)]

    def mark_retried(self, job_id, chunk_id) -> None:
        """Record that a dead letter was re-injected; appends a line, never rewrites."""
        if not any(r["chunk_id"] == chunk_id for r in self.pending(job_id)):
            raise KeyError(f"no pending dead letter for job {job_id} chunk {chunk_id} in {self.path}")
        self._append({"kind": "retried", "job_id": str(job_id), "chunk_id": chunk_id, "time_utc": utc_now()})


class JobLedger(_JsonlLog):
    """Job state transitions: submitted, running, chunk_done, done, failed, dead, cancelled.

    ``state(job_id)`` folds a job's lines into one dict: the latest ``state`` (``chunk_done``
    lines do not change it, they add to ``chunks_done``), the info of every line merged (later
    wins), ``history`` of (state, time) without the chunk lines, and ``updated``.
    """

    def __init__(self, path):
        self._jobs: dict[str, dict] = {}
        super().__init__(path)

    def record(self, job_id, state, **info) -> None:
        if state not in JOB_STATES:
            raise ValueError(f"unknown job state {state!r}; one of {', '.join(JOB_STATES)}")
        reserved = {"job_id", "state", "time_utc"} & set(info)
        if reserved:
            raise ValueError(f"{sorted(reserved)} are set by the ledger")
        self._append({"job_id": str(job_id), "state": state, "time_utc": utc_now(), **info})

    def _on_record(self, rec: dict) -> None:
        jid, state = rec.get("job_id"), rec.get("state")
        if jid is None or state not in JOB_STATES:
            return
        cur = self._jobs.setdefault(jid, {"job_id": jid, "state": None, "chunks_done": [], "history": []})
        info = {k: v for k, v in rec.items() if k not in ("job_id", "state", "time_utc")}
        if state == "chunk_done":
            cid = info.pop("chunk_id", None)
            if cid is not None and cid not in cur["chunks_done"]:
                cur["chunks_done"].append(cid)
            cur["state"] = cur["state"] or "running"
        else:
            cur["state"] = state
            cur["history"].append({"state": state, "time_utc": rec.get("time_utc")})
        for k, v in info.items():
            if k not in ("chunks_done", "history", "updated"):
                cur[k] = v
        cur["updated"] = rec.get("time_utc")

    def state(self, job_id) -> dict | None:
        self._refresh()
        cur = self._jobs.get(str(job_id))
        return None if cur is None else json.loads(json.dumps(cur))     # a copy the caller may change

    def jobs(self) -> list[dict]:
        """Every job's folded state, in order of first appearance."""
        self._refresh()
        return [json.loads(json.dumps(v)) for v in self._jobs.values()]
