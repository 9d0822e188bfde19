"""Image-level nodes executed by a real ComfyUI server (queued prompts, WebSocket, /history)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from devtools.comfy_harness import ComfyExecutionError
from devtools.media import HANKS, T1, insightface_image, put_input, rgb

BUILTIN = "builtin (MTCNN + dlib, no download)"
CLASSICAL = "builtin classical (landmark warp, no download)"

SWAPLINE_NODES = {
    "SwaplineAnalyzerLoader", "SwaplineDetectFaces", "SwaplineSelectFaces", "SwaplineAlignFaces",
    "SwaplineBuildFaceModel", "SwaplineSaveFaceModel", "SwaplineLoadFaceModel",
    "SwaplineSwapperLoader", "SwaplineSwapFaces", "SwaplineLoadVideo", "SwaplineTrackFaces",
    "SwaplineSwapFrames", "SwaplineSaveVideo", "SwaplineFramesToImage", "SwaplineImageToFrames",
    "SwaplineQAGate", "SwaplineC2PASink", "SwaplinePasteFaces",
}


def test_nodes_listed_with_descriptions_and_tooltips(comfy):
    info = comfy.object_info()
    ours = {k: v for k, v in info.items() if k.startswith("Swapline")}
    assert SWAPLINE_NODES <= set(ours), SWAPLINE_NODES - set(ours)
    for node_id, spec in ours.items():
        assert spec["category"].startswith("Swapline/"), node_id
        assert len(spec["description"]) > 30, node_id
        for group in ("required", "optional"):
            for name, value in spec["input"].get(group, {}).items():
                opts = value[1] if len(value) > 1 else {}
                assert opts.get("tooltip"), f"{node_id}.{name} has no tooltip"
    assert "IMPORT FAILED" not in comfy.log()
    docs = Path(__file__).resolve().parents[2] / "web" / "docs"
    missing = [n for n in ours if not (docs / f"{n}.md").exists()]
    assert not missing, f"no web/docs page (run scripts/make_node_docs.py): {missing}"


def detect_prompt(image: str, pack: str) -> dict:
    return {
        "1": {"class_type": "LoadImage", "inputs": {"image": image}},
        "2": {"class_type": "SwaplineAnalyzerLoader",
              "inputs": {"pack": pack, "provider": "CPU", "det_size": 640, "det_thresh": 0.0}},
        "3": {"class_type": "SwaplineDetectFaces",
              "inputs": {"images": ["1", 0], "analyzer": ["2", 0], "embeddings": True,
                         "landmarks": False, "no_face": "pass through"}},
        "4": {"class_type": "PreviewImage", "inputs": {"images": ["3", 1]}},
        "5": {"class_type": "PreviewAny", "inputs": {"source": ["2", 1]}},
    }


def test_synthetic_buffalo_l_detects_through_insightface_loader(comfy):
    """The synthetic buffalo_l pack goes through insightface's own router, like a user's real pack."""
    name = put_input(comfy, insightface_image(T1))
    hist = comfy.run(detect_prompt(name, "buffalo_l"))
    faces = hist["outputs"]["3"]["swapline_faces"][0]
    assert faces["analyzer"] == "buffalo_l"
    assert len(faces["frames"]) == 1 and faces["frames"][0]["faces"], faces
    h, w = rgb(insightface_image(T1)).shape[:2]
    for f in faces["frames"][0]["faces"]:
        x1, y1, x2, y2 = f["bbox"]
        assert -w * 0.1 <= x1 < x2 <= w * 1.1 and -h * 0.1 <= y1 < y2 <= h * 1.1
    providers = json.loads(hist["outputs"]["5"]["text"][0])["providers"]
    assert providers and all(p == ["CPUExecutionProvider"] for p in providers.values()), providers
    assert hist["outputs"]["3"]["images"], "detect node must show a preview"


def test_buffalo_l_landmarks_from_1k3d68_draw_68_point_hints(comfy):
    """Detect Faces with landmarks on: the pack's 1k3d68.onnx (through insightface's Landmark)
    fills the 68 points a 68_point hint needs."""
    name = put_input(comfy, insightface_image(T1))
    p = detect_prompt(name, "buffalo_l")
    p["3"]["inputs"]["landmarks"] = True
    p["6"] = {"class_type": "SwaplineFaceHint",
              "inputs": {"faces": ["3", 0], "format": "68_point", "images": ["1", 0], "mask_grow": 0.25}}
    p["7"] = {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": "hint68"}}
    hist = comfy.run(p)
    providers = json.loads(hist["outputs"]["5"]["text"][0])["providers"]
    assert providers.get("landmarks:1k3d68.onnx") == ["CPUExecutionProvider"], providers
    hint = rgb(comfy.output_path(hist["outputs"]["7"]["images"][0]))
    assert hint.shape[:2] == rgb(insightface_image(T1)).shape[:2]
    assert 0.001 < (hint.max(-1) > 0).mean() < 0.2           # contours on black


def test_builtin_analyzer_finds_all_six_faces(comfy):
    name = put_input(comfy, insightface_image(T1))
    hist = comfy.run(detect_prompt(name, BUILTIN))
    frame = hist["outputs"]["3"]["swapline_faces"][0]["frames"][0]
    assert frame["status"] == "ok" and len(frame["faces"]) == 6, frame


def swap_prompt(target: str, source: str, select_mode: str = "largest") -> dict:
    return {
        "1": {"class_type": "LoadImage", "inputs": {"image": target}},
        "2": {"class_type": "LoadImage", "inputs": {"image": source}},
        "3": {"class_type": "SwaplineAnalyzerLoader",
              "inputs": {"pack": BUILTIN, "provider": "auto", "det_size": 640, "det_thresh": 0.0}},
        "4": {"class_type": "SwaplineDetectFaces",
              "inputs": {"images": ["1", 0], "analyzer": ["3", 0], "embeddings": True,
                         "landmarks": False, "no_face": "pass through"}},
        "5": {"class_type": "SwaplineBuildFaceModel",
              "inputs": {"images": ["2", 0], "analyzer": ["3", 0], "reduce": "mean"}},
        "6": {"class_type": "SwaplineSelectFaces",
              "inputs": {"faces": ["4", 0], "mode": select_mode, "reference": ["5", 0], "threshold": 0.0,
                         "indices": "0", "max_faces": 1, "images": ["1", 0]}},
        "7": {"class_type": "SwaplineSwapperLoader",
              "inputs": {"swapper": CLASSICAL, "provider": "auto", "mask": "hull", "mask_erode": 0.0,
                         "mask_blur": 0.1}},
        "8": {"class_type": "SwaplineSwapFaces",
              "inputs": {"images": ["1", 0], "faces": ["6", 0], "face_model": ["5", 0], "swapper": ["7", 0],
                         "color_match": True}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "swap"}},
        "10": {"class_type": "MaskToImage", "inputs": {"mask": ["8", 1]}},
        "11": {"class_type": "SaveImage", "inputs": {"images": ["10", 0], "filename_prefix": "mask"}},
    }


def test_classical_swap_changes_only_the_masked_face(comfy):
    target = put_input(comfy, insightface_image(T1))
    source = put_input(comfy, insightface_image(HANKS))
    hist = comfy.run(swap_prompt(target, source))
    out = rgb(comfy.output_path(hist["outputs"]["9"]["images"][0]))
    mask = rgb(comfy.output_path(hist["outputs"]["11"]["images"][0]))[..., 0]
    original = rgb(insightface_image(T1))
    assert out.shape == original.shape
    outside = mask == 0
    assert outside.mean() > 0.8
    assert np.array_equal(out[outside], original[outside]), "pixels outside the paste mask changed"
    inside = mask > 128
    assert inside.sum() > 500
    assert np.abs(out[inside].astype(int) - original[inside]).mean() > 5, "the face was not changed"


def test_pack_without_detector_gives_clear_error(comfy, models_dir):
    """A pack folder lacking its detector fails with the file kind and the folder searched."""
    import shutil

    broken = models_dir / "insightface" / "models" / "broken_pack"
    broken.mkdir(parents=True, exist_ok=True)
    shutil.copy(models_dir / "insightface" / "models" / "buffalo_l" / "w600k_r50.onnx", broken)
    name = put_input(comfy, insightface_image(T1))
    prompt = detect_prompt(name, "broken_pack")
    with pytest.raises(ComfyExecutionError) as err:
        comfy.run(prompt)
    assert "detector" in err.value.exception_message
    # the folder, named relative to ComfyUI's model folders: never an absolute server path
    assert "[insightface folder]/models/broken_pack" in err.value.exception_message
    assert str(broken) not in err.value.exception_message
    assert "docs/models.md" in err.value.exception_message


def test_unknown_pack_is_rejected_before_running(comfy):
    from devtools.comfy_harness import PromptRejected

    name = put_input(comfy, insightface_image(T1))
    prompt = detect_prompt(name, "buffalo_l")
    prompt["2"]["inputs"]["pack"] = "antelopev2"
    with pytest.raises(PromptRejected) as err:
        comfy.queue(prompt)
    assert "antelopev2" in json.dumps(err.value.body)


def test_no_face_policy_pass_through_and_raise(comfy):
    """A frame without a face: explicit record, unchanged pixels, same frame count; or a clear error."""

    blank = comfy.base_dir / "input" / "swapline_blank.png"
    Image.fromarray(np.full((120, 160, 3), 90, np.uint8)).save(blank)
    source = put_input(comfy, insightface_image(HANKS))
    prompt = swap_prompt(blank.name, source)
    hist = comfy.run(prompt)
    frame = hist["outputs"]["4"]["swapline_faces"][0]["frames"][0]
    assert frame["status"] == "no_face" and frame["faces"] == []
    out = rgb(comfy.output_path(hist["outputs"]["9"]["images"][0]))
    assert np.array_equal(out, np.full((120, 160, 3), 90, np.uint8))

    prompt["4"]["inputs"]["no_face"] = "raise"
    with pytest.raises(ComfyExecutionError) as err:
        comfy.run(prompt)
    assert "no face" in err.value.exception_message and "pass through" in err.value.exception_message


def test_image_batch_roundtrips_through_frames(comfy):
    """IMAGE -> SWAPLINE_FRAMES -> IMAGE keeps every frame and every pixel (lossless PNG store)."""
    name = put_input(comfy, insightface_image(T1))
    hist = comfy.run({
        "1": {"class_type": "LoadImage", "inputs": {"image": name}},
        "2": {"class_type": "RepeatImageBatch", "inputs": {"image": ["1", 0], "amount": 3}},
        "3": {"class_type": "SwaplineImageToFrames", "inputs": {"images": ["2", 0], "fps": 12.0, "chunk": 2}},
        "4": {"class_type": "SwaplineFramesToImage", "inputs": {"frames": ["3", 0], "max_frames": 10}},
        "5": {"class_type": "SaveImage", "inputs": {"images": ["4", 0], "filename_prefix": "roundtrip"}},
    })
    images = hist["outputs"]["5"]["images"]
    assert len(images) == 3
    original = rgb(insightface_image(T1))
    assert all(np.array_equal(rgb(comfy.output_path(i)), original) for i in images)


def test_align_then_paste_back_roundtrip(comfy):
    """Aligned 512 crops pasted back unedited leave the frame (nearly) as it was; outside the mask exactly."""
    name = put_input(comfy, insightface_image(T1))
    hist = comfy.run({
        "1": {"class_type": "LoadImage", "inputs": {"image": name}},
        "2": {"class_type": "SwaplineAnalyzerLoader",
              "inputs": {"pack": BUILTIN, "provider": "auto", "det_size": 640, "det_thresh": 0.0}},
        "3": {"class_type": "SwaplineDetectFaces",
              "inputs": {"images": ["1", 0], "analyzer": ["2", 0], "embeddings": False, "landmarks": False,
                         "no_face": "pass through"}},
        "4": {"class_type": "SwaplineAlignFaces",
              "inputs": {"images": ["1", 0], "faces": ["3", 0], "size": "512", "template": "ffhq"}},
        "5": {"class_type": "ImageInvert", "inputs": {"image": ["4", 0]}},
        "6": {"class_type": "SwaplinePasteFaces",
              "inputs": {"images": ["1", 0], "crops": ["5", 0], "transforms": ["4", 1], "mask_erode": 0.02,
                         "mask_blur": 0.08}},
        "7": {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": "pasted"}},
        "8": {"class_type": "MaskToImage", "inputs": {"mask": ["6", 1]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "pasted_mask"}},
        "10": {"class_type": "PreviewImage", "inputs": {"images": ["4", 0]}},
    })
    assert len(hist["outputs"]["10"]["images"]) == 6, "one aligned crop per face"
    out = rgb(comfy.output_path(hist["outputs"]["7"]["images"][0]))
    mask = rgb(comfy.output_path(hist["outputs"]["9"]["images"][0]))[..., 0]
    original = rgb(insightface_image(T1))
    assert np.array_equal(out[mask == 0], original[mask == 0])
    inside = mask > 250
    # inverted crops pasted back: the faces are inverted, i.e. far from the original
    assert np.abs(out[inside].astype(int) - original[inside]).mean() > 60


def test_face_model_save_load_and_many_faces(comfy):
    """A face model survives save/load; twelve faces in one frame are all found and swappable."""

    t1 = rgb(insightface_image(T1))
    many = comfy.base_dir / "input" / "swapline_twelve.png"
    Image.fromarray(np.concatenate([t1, t1[:, ::-1]], axis=1)).save(many)  # 6 people, twice
    source = put_input(comfy, insightface_image(HANKS))
    prompt = swap_prompt(many.name, source, select_mode="all")
    prompt["6"]["inputs"]["max_faces"] = 0
    prompt["12"] = {"class_type": "SwaplineSaveFaceModel", "inputs": {"face_model": ["5", 0], "name": "hanks test"}}
    hist = comfy.run(prompt)
    faces = hist["outputs"]["4"]["swapline_faces"][0]["frames"][0]["faces"]
    assert len(faces) == 12
    assert len(hist["outputs"]["6"]["swapline_selection"][0]["frames"][0]["faces"]) == 12
    saved = comfy.models_dir / "swapline" / "faces" / "hanks test.safetensors"
    assert saved.exists()

    loaded = swap_prompt(put_input(comfy, insightface_image(T1)), source)
    loaded["5"] = {"class_type": "SwaplineLoadFaceModel", "inputs": {"face_model": "hanks test.safetensors"}}
    hist = comfy.run(loaded)
    out = rgb(comfy.output_path(hist["outputs"]["9"]["images"][0]))
    assert np.abs(out.astype(int) - t1).mean() > 0.1
