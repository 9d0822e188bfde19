"""Each swapper family through the shipped video workflow on a real ComfyUI server.

workflows/api/video_swap.json with its Load Face Swapper switched to another family's file (the
documented switch for HyperSwap: docs/workflows.md). Stand-ins from
devtools/synthetic_swappers.py, placed by the session's models fixture under ReActor's and
FaceFusion's folder names.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from devtools.media import SAMPLES

REPO = Path(__file__).resolve().parents[2]
CLIP = SAMPLES / "kling_avatar_clip.mp4"
FAMILY_FILES = {"hyperswap": "hyperswap/hyperswap_1a_256.onnx", "ghost": "facefusion/ghost_2_256.onnx",
                "simswap": "facefusion/simswap_256.onnx",
                "simswap_unofficial_512": "facefusion/simswap_unofficial_512.onnx",
                "blendswap": "facefusion/blendswap_256.onnx", "uniface": "facefusion/uniface_256.onnx",
                "inswapper": "reswapper/reswapper_128.onnx", "reswapper_256": "reswapper/reswapper_256.onnx"}


@pytest.fixture(scope="module")
def staged(comfy):
    inp = comfy.base_dir / "input"
    shutil.copy(CLIP, inp / "swapline_sample_clip.mp4")
    shutil.copy(SAMPLES / "source_face.png", inp / "swapline_source_face.png")
    shutil.copy(SAMPLES / "target_reference.png", inp / "swapline_target_reference.png")
    return comfy


def _run(server, swapper: str, count: int, **loader):
    from swapline_core.video.read import iter_frames, probe

    api = json.loads((REPO / "workflows" / "api" / "video_swap.json").read_text())
    load = next(n for n in api.values() if n["class_type"] == "SwaplineSwapperLoader")
    load["inputs"].update(swapper=swapper, **loader)
    src = next(n for n in api.values() if n["class_type"] == "SwaplineLoadVideo")
    src["inputs"]["count"] = count
    hist = server.run(api)
    video = next(server.output_path(d["images"][0]) for d in hist["outputs"].values()
                 if "swapline_video" in d or "swapline_signing" in d)
    report = next(json.loads(d["text"][0]) for d in hist["outputs"].values()
                  if "text" in d and '"family"' in d["text"][0])
    n = count or probe(CLIP).frame_count
    assert probe(video).frame_count == n
    a = [f for _, f in iter_frames(CLIP)][:n]
    b = [f for _, f in iter_frames(video)]
    changed = np.mean([np.abs(x.astype(int) - y).mean() > 0.3 for x, y in zip(a, b)])
    return report, changed


@pytest.mark.once     # families differ in the core's model code, not in what ComfyUI does
def test_hyperswap_video_workflow(staged):
    report, changed = _run(staged, FAMILY_FILES["hyperswap"], 0, pixel_boost="512", identity_weight=0.4)
    assert report["family"] == "hyperswap" and report["detected_by"].startswith("file name")
    assert report["crop"] == 512 and report["identity_weight"] == 0.4
    assert report["models"][0]["licence"].startswith("ResearchRAIL")
    assert changed > 0.8


@pytest.mark.once
@pytest.mark.parametrize("family", sorted(set(FAMILY_FILES) - {"hyperswap"}))
def test_family_video_workflow(staged, family):
    report, changed = _run(staged, FAMILY_FILES[family], 6)
    assert report["family"] == family
    assert changed > 0.5


def test_commercial_only_refuses_on_the_server(staged):
    from devtools.comfy_harness import ComfyExecutionError

    with pytest.raises(ComfyExecutionError, match="licence ResearchRAIL"):
        _run(staged, FAMILY_FILES["hyperswap"], 4, commercial_only=True)
    report, _ = _run(staged, FAMILY_FILES["ghost"], 4, commercial_only=True)
    assert [m["commercial"] for m in report["models"]] == ["yes", "yes"]


@pytest.mark.parametrize("restorer", ["GPEN-BFR-512.onnx", "facefusion/gpen_bfr_256.onnx"])
def test_gpen_restorer_on_the_server(staged, restorer):
    from test_restore_nodes import restore_prompt

    from devtools.media import T1, insightface_image, put_input, rgb

    name = put_input(staged, insightface_image(T1))
    hist = staged.run(restore_prompt(name, restorer))
    original = rgb(insightface_image(T1))
    out = rgb(staged.output_path(hist["outputs"]["7"]["images"][0]))
    mask = rgb(staged.output_path(hist["outputs"]["9"]["images"][0]))[..., 0]
    assert out.shape == original.shape
    assert np.abs(out[mask == 0].astype(int) - original[mask == 0]).max() <= 1
    assert np.abs(out[mask > 250].astype(int) - original[mask > 250]).mean() > 0.3
