"""Core VIDEO and VHS-style IMAGE + AUDIO interop in a real ComfyUI (0.3.75 and, in CI, 0.33):
the shipped workflow that starts at core Load Video and ends at core Save Video, and frames
round-tripping through IMAGE + AUDIO and through core Create Video."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import av
import pytest

from devtools.media import SAMPLES

REPO = Path(__file__).resolve().parents[2]
CLIP = "swapline_sample_clip.mp4"          # kling_avatar_clip.mp4: 48 frames, 15 fps, AAC audio


@pytest.fixture(scope="module")
def staged(comfy):
    for name, src in {CLIP: "kling_avatar_clip.mp4", "swapline_source_face.png": "source_face.png",
                      "swapline_target_reference.png": "target_reference.png"}.items():
        shutil.copy(SAMPLES / src, comfy.base_dir / "input" / name)
    return comfy


def streams(path: Path) -> tuple[int, float, str | None, float]:
    """(decoded video frames, fps, audio codec, audio seconds)."""
    with av.open(str(path)) as c:
        vs = c.streams.video[0]
        fps = float(vs.average_rate)
        a = c.streams.audio[0] if c.streams.audio else None
        codec = a.codec_context.name if a else None
        n = sum(1 for _ in c.decode(vs))
    seconds = 0.0
    if codec:
        with av.open(str(path)) as c:
            seconds = sum(f.samples for f in c.decode(c.streams.audio[0])) / c.streams.audio[0].rate
    return n, fps, codec, seconds


def saved(server, hist: dict, node: str) -> Path:
    out = hist["outputs"][node]
    items = out.get("images") or out.get("videos") or []
    assert items, out
    return server.output_path(items[0])


def test_core_load_video_to_core_save_video_workflow(staged):
    prompt = json.loads((REPO / "workflows" / "api" / "video_swap_core_builtin.json").read_text())
    prompt["11"]["inputs"]["count"] = 10                  # CI size: 10 of the 48 frames
    hist = staged.run(prompt)
    info = json.loads(hist["outputs"]["11"]["text"][0])
    # the VIDEO's own file was opened where it lies (no decode into an IMAGE tensor, no copy)
    assert info["file"] == CLIP and info["frames"] == 10 and info["audio"] == "aac"
    qa = [d["swapline_qa"][0] for d in hist["outputs"].values() if "swapline_qa" in d][0]
    assert qa["summary"]["frames"] == 10
    path = saved(staged, hist, "13")
    assert path.suffix == ".mp4" and path.stat().st_size > 10_000
    frames, fps, codec, seconds = streams(path)
    assert (frames, fps, codec) == (10, 15.0, "aac")
    assert abs(seconds - 10 / 15) < 0.1                   # audio cut to the frames used


def _load(count: int) -> dict:
    return {"1": {"class_type": "SwaplineLoadVideo",
                  "inputs": {"video": CLIP, "start": 5, "count": count, "stride": 1, "chunk": 4}}}


def test_image_and_audio_round_trip_like_vhs(staged):
    """Frames -> IMAGE + AUDIO (what VHS Video Combine takes) -> back to frames with that AUDIO
    (what VHS Load Video gives) -> MP4: frame count, rate and audio survive."""
    p = _load(6)
    p.update({
        "2": {"class_type": "SwaplineFramesToImage", "inputs": {"frames": ["1", 0], "max_frames": 64}},
        "3": {"class_type": "SwaplineImageToFrames",
              "inputs": {"images": ["2", 0], "fps": 15.0, "chunk": 4, "audio": ["2", 1]}},
        "4": {"class_type": "SwaplineSaveVideo",
              "inputs": {"frames": ["3", 0], "filename_prefix": "swapline/vhs_rt", "crf": 18, "preset": "ultrafast",
                         "audio": True}},
    })
    hist = staged.run(p)
    frames, fps, codec, seconds = streams(saved(staged, hist, "4"))
    assert (frames, fps, codec) == (6, 15.0, "aac")
    assert abs(seconds - 6 / 15) < 0.1


def test_frames_through_core_create_video_and_back(staged):
    """An in-memory core VIDEO (Create Video's components, with AUDIO) into frames, and frames out to
    core Save Video through Frames to VIDEO."""
    p = _load(5)
    p.update({
        "2": {"class_type": "SwaplineFramesToImage", "inputs": {"frames": ["1", 0], "max_frames": 64}},
        "3": {"class_type": "CreateVideo", "inputs": {"images": ["2", 0], "fps": 15.0, "audio": ["2", 1]}},
        "4": {"class_type": "SwaplineVideoToFrames",
              "inputs": {"video": ["3", 0], "start": 1, "count": 0, "stride": 1, "chunk": 4}},
        "5": {"class_type": "SwaplineFramesToVideo",
              "inputs": {"frames": ["4", 0], "crf": 18, "preset": "ultrafast", "audio": True}},
        "6": {"class_type": "SaveVideo", "inputs": {"video": ["5", 0], "filename_prefix": "swapline/create_rt",
                                                    "format": "auto", "codec": "auto"}},
    })
    hist = staged.run(copy.deepcopy(p))
    info = json.loads(hist["outputs"]["4"]["text"][0])
    assert info["frames"] == 4 and info["audio"] == "pcm_f32le"     # stored once, losslessly, with its audio
    frames, fps, codec, seconds = streams(saved(staged, hist, "6"))
    assert (frames, fps, codec) == (4, 15.0, "aac")
    assert abs(seconds - 4 / 15) < 0.1
