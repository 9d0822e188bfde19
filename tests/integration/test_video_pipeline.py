"""The batch video pipeline through a real ComfyUI: shipped workflow, frame counts, audio, resume."""
from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from devtools.comfy_harness import ComfyServer
from devtools.media import SAMPLES

REPO = Path(__file__).resolve().parents[2]
CLIP = SAMPLES / "kling_avatar_clip.mp4"


def load_api(name: str) -> dict:
    return json.loads((REPO / "workflows" / "api" / f"{name}.json").read_text())


def stage_inputs(server: ComfyServer, clip: Path = CLIP) -> None:
    inp = server.base_dir / "input"
    shutil.copy(clip, inp / "swapline_sample_clip.mp4")
    shutil.copy(SAMPLES / "source_face.png", inp / "swapline_source_face.png")
    shutil.copy(SAMPLES / "target_reference.png", inp / "swapline_target_reference.png")


def saved_video(server: ComfyServer, hist: dict) -> Path:
    for data in hist["outputs"].values():
        if "swapline_video" in data or "swapline_signing" in data:
            return server.output_path(data["images"][0])
    raise AssertionError(f"no video in outputs: {list(hist['outputs'])}")


def qa_report(server: ComfyServer, hist: dict) -> dict:
    qa = next(d["swapline_qa"][0] for d in hist["outputs"].values() if "swapline_qa" in d)
    return json.loads((server.base_dir / "output" / qa["report_file"]).read_text())


def decode(path: Path) -> list[np.ndarray]:
    from swapline_core.video.read import iter_frames

    return [f for _, f in iter_frames(path)]


