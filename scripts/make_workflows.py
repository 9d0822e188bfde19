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
sys.path.insert(0, str(REPO))          # devtools, swapline_core
sys.path.insert(0, str(REPO / "scripts"))

from workflow_format import api_to_ui, is_widget, widget_inputs  # noqa: E402

# The built-in workflows run the mesh path: every model in it allows commercial use, and viewers
# accept its faces more often than the classical path's (docs/measurements/qa_agreement.md).
BUILTIN = "builtin mesh (BlazeFace + MediaPipe mesh, no download)"
MESH = "builtin mesh (MediaPipe mesh warp, no download)"
CLIP = "swapline_sample_clip.mp4"
SOURCE = "swapline_source_face.png"
TARGET_REF = "swapline_target_reference.png"


def video_swap(pack: str, swapper: str, threshold: float, prefix: str) -> dict:
    return {
        "1": {"class_type": "SwaplineLoadVideo", "_meta": {"title": "Target clip"},
              "inputs": {"video": CLIP, "start": 0, "count": 0, "stride": 1, "chunk": 16}},
        "2": {"class_type": "LoadImage", "_meta": {"title": "Source face (the new identity)"},
              "inputs": {"image": SOURCE}},
        "3": {"class_type": "LoadImage", "_meta": {"title": "Who to replace (target reference)"},
              "inputs": {"image": TARGET_REF}},
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
              "inputs": {"swapper": swapper, "provider": "auto", "mask": "ellipse", "mask_erode": 0.0,
                         "mask_blur": 0.05}},
        "9": {"class_type": "SwaplineSwapFrames",
              "inputs": {"frames": ["1", 0], "faces": ["7", 0], "face_model": ["5", 0], "swapper": ["8", 0],
                         "color_match": True, "guards": True, "max_yaw": 0.0}},
        "10": {"class_type": "SwaplineQAGate",
               "inputs": {"frames": ["9", 0], "faces": ["7", 0], "face_model": ["5", 0], "analyzer": ["4", 0],
                          # production default (qa/decide.DEFAULT_POLICY): a shot with more than a fifth of
                          # its frames failing gets the original back; the failing frames a shot ships are listed
                          "policy": "keep original unless few fail",
                          "limit_set": "auto (viewer-labelled for the built-in swap)",
                          # single limits stay with the set (a QA Limit Overrides node on 'limits' would change them)
                          "sample_every": 1, "require_redetection": True, "allow_no_face": False,
                          "filename_prefix": prefix}},
        "11": {"class_type": "SwaplineC2PASink",
               "inputs": {"frames": ["10", 0], "face_model": ["5", 0], "qa": ["10", 1], "filename_prefix": prefix,
                          "image_format": "png", "crf": 18, "preset": "medium", "audio": True, "attestation": "",
                          # fail closed: an output that cannot be signed fails the job (kept as *_UNSIGNED)
                          "require_trusted_signer": False, "on_signing_failure": "fail",
                          "require_consent": False}},
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
        "5": {"class_type": "SwaplineBuildFaceModel",
              "inputs": {"images": ["2", 0], "analyzer": ["3", 0], "reduce": "mean"}},
        "6": {"class_type": "SwaplineSelectFaces",
              "inputs": {"faces": ["4", 0], "mode": "largest", "threshold": threshold, "indices": "0",
                         "max_faces": 1, "images": ["1", 0]}},
        "7": {"class_type": "SwaplineSwapperLoader",
              "inputs": {"swapper": swapper, "provider": "auto", "mask": "ellipse", "mask_erode": 0.0,
                         "mask_blur": 0.05}},
        "8": {"class_type": "SwaplineSwapFaces",
              "inputs": {"images": ["1", 0], "faces": ["6", 0], "face_model": ["5", 0], "swapper": ["7", 0],
                         "color_match": True, "guards": True, "max_yaw": 0.0}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "swapline/image_swap"}},
    }


