"""Models Swapline can use: where they live, how big they are and where users get them.

The tables in docs/models.md are written from this list; install.py reports which are present.
"""
from __future__ import annotations

from dataclasses import dataclass

# Folder names relative to ComfyUI's models directory, in the layout ReActor users already have.
INSIGHTFACE = "insightface"
ANALYSIS_PACKS = "insightface/models"
FACERESTORE = "facerestore_models"
FACE_MODELS = "swapline/faces"
# ReActor 0.7 keeps HyperSwap and ReSwapper files in their own folders; FaceFusion keeps all of
# its models (swappers, embedding converters, GPEN) in .assets/models: point models/facefusion
# at it (a link, or extra_model_paths.yaml key ``facefusion``).
HYPERSWAP = "hyperswap"
RESWAPPER = "reswapper"
FACEFUSION = "facefusion"
FACEMASK = "facemask"          # FaceFusion's occluder / face parser ONNX files (mask stack)
MODEL_FOLDERS = (INSIGHTFACE, ANALYSIS_PACKS, FACERESTORE, FACE_MODELS, HYPERSWAP, RESWAPPER, FACEFUSION, FACEMASK)
COMMERCIAL = ("yes", "no", "unknown")
_FF = "FaceFusion models-3.x release assets (github.com/facefusion/facefusion-assets)"


@dataclass(frozen=True)
class KnownModel:
    folder: str
    filename: str
    role: str
    licence: str
    source: str
    size_bytes: int | None = None
    sha256: str | None = None
    vendor: str = ""
    # may a commercial user run it: "yes", "no" or "unknown" (treated as no by commercial_only)
    commercial: str = "unknown"


