"""finalize_job: QA on the whole stitched clip (seams included), one signature, one audit line."""
from __future__ import annotations

import json
from pathlib import Path

import c2pa  # noqa: F401  (a hard requirement: missing c2pa fails, never skips)
import pytest
from swapline_farm.finalize import FinalizeError, finalize_job, qa_options  # noqa: E402
from swapline_farm.jobs import load_manifest  # noqa: E402
from swapline_farm.stitch import stitch  # noqa: E402

from swapline_core.provenance import signing  # noqa: E402
from swapline_core.provenance.audit_log import audit_log_path, read_audit_log  # noqa: E402
from swapline_core.provenance.c2pa import verify_media  # noqa: E402
from swapline_core.provenance.hashing import sha256_file  # noqa: E402
from swapline_core.video import read as video_read  # noqa: E402
from swapline_core.video.write import VideoWriter  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CLIP = REPO / "assets" / "samples" / "kling_avatar_clip.mp4"
FACE = REPO / "assets" / "samples" / "source_face.png"
FRAMES, SEAM = 16, 8


def stitched_clip(folder: Path, count: int) -> Path:
    """The job's frames 0..count-1 as two worker chunks, stitched (audio from the original)."""
    folder.mkdir(parents=True, exist_ok=True)
    chunks = []
    for i, (start, n) in enumerate([(0, SEAM), (SEAM, count - SEAM)]):
        path = folder / f"chunk_{i}.mp4"
        with VideoWriter(path, 15, crf=18, preset="veryfast") as w:
            for _, frame in video_read.iter_frames(CLIP, start, n):
                w.write(frame)
        chunks.append(path)
    out = folder / "stitched.mp4"
    stitch(chunks, CLIP, out, expected_frames=count)
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("finalize")
    (d / "m.yaml").write_text(f"jobs:\n  - clip: {CLIP}\n    faces: [{FACE}]\n    workflow: video_swap_builtin\n"
                              f"    settings: {{\"1.count\": {FRAMES}}}\n")
    job = load_manifest(d / "m.yaml")[0]
    return d, job, stitched_clip(d / "work", FRAMES)


@pytest.fixture(scope="module")
def signed(setup):
    d, job, stitched = setup
    out = d / "delivered"
    result = finalize_job(job, stitched, out, {"user_dir": str(d / "user"), "attestation": "test consent"})
    return d, job, stitched, out, result


def audit_lines(out: Path, job_id: str) -> list[dict]:
    return [r for r in read_audit_log(audit_log_path(out)).records if r["job_id"] == job_id]


def test_qa_covers_the_whole_clip_and_its_seam(signed):
    _, job, _, _, result = signed
    report = result["qa"]
    assert [r["frame"] for r in report["frames"]] == list(range(FRAMES))
    assert report["scope"]["clip"] == "whole stitched clip, seams included"
    # the seam's first frame is compared with the last frame of the previous chunk (flicker)
    seam = report["frames"][SEAM]
    assert seam["status"] != "skipped" and seam["faces"] and seam["faces"][0]["flicker_ratio"] is not None
    # nothing was swapped in this stitched clip (it re-encodes the original), and QA says so
    assert result["qa_decision"] == "fail" and "no face swapped" in report["summary"]["decision_reasons"]
    assert json.loads(Path(result["qa_report"]).read_text())["decision"] == "fail"


def test_output_carries_a_manifest_that_reads_back(signed):
    d, job, stitched, out, result = signed
    creds = signing.load_signing_credentials(d / "user")
    assert result["signed"] and result["signer_kind"] == "development" and result["validation_state"] == "Trusted"
    check = verify_media(result["output"], creds.trust_anchors_pem)
    assert check.state == "Trusted", check.failure_codes
    assert check.qa["qa"]["decision"] == "fail" and check.qa["attestation"] == "test consent"
    assert {i["relationship"] for i in check.ingredients} >= {"parentOf"}
    assert any(a.get("digitalSourceType", "").endswith("compositeWithTrainedAlgorithmicMedia")
               for a in check.actions)
    assert video_read.probe(result["output"]).frame_count == FRAMES