def test_builtin_video_swap_workflow(comfy):
    from swapline_core.video.read import probe

    stage_inputs(comfy)
    hist = comfy.run(load_api("video_swap_builtin"))
    out = saved_video(comfy, hist)
    src, res = probe(CLIP), probe(out)
    assert res.frame_count == src.frame_count
    assert abs(res.fps - src.fps) < 1e-3
    assert res.has_audio == src.has_audio
    if src.has_audio:
        assert abs(res.audio_duration - src.audio_duration) < 0.15
    track = next(d["swapline_track"][0] for d in hist["outputs"].values() if "swapline_track" in d)
    # cross-frame reuse: the detector ran on a fraction of the frames
    assert track["tracker"]["detector_frames"] < 0.5 * src.frame_count, track
    assert track["frames_with_face"] >= 0.9 * src.frame_count, track
    a, b = decode(CLIP), decode(out)
    diffs = [np.abs(x.astype(int) - y).mean() for x, y in zip(a, b)]
    # guards: refused faces are counted by reason category, with the frames they were on
    swap = next(d["swapline_swap"][0] for d in hist["outputs"].values() if "swapline_swap" in d)
    assert isinstance(swap["skipped"], dict) and set(swap["skipped"]) == set(swap["skipped_frames"]), swap
    assert sum(swap["skipped"].values()) < 0.1 * src.frame_count, swap      # a frontal talking clip

    # QA gate: a report per frame, written next to the outputs. The shipped default decides per
    # shot: a shot with more than a fifth of its frames failing gets its original back, the failing
    # frames a shot ships are listed with why.
    qa = next(d["swapline_qa"][0] for d in hist["outputs"].values() if "swapline_qa" in d)
    report = json.loads((comfy.base_dir / "output" / qa["report_file"]).read_text())
    assert len(report["frames"]) == src.frame_count and report["policy"] == "keep original unless few fail"
    assert "qa" in Path(qa["report_file"]).name
    reverted = set(report["reverted_frames"])
    # one decision per shot: the frames of kept segments go back, failures just past a limit
    # inside a swapped segment are bridged, a shot's few failing frames ship listed, nothing else
    bridged = {i for seg in report["segments"] for i in seg.get("bridged_frames", [])}
    kept_spans = {i for seg in report["segments"] if seg["decision"] == "kept original"
                  for i in range(seg["first"], seg["last"] + 1)}
    assert reverted == kept_spans and not reverted & bridged
    shipped = {f["frame"] for f in report["shipped_failing"]}
    assert shipped <= {i for seg in report["segments"] for i in seg.get("shipped_failing_frames", [])} | bridged
    assert set(report["summary"]["failing_frames"]) <= reverted | bridged | shipped
    # a reverted frame is the original re-encoded: codec noise only (~1.7 grey levels on this clip)
    assert all(diffs[i] < 2.5 for i in reverted), "a failing frame was shipped"
    kept = [d for i, d in enumerate(diffs) if i not in reverted]
    assert not kept or np.median(kept) > 1.0, "the passing frames do not look swapped"

    # C2PA: signed, read back intact, both ingredients and the QA assertion present
    from swapline_core.provenance.c2pa import verify_media

    signing = next(d["swapline_signing"][0] for d in hist["outputs"].values() if "swapline_signing" in d)
    assert signing["status"] == "dev certificate" and signing["results"][0]["signed"], signing
    check = verify_media(out)
    assert check.state == "Valid" and "signingCredential.untrusted" in check.failure_codes
    assert {i["relationship"] for i in check.ingredients} == {"parentOf", "componentOf"}
    assert check.qa
    # ... and it states the dense mesh warp (no trained swap model), with every model that ran (the
    # built-in mesh analyzer's BlazeFace, mesh and iris files, dlib's CC0 embedding) by sha256 and
    # licence, none of them restricted to non-commercial use
    from swapline_core.provenance.method import SYNTHETIC_COMPOSITE

    edits = [a for a in check.actions if a["action"] == "c2pa.edited"]
    assert [e["digitalSourceType"] for e in edits] == [SYNTHETIC_COMPOSITE], edits
    assert "trained face-swap model" not in edits[0]["description"]
    stages = {s["stage"]: s for s in check.qa["method"]["stages"]}
    assert stages["swap"]["method"].startswith("dense mesh texture warp")
    assert "face_landmark.tflite" in {m["name"] for m in stages["swap"]["models"]}, stages["swap"]
    names = {m["name"] for m in stages["analysis"]["models"]}
    assert {"face_detection_short_range.tflite", "face_landmark.tflite"} <= names, names
    assert all(len(m["sha256"]) == 64 and m["licence"] for m in check.qa["models"]), check.qa["models"]
    from swapline_core.backends.catalog import licence_of

    assert all(licence_of(m["name"])["commercial"] == "yes" for m in check.qa["models"]), check.qa["models"]

    # audit log: one parseable line for this job with the output's hash
    from swapline_core.provenance.audit_log import read_audit_log
    from swapline_core.provenance.hashing import sha256_file

    log = read_audit_log(comfy.base_dir / "output" / "swapline_audit.jsonl")
    assert any(r.get("output_sha256") == sha256_file(out) and r["job_id"] == hist["_prompt_id"] for r in log.records)