KNOWN_MODELS = (
    KnownModel(INSIGHTFACE, "inswapper_128.onnx", "neural face swapper (128 px)",
               "non-commercial research only (InsightFace)",
               "InsightFace release / the ReActor and roop model mirrors", 554253681,
               "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af", "InsightFace", "no"),
    KnownModel(INSIGHTFACE, "inswapper_128_fp16.onnx", "neural face swapper, fp16",
               "non-commercial research only (InsightFace)",
               "FaceFusion / ReActor model mirrors", 277680638,
               "6d51a9278a1f650cffefc18ba53f38bf2769bf4bbff89267822cf72945f8a38b", "InsightFace", "no"),
    KnownModel(f"{ANALYSIS_PACKS}/buffalo_l", "det_10g.onnx", "SCRFD-10G face detector",
               "non-commercial research only (InsightFace)",
               "insightface buffalo_l.zip (github.com/deepinsight/insightface releases)", 16923827,
               "5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91", "InsightFace", "no"),
    KnownModel(f"{ANALYSIS_PACKS}/buffalo_l", "w600k_r50.onnx", "ArcFace R50 recognizer (512-d)",
               "non-commercial research only (InsightFace)",
               "insightface buffalo_l.zip (github.com/deepinsight/insightface releases)", 174383860,
               "4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43", "InsightFace", "no"),
    # optional: 68-point landmarks (hints, classical swapper); size/hash as published by several
    # independent projects pinning buffalo_l's members
    KnownModel(f"{ANALYSIS_PACKS}/buffalo_l", "1k3d68.onnx", "68-point 3-D landmarks (optional)",
               "non-commercial research only (InsightFace)",
               "insightface buffalo_l.zip (github.com/deepinsight/insightface releases)", 143607619,
               "df5c06b8a0c12e422b2ed8947b8869faa4105387f199c477af038aa01f9a45cc", "InsightFace", "no"),
    KnownModel(FACERESTORE, "GFPGANv1.4.pth", "GFPGAN v1.4 face restorer", "Apache-2.0 (TencentARC)",
               "github.com/TencentARC/GFPGAN releases", 348632874,
               "e2cd4703ab14f4d01fd1383a8a8b266f9a5833dacee8e6a79d3bf21a1b6be5ad", "TencentARC", "yes"),
    KnownModel(FACERESTORE, "GFPGANv1.3.pth", "GFPGAN v1.3 face restorer", "Apache-2.0 (TencentARC)",
               "github.com/TencentARC/GFPGAN releases", 348632874,
               "c953a88f2727c85c3d9ae72e2bd4846bbaf59fe6972ad94130e23e7017524a70", "TencentARC", "yes"),
    # Swapper families (docs/swappers.md). Licences as FaceFusion's model metadata publishes
    # them; the embedding converters ship with and are licensed as their swapper's entry.
    # FaceFusion publishes CRC32 .hash files, not sha256: no digests are listed for these.
    *(KnownModel(HYPERSWAP, f"hyperswap_{v}_256.onnx", "HyperSwap face swapper (256 px)",
                 "ResearchRAIL (research only)", f"{_FF}, models-3.3.0", vendor="FaceFusion", commercial="no")
      for v in ("1a", "1b", "1c")),
    *(KnownModel(FACEFUSION, f"ghost_{v}_256.onnx", "GHOST face swapper (256 px)", "Apache-2.0",
                 f"{_FF}, models-3.0.0", vendor="ai-forever", commercial="yes") for v in (1, 2, 3)),
    KnownModel(FACEFUSION, "crossface_ghost.onnx", "ArcFace -> GHOST embedding converter", "Apache-2.0",
               f"{_FF}, models-3.4.0", vendor="ai-forever / FaceFusion", commercial="yes"),
    KnownModel(FACEFUSION, "simswap_256.onnx", "SimSwap face swapper (256 px)", "non-commercial",
               f"{_FF}, models-3.0.0", vendor="neuralchen", commercial="no"),
    KnownModel(FACEFUSION, "simswap_unofficial_512.onnx", "SimSwap unofficial face swapper (512 px)",
               "non-commercial", f"{_FF}, models-3.0.0", vendor="neuralchen", commercial="no"),
    KnownModel(FACEFUSION, "crossface_simswap.onnx", "ArcFace -> SimSwap embedding converter", "non-commercial",
               f"{_FF}, models-3.4.0", vendor="neuralchen / FaceFusion", commercial="no"),
    KnownModel(FACEFUSION, "hififace_unofficial_256.onnx", "HiFiFace unofficial face swapper (256 px)",
               "unknown", f"{_FF}, models-3.1.0", vendor="GuijiAI", commercial="unknown"),
    KnownModel(FACEFUSION, "crossface_hififace.onnx", "ArcFace -> HiFiFace embedding converter", "unknown",
               f"{_FF}, models-3.4.0", vendor="GuijiAI / FaceFusion", commercial="unknown"),
    KnownModel(FACEFUSION, "blendswap_256.onnx", "BlendSwap face swapper (256 px)", "non-commercial",
               f"{_FF}, models-3.0.0", vendor="mapooon", commercial="no"),
    KnownModel(FACEFUSION, "uniface_256.onnx", "UniFace face swapper (256 px)", "unknown",
               f"{_FF}, models-3.0.0", vendor="xc-csc101", commercial="unknown"),
    *(KnownModel(RESWAPPER, f"reswapper_{n}.onnx", f"ReSwapper face swapper ({n} px, INSwapper architecture)",
                 "unknown (no licence published with the weights)",
                 "ReActor's model list (github.com/somanchiu/ReSwapper)",
                 vendor="somanchiu", commercial="unknown") for n in (128, 256)),
    *(KnownModel(FACEFUSION, f"gpen_bfr_{n}.onnx", f"GPEN-BFR face restorer ({n} px)", "non-commercial",
                 f"{_FF}, models-3.0.0", vendor="yangxy", commercial="no") for n in (256, 512, 1024)),
    # the same GPEN-BFR exports under the names ReActor's model list gives them
    *(KnownModel(FACERESTORE, f"GPEN-BFR-{n}.onnx", f"GPEN-BFR face restorer ({n} px)", "non-commercial",
                 "ReActor's model list (yangxy/GPEN exports)", vendor="yangxy", commercial="no")
      for n in (512, 1024, 2048)),
    # Mask stack models, the files FaceFusion users already have (its .assets/models). FaceFusion
    # publishes CRC32 .hash files, not sha256, and no sizes: both left unset rather than guessed.
    *(KnownModel(FACEMASK, f"xseg_{k}.onnx", "XSeg face occluder (256 px, optional)",
                 "GPL-3.0 (DeepFaceLab)", "FaceFusion model assets (facefusion-assets releases, "
                 f"models-{'3.2.0' if k == 3 else '3.1.0'})", vendor="DeepFaceLab (iperov)",
                 commercial="yes") for k in (1, 2, 3)),
    *(KnownModel(FACEMASK, f"bisenet_resnet_{d}.onnx", "BiSeNet face parser (512 px, optional)",
                 "MIT (yakhyo/face-parsing)", "FaceFusion model assets (facefusion-assets releases, "
                 f"models-{'3.0.0' if d == 34 else '3.1.0'})", vendor="yakhyo",
                 commercial="yes") for d in (18, 34)),
)