# The real SD1.5 files the face refine workflow names (what ComfyUI's templates use); the editor's
# missing-models dialog shows each one with its folder. Tests place small stand-ins under these names.
REFINE_MODELS = {
    "checkpoint": {"name": "v1-5-pruned-emaonly-fp16.safetensors", "directory": "checkpoints",
                   "url": "https://huggingface.co/Comfy-Org/stable-diffusion-v1-5-archive/resolve/main/"
                          "v1-5-pruned-emaonly-fp16.safetensors"},
    "vae": {"name": "vae-ft-mse-840000-ema-pruned.safetensors", "directory": "vae",
            "url": "https://huggingface.co/stabilityai/sd-vae-ft-mse-original/resolve/main/"
                   "vae-ft-mse-840000-ema-pruned.safetensors"},
    "controlnet": {"name": "control_v11p_sd15_openpose_fp16.safetensors", "directory": "controlnet",
                   "url": "https://huggingface.co/comfyanonymous/ControlNet-v1-1_fp16_safetensors/resolve/main/"
                          "control_v11p_sd15_openpose_fp16.safetensors"},
}


def face_refine() -> dict:
    """Aligned face crops -> exact tiled VAE encode -> low-denoise KSampler with the face ControlNet
    (per-block schedule, face mask) -> decode -> paste back -> a layer on the source clip."""
    m = REFINE_MODELS
    return {
        "1": {"class_type": "SwaplineLoadVideo", "_meta": {"title": "Clip to refine (e.g. a swapped video)"},
              "inputs": {"video": CLIP, "start": 0, "count": 0, "stride": 1, "chunk": 16}},
        "2": {"class_type": "SwaplineFramesToImage", "inputs": {"frames": ["1", 0], "max_frames": 512}},
        "3": {"class_type": "SwaplineAnalyzerLoader",
              "inputs": {"pack": BUILTIN, "provider": "auto", "det_size": 640, "det_thresh": 0.0}},
        "4": {"class_type": "SwaplineDetectFaces",
              "inputs": {"images": ["2", 0], "analyzer": ["3", 0], "embeddings": False, "landmarks": True,
                         "no_face": "pass through"}},
        "5": {"class_type": "SwaplineSelectFaces",
              "inputs": {"faces": ["4", 0], "mode": "largest", "threshold": 0.35, "indices": "0", "max_faces": 1}},
        "6": {"class_type": "SwaplineAlignFaces",
              "inputs": {"images": ["2", 0], "faces": ["5", 0], "size": "512", "template": "ffhq"}},
        "7": {"class_type": "SwaplineFaceHint",
              "inputs": {"faces": ["5", 0], "format": "openpose_face", "transforms": ["6", 1], "mask_grow": 0.25}},
        "8": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": m["checkpoint"]["name"]}},
        "9": {"class_type": "VAELoader", "inputs": {"vae_name": m["vae"]["name"]}},
        "10": {"class_type": "ControlNetLoader", "inputs": {"control_net_name": m["controlnet"]["name"]}},
        "11": {"class_type": "CLIPTextEncode", "_meta": {"title": "Positive prompt"},
               "inputs": {"clip": ["8", 1], "text": "close-up photo of a face, natural skin texture, detailed eyes"}},
        "12": {"class_type": "CLIPTextEncode", "_meta": {"title": "Negative prompt"},
               "inputs": {"clip": ["8", 1], "text": "blurry, deformed, plastic skin, lowres, cartoon"}},
        "13": {"class_type": "SwaplineApplyFaceControlNet",
               "inputs": {"positive": ["11", 0], "negative": ["12", 0], "control_net": ["10", 0], "hint": ["7", 0],
                          "strength": 0.8, "start_percent": 0.0, "end_percent": 1.0, "middle": 1.0,
                          "output_1": 0.7, "output_2": 0.5, "rest": 1.0, "mask": ["7", 1]}},
        "14": {"class_type": "SwaplineTiledVAEEncode",
               "inputs": {"vae": ["9", 0], "images": ["6", 0], "mode": "auto", "tile_size": 256, "overlap": 64,
                          "frames_per_chunk": 8}},
        "15": {"class_type": "KSampler",
               "inputs": {"model": ["8", 0], "seed": 0, "steps": 20, "cfg": 5.0, "sampler_name": "dpmpp_2m",
                          "scheduler": "karras", "positive": ["13", 0], "negative": ["13", 1],
                          "latent_image": ["14", 0], "denoise": 0.3}},
        "16": {"class_type": "VAEDecode", "inputs": {"samples": ["15", 0], "vae": ["9", 0]}},
        "17": {"class_type": "SwaplinePasteFaces",
               "inputs": {"images": ["2", 0], "crops": ["16", 0], "transforms": ["6", 1], "mask_erode": 0.02,
                          "mask_blur": 0.08}},
        "18": {"class_type": "SwaplineImageToFrames",
               "inputs": {"images": ["17", 0], "fps": 24.0, "chunk": 16, "reference": ["1", 0]}},
        "19": {"class_type": "SwaplineSaveVideo",
               "inputs": {"frames": ["18", 0], "filename_prefix": "swapline/face_refine", "crf": 18,
                          "preset": "medium", "audio": True}},
        # every output depends on all three loaders: ComfyUI runs a prompt whose other outputs are
        # valid and drops the rest, so an output that did not need them (e.g. a hint preview) would
        # turn a missing checkpoint into a silent partial run instead of a rejected prompt
        "20": {"class_type": "PreviewImage", "_meta": {"title": "Refined face crops"}, "inputs": {"images": ["16", 0]}},
    }


