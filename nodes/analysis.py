"""Face analysis nodes: load an analyzer, detect, select and align faces."""
from __future__ import annotations

import json

import numpy as np
from comfy_api.latest import io, ui
from typing_extensions import override

from ..swapline_core.backends.cache import cached
from ..swapline_core.backends.onnx_sessions import PROVIDER_CHOICES
from ..swapline_core.errors import NoFaceError
from ..swapline_core.faces import align as core_align
from ..swapline_core.faces import select as core_select
from ..swapline_core.faces.paste import crop_mask
from ..swapline_core.faces.preview import draw_faces
from ..swapline_core.types import FaceSet, FrameFaces
from . import model_paths
from .absent import ABSENT, sentence
from .convert import check_interrupt, preview_ui, progress, to_arrays, to_image, to_mask
from .types import CATEGORY, Analyzer, FaceModel, Faces, Transforms

BUILTIN = "builtin (MTCNN + dlib, no download)"
# every model Apache-2.0 or CC0 (no dlib 68-point predictor); files extracted at setup
BUILTIN_MESH = "builtin mesh (BlazeFace + MediaPipe mesh, no download)"
BUILTINS = (BUILTIN, BUILTIN_MESH)
NO_FACE_POLICIES = ("pass through", "raise")
# Score scales differ per detector: MTCNN's final-stage probabilities sit much higher than SCRFD's;
# BlazeFace's published minimum is 0.5 (the mesh's face presence then vets each detection).
BUILTIN_THRESH, SCRFD_THRESH, BLAZEFACE_THRESH = 0.9, 0.5, 0.5


def load_analyzer(pack: str, provider: str = "auto", det_size: int = 640, det_thresh: float = 0.0):
    if pack == BUILTIN:
        from ..swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

        thresh = det_thresh or BUILTIN_THRESH
        return cached("builtin-analyzer", "", (thresh,), lambda: BuiltinAnalyzer(threshold=thresh))
    if pack == BUILTIN_MESH:
        from ..swapline_core.backends.mesh_analyzer import MeshAnalyzer

        thresh = det_thresh or BLAZEFACE_THRESH
        return cached("builtin-mesh-analyzer", "", (thresh,), lambda: MeshAnalyzer(threshold=thresh))
    from ..swapline_core.backends.insightface_pack import InsightFaceAnalyzer

    path = model_paths.resolve_pack(pack)
    thresh = det_thresh or SCRFD_THRESH
    return cached("insightface-analyzer", path, (provider, det_size, thresh),
                  lambda: InsightFaceAnalyzer(path, model_paths.onnx_provider(provider), det_size, thresh))


