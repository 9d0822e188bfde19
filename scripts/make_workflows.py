"""Write the shipped workflows: API format in workflows/api/, UI format (generated from the API
one with a real server's /object_info) in workflows/. Run after changing a node's inputs:
    .venv/bin/python scripts/make_workflows.py
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

from workflow_format import api_to_ui  # noqa: E402

BUILTIN = "builtin (MTCNN + dlib, no download)"
CLASSICAL = "builtin classical (landmark warp, no download)"
CLIP = "swapline_sample_clip.mp4"
SOURCE = "swapline_source_face.png"
TARGET_REF = "swapline_target_reference.png"


def video_swap(pack: str, swapper: str, threshold: float, prefix: str) -> dict:
    return {
        "1": {"class_type": "SwaplineLoadVideo", "_meta": {"title": "Target clip"},
              "inputs": {"video": CLIP, "start": 0, "count": 0, "stride": 1, "chunk": 16}},
        "2": {"class_type": "LoadImage", "_meta": {"title": "Source face (the new identity)"}, "inputs": {"image": SOURCE}},
        "3": {"class_type": "LoadImage", "_meta": {"title": "Who to replace (target reference)"}, "inputs": {"image": TARGET_REF}},
        "4": {"class_type": "SwaplineAnalyzerLoader",
              "inputs": {"pack": pack, "provider": "auto", "det_size": 640, "det_thresh": 0.0}},
        "5": {"class_type": "SwaplineBuildFaceModel", "_meta": {"title": "Source face model"},
              "inputs": {"images": ["2", 0], "analyzer": ["4", 0], "reduce": "mean"}},
        "6": {"class_type": "SwaplineBuildFaceModel", "_meta": {"title": "Target reference model"},
              "inputs": {"images": ["3", 0], "analyzer": ["4", 0], "reduce": "mean"}},
        "7": {"class_type": "SwaplineTrackFaces",
              "inputs": {"frames": ["1", 0], "analyzer": ["4", 0], "mode": "identity", "reference": ["6", 0],
                         "threshold": threshold, "max_faces": 1, "detect_every": 8, "max_missing": 12,
                         "smoothing": 0.5}},
        "8": {"class_type": "SwaplineSwapperLoader",
              "inputs": {"swapper": swapper, "provider": "auto", "mask": "ellipse", "mask_erode": 0.0, "mask_blur": 0.05}},
        "9": {"class_type": "SwaplineSwapFrames",
              "inputs": {"frames": ["1", 0], "faces": ["7", 0], "face_model": ["5", 0], "swapper": ["8", 0],
                         "color_match": True}},
        "10": {"class_type": "SwaplineQAGate",
               "inputs": {"frames": ["9", 0], "faces": ["7", 0], "face_model": ["5", 0], "analyzer": ["4", 0],
                          "policy": "flag only", "min_identity": -1.0, "max_leakage": -1.0,
                          "max_landmark_drift": -1.0, "max_flicker_ratio": -1.0, "require_redetection": True,
                          "sample_every": 1, "filename_prefix": prefix}},
        "11": {"class_type": "SwaplineC2PASink",
               "inputs": {"frames": ["10", 0], "face_model": ["5", 0], "qa": ["10", 1], "filename_prefix": prefix,
                          "image_format": "png", "crf": 18, "preset": "medium", "audio": True, "attestation": "",
                          "require_trusted_signer": False}},
    }


def image_swap(pack: str, swapper: str, threshold: float) -> dict:
    return {
        "1": {"class_type": "LoadImage", "_meta": {"title": "Target image"}, "inputs": {"image": TARGET_REF}},
        "2": {"class_type": "LoadImage", "_meta": {"title": "Source face"}, "inputs": {"image": SOURCE}},
        "3": {"class_type": "SwaplineAnalyzerLoader",
              "inputs": {"pack": pack, "provider": "auto", "det_size": 640, "det_thresh": 0.0}},
        "4": {"class_type": "SwaplineDetectFaces",
              "inputs": {"images": ["1", 0], "analyzer": ["3", 0], "embeddings": True, "landmarks": False,
                         "no_face": "pass through"}},
        "5": {"class_type": "SwaplineBuildFaceModel", "inputs": {"images": ["2", 0], "analyzer": ["3", 0], "reduce": "mean"}},
        "6": {"class_type": "SwaplineSelectFaces",
              "inputs": {"faces": ["4", 0], "mode": "largest", "threshold": threshold, "indices": "0",
                         "max_faces": 1, "images": ["1", 0]}},
        "7": {"class_type": "SwaplineSwapperLoader",
              "inputs": {"swapper": swapper, "provider": "auto", "mask": "ellipse", "mask_erode": 0.0, "mask_blur": 0.05}},
        "8": {"class_type": "SwaplineSwapFaces",
              "inputs": {"images": ["1", 0], "faces": ["6", 0], "face_model": ["5", 0], "swapper": ["7", 0],
                         "color_match": True}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "swapline/image_swap"}},
    }


WORKFLOWS = {
    "video_swap_builtin": ("Batch video face swap (built-in models, no download)",
                           video_swap(BUILTIN, CLASSICAL, 0.9, "swapline/video_swap_builtin")),
    "video_swap": ("Batch video face swap (InsightFace buffalo_l + inswapper_128)",
                   video_swap("buffalo_l", "inswapper_128.onnx", 0.35, "swapline/video_swap")),
    "image_swap_builtin": ("Image face swap (built-in models, no download)", image_swap(BUILTIN, CLASSICAL, 0.9)),
    "image_swap": ("Image face swap (InsightFace buffalo_l + inswapper_128)", image_swap("buffalo_l", "inswapper_128.onnx", 0.35)),
}


def main() -> int:
    from comfy_harness import ComfyServer
    from synthetic_models import build_models

    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        build_models(models)  # so buffalo_l/inswapper appear in the combos the editor validates against
        server = ComfyServer(Path(tmp) / "base", models).start()
        try:
            info = server.object_info()
        finally:
            server.stop()
    (REPO / "workflows" / "api").mkdir(parents=True, exist_ok=True)
    for name, (title, prompt) in WORKFLOWS.items():
        (REPO / "workflows" / "api" / f"{name}.json").write_text(json.dumps(prompt, indent=1) + "\n")
        (REPO / "workflows" / f"{name}.json").write_text(json.dumps(api_to_ui(prompt, info, title), indent=1) + "\n")
        print("wrote", name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
