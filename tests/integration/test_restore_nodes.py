"""Face restoration nodes executed by a real ComfyUI server, with the synthetic GFPGANv1.4.pth."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from devtools.comfy_harness import ComfyExecutionError, PromptRejected
from devtools.media import SAMPLES, T1, insightface_image, put_input, rgb

BUILTIN = "builtin (MTCNN + dlib, no download)"
RESTORE_NODES = {"SwaplineRestorerLoader", "SwaplineRestoreFaces", "SwaplineRestoreFrames"}


def restore_prompt(image: str, restorer: str = "GFPGANv1.4.pth") -> dict:
    return {
        "1": {"class_type": "LoadImage", "inputs": {"image": image}},
        "2": {"class_type": "SwaplineAnalyzerLoader",
              "inputs": {"pack": BUILTIN, "provider": "auto", "det_size": 640, "det_thresh": 0.0}},
        "3": {"class_type": "SwaplineDetectFaces",
              "inputs": {"images": ["1", 0], "analyzer": ["2", 0], "embeddings": False,
                         "landmarks": False, "no_face": "pass through"}},
        "4": {"class_type": "SwaplineSelectFaces",
              "inputs": {"faces": ["3", 0], "mode": "largest", "threshold": 0.0, "indices": "0", "max_faces": 1}},
        "5": {"class_type": "SwaplineRestorerLoader",
              "inputs": {"restorer": restorer, "codeformer_fidelity": 0.5, "mask_blur": 0.1}},
        "6": {"class_type": "SwaplineRestoreFaces",
              "inputs": {"images": ["1", 0], "faces": ["4", 0], "restorer": ["5", 0], "weight": 1.0, "batch": 4}},
        "7": {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": "restored"}},
        "8": {"class_type": "MaskToImage", "inputs": {"mask": ["6", 1]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "restore_mask"}},
    }


def test_restore_nodes_listed(comfy):
    info = comfy.object_info()
    assert RESTORE_NODES <= set(info), RESTORE_NODES - set(info)
    options = info["SwaplineRestorerLoader"]["input"]["required"]["restorer"]
    assert "GFPGANv1.4.pth" in json.dumps(options)
    assert info["SwaplineRestoreFrames"]["output"][0] == "SWAPLINE_FRAMES"


def test_restore_largest_face_keeps_everything_else(comfy):
    name = put_input(comfy, insightface_image(T1))
    hist = comfy.run(restore_prompt(name))
    original = rgb(insightface_image(T1))
    out = rgb(comfy.output_path(hist["outputs"]["7"]["images"][0]))
    mask = rgb(comfy.output_path(hist["outputs"]["9"]["images"][0]))[..., 0]
    assert out.shape == original.shape

    # far from the selected face (outside its box grown by its own size on every side): untouched
    (face,) = hist["outputs"]["4"]["swapline_selection"][0]["frames"][0]["faces"]
    x1, y1, x2, y2 = face["bbox"]
    w, h = x2 - x1, y2 - y1
    far = np.ones(original.shape[:2], bool)
    far[max(0, int(y1 - h)):int(y2 + h) + 1, max(0, int(x1 - w)):int(x2 + w) + 1] = False
    assert far.mean() > 0.7
    assert np.array_equal(out[far], original[far]), "pixels far from the restored face changed"
    # where the saved (8-bit) mask reads 0 the true weight is below 1/510: at most a rounding step
    assert np.abs(out[mask == 0].astype(int) - original[mask == 0]).max() <= 1
    inside = mask > 250
    assert inside.sum() > 500
    assert np.abs(out[inside].astype(int) - original[inside]).mean() > 5, "the face was not restored"


def test_restorer_not_in_list_is_rejected_before_running(comfy):
    name = put_input(comfy, insightface_image(T1))
    with pytest.raises(PromptRejected) as err:
        comfy.queue(restore_prompt(name, "GFPGANv1.3.pth"))
    assert "GFPGANv1.3.pth" in json.dumps(err.value.body)


@pytest.mark.parametrize("role,problem", [("truncated_restorer", "truncated or corrupt"),
                                          ("not_a_restorer", "not a face restorer")])
def test_bad_restorer_file_gives_clear_error(comfy, models_dir, tmp_path, role, problem):
    from devtools.synthetic_models import build_bad_models

    bad = build_bad_models(tmp_path / "bad")[role]
    target = models_dir / "facerestore_models" / f"bad_{bad.name}"
    shutil.copy(bad, target)
    name = put_input(comfy, insightface_image(T1))
    with pytest.raises(ComfyExecutionError) as err:
        comfy.run(restore_prompt(name, target.name))
    assert err.value.node_type == "SwaplineRestorerLoader"
    assert err.value.data.get("exception_type", "").endswith("BadModelError")
    assert "/" not in err.value.data["exception_type"]  # ComfyUI names it by module: no server path
    msg = err.value.exception_message
    assert f"[facerestore_models folder]/{target.name}" in msg and problem in msg, msg
    assert str(target) not in msg, msg


def test_restore_frames_on_a_clip(comfy):
    from swapline_core.video.read import iter_frames

    clip = SAMPLES / "kling_avatar_clip.mp4"
    shutil.copy(clip, comfy.base_dir / "input" / "swapline_restore_clip.mp4")
    prompt = {
        "1": {"class_type": "SwaplineLoadVideo",
              "inputs": {"video": "swapline_restore_clip.mp4", "start": 0, "count": 2, "stride": 1, "chunk": 2}},
        "2": {"class_type": "SwaplineAnalyzerLoader",
              "inputs": {"pack": BUILTIN, "provider": "auto", "det_size": 640, "det_thresh": 0.0}},
        "3": {"class_type": "SwaplineTrackFaces",
              "inputs": {"frames": ["1", 0], "analyzer": ["2", 0], "mode": "largest", "threshold": 0.35,
                         "max_faces": 1, "detect_every": 8, "max_missing": 12, "smoothing": 0.5}},
        "4": {"class_type": "SwaplineRestorerLoader",
              "inputs": {"restorer": "GFPGANv1.4.pth", "codeformer_fidelity": 0.5, "mask_blur": 0.1}},
        "5": {"class_type": "SwaplineRestoreFrames",
              "inputs": {"frames": ["1", 0], "faces": ["3", 0], "restorer": ["4", 0], "weight": 1.0, "batch": 2}},
        "6": {"class_type": "SwaplineFramesToImage", "inputs": {"frames": ["5", 0], "max_frames": 16}},
        "7": {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": "restored_frames"}},
    }
    hist = comfy.run(prompt)
    report = hist["outputs"]["5"]["swapline_restore"][0]
    assert report["stage"] == "restore" and report["chunks_total"] == 1 and report["faces_restored"] == 2, report
    saved = [rgb(comfy.output_path(item)) for item in hist["outputs"]["7"]["images"]]
    originals = [f for _, f in iter_frames(clip, 0, 2)]
    assert len(saved) == 2
    for got, orig in zip(saved, originals):
        assert got.shape == orig.shape
        changed = np.any(got != orig, axis=2)
        assert 0.02 < changed.mean() < 0.6, changed.mean()
        ys, xs = np.nonzero(changed)  # one compact region: the face, not the whole frame
        assert (ys.max() - ys.min()) * (xs.max() - xs.min()) < 0.8 * changed.size