class AnalyzerLoader(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineAnalyzerLoader",
            display_name="Load Face Analyzer (Swapline)",
            category=f"{CATEGORY}/loaders",
            description="Loads a face analyzer: an InsightFace pack from models/insightface/models/<pack> "
                        "(buffalo_l, antelopev2, ...) or one of the two built-in analyzers made only of "
                        "models that ship with the pack's setup (works with nothing downloaded).",
            inputs=[
                io.Combo.Input("pack", options=[*BUILTINS] + model_paths.analysis_packs(), default=BUILTIN,
                               tooltip="Analysis pack folder under models/insightface/models, or a built-in analyzer. "
                                       "builtin (MTCNN + dlib): its 68-point landmarks come from a model trained on "
                                       "non-commercial data. builtin mesh (BlazeFace + MediaPipe mesh): every model "
                                       "Apache-2.0 or CC0, so commercially usable; 68 points read off the 468-point "
                                       "mesh, same dlib embedding; misses near-profile faces (docs/models.md)."),
                io.Combo.Input("provider", options=list(PROVIDER_CHOICES), default="auto",
                               tooltip="ONNX Runtime execution provider: auto (CUDA when onnxruntime-gpu has it, else CPU), CPU, CUDA, "
                                       "TensorRT or TensorRT fp16 (engines built once, cached in user/swapline/trt_engines). "
                                       "The provider each session really got and its batch size are reported."),
                io.Int.Input("det_size", default=640, min=160, max=1280, step=32,
                             tooltip="Detector input size (square). 640 is the classic InsightFace setting."),
                io.Float.Input("det_thresh", default=0.0, min=0.0, max=0.99, step=0.01,
                               tooltip="Minimum detection score for a face to count (0 = the detector's own default: 0.5 for InsightFace SCRFD, 0.9 for the built-in MTCNN, 0.5 for the built-in mesh's BlazeFace)."),
                io.Boolean.Input("commercial_only", default=False, optional=True,
                                 tooltip="Refuse an analyzer with a model whose licence does not allow commercial "
                                         "use, or is unknown (builtin (MTCNN + dlib): its 68-point model; InsightFace "
                                         "packs: research only). builtin mesh passes."),
            ],
            outputs=[Analyzer.Output(display_name="analyzer"),
                     io.String.Output(display_name="providers")],
        )

    @classmethod
    @override
    def validate_inputs(cls, pack=ABSENT):
        if pack is ABSENT:
            return sentence(cls, "pack", f"'{BUILTIN}', '{BUILTIN_MESH}' or an analysis pack folder under "
                                         "models/insightface/models (e.g. buffalo_l)")
        return pack is None or pack in BUILTINS or model_paths.check_choice(
            "analysis pack", pack, model_paths.analysis_packs(), model_paths.analysis_roots())

    @classmethod
    @override
    def fingerprint_inputs(cls, pack, **_):
        return pack if pack in BUILTINS else model_paths.file_fingerprint("analysis pack", pack)

    @classmethod
    @override
    def execute(cls, pack, provider, det_size, det_thresh, commercial_only=False) -> io.NodeOutput:
        analyzer = load_analyzer(pack, provider, det_size, det_thresh)
        if commercial_only:
            from ..swapline_core.backends.catalog import check_commercial

            check_commercial(analyzer.model_files(), f"'{BUILTIN_MESH}' is made only of commercially usable "
                                                     "models (docs/models.md).")
        report = json.dumps({"analyzer": analyzer.name, "recognizer": analyzer.recognizer_name,
                             "providers": analyzer.providers}, indent=1)
        return io.NodeOutput(analyzer, report, ui=ui.PreviewText(report))


def detect(analyzer, frames: list[np.ndarray], embeddings: bool, landmarks: bool,
           first_index: int = 0) -> list[FrameFaces]:
    found = analyzer.detect(frames)
    if embeddings and analyzer.embedding_dim:
        analyzer.embed(frames, found)
    if landmarks and analyzer.supports_landmarks:
        analyzer.landmarks68(frames, found)
    return [FrameFaces(first_index + i, fs, f.shape[1], f.shape[0]) for i, (f, fs) in enumerate(zip(frames, found))]


def apply_no_face_policy(faceset: FaceSet, policy: str) -> None:
    missing = [fr.index for fr in faceset.frames if not fr.faces]
    if missing and policy == "raise":
        raise NoFaceError(f"no face found in frame(s) {missing[:20]}{' ...' if len(missing) > 20 else ''}; "
                          "set no_face to 'pass through' to keep such frames unchanged")


class DetectFaces(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineDetectFaces",
            display_name="Detect Faces (Swapline)",
            category=f"{CATEGORY}/faces",
            description="Detects faces in an image batch: boxes, five keypoints, scores and (on demand) "
                        "identity embeddings and 68-point landmarks. Frames without a face get an explicit "
                        "'no_face' record; no frame is ever dropped.",
            inputs=[
                io.Image.Input("images", tooltip="Image batch (RGB, RGBA or grayscale)."),
                Analyzer.Input("analyzer", tooltip="From Load Face Analyzer."),
                io.Boolean.Input("embeddings", default=True,
                                 tooltip="Compute identity embeddings (needed to select faces by identity)."),
                io.Boolean.Input("landmarks", default=False,
                                 tooltip="Compute 68-point landmarks where the analyzer has them (the classical swapper computes them itself when needed)."),
                io.Combo.Input("no_face", options=list(NO_FACE_POLICIES), default="pass through",
                               tooltip="What to do when a frame has no face: keep it (recorded as no_face) or stop with an error."),
            ],
            outputs=[Faces.Output(display_name="faces"),
                     io.Image.Output(display_name="preview"),
                     io.String.Output(display_name="report")],
        )

    @classmethod
    @override
    def execute(cls, images, analyzer, embeddings, landmarks, no_face) -> io.NodeOutput:
        frames = to_arrays(images)
        pbar, result = progress(len(frames)), []
        for s in range(0, len(frames), 8):
            check_interrupt()
            result += detect(analyzer, frames[s:s + 8], embeddings, landmarks, s)
            pbar.update(len(frames[s:s + 8]))
        faceset = FaceSet(result, analyzer)
        apply_no_face_policy(faceset, no_face)
        preview = to_image([draw_faces(f, fr.faces) for f, fr in zip(frames, result)])
        report = json.dumps(faceset.to_json())
        return io.NodeOutput(faceset, preview, report, ui=preview_ui(cls, preview, faces=faceset.to_json()))


