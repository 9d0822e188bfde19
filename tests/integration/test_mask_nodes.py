"""Face Mask Options through a real ComfyUI server: the stack preview, model files from
models/facemask (synthetic XSeg/BiSeNet stand-ins), and clear validation errors."""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_image_nodes import swap_prompt

from devtools.comfy_harness import PromptRejected
from devtools.media import HANKS, T1, insightface_image, put_input, rgb

OPTIONS = {"occlusion": "builtin (skin colour, no model)", "occlusion_sensitivity": 1.0, "parser": "off",
           "regions": "skin, nose, upper-lip, lower-lip", "areas": "", "mouth": "auto", "mouth_size": 0.08,
           "mouth_feather": 0.12, "mouth_lower_lip": 0.0, "erode": 0.0, "blur": 0.02, "temporal": 2}


def _with_options(prompt: dict, **changes) -> dict:
    prompt["20"] = {"class_type": "SwaplineMaskOptions", "inputs": {**OPTIONS, **changes}}
    prompt["8"]["inputs"]["mask_options"] = ["20", 0]
    prompt["21"] = {"class_type": "SaveImage", "inputs": {"images": ["8", 3], "filename_prefix": "stack"}}
    return prompt


def test_mask_options_node_with_model_files_and_preview(comfy):
    info = comfy.object_info("SwaplineMaskOptions")["SwaplineMaskOptions"]
    occl = info["input"]["required"]["occlusion"]
    choices = occl[0] if isinstance(occl[0], list) else occl[1]["options"]
    assert "xseg_1.onnx" in choices and "builtin + xseg_1.onnx" in choices
    target = put_input(comfy, insightface_image(T1))
    source = put_input(comfy, insightface_image(HANKS))
    prompt = _with_options(swap_prompt(target, source), occlusion="builtin + xseg_1.onnx",
                           parser="bisenet_resnet_34.onnx", areas="lower-face, upper-face")
    hist = comfy.run(prompt)
    original = rgb(insightface_image(T1))
    out = rgb(comfy.output_path(hist["outputs"]["9"]["images"][0]))
    mask = rgb(comfy.output_path(hist["outputs"]["11"]["images"][0]))[..., 0]
    preview = rgb(comfy.output_path(hist["outputs"]["21"]["images"][0]))
    assert out.shape == original.shape == preview.shape
    outside = mask == 0
    assert np.array_equal(out[outside], original[outside])
    assert not np.array_equal(preview, original)             # dimmed and coloured
    records = json.loads(hist["outputs"]["8"]["text"][0]) if "text" in hist["outputs"].get("8", {}) else None
    if records:
        face = records[0]["faces"][0]
        assert face["masks"]["occluder"]["file"] == "xseg_1.onnx"


def test_bad_region_list_is_rejected_before_running(comfy):
    target = put_input(comfy, insightface_image(T1))
    source = put_input(comfy, insightface_image(HANKS))
    prompt = _with_options(swap_prompt(target, source), regions="skin, chin")
    with pytest.raises(PromptRejected) as err:
        comfy.queue(prompt)
    assert "chin" in json.dumps(err.value.body)