def video_swap_refine() -> dict:
    """The production chain: swap (buffalo_l + inswapper_128), then stream every swapped face through
    SD1.5 + the face ControlNet at low denoise (Refine Faces in Frames), QA, signed MP4."""
    m = REFINE_MODELS
    p = video_swap("buffalo_l", "inswapper_128.onnx", 0.35, "swapline/video_swap_refine")
    p.update({
        "12": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": m["checkpoint"]["name"]}},
        "13": {"class_type": "VAELoader", "inputs": {"vae_name": m["vae"]["name"]}},
        "14": {"class_type": "ControlNetLoader", "inputs": {"control_net_name": m["controlnet"]["name"]}},
        "15": {"class_type": "CLIPTextEncode", "_meta": {"title": "Positive prompt"},
               "inputs": {"clip": ["12", 1], "text": "close-up photo of a face, natural skin texture, detailed eyes"}},
        "16": {"class_type": "CLIPTextEncode", "_meta": {"title": "Negative prompt"},
               "inputs": {"clip": ["12", 1], "text": "blurry, deformed, plastic skin, lowres, cartoon"}},
        "17": {"class_type": "SwaplineRefineFrames",
               "inputs": {"frames": ["9", 0], "faces": ["7", 0], "model": ["12", 0], "positive": ["15", 0],
                          "negative": ["16", 0], "vae": ["13", 0], "size": "512", "template": "ffhq", "seed": 0,
                          "steps": 20, "cfg": 5.0, "sampler_name": "dpmpp_2m", "scheduler": "karras", "denoise": 0.3,
                          "faces_per_batch": 8, "mask_erode": 0.02, "mask_blur": 0.08, "control_net": ["14", 0],
                          "hint_format": "openpose_face", "control_strength": 0.8, "middle": 1.0, "output_1": 0.7,
                          "output_2": 0.5, "rest": 1.0, "analyzer": ["4", 0]}},
    })
    p["10"]["inputs"]["frames"] = ["17", 0]       # QA and signing see the refined frames
    return p


