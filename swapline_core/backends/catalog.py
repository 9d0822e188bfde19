"""Models Swapline can use: where they live, how big they are and where users get them.

The README's models table is written from this list; install.py reports which are present.
"""
from __future__ import annotations

from dataclasses import dataclass

# Folder names relative to ComfyUI's models directory, in the layout ReActor users already have.
INSIGHTFACE = "insightface"
ANALYSIS_PACKS = "insightface/models"
FACERESTORE = "facerestore_models"
FACE_MODELS = "swapline/faces"
FACEMASK = "facemask"          # FaceFusion's occluder / face parser ONNX files (mask stack)
MODEL_FOLDERS = (INSIGHTFACE, ANALYSIS_PACKS, FACERESTORE, FACE_MODELS, FACEMASK)


@dataclass(frozen=True)
class KnownModel:
    folder: str
    filename: str
    role: str
    licence: str
    source: str
    size_bytes: int | None = None
    sha256: str | None = None


KNOWN_MODELS = (
    KnownModel(INSIGHTFACE, "inswapper_128.onnx", "neural face swapper (128 px)",
               "non-commercial research only (InsightFace)",
               "InsightFace release / the ReActor and roop model mirrors", 554253681,
               "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af"),
    KnownModel(INSIGHTFACE, "inswapper_128_fp16.onnx", "neural face swapper, fp16",
               "non-commercial research only (InsightFace)",
               "FaceFusion / ReActor model mirrors", 277680638,
               "6d51a9278a1f650cffefc18ba53f38bf2769bf4bbff89267822cf72945f8a38b"),
    KnownModel(f"{ANALYSIS_PACKS}/buffalo_l", "det_10g.onnx", "SCRFD-10G face detector",
               "non-commercial research only (InsightFace)",
               "insightface buffalo_l.zip (github.com/deepinsight/insightface releases)", 16923827,
               "5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91"),
    KnownModel(f"{ANALYSIS_PACKS}/buffalo_l", "w600k_r50.onnx", "ArcFace R50 recognizer (512-d)",
               "non-commercial research only (InsightFace)",
               "insightface buffalo_l.zip (github.com/deepinsight/insightface releases)", 174383860,
               "4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43"),
    # optional: 68-point landmarks (hints, classical swapper); size/hash as published by several
    # independent projects pinning buffalo_l's members
    KnownModel(f"{ANALYSIS_PACKS}/buffalo_l", "1k3d68.onnx", "68-point 3-D landmarks (optional)",
               "non-commercial research only (InsightFace)",
               "insightface buffalo_l.zip (github.com/deepinsight/insightface releases)", 143607619,
               "df5c06b8a0c12e422b2ed8947b8869faa4105387f199c477af038aa01f9a45cc"),
    KnownModel(FACERESTORE, "GFPGANv1.4.pth", "GFPGAN v1.4 face restorer", "Apache-2.0 (TencentARC)",
               "github.com/TencentARC/GFPGAN releases", 348632874,
               "e2cd4703ab14f4d01fd1383a8a8b266f9a5833dacee8e6a79d3bf21a1b6be5ad"),
    KnownModel(FACERESTORE, "GFPGANv1.3.pth", "GFPGAN v1.3 face restorer", "Apache-2.0 (TencentARC)",
               "github.com/TencentARC/GFPGAN releases", 348632874,
               "c953a88f2727c85c3d9ae72e2bd4846bbaf59fe6972ad94130e23e7017524a70"),
    # Mask stack models, the files FaceFusion users already have (its .assets/models). FaceFusion
    # publishes CRC32 .hash files, not sha256, and no sizes: both left unset rather than guessed.
    *(KnownModel(FACEMASK, f"xseg_{k}.onnx", "XSeg face occluder (256 px, optional)",
                 "GPL-3.0 (DeepFaceLab)", "FaceFusion model assets (facefusion-assets releases, "
                 f"models-{'3.2.0' if k == 3 else '3.1.0'})") for k in (1, 2, 3)),
    *(KnownModel(FACEMASK, f"bisenet_resnet_{d}.onnx", "BiSeNet face parser (512 px, optional)",
                 "MIT (yakhyo/face-parsing)", "FaceFusion model assets (facefusion-assets releases, "
                 f"models-{'3.0.0' if d == 34 else '3.1.0'})") for d in (18, 34)),
)