# Files outside Swapline's model folders, only so provenance can state their licences: the SD1.5
# set the refine workflows name (scripts/make_workflows.py REFINE_MODELS; ComfyUI's own folders)
# and the built-in analyzers' weights (inside pip packages, or extracted from one at setup). Not
# Swapline downloads, so install.py does not list them. Licences as their model cards / packages publish them.
DIFFUSION_MODELS = (
    KnownModel("checkpoints", "v1-5-pruned-emaonly-fp16.safetensors", "Stable Diffusion 1.5 checkpoint",
               "CreativeML OpenRAIL-M", "huggingface.co/Comfy-Org/stable-diffusion-v1-5-archive",
               vendor="Runway / Stability AI", commercial="yes"),
    KnownModel("vae", "vae-ft-mse-840000-ema-pruned.safetensors", "SD 1.x VAE (ft-MSE)", "MIT",
               "huggingface.co/stabilityai/sd-vae-ft-mse-original", vendor="Stability AI", commercial="yes"),
    KnownModel("controlnet", "control_v11p_sd15_openpose_fp16.safetensors", "ControlNet 1.1 OpenPose (SD 1.5)",
               "CreativeML OpenRAIL-M", "huggingface.co/comfyanonymous/ControlNet-v1-1_fp16_safetensors",
               vendor="lllyasviel", commercial="yes"),
    # the built-in analyzer's weights, shipped inside pip packages (builtin_models.py)
    *(KnownModel("facenet_pytorch/data", f"{n}.pt", f"MTCNN {n} (built-in detector)", "MIT (facenet-pytorch)",
                 "facenet-pytorch 2.5.3 wheel", vendor="timesler", commercial="yes") for n in ("pnet", "rnet", "onet")),
    KnownModel("face_recognition_models/models", "shape_predictor_68_face_landmarks.dat",
               "dlib 68-point landmarks (built-in)", "trained on iBUG 300-W, whose terms exclude commercial use",
               "face-recognition-models 0.3.0", vendor="dlib (Davis King)", commercial="no"),
    KnownModel("face_recognition_models/models", "shape_predictor_5_face_landmarks.dat",
               "dlib 5-point landmarks (built-in)", "CC0-1.0", "face-recognition-models 0.3.0",
               vendor="dlib (Davis King)", commercial="yes"),
    KnownModel("face_recognition_models/models", "dlib_face_recognition_resnet_model_v1.dat",
               "dlib ResNet face embedding (built-in)", "CC0-1.0", "face-recognition-models 0.3.0",
               vendor="dlib (Davis King)", commercial="yes"),
    # the built-in mesh analyzer's files, shipped in the pack's models/mediapipe/ (taken from the
    # mediapipe wheel; mesh_models.py also checks these digests); licence as each model card states
    *(KnownModel("models/mediapipe", name, role,
                 f"Apache-2.0 (model card \"{card}\"; mediapipe wheel: Apache 2.0)",
                 "mediapipe 0.10.21 wheel (PyPI), shipped in Swapline's models/mediapipe/", size, digest,
                 vendor="Google (MediaPipe)", commercial="yes")
      for name, role, card, size, digest in (
          ("face_detection_short_range.tflite", "BlazeFace short range face detector (built-in mesh)",
           "MediaPipe BlazeFace Model Card (Short Range)", 229714,
           "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8"),
          ("face_landmark.tflite", "MediaPipe 468-point face mesh (built-in mesh)",
           "MediaPipe Face Mesh", 1242398, "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814"),
          ("iris_landmark.tflite", "MediaPipe iris and eye contour landmarks (built-in mesh)",
           "MediaPipe Iris", 2640568, "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f"),
          ("palm_detection_full.tflite", "MediaPipe palm detector, full (the hand occluder)",
           "Model Card Hand Tracking (Lite/Full) with Fairness", 2339846,
           "1b14e9422c6ad006cde6581a46c8b90dd573c07ab7f3934b5589e7cea3f89a54"),
          ("hand_landmark_lite.tflite", "MediaPipe 21-point hand landmarks, lite (the hand occluder)",
           "Model Card Hand Tracking (Lite/Full) with Fairness", 2071597,
           "048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6"))),
)


def known(filename: str) -> KnownModel | None:
    """The catalog entry for a file name (any folder), or None."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    for m in KNOWN_MODELS + DIFFUSION_MODELS:
        if m.filename == base:
            return m
    return None


def licence_of(filename: str) -> dict:
    """What provenance records about a model file's licence."""
    m = known(filename)
    if m is None:
        return {"licence": "unknown (not in Swapline's catalog)", "commercial": "unknown", "vendor": ""}
    return {"licence": m.licence, "commercial": m.commercial, "vendor": m.vendor}


def check_commercial(files: list[tuple[str, str]], builtin_note: str = "") -> None:
    """Refuse (with each model's licence) when any file is not known to allow commercial use."""
    bad = []
    for role, path in files:
        lic = licence_of(path)
        if lic["commercial"] != "yes":
            name = path.replace("\\", "/").rsplit("/", 1)[-1]
            bad.append(f"  - {role} '{name}': licence {lic['licence']} (commercial use: {lic['commercial']})")
    if bad:
        from ..errors import SwaplineError

        raise SwaplineError("'commercial use only' is on, and these models are not known to allow commercial "
                            "use:\n" + "\n".join(bad) + "\nChoose a commercially usable model (docs/models.md "
                            "lists each file's licence, e.g. GHOST is Apache-2.0) or switch 'commercial use only' off "
                            "if your use is non-commercial." + (f" {builtin_note}" if builtin_note else ""))