def test_corrupt_video_gives_clear_error(comfy, tmp_path):
    from devtools.comfy_harness import ComfyExecutionError

    bad = comfy.base_dir / "input" / "swapline_corrupt.mp4"
    bad.write_bytes(CLIP.read_bytes()[: CLIP.stat().st_size // 3])
    prompt = {"1": {"class_type": "SwaplineLoadVideo",
                    "inputs": {"video": bad.name, "start": 0, "count": 0, "stride": 1, "chunk": 16}},
              "2": {"class_type": "SwaplineSaveVideo",
                    "inputs": {"frames": ["1", 0], "filename_prefix": "swapline/corrupt", "crf": 23,
                               "preset": "veryfast", "audio": True}}}
    with pytest.raises(ComfyExecutionError) as err:
        comfy.run(prompt)
    assert "swapline_corrupt.mp4" in err.value.exception_message


def test_clip_without_faces_keeps_every_frame_unchanged(comfy, tmp_path):
    """No face anywhere: explicit no_face records, frame count and pixels preserved."""
    from swapline_core.video.write import VideoWriter

    clip = comfy.base_dir / "input" / "swapline_noface.mp4"
    rng = np.random.default_rng(0)
    with VideoWriter(clip, fps=12, crf=18, preset="veryfast") as w:
        for i in range(20):
            w.write(np.full((96, 130, 3), 40 + 5 * i, np.uint8) + rng.integers(0, 3, (96, 130, 3), dtype=np.uint8))
    stage_inputs(comfy)
    prompt = load_api("video_swap_builtin")
    prompt["1"]["inputs"]["video"] = clip.name
    hist = comfy.run(prompt)
    track = next(d["swapline_track"][0] for d in hist["outputs"].values() if "swapline_track" in d)
    assert track["frames"] == 20 and track["frames_with_face"] == 0
    assert track["no_face_frames"] == list(range(20))
    # nothing was swapped: QA never calls that a pass (a full-body clip once passed with 0 evaluated)
    report = qa_report(comfy, hist)
    assert report["decision"] == "fail" and report["summary"]["evaluated"] == 0
    assert report["summary"]["decision_reasons"][0].startswith("no face swapped")
    out = decode(saved_video(comfy, hist))
    src = decode(clip)
    assert len(out) == len(src) == 20
    # both are lossy H.264 encodes of the same pixels: only codec noise may differ
    assert max(np.abs(a.astype(int) - b).mean() for a, b in zip(out, src)) < 1.5


def _long_clip(tmp: Path) -> Path:
    """The sample forwards then backwards (96 frames) so an interruption lands mid-run."""
    from swapline_core.video.read import iter_frames, probe
    from swapline_core.video.write import VideoWriter

    frames = [f for _, f in iter_frames(CLIP)]
    path = tmp / "long.mp4"
    with VideoWriter(path, fps=probe(CLIP).fps_fraction, crf=18, preset="veryfast") as w:
        for f in frames + frames[::-1]:
            w.write(f)
    return path


def _resume_prompt() -> dict:
    p = load_api("video_swap_builtin")
    p["1"]["inputs"]["chunk"] = 8
    p["7"]["inputs"]["detect_every"] = 1  # slow enough to be killed mid-way
    return p


@pytest.mark.slow
@pytest.mark.once     # the chunk stores' resume is the pack's; ~4-8 min per run
def test_killed_server_resumes_from_finished_chunks(tmp_path, models_dir):
    clip = _long_clip(tmp_path)
    prompt = _resume_prompt()

    baseline = ComfyServer(tmp_path / "baseline", models_dir)
    baseline.prepare_dirs()
    stage_inputs(baseline, clip)
    baseline.start()
    try:
        hist = baseline.run(prompt)
        expected = decode(saved_video(baseline, hist))
        expected_qa = qa_report(baseline, hist)
    finally:
        baseline.stop()

    base = tmp_path / "victim"
    server = ComfyServer(base, models_dir)
    server.prepare_dirs()
    stage_inputs(server, clip)
    server.start()
    killed = threading.Event()

    def kill_midway(msg):
        d = msg.get("data", {})
        if msg["type"] == "progress" and d.get("node") == "7" and d["value"] >= 40 and not killed.is_set():
            killed.set()
            server.kill()

    ws = server.connect()
    pid = server.queue(prompt)
    with pytest.raises(Exception):  # noqa: B017 - whatever the dead server's socket raises; the point is the kill
        server.follow(ws, pid, timeout=600, on_message=kill_midway)
    assert killed.is_set(), "the server finished before it could be killed"
    ws.close()

    restarted = ComfyServer(base, models_dir)
    restarted.start()
    try:
        hist = restarted.run(prompt)
        track = next(d["swapline_track"][0] for d in hist["outputs"].values() if "swapline_track" in d)
        assert track["chunks_resumed"] >= 4, track  # >= 40 frames in chunks of 8 were on disk
        assert track["chunks_resumed"] < track["chunks_total"]
        got = decode(saved_video(restarted, hist))
        got_qa = qa_report(restarted, hist)
    finally:
        restarted.stop()
    from swapline_core.video.read import probe

    assert len(got) == len(expected) == probe(clip).frame_count
    assert all(np.array_equal(a, b) for a, b in zip(got, expected)), "resumed output differs from uninterrupted run"
    # the QA report too: same records, same decision, same reverted frames
    assert got_qa["frames"] == expected_qa["frames"] and got_qa["summary"] == expected_qa["summary"]
    assert got_qa["reverted_frames"] == expected_qa["reverted_frames"]
