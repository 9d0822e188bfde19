"""Audit log: one parseable line per job, append-only, survives a writer killed mid-write."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from swapline_core.provenance import audit_log as al  # noqa: E402
from swapline_core.provenance.hashing import sha256_file  # noqa: E402


def job(i: int, **extra) -> dict:
    return dict(job_id=f"job-{i}", input_sha256="a" * 64, output_sha256="b" * 64,
                models=[{"name": "inswapper_128.onnx", "sha256": "c" * 64}],
                settings={"blend": 0.8, "frames": i}, qa_decision="pass",
                signer_fingerprint="d" * 64, **extra)


def test_append_lines_each_parseable_and_prefix_kept(tmp_path):
    path = al.audit_log_path(tmp_path)
    snapshots = []
    for i in range(5):
        assert al.append_job(tmp_path, **job(i)) == path
        snapshots.append(path.read_bytes())
    data = path.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 5
    for snap in snapshots:
        assert data.startswith(snap)                      # nothing earlier was rewritten
    for line in data.splitlines():
        json.loads(line)
    log = al.read_audit_log(path)
    assert [r["job_id"] for r in log.records] == [f"job-{i}" for i in range(5)]
    assert not log.torn and log.bad_lines == [] and log.problems() == []
    rec = log.records[0]
    assert rec["schema"] == al.SCHEMA and rec["time_utc"].endswith("Z")
    assert rec["models"][0]["sha256"] == "c" * 64 and rec["signer_fingerprint_sha256"] == "d" * 64


def test_values_are_plain_json(tmp_path):
    path = tmp_path / "log.jsonl"
    al.append_record(path, al.make_record(**job(0, score=np.float32(0.5), nan=float("nan"),
                                                box=np.arange(3), where=tmp_path)))
    rec = al.read_audit_log(path).records[0]
    assert rec["score"] == 0.5 and rec["nan"] == "nan" and rec["box"] == [0, 1, 2]
    assert rec["where"] == str(tmp_path)
    assert b"NaN" not in path.read_bytes()


def test_torn_tail_is_reported_and_next_append_starts_clean(tmp_path):
    path = tmp_path / "log.jsonl"
    al.append_record(path, al.make_record(**job(0)))
    with open(path, "ab") as f:                           # a write cut short by a crash
        f.write(b'{"job_id":"job-1","input_sha')
    torn = path.read_bytes()
    log = al.read_audit_log(path)
    assert [r["job_id"] for r in log.records] == ["job-0"]
    assert log.torn and log.torn_tail.startswith(b'{"job_id":"job-1"')
    assert "torn" in log.problems()[0]

    al.append_record(path, al.make_record(**job(2)))
    assert path.read_bytes().startswith(torn)
    log = al.read_audit_log(path)
    assert [r["job_id"] for r in log.records] == ["job-0", "job-2"]
    assert log.bad_lines == [2] and not log.torn          # the fragment stays, now mid-file


def test_missing_log_reads_empty(tmp_path):
    log = al.read_audit_log(tmp_path / "none.jsonl")
    assert log.records == [] and not log.torn


CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from swapline_core.provenance import audit_log as al
path, pad = sys.argv[2], "x" * int(sys.argv[3])
i = 0
while True:
    al.append_record(path, al.make_record(job_id=f"job-{i}", input_sha256=None,
        output_sha256=None, models=[], settings={"pad": pad}, qa_decision="pass",
        signer_fingerprint=None))
    i += 1
"""


def _complete_prefix(path: Path) -> bytes:
    data = path.read_bytes()
    return data[:data.rfind(b"\n") + 1]


@pytest.mark.parametrize("pad", [200, 2_000_000])
def test_writer_killed_mid_write(tmp_path, pad):
    """SIGKILL a writer in its append loop; big lines make a kill inside write() likely."""
    path = tmp_path / "swapline_audit.jsonl"
    previous = b""
    for round_ in range(3):
        lines_before = previous.count(b"\n")
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(REPO), str(path), str(pad)])
        try:
            deadline = time.monotonic() + 30
            while not path.exists() or path.read_bytes().count(b"\n") < lines_before + 3:
                assert child.poll() is None, "writer exited early"
                assert time.monotonic() < deadline, "writer made no progress"
                time.sleep(0.01)
            snapshot = _complete_prefix(path)               # complete lines so far
            time.sleep(0.02 + 0.03 * round_)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        assert child.returncode == -signal.SIGKILL

        data = path.read_bytes()
        assert data.startswith(snapshot) and data.startswith(previous)
        log = al.read_audit_log(path)
        # Earlier rounds may have left one torn fragment each (now mid-file, reported as bad
        # lines); within this round only the very last line may be torn.
        assert len(log.bad_lines) <= round_
        assert len(log.records) >= snapshot.count(b"\n") - round_
        if log.torn:
            assert not data.endswith(b"\n") and log.problems()[-1].startswith("the last line")
        assert all(r["settings"]["pad"] == "x" * pad for r in log.records)
        if round_ == 0:
            ids = [r["job_id"] for r in log.records]
            assert ids == [f"job-{i}" for i in range(len(ids))]
        print(f"pad={pad} round={round_}: {len(log.records)} records, torn={log.torn}, "
              f"bad_lines={log.bad_lines}")
        previous = data

    # The log stays usable: a fresh append is a complete record at the end.
    digest = sha256_file(path)
    al.append_record(path, al.make_record(**job(99)))
    assert path.read_bytes().startswith(previous)
    log = al.read_audit_log(path)
    assert log.records[-1]["job_id"] == "job-99" and not log.torn
    assert sha256_file(path) != digest
