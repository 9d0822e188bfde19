"""The model setups compared: the shipped built-in mesh path (BlazeFace + MediaPipe mesh analyzer,
mesh swapper), the older built-in classical path (MTCNN + dlib, 68-point warp) and InsightFace
(buffalo_l + inswapper_128 layout, here the synthetic stand-ins from devtools/synthetic_models.py).

Loading models, building the source face model and the target reference happen here, before
any timing; the settings are the shipped workflows' (workflows/api/video_swap*.json).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .paths import MODELS, SOURCE_FACE, TARGET_REFERENCE


@dataclass
class Case:
    name: str
    description: str
    analyzer: object
    swapper: object
    source: object            # SourceIdentity pasted in
    reference: object         # SourceIdentity of the person to replace
    threshold: float          # identity similarity threshold (the workflow's)
    notes: list[str] = field(default_factory=list)

    @property
    def needs_landmarks(self) -> bool:
        return bool(getattr(self.swapper, "needs_landmarks", False))


def load_rgb(path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB")).copy()


def face_model(analyzer, image: np.ndarray):
    """As Build Face Model does: the largest face, embedded (with landmarks where the analyzer has them)."""
    from swapline_core.faces import identity as fm

    return fm.build_from_images(analyzer, [image])


def builtin_case() -> Case:
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import ClassicalSwapper

    analyzer = BuiltinAnalyzer(threshold=0.9)   # what Load Face Analyzer maps det_thresh 0.5 to
    return Case("builtin", "built-in MTCNN + dlib analyzer, classical landmark-warp swapper",
                analyzer, ClassicalSwapper(), face_model(analyzer, load_rgb(SOURCE_FACE)),
                face_model(analyzer, load_rgb(TARGET_REFERENCE)), threshold=0.9,
                notes=["ClassicalSwapper() with its defaults (seamless blend, colour transfer, relight)"])


def mesh_case() -> Case:
    from swapline_core.backends.blazeface import MIN_SCORE
    from swapline_core.backends.mesh_analyzer import MeshAnalyzer
    from swapline_core.backends.mesh_swap import MeshSwapper

    # as Load Face Analyzer / Load Face Swapper build them for the shipped built-in workflows
    analyzer = MeshAnalyzer(threshold=MIN_SCORE)
    return Case("builtin_mesh", "built-in mesh analyzer (BlazeFace + MediaPipe mesh), mesh swapper: the shipped "
                "built-in workflows", analyzer, MeshSwapper(mask_erosion=0.0, mask_feather=0.05, analyzer=analyzer),
                face_model(analyzer, load_rgb(SOURCE_FACE)), face_model(analyzer, load_rgb(TARGET_REFERENCE)),
                threshold=0.9, notes=["MeshSwapper as Load Face Swapper's builtin mesh entry makes it "
                                      "(mask_blur 0.05); the hands occluder rule runs in the mask stack"])


def insightface_case() -> Case:
    from devtools.synthetic_models import build_models
    from swapline_core.backends.insightface_pack import InsightFaceAnalyzer
    from swapline_core.backends.inswapper import InSwapper

    files = build_models(MODELS)
    analyzer = InsightFaceAnalyzer(str(files["detector"].parent), "auto", 640, 0.5)
    swapper = InSwapper(str(files["swapper"]), "auto", "ellipse", 0.03, 0.1)
    return Case("insightface_synthetic",
                "buffalo_l + inswapper_128 stand-ins (synthetic weights, real signatures and loaders)",
                analyzer, swapper, face_model(analyzer, load_rgb(SOURCE_FACE)),
                face_model(analyzer, load_rgb(TARGET_REFERENCE)), threshold=0.35,
                notes=["the stand-in detector is MTCNN's O-Net as an SCRFD-shaped graph, slower than "
                       "the real SCRFD-10G; the recognizer and swapper are small random convnets, much "
                       "faster than the real w600k_r50 / inswapper_128",
                       "the stand-in 1k3d68 (68-point landmarks) is a tiny net drawing a mean face, "
                       "much faster than the real one"])


CASES = {"builtin_mesh": mesh_case, "builtin": builtin_case, "insightface_synthetic": insightface_case}
