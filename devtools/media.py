"""Real face media available offline: images bundled with the insightface wheel, our samples."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "assets" / "samples"
# the input files the shipped workflows name (ComfyUI input folder name -> shipped sample)
WORKFLOW_INPUTS = {"swapline_sample_clip.mp4": "kling_avatar_clip.mp4", "swapline_source_face.png": "source_face.png",
                   "swapline_target_reference.png": "target_reference.png"}


def stage_workflow_inputs(input_dir: Path) -> None:
    """Copy the shipped samples into a ComfyUI input folder under the names the workflows use."""
    for name, src in WORKFLOW_INPUTS.items():
        shutil.copy(SAMPLES / src, Path(input_dir) / name)


def insightface_image(name: str) -> Path:
    spec = importlib.util.find_spec("insightface")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "data" / "images" / name


T1 = "t1.jpg"                 # six people, frontal
HANKS = "Tom_Hanks_54745.png"  # one face


def rgb(path: Path) -> np.ndarray:
    return np.array(Image.open(path).convert("RGB"))


def put_input(server, src: Path, name: str | None = None) -> str:
    """Copy `src` into the server's input folder; returns the name to use in a prompt. A JPEG is
    stored as the PNG of Pillow's decode (name ending in .png), so ComfyUI loads exactly the pixels
    `rgb(src)` gives: ComfyUI 0.33's LoadImage decodes with PyAV, whose JPEG colour conversion
    differs from Pillow's by a level here and there."""
    name = name or src.name
    if src.suffix.lower() in (".jpg", ".jpeg"):
        name = str(Path(name).with_suffix(".png"))
        Image.fromarray(rgb(src)).save(server.base_dir / "input" / name)
        return name
    shutil.copy(src, server.base_dir / "input" / name)
    return name
