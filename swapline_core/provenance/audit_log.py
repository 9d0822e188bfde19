"""Append-only JSONL audit log: one line per job in ``<output_dir>/swapline_audit.jsonl``.

Durability rules, and why:
- Each record is one ``os.write`` of the whole line on an ``O_APPEND`` descriptor, so the
  kernel places it at the current end of file even with several writers, and nothing already
  in the file is ever touched or rewritten.
- ``os.fsync`` after every line: a job's record must survive a crash right after the job.
  (``os.write`` has no user-space buffer, so there is nothing to flush before the fsync.)
- A writer killed mid-write (or a power cut) can leave a torn last line. The reader skips it
  and reports it; the next append starts with a newline so the fragment never swallows a
  complete record.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SwaplineError

AUDIT_FILENAME = "swapline_audit.jsonl"
SCHEMA = "swapline.audit/1"
_OPEN_FLAGS = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_BINARY", 0))


class AuditLogError(SwaplineError):
    pass


def audit_log_path(output_dir: str | os.PathLike) -> Path:
    return Path(output_dir) / AUDIT_FILENAME


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def make_record(*, job_id: str, input_sha256: str | None, output_sha256: str | None,
                models: list[dict], settings: dict, qa_decision: str | None,
                signer_fingerprint: str | None, time_utc: str | None = None,
                **extra) -> dict:
    """The fields every job line carries; ``extra`` adds paths, signer kind, errors..."""
    record = {"schema": SCHEMA, "job_id": job_id, "time_utc": time_utc or utc_now(),
              "input_sha256": input_sha256, "output_sha256": output_sha256,
              # licence + commercial flag travel with each model where the catalog knows them
              "models": [{"name": m.get("name"), "sha256": m.get("sha256"),
                          **{k: m[k] for k in ("licence", "commercial") if m.get(k) is not None}}
                         for m in models],
              "settings": settings, "qa_decision": qa_decision,
              "signer_fingerprint_sha256": signer_fingerprint}
    record.update(extra)
    return record


def append_job(output_dir: str | os.PathLike, **fields) -> Path:
    """``make_record(**fields)`` appended to the output folder's audit log."""
    path = audit_log_path(output_dir)
    append_record(path, make_record(**fields))
    return path


def append_record(path: str | os.PathLike, record: dict) -> None:
    """Append one record as one line; raises AuditLogError if it could not be stored whole."""
    line = (json.dumps(_clean(record), ensure_ascii=True, separators=(",", ":"),
                       allow_nan=False) + "\n").encode("ascii")
    fd = os.open(path, _OPEN_FLAGS, 0o644)
    try:
        if _ends_without_newline(path, fd):
            line = b"\n" + line
        written = os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    if written != len(line):
        # Finishing the line with a second write could interleave with another writer; a short
        # fragment is instead left for the reader to skip, and the next append starts afresh.
        raise AuditLogError(f"audit log '{path}': only {written} of {len(line)} bytes were "
                            "written (disk full?); the record was not stored")


@dataclass
class AuditLogContents:
    records: list[dict] = field(default_factory=list)
    torn_tail: bytes | None = None        # unterminated, unparseable last fragment
    bad_lines: list[int] = field(default_factory=list)   # 1-based numbers of unparseable lines

    @property
    def torn(self) -> bool:
        return self.torn_tail is not None

    def problems(self) -> list[str]:
        out = [f"line {n} is not a complete JSON record (an earlier interrupted write)"
               for n in self.bad_lines]
        if self.torn_tail is not None:
            out.append(f"the last line is torn ({len(self.torn_tail)} bytes, no newline); "
                       "it was skipped")
        return out


def read_audit_log(path: str | os.PathLike) -> AuditLogContents:
    """Every complete record; torn or damaged lines are skipped and reported, never fatal."""
    result = AuditLogContents()
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return result
    lines = data.split(b"\n")
    tail = lines.pop()                      # b"" when the file ends with a newline
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        record = _parse(raw)
        if record is None:
            result.bad_lines.append(number)
        else:
            result.records.append(record)
    if tail.strip():
        # An object only parses once its closing brace is there, so a fragment that parses is
        # a whole record that merely lost its newline.
        record = _parse(tail)
        if record is None:
            result.torn_tail = tail
        else:
            result.records.append(record)
    return result


def _parse(raw: bytes) -> dict | None:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _ends_without_newline(path, fd: int) -> bool:
    if os.fstat(fd).st_size == 0:
        return False
    # The append descriptor is write-only, so peek at the last byte through a second one.
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def _clean(value):
    """Plain JSON: numpy scalars/arrays unwrapped, NaN/inf (not JSON) spelled as strings."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if hasattr(value, "tolist"):
        return _clean(value.tolist())
    if hasattr(value, "item"):
        return _clean(value.item())
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


TOMBSTONE = "tombstone"


def append_tombstone(output_dir: str | os.PathLike, *, job_id: str, deleted: dict, requested_by: str,
                     request_id: str | None, reason: str, **extra) -> Path:
    """Record that a job's files were deleted: a new line, the job's earlier lines stay as they
    are (the log is append-only; it names hashes and file names, never pixels)."""
    path = audit_log_path(output_dir)
    append_record(path, {"schema": SCHEMA, "kind": TOMBSTONE, "job_id": job_id, "time_utc": utc_now(),
                         "requested_by": requested_by, "request_id": request_id, "reason": reason,
                         "deleted": deleted, **extra})
    return path


def job_records(output_dir: str | os.PathLike, job_id: str | None = None) -> list[dict]:
    """Every complete record of the output folder's log (only ``job_id``'s when given)."""
    records = read_audit_log(audit_log_path(output_dir)).records
    return [r for r in records if job_id is None or r.get("job_id") == job_id]
