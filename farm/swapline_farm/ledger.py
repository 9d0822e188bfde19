"""Append-only ledgers (farm-exec's minimal version; the lead takes farm-data's on merge)."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

_LOCK = threading.Lock()


class _Jsonl:
    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _append(self, row: dict) -> None:
        with _LOCK, open(self.path, "a") as f:
            f.write(json.dumps({"time": time.time(), **row}, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _rows(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]


class DeadLetterLedger(_Jsonl):
    def append(self, job_id, chunk_id, attempts: list[dict]) -> None:
        self._append({"kind": "dead", "job_id": job_id, "chunk_id": chunk_id, "attempts": attempts})

    def entries(self) -> list[dict]:
        return self._rows()

    def pending(self, job_id=None) -> list[dict]:
        open_ = {}
        for r in self._rows():
            k = (r["job_id"], r["chunk_id"])
            if r["kind"] == "dead":
                open_[k] = r
            else:
                open_.pop(k, None)
        return [r for (j, _), r in open_.items() if job_id is None or j == job_id]

    def mark_retried(self, job_id, chunk_id) -> None:
        self._append({"kind": "retried", "job_id": job_id, "chunk_id": chunk_id})


class JobLedger(_Jsonl):
    def record(self, job_id, state, **info) -> None:
        self._append({"job_id": job_id, "state": state, **info})

    def state(self, job_id) -> dict | None:
        cur = None
        for r in self._rows():
            if r["job_id"] == job_id:
                cur = {**(cur or {}), **r}
        return cur

    def jobs(self) -> list[dict]:
        cur: dict[str, dict] = {}
        for r in self._rows():
            cur[r["job_id"]] = {**cur.get(r["job_id"], {}), **r}
        return list(cur.values())