def test_exactly_one_audit_line_per_job(signed):
    d, job, stitched, out, result = signed
    lines = audit_lines(out, job.job_id)
    assert len(lines) == 1
    line = lines[0]
    assert line["signed"] and line["qa_decision"] == "fail" and line["farm"] is True
    assert line["output_sha256"] == sha256_file(result["output"]) == result["output_sha256"]
    assert line["target_sha256"] == sha256_file(CLIP) and line["settings"]["1.count"] == FRAMES
    # finalizing again (a coordinator restarted after the fact) neither signs nor logs again
    before = Path(result["output"]).stat().st_mtime_ns
    again = finalize_job(job, stitched, out, {"user_dir": str(d / "user")})
    assert again["already_final"] and again["signed"] and again["output"] == result["output"]
    assert Path(result["output"]).stat().st_mtime_ns == before
    assert len(audit_lines(out, job.job_id)) == 1


def test_changed_frame_count_is_refused(setup, tmp_path):
    d, job, _ = setup
    short = stitched_clip(tmp_path / "short", 12)
    with pytest.raises(FinalizeError, match="has 12 frames but the job's range .* has 16"):
        finalize_job(job, short, tmp_path / "out", {"user_dir": str(d / "user")})
    assert audit_lines(tmp_path / "out", job.job_id) == []


def test_fail_job_refuses_to_sign(setup, tmp_path):
    d, job, stitched = setup
    with pytest.raises(FinalizeError, match="QA of the stitched clip failed"):
        finalize_job(job, stitched, tmp_path / "out", {"user_dir": str(d / "user")},
                     qa={"fail_job": True, "sample_every": 4})
    assert audit_lines(tmp_path / "out", job.job_id) == [] and not list((tmp_path / "out").glob("*.mp4"))


def test_unsigned_without_signing_config(setup, tmp_path):
    d, job, stitched = setup
    res = finalize_job(job, stitched, tmp_path / "out", None, qa={"enabled": False})
    assert not res["signed"] and res["qa_decision"] == "skipped"
    assert verify_media(res["output"]).state == "NoManifest"
    (line,) = audit_lines(tmp_path / "out", job.job_id)
    assert line["signed"] is False and line["signing_error"] == "no signing configured"


def test_qa_options_follow_the_workflow(setup):
    _, job, _ = setup
    opts = qa_options(job, job.load_workflow(), {"sample_every": 3, "limits": {"min_identity": 0.5}})
    # Track Faces of video_swap_builtin: identity mode (falls back to largest without a reference)
    assert opts["track"]["mode"] == "identity" and opts["track"]["max_faces"] == 1
    assert opts["sample_every"] == 3 and opts["limits"] == {"min_identity": 0.5}
    assert opts["require_redetection"] is True and opts["allow_no_face"] is False
    with pytest.raises(ValueError, match="unknown option 'sample_evry'"):
        qa_options(job, job.load_workflow(), {"sample_evry": 2})


def test_qa_limits_from_the_workflow_gate_and_its_overrides_node(setup):
    """Limits reach the farm's QA from a QA Limit Overrides node linked to the gate, and from the
    gate's own inputs in a prompt written before that node; -1 (the limit set's) is not a limit."""
    _, job, _ = setup
    wf = job.load_workflow()
    gate = next(k for k, v in wf.items() if v["class_type"] == "SwaplineQAGate")
    wf["90"] = {"class_type": "SwaplineQALimitOverrides", "inputs": {"max_seam_ratio": 2.0, "max_bleed": -1.0}}
    wf[gate]["inputs"]["limits"] = ["90", 0]
    assert qa_options(job, wf, None)["limits"] == {"max_seam_ratio": 2.0}
    del wf[gate]["inputs"]["limits"]
    wf[gate]["inputs"]["min_identity"] = 0.4
    assert qa_options(job, wf, None)["limits"] == {"min_identity": 0.4}


def test_bad_signing_config_fails_before_qa(setup, tmp_path):
    _, job, stitched = setup
    with pytest.raises(signing.SigningConfigError, match="missing.json"):
        finalize_job(job, stitched, tmp_path / "out", {"config": str(tmp_path / "missing.json")})
    with pytest.raises(ValueError, match="unknown field 'key'"):
        finalize_job(job, stitched, tmp_path / "out", {"key": "secret.pem"})
    assert audit_lines(tmp_path / "out", job.job_id) == []