class SelectFaces(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineSelectFaces",
            display_name="Select Faces (Swapline)",
            category=f"{CATEGORY}/faces",
            description="Chooses which detected faces to swap. 'identity' (default) keeps faces whose "
                        "embedding matches the reference face model: robust on video, unlike an index.",
            inputs=[
                Faces.Input("faces", tooltip="From Detect Faces."),
                io.Combo.Input("mode", options=list(core_select.MODES), default="identity",
                               tooltip="identity: similarity to the reference; largest; index / reading_order: the indices below; all; gender_*: where the pack predicts gender."),
                FaceModel.Input("reference", optional=True,
                                                       tooltip="Face model of the person to select (identity mode)."),
                io.Float.Input("threshold", default=0.35, min=-1.0, max=1.0, step=0.01,
                               tooltip="Minimum cosine similarity to the reference for identity mode."),
                io.String.Input("indices", default="0", tooltip="Comma list or ranges, e.g. '0,2-3' (index and reading_order modes)."),
                io.Int.Input("max_faces", default=1, min=0, max=64, tooltip="At most this many faces per frame (0 = no limit)."),
                io.Image.Input("images", optional=True, tooltip="The detected images, to draw a preview of the selection."),
            ],
            outputs=[Faces.Output(display_name="selected"),
                     io.String.Output(display_name="similarities")],
        )

    @classmethod
    @override
    def execute(cls, faces, mode, threshold, indices, max_faces, reference=None, images=None) -> io.NodeOutput:
        ref = None if reference is None else reference.embedding
        if ref is not None and faces.frames and any(f.embedding is None for fr in faces.frames for f in fr.faces):
            raise ValueError("the faces have no embeddings: enable 'embeddings' on Detect Faces")
        if ref is not None and reference.recognizer != getattr(faces.analyzer, "recognizer_name", reference.recognizer):
            raise ValueError(f"the reference face model was made with '{reference.recognizer}' but the faces "
                             f"were embedded by '{faces.analyzer.recognizer_name}': rebuild the face model with the same analyzer")
        frames, sims, chosen_all = [], [], []
        for fr in faces.frames:
            chosen, s = core_select.select(fr.faces, mode, ref, threshold, indices, max_faces)
            frames.append(FrameFaces(fr.index, [fr.faces[i] for i in chosen], fr.width, fr.height))
            sims.append(s)
            chosen_all.append(chosen)
        out = FaceSet(frames, faces.analyzer, selection=mode, similarities=[[s[i] for i in c] for s, c in zip(sims, chosen_all)],
                      cuts=faces.cuts)
        report = json.dumps([{"frame": fr.index, "selected": c, "similarity": [None if v is None else round(v, 4) for v in s]}
                             for fr, c, s in zip(faces.frames, chosen_all, sims)])
        if images is not None:
            arrays = to_arrays(images)
            preview = to_image([draw_faces(a, fr.faces, c, s) for a, fr, c, s in zip(arrays, faces.frames, chosen_all, sims)])
            return io.NodeOutput(out, report, ui=preview_ui(cls, preview, selection=out.to_json()))
        return io.NodeOutput(out, report, ui=preview_ui(cls, selection=out.to_json()))


