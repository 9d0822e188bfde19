"""workflows/face_refine through a real ComfyUI: core checkpoint/VAE/ControlNet loaders on the
small SD1.5 stand-ins of devtools/synthetic_sd.py (placed under the real files' names), our hint,
face ControlNet, exact tiled encode and paste-back, a layer on the source clip."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from devtools.comfy_harness import ComfyExecutionError, PromptRejected
from devtools.media import SAMPLES, rgb

REPO = Path(__file__).resolve().parents[2]
API = json.loads((REPO / "workflows" / "api" / "face_refine.json").read_text())
UI = json.loads((REPO / "workflows" / "face_refine.json").read_text())
FRAMES = 3


@pytest.fixture(scope="module")
def staged(comfy):
    shutil.copy(SAMPLES / "kling_avatar_clip.mp4", comfy.base_dir / "input" / "swapline_sample_clip.mp4")
    return comfy


def node_of(prompt: dict, class_type: str) -> str:
    return next(k for k, v in prompt.items() if v["class_type"] == class_type)


def small(prompt: dict = API) -> dict:
    """The shipped workflow, cut to CI size: 3 frames, 256 px crops (32x32 latents), 2 steps."""
    p = copy.deepcopy(prompt)
    p[node_of(p, "SwaplineLoadVideo")]["inputs"]["count"] = FRAMES
    p[node_of(p, "SwaplineAlignFaces")]["inputs"]["size"] = "256"
    p[node_of(p, "KSampler")]["inputs"]["steps"] = 2
    return p


def test_face_refine_runs_and_changes_only_the_faces(staged):
    from swapline_core.video.read import probe

    p = small()
    paste, frames = node_of(p, "SwaplinePasteFaces"), node_of(p, "SwaplineFramesToImage")
    # lossless views of the frames before and after, and of the paste mask, next to the shipped outputs
    p["90"] = {"class_type": "SaveImage", "inputs": {"images": [frames, 0], "filename_prefix": "refine_test/before"}}
    p["91"] = {"class_type": "SaveImage", "inputs": {"images": [paste, 0], "filename_prefix": "refine_test/after"}}
    p["92"] = {"class_type": "MaskToImage", "inputs": {"mask": [paste, 1]}}
    p["93"] = {"class_type": "SaveImage", "inputs": {"images": ["92", 0], "filename_prefix": "refine_test/mask"}}
    hist = staged.run(p)
    out = hist["outputs"]

    before = [rgb(staged.output_path(i)) for i in out["90"]["images"]]
    after = [rgb(staged.output_path(i)) for i in out["91"]["images"]]
    masks = [rgb(staged.output_path(i))[..., 0] for i in out["93"]["images"]]
    assert len(before) == len(after) == len(masks) == FRAMES
    for b, a, m in zip(before, after, masks):
        assert (m > 0).mean() > 0.02                                    # a face region was pasted
        assert np.array_equal(a[m == 0], b[m == 0])                     # outside it: bit-identical
        inside = m > 200
        assert np.abs(a[inside].astype(int) - b[inside]).mean() > 1.0   # inside: refined

    hints = out[node_of(p, "SwaplineFaceHint")]["images"]
    assert len(hints) == FRAMES
    hint = rgb(staged.output_path(hints[0]))
    assert hint.shape[:2] == (256, 256) and 0.002 < (hint.max(-1) > 0).mean() < 0.2   # dots on black
    crops = out[node_of(p, "PreviewImage")]["images"]
    assert len(crops) == FRAMES

    video = out[node_of(p, "SwaplineSaveVideo")]["images"][0]
    info = probe(str(staged.output_path(video)))
    source = probe(str(SAMPLES / "kling_avatar_clip.mp4"))
    assert info.frame_count == FRAMES
    assert abs(info.fps - source.fps) < 1e-3 and info.has_audio       # the source clip's timing and audio


def test_face_refine_ui_workflow_matches_and_declares_its_models(staged):
    """The editor's missing-models check reads properties.models: every core loader declares
    the file it names and the folder it must be in."""
    import sys

    sys.path.insert(0, str(REPO / "scripts"))
    from workflow_format import ui_to_api

    assert ui_to_api(UI, staged.object_info()) == {k: {"class_type": v["class_type"], "inputs": v["inputs"]}
                                                   for k, v in API.items()}
    folders = {"CheckpointLoaderSimple": ("ckpt_name", "checkpoints"), "VAELoader": ("vae_name", "vae"),
               "ControlNetLoader": ("control_net_name", "controlnet")}
    seen = set()
    for node in UI["nodes"]:
        if node["type"] in folders:
            field, folder = folders[node["type"]]
            models = node["properties"]["models"]
            assert [m["directory"] for m in models] == [folder]
            assert models[0]["name"] == API[str(node["id"])]["inputs"][field] == node["widgets_values"][0]
            url = models[0]["url"]
            assert url.startswith("https://huggingface.co/") and url.endswith(models[0]["name"])
            seen.add(node["type"])
    assert seen == set(folders)


@pytest.mark.parametrize("class_type,field", [("CheckpointLoaderSimple", "ckpt_name"), ("VAELoader", "vae_name"),
                                              ("ControlNetLoader", "control_net_name")])
def test_missing_model_files_are_named_before_anything_runs(staged, class_type, field):
    p = small()
    p[node_of(p, class_type)]["inputs"][field] = "not_downloaded_yet.safetensors"
    with pytest.raises(PromptRejected) as err:
        staged.queue(p)
    errors = err.value.body["node_errors"][node_of(p, class_type)]["errors"]
    assert any("not_downloaded_yet.safetensors" in e["details"] and field in e["details"] for e in errors), errors


def test_hint_needing_landmarks_explains_what_to_do(staged):
    p = small()
    p[node_of(p, "SwaplineDetectFaces")]["inputs"]["landmarks"] = False
    p[node_of(p, "SwaplineAnalyzerLoader")]["inputs"]["pack"] = "buffalo_l"    # landmarks off: 5 keypoints only
    with pytest.raises(ComfyExecutionError) as err:
        staged.run(p)
    assert err.value.node_type == "SwaplineFaceHint"
    assert "68-point landmarks" in err.value.exception_message and "5_point" in err.value.exception_message


def test_refine_faces_in_frames_streams_a_clip_through_a_real_server(staged):
    """The streaming node in a real prompt: tracked faces of 4 frames, chunks of 2, the same
    core loaders; the MP4 keeps the frame count, fps and audio, and a re-queue is resumed."""
    from swapline_core.video.read import probe

    refine = {
        "1": {"class_type": "SwaplineLoadVideo",
              "inputs": {"video": "swapline_sample_clip.mp4", "start": 0, "count": 4, "stride": 1, "chunk": 2}},
        "2": {"class_type": "SwaplineAnalyzerLoader",
              "inputs": {"pack": API["3"]["inputs"]["pack"], "provider": "auto", "det_size": 640, "det_thresh": 0.0}},
        "3": {"class_type": "SwaplineTrackFaces",
              "inputs": {"frames": ["1", 0], "analyzer": ["2", 0], "mode": "largest", "threshold": 0.35,
                         "max_faces": 1, "detect_every": 8, "max_missing": 12, "smoothing": 0.5}},
        "8": API["8"], "9": API["9"], "10": API["10"], "11": API["11"], "12": API["12"],
        "13": {"class_type": "SwaplineRefineFrames",
               "inputs": {"frames": ["1", 0], "faces": ["3", 0], "model": ["8", 0], "positive": ["11", 0],
                          "negative": ["12", 0], "vae": ["9", 0], "size": "128", "template": "ffhq", "seed": 5,
                          "steps": 2, "cfg": 4.0, "sampler_name": "euler", "scheduler": "normal", "denoise": 0.5,
                          "faces_per_batch": 8, "mask_erode": 0.02, "mask_blur": 0.08, "control_net": ["10", 0],
                          "hint_format": "openpose_face", "control_strength": 0.8, "middle": 1.0, "output_1": 0.7,
                          "output_2": 0.5, "rest": 1.0, "analyzer": ["2", 0]}},
        "14": {"class_type": "SwaplineSaveVideo",
               "inputs": {"frames": ["13", 0], "filename_prefix": "refine_test/stream", "crf": 18, "preset": "medium",
                          "audio": True}},
    }
    hist = staged.run(refine)
    assert "refined 4 face crop(s) in 2 chunk(s)" in hist["outputs"]["13"]["text"][0]
    info = probe(str(staged.output_path(hist["outputs"]["14"]["images"][0])))
    source = probe(str(SAMPLES / "kling_avatar_clip.mp4"))
    assert info.frame_count == 4 and abs(info.fps - source.fps) < 1e-3 and info.has_audio
    refine["14"]["inputs"]["filename_prefix"] = "refine_test/stream_again"   # new output, same refine inputs
    refine["13"]["inputs"]["faces_per_batch"] = 1                            # (not in the cache key)
    again = staged.run(refine)
    assert "2 chunk(s) resumed" in again["outputs"]["13"]["text"][0]


def test_video_swap_refine_workflow_runs_swap_refine_qa_and_signing(staged):
    """workflows/video_swap_refine at CI size: swap (stand-in buffalo_l + inswapper), streamed
    refine on the stand-in SD1.5 set, QA over the refined frames, signed MP4."""
    import shutil as _shutil

    from swapline_core.video.read import probe

    for name, src in {"swapline_source_face.png": "source_face.png",
                      "swapline_target_reference.png": "target_reference.png"}.items():
        _shutil.copy(SAMPLES / src, staged.base_dir / "input" / name)
    p = copy.deepcopy(json.loads((REPO / "workflows" / "api" / "video_swap_refine.json").read_text()))
    p[node_of(p, "SwaplineLoadVideo")]["inputs"]["count"] = 4
    p[node_of(p, "SwaplineRefineFrames")]["inputs"].update(size="128", steps=2)
    hist = staged.run(p)
    out = hist["outputs"]
    assert "refined" in out[node_of(p, "SwaplineRefineFrames")]["text"][0]
    qa = out[node_of(p, "SwaplineQAGate")]["swapline_qa"][0]
    assert qa["summary"]["frames"] == 4
    video = out[node_of(p, "SwaplineC2PASink")]["images"][0]
    assert probe(str(staged.output_path(video))).frame_count == 4

    # the signed manifest names what ran: the trained swapper's family, then the diffusion refine
    # with the checkpoint, VAE and ControlNet files the loaders read (sha256 of those files)
    from swapline_core.provenance.c2pa import verify_media
    from swapline_core.provenance.hashing import sha256_file
    from swapline_core.provenance.method import TRAINED_COMPOSITE

    check = verify_media(staged.output_path(video))
    assert check.intact, check.failure_codes
    edits = [a for a in check.actions if a["action"] == "c2pa.edited"]
    assert [e["digitalSourceType"] for e in edits] == [TRAINED_COMPOSITE] * 2
    assert "inswapper family" in edits[0]["description"] and "diffusion" in edits[1]["description"]
    stages = {s["stage"]: s for s in check.qa["method"]["stages"]}
    assert stages["swap"]["family"] == "inswapper"
    assert stages["swap"]["models"][0]["name"] == "inswapper_128.onnx"
    refine = {m["role"]: m for m in stages["refine"]["models"]}
    assert set(refine) == {"checkpoint", "VAE", "ControlNet"}, refine
    files = {"checkpoint": "checkpoints/v1-5-pruned-emaonly-fp16.safetensors",
             "VAE": "vae/vae-ft-mse-840000-ema-pruned.safetensors",
             "ControlNet": "controlnet/control_v11p_sd15_openpose_fp16.safetensors"}
    for role, rel in files.items():
        assert refine[role]["name"] == rel.split("/")[1]
        assert refine[role]["sha256"] == sha256_file(staged.models_dir / rel), role
        assert refine[role]["licence"] in ("CreativeML OpenRAIL-M", "MIT")
    assert {m["name"] for m in check.qa["models"]} >= {r.split("/")[1] for r in files.values()}
