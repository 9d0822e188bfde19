"""The shipped workflows, both formats, executed by a real ComfyUI.

UI-format files are converted to API prompts with the node definitions the server reports at
/object_info (what the editor does when it queues), compared with their API twins, and run.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from devtools.media import SAMPLES, rgb

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from workflow_format import ui_to_api  # noqa: E402

WORKFLOWS = sorted(p.stem for p in (REPO / "workflows").glob("*.json"))


def test_every_ui_workflow_has_an_api_twin():
    assert WORKFLOWS, "no UI workflows shipped"
    for name in WORKFLOWS:
        assert (REPO / "workflows" / "api" / f"{name}.json").exists(), name
        ui = json.loads((REPO / "workflows" / f"{name}.json").read_text())
        assert "nodes" in ui and "links" in ui, f"{name}.json is not in UI format"


@pytest.mark.parametrize("name", WORKFLOWS)
def test_ui_workflow_converts_to_its_api_twin(staged, name):
    info = staged.object_info()
    ui = json.loads((REPO / "workflows" / f"{name}.json").read_text())
    api = json.loads((REPO / "workflows" / "api" / f"{name}.json").read_text())
    converted = ui_to_api(ui, info)
    strip = {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in api.items()}
    assert converted == strip


def _outputs_of(hist: dict, key: str) -> list:
    return [d[key][0] for d in hist["outputs"].values() if key in d]


def test_image_swap_builtin_ui_workflow_runs(staged):
    info = staged.object_info()
    ui = json.loads((REPO / "workflows" / "image_swap_builtin.json").read_text())
    hist = staged.run(ui_to_api(ui, info))
    images = [i for d in hist["outputs"].values() for i in d.get("images", []) if i["type"] == "output"]
    assert images
    out = rgb(staged.output_path(images[0]))
    original = rgb(SAMPLES / "target_reference.png")
    assert out.shape == original.shape
    assert np.abs(out.astype(int) - original).mean() > 0.5


def test_image_swap_neural_api_workflow_runs(staged):
    """buffalo_l + inswapper_128 (synthetic stand-ins, real loaders) on the image workflow."""
    api = json.loads((REPO / "workflows" / "api" / "image_swap.json").read_text())
    hist = staged.run(api)
    images = [i for d in hist["outputs"].values() for i in d.get("images", []) if i["type"] == "output"]
    out = rgb(staged.output_path(images[0]))
    assert out.shape == rgb(SAMPLES / "target_reference.png").shape


def test_video_swap_neural_api_workflow_runs(staged):
    from swapline_core.video.read import probe

    api = json.loads((REPO / "workflows" / "api" / "video_swap.json").read_text())
    hist = staged.run(api)
    videos = [i for d in hist["outputs"].values() if "swapline_video" in d or "swapline_signing" in d
              for i in d["images"]]
    assert videos
    assert probe(staged.output_path(videos[0])).frame_count == probe(SAMPLES / "kling_avatar_clip.mp4").frame_count