class AlignFaces(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineAlignFaces",
            display_name="Align Faces (Swapline)",
            category=f"{CATEGORY}/faces",
            description="Aligned face crops on the ArcFace (or FFHQ) template by a least-squares similarity "
                        "transform, the transforms back to each frame, and soft face masks.",
            inputs=[
                io.Image.Input("images", tooltip="The images the faces were detected in."),
                Faces.Input("faces", tooltip="Detected or selected faces."),
                io.Combo.Input("size", options=[str(s) for s in core_align.CROP_SIZES], default="512",
                               tooltip="Crop size in pixels."),
                io.Combo.Input("template", options=["arcface", "ffhq"], default="arcface",
                               tooltip="arcface: what swappers/recognizers expect; ffhq: what GFPGAN-style restorers expect."),
            ],
            outputs=[io.Image.Output(display_name="crops"), Transforms.Output(display_name="transforms"),
                     io.Mask.Output(display_name="masks")],
        )

    @classmethod
    @override
    def execute(cls, images, faces, size, template) -> io.NodeOutput:
        size = int(size)
        arrays = to_arrays(images)
        crops, transforms = [], []
        for fr in faces.frames:
            if fr.faces and fr.index < len(arrays):
                c, m = core_align.warp_crops(arrays[fr.index], fr.faces, size, template)
                crops.extend(c)
                transforms.extend({"frame": fr.index, "face": j, "matrix": m[j], "size": size, "template": template,
                                   "frame_hw": arrays[fr.index].shape[:2]} for j in range(len(c)))
        if not crops:
            raise NoFaceError("no faces to align: every frame is 'no_face' (check detection and selection)")
        mask = crop_mask(size, "ellipse")
        return io.NodeOutput(to_image(crops), transforms, to_mask([mask] * len(crops)))


class PasteFaces(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplinePasteFaces",
            display_name="Paste Faces Back (Swapline)",
            category=f"{CATEGORY}/faces",
            description="Pastes edited aligned face crops (e.g. refined by a diffusion model) back into the "
                        "frames they came from, using Align Faces' transforms and a feathered mask. Pixels "
                        "outside the mask stay bit-identical.",
            inputs=[
                io.Image.Input("images", tooltip="The frames the faces were aligned from."),
                io.Image.Input("crops", tooltip="Edited crops, in the order Align Faces produced them (any size: resized to the aligned size)."),
                Transforms.Input("transforms", tooltip="From Align Faces."),
                io.Float.Input("mask_erode", default=0.02, min=0.0, max=0.3, step=0.005,
                               tooltip="Shrink the paste mask by this fraction of the crop size."),
                io.Float.Input("mask_blur", default=0.08, min=0.0, max=0.3, step=0.005,
                               tooltip="Feather width as a fraction of the crop size (inside the mask only)."),
            ],
            outputs=[io.Image.Output(display_name="images"), io.Mask.Output(display_name="mask")],
        )

    @classmethod
    @override
    def execute(cls, images, crops, transforms, mask_erode, mask_blur) -> io.NodeOutput:
        import cv2

        from ..swapline_core.faces.paste import apply_patches, crop_to_patch, union_mask

        frames = to_arrays(images)
        edited = to_arrays(crops)
        if len(edited) != len(transforms):
            raise ValueError(f"{len(edited)} crops but {len(transforms)} transforms: connect the crops made from "
                             "this Align Faces node (one per face, same order)")
        per_frame: dict[int, list] = {}
        for crop, t in zip(edited, transforms):
            size = t["size"]
            if crop.shape[:2] != (size, size):
                crop = cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA)
            mask = crop_mask(size, "ellipse", erode=mask_erode, blur=mask_blur)
            patch = crop_to_patch(frames[t["frame"]].shape[:2], crop.astype(np.float32), mask, t["matrix"])
            if patch is not None:
                per_frame.setdefault(t["frame"], []).append(patch)
        out = [apply_patches(f, per_frame.get(i, [])) for i, f in enumerate(frames)]
        masks = [union_mask(f.shape[:2], per_frame.get(i, [])) for i, f in enumerate(frames)]
        return io.NodeOutput(to_image(out), to_mask(masks))