def video_swap_core_builtin() -> dict:
    """video_swap_builtin between core's own video nodes: core Load Video -> VIDEO to Frames (no
    decode into an IMAGE tensor) ... QA -> Frames to VIDEO -> core Save Video (stream copy)."""
    p = video_swap(BUILTIN, MESH, 0.9, "swapline/video_swap_core_builtin")
    p["1"] = {"class_type": "LoadVideo", "_meta": {"title": "Target clip (core Load Video)"},
              "inputs": {"file": CLIP}}
    del p["11"]                                    # the C2PA sink: core Save Video writes the file here
    # ids in insertion order, 1..n: the UI format numbers nodes that way
    p["11"] = {"class_type": "SwaplineVideoToFrames",
               "inputs": {"video": ["1", 0], "start": 0, "count": 0, "stride": 1, "chunk": 16}}
    for nid in ("7", "9"):
        p[nid]["inputs"]["frames"] = ["11", 0]
    p["12"] = {"class_type": "SwaplineFramesToVideo",
               "inputs": {"frames": ["10", 0], "crf": 18, "preset": "medium", "audio": True}}
    # format/codec as 0.3.75 names them; 0.33 takes the same (its Save Video keeps `codec` for that)
    p["13"] = {"class_type": "SaveVideo", "_meta": {"title": "core Save Video"},
               "inputs": {"video": ["12", 0], "filename_prefix": "swapline/video_swap_core_builtin",
                          "format": "auto", "codec": "auto"}}
    return p


# node id -> models the editor should find in ComfyUI's folders (UI format `properties.models`)
UI_MODELS = {"face_refine": {"8": [REFINE_MODELS["checkpoint"]], "9": [REFINE_MODELS["vae"]],
                             "10": [REFINE_MODELS["controlnet"]]},
             "video_swap_refine": {"12": [REFINE_MODELS["checkpoint"]], "13": [REFINE_MODELS["vae"]],
                                   "14": [REFINE_MODELS["controlnet"]]}}

WORKFLOWS = {
    "video_swap_builtin": ("Batch video face swap (built-in models, no download)",
                           video_swap(BUILTIN, MESH, 0.9, "swapline/video_swap_builtin")),
    "video_swap": ("Batch video face swap (InsightFace buffalo_l + inswapper_128)",
                   video_swap("buffalo_l", "inswapper_128.onnx", 0.35, "swapline/video_swap")),
    "video_swap_core_builtin": ("Batch video face swap between core Load Video and core Save Video (built-in "
                                "models, no download)", video_swap_core_builtin()),
    "image_swap_builtin": ("Image face swap (built-in models, no download)", image_swap(BUILTIN, MESH, 0.9)),
    "image_swap": ("Image face swap (InsightFace buffalo_l + inswapper_128)",
                   image_swap("buffalo_l", "inswapper_128.onnx", 0.35)),
    "face_refine": ("Face refine: SD1.5 + face ControlNet at low denoise on aligned crops, pasted back", face_refine()),
    "video_swap_refine": ("Batch video face swap + streamed SD1.5 face refine (buffalo_l, inswapper_128, "
                          "OpenPose ControlNet), QA, signed MP4", video_swap_refine()),
}


def fill_widget_defaults(prompt: dict, info: dict) -> None:
    """Every widget of our nodes stated in the API twin, with the default the editor would put
    there: what a studio queues over the API is then exactly what the editor queues."""
    for node in prompt.values():
        if not node["class_type"].startswith("Swapline"):
            continue
        for name, spec, _optional in widget_inputs(info[node["class_type"]]):
            if is_widget(spec) and name not in node["inputs"]:
                default = (spec[1] or {}).get("default") if len(spec) > 1 else None
                if default is not None:
                    node["inputs"][name] = default


def main() -> int:
    from devtools.comfy_harness import ComfyServer
    from devtools.synthetic_models import build_models
    from devtools.synthetic_sd import build_sd_models

    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        build_models(models)  # so buffalo_l/inswapper appear in the combos the editor validates against
        build_sd_models(models)
        server = ComfyServer(Path(tmp) / "base", models).start()
        try:
            info = server.object_info()
        finally:
            server.stop()
    (REPO / "workflows" / "api").mkdir(parents=True, exist_ok=True)
    for name, (title, prompt) in WORKFLOWS.items():
        fill_widget_defaults(prompt, info)
        (REPO / "workflows" / "api" / f"{name}.json").write_text(json.dumps(prompt, indent=1) + "\n")
        ui = api_to_ui(prompt, info, title, UI_MODELS.get(name))
        (REPO / "workflows" / f"{name}.json").write_text(json.dumps(ui, indent=1) + "\n")
        print("wrote", name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
