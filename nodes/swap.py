"""Swapper loading and the image-batch swap node."""
from __future__ import annotations

import json

from comfy_api.latest import io, ui
from typing_extensions import override

from ..swapline_core.backends.cache import cached
from ..swapline_core.backends.onnx_sessions import PROVIDER_CHOICES
from ..swapline_core.backends.swappers.families import FAMILIES
from ..swapline_core.errors import SwaplineError
from ..swapline_core.faces import source_check
from ..swapline_core.faces.paste import MASK_KINDS, union_mask
from ..swapline_core.guards import GuardOptions, Refusals, refused_boxes
from ..swapline_core.masks import MaskOptions as CoreMaskOptions
from ..swapline_core.masks.preview import draw_stack
from ..swapline_core.swap.chunk import SwapOptions, swap_chunk
from ..swapline_core.types import FaceSet
from ..swapline_core.video.stages import swap_stage_records
from . import image_provenance, model_paths
from .absent import ABSENT, sentence
from .convert import check_interrupt, preview_ui, progress, to_arrays, to_image, to_mask
from .types import CATEGORY, FaceModel, Faces, MaskOptions, Swapper

CLASSICAL = "builtin classical (landmark warp, no download)"
MESH = "builtin mesh (MediaPipe mesh warp, no download)"
BUILTIN_SWAPPERS = (CLASSICAL, MESH)
CHUNK = 8
FAMILY_CHOICES = ("auto",) + tuple(FAMILIES)
BOOST_CHOICES = ("off", "256", "384", "512", "768", "1024")
# files in FaceFusion's folder that are not swappers (converters, restorers)
_NOT_SWAPPERS = ("crossface_", "gpen_", "gfpgan", "codeformer", "restoreformer", "xseg", "bisenet", "arcface",
                 "yoloface", "retinaface", "scrfd", "2dfan", "fan_68", "fairface", "open_nsfw", "nsfw")


def swapper_files() -> list[str]:
    """Widget values: models/insightface files bare (as before), other folders as 'folder/file'."""
    # analysis packs live under insightface/models/<pack>; only top-level files are swappers
    out = [f for f in model_paths.files(model_paths.INSIGHTFACE) if not f.replace("\\", "/").startswith("models/")]
    for folder in model_paths.SWAPPER_FOLDERS:
        out += [f"{folder}/{f}" for f in model_paths.files(folder)
                if not f.replace("\\", "/").rsplit("/", 1)[-1].lower().startswith(_NOT_SWAPPERS)]
    return out


def swapper_search_folders() -> list[str]:
    return [d for name in (model_paths.INSIGHTFACE,) + model_paths.SWAPPER_FOLDERS for d in model_paths.folders(name)]


def resolve_swapper(name: str) -> str:
    head, _, rest = name.replace("\\", "/").partition("/")
    if rest and head in model_paths.SWAPPER_FOLDERS:
        return model_paths.resolve(head, rest)
    return model_paths.resolve(model_paths.INSIGHTFACE, name)


def load_swapper(name: str, provider: str, mask_kind: str, mask_erode: float, mask_blur: float,
                 family: str = "auto", pixel_boost: str = "off", identity_weight: float = 0.5,
                 commercial_only: bool = False):
    settings = (provider, mask_kind, mask_erode, mask_blur, family, pixel_boost, identity_weight)
    if name == CLASSICAL:
        from ..swapline_core.backends.classical import ClassicalSwapper

        # Swapline's own code over the analyzer's landmarks: no third-party swap weights
        return cached("classical-swapper", "", settings[:4],
                      lambda: ClassicalSwapper(mask_erosion=mask_erode, mask_feather=mask_blur))
    from ..swapline_core.backends.catalog import check_commercial

    if name == MESH:
        from ..swapline_core.backends.mesh_swap import MeshSwapper

        # Swapline's own code over MediaPipe's Apache-2.0 mesh (no dlib 68-point predictor)
        sw = cached("mesh-swapper", "", settings[:4],
                    lambda: MeshSwapper(mask_erosion=mask_erode, mask_feather=mask_blur))
        if commercial_only:
            check_commercial(sw.model_files())
        return sw
    from ..swapline_core.backends.swappers import FamilySwapper

    path = resolve_swapper(name)
    boost = 0 if pixel_boost in ("off", "", None) else int(pixel_boost)
    sw = cached("family-swapper", path, settings, lambda: FamilySwapper(
        path, model_paths.onnx_provider(provider), mask_kind, mask_erode, mask_blur, family=family, pixel_boost=boost,
        identity_weight=identity_weight, converter_dirs=[d for n in model_paths.SWAPPER_FOLDERS
                                                         for d in model_paths.folders(n)]))
    if commercial_only:
        check_commercial(sw.model_files())
    return sw


def swapper_report(sw) -> str:
    from ..swapline_core.backends.catalog import licence_of

    if not hasattr(sw, "spec"):
        family = "mesh" if sw.name == "mesh_warp" else "classical"
        return json.dumps({"swapper": sw.name, "family": family, "licence": "Swapline (this pack)",
                           "models": [{"role": r, "file": p.replace("\\", "/").rsplit("/", 1)[-1], **licence_of(p)}
                                      for r, p in sw.model_files()]}, indent=1)
    return json.dumps({"swapper": sw.name, "family": sw.spec.name, "detected_by": sw.detected_by,
                       "crop": sw.crop_size, "pixel_boost": sw.k > 1, "identity_weight": sw.identity_weight,
                       "providers": sw.providers,
                       "batch": {k: {"max_batch": r.max_batch, "batch_fixed_by_graph": r.fixed, "io_binding": r.io_binding}
                                 for k, r in getattr(sw, "batching", {}).items()},
                       "models": [{"role": r, "file": p.replace("\\", "/").rsplit("/", 1)[-1], **licence_of(p)}
                                  for r, p in sw.model_files()]}, indent=1)


class SwapperLoader(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineSwapperLoader",
            display_name="Load Face Swapper (Swapline)",
            category=f"{CATEGORY}/loaders",
            description="Loads a face swapper: an ONNX file of a known family (INSwapper/ReSwapper, HyperSwap, "
                        "GHOST, SimSwap, HiFiFace, BlendSwap, UniFace; see docs/swappers.md) from models/insightface, "
                        "models/hyperswap, models/reswapper or models/facefusion, detected by its signature, or "
                        "the built-in classical landmark-warp swapper.",
            inputs=[
                io.Combo.Input("swapper", options=list(BUILTIN_SWAPPERS) + swapper_files(), default=CLASSICAL,
                               tooltip="Swapper model file (models/insightface, hyperswap/, reswapper/, facefusion/), "
                                       "or a built-in swapper: classical (68-point warp) or mesh (MediaPipe's 468-point "
                                       "mesh, Apache-2.0 models, commercially usable)."),
                io.Combo.Input("provider", options=list(PROVIDER_CHOICES), default="auto",
                               tooltip="ONNX Runtime execution provider: auto (CUDA when onnxruntime-gpu has it, else CPU), CPU, CUDA, "
                                       "TensorRT or TensorRT fp16 (engines built once, cached in user/swapline/trt_engines). "
                                       "Neural swappers only. The provider each session really got and its batch size are reported."),
                io.Combo.Input("mask", options=list(MASK_KINDS), default="ellipse",
                               tooltip="Shape of the paste-back mask in the aligned crop."),
                io.Float.Input("mask_erode", default=0.0, min=0.0, max=0.3, step=0.005,
                               tooltip="Shrink the paste mask by this fraction of the face size."),
                io.Float.Input("mask_blur", default=0.05, min=0.0, max=0.3, step=0.005,
                               tooltip="Feather width of the paste mask as a fraction of the face size (inside the mask only)."),
                io.Combo.Input("family", options=list(FAMILY_CHOICES), default="auto", optional=True,
                               tooltip="Swapper family; 'auto' detects it from the file's signature (and its name "
                                       "where families share a signature)."),
                io.Combo.Input("pixel_boost", options=list(BOOST_CHOICES), default="off", optional=True,
                               tooltip="Swap at this crop size by running the model on sub-pixel-shifted tiles of a "
                                       "larger aligned crop (a multiple of the model's own size)."),
                io.Float.Input("identity_weight", default=0.5, min=0.0, max=1.0, step=0.05, optional=True,
                               tooltip="0.5 = the source identity as is; lower keeps more of each target face's "
                                       "identity (up to 35 %), higher pushes away from it. Embedding-driven families only."),
                io.Boolean.Input("commercial_only", default=False, optional=True,
                                 tooltip="Refuse models whose licence does not allow commercial use, or is unknown."),
            ],
            outputs=[Swapper.Output(display_name="swapper")],
        )

    @classmethod
    @override
    def validate_inputs(cls, swapper=ABSENT):
        if swapper is ABSENT:
            return sentence(cls, "swapper", f"'{CLASSICAL}' or a swapper file from models/insightface, "
                                            "hyperswap, reswapper or facefusion")
        return swapper is None or swapper in BUILTIN_SWAPPERS or model_paths.check_choice(
            "swapper", swapper, swapper_files(), swapper_search_folders())

    @classmethod
    @override
    def fingerprint_inputs(cls, swapper, **_):
        return swapper if swapper in BUILTIN_SWAPPERS else model_paths.file_fingerprint(
            model_paths.INSIGHTFACE, swapper, resolve_swapper)

    @classmethod
    @override
    def execute(cls, swapper, provider, mask, mask_erode, mask_blur, family="auto", pixel_boost="off",
                identity_weight=0.5, commercial_only=False) -> io.NodeOutput:
        sw = load_swapper(swapper, provider, mask, mask_erode, mask_blur, family, pixel_boost, identity_weight,
                          commercial_only)
        return io.NodeOutput(sw, ui=ui.PreviewText(swapper_report(sw)))


def guard_inputs(tracked: bool = False) -> list:
    """Optional (so saved API prompts stay valid) guard widgets shared by the two swap nodes;
    ``tracked``: the pose tolerance too, which only a clip's tracks can use (Swap Faces in Frames)."""
    out = [io.Boolean.Input("guards", default=True, optional=True,
                            tooltip="Leave faces the swapper cannot do well untouched and report why: turned "
                                    "too far, too small, head pose unknown, implausible landmarks, a box jumping "
                                    "against its track, no skin where the paste would go."),
           io.Float.Input("max_yaw", default=0.0, min=0.0, max=90.0, step=1.0, optional=True,
                          tooltip="Refuse faces turned more than this many degrees; 0 uses the swapper's "
                                  "own limit (45 for the built-in classical swapper). Never looser than it.")]
    if tracked:
        out.append(io.Float.Input(
            "pose_tolerance_deg", default=0.0, min=0.0, max=30.0, step=1.0, optional=True,
            tooltip="Hysteresis on head pose, off at 0: a face turned or pitched up to this many degrees past "
                    "the swapper's limit is still swapped when its track is within the limit at most "
                    f"{GuardOptions.bridge_frames} frames before and after it in the same shot, so a brief turn "
                    "does not flip the face back to the original; those frames are reported as bridged. "
                    "0 (default): the limit is a limit, every face past it is left untouched."))
    return out


def guard_options(guards: bool = True, max_yaw: float = 0.0, pose_tolerance_deg: float = 0.0) -> GuardOptions:
    return GuardOptions(enabled=bool(guards), max_yaw=float(max_yaw or 0.0),
                        pose_tolerance_deg=float(pose_tolerance_deg or 0.0))


class SwapFaces(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineSwapFaces",
            display_name="Swap Faces (Swapline)",
            category=f"{CATEGORY}/swap",
            description="Swaps the selected faces of an image batch with a face model, batched through the "
                        "swapper, and pastes them back with a feathered mask. Frames without a selected face "
                        "pass through unchanged; the output has exactly as many frames as the input.",
            inputs=[
                io.Image.Input("images", tooltip="Target images (the frames to change)."),
                Faces.Input("faces", tooltip="Selected faces of these images (Select Faces)."),
                FaceModel.Input("face_model", tooltip="The source identity (Build/Load Face Model)."),
                Swapper.Input("swapper", tooltip="From Load Face Swapper."),
                io.Boolean.Input("color_match", default=True,
                                 tooltip="Match the swapped face's colour statistics to the target skin inside the mask."),
                *guard_inputs(),
                MaskOptions.Input("mask_options", optional=True,
                                  tooltip="From Face Mask Options. Not connected: the built-in occluder and, for the "
                                          "classical swapper, the kept mouth interior."),
            ],
            outputs=[io.Image.Output(display_name="images"),
                     io.Mask.Output(display_name="mask", tooltip="The final paste mask (the whole mask stack)."),
                     io.String.Output(display_name="records"),
                     io.Image.Output(display_name="mask_preview",
                                     tooltip="The mask stack on the target: occlusion red, parser regions blue, "
                                             "landmark area yellow, kept mouth green; dimmed where nothing is pasted.")],
        )

    @classmethod
    @override
    def execute(cls, images, faces: FaceSet, face_model, swapper, color_match, guards=True,
                max_yaw=0.0, mask_options=None) -> io.NodeOutput:
        frames = to_arrays(images)
        if len(faces.frames) != len(frames):
            raise SwaplineError(f"faces were detected on {len(faces.frames)} frames but {len(frames)} images "
                                "were given: connect the same images to Detect Faces and Swap Faces")
        per_frame = [fr.faces for fr in faces.frames]
        pbar = progress(len(frames))
        opts = SwapOptions(color_match=color_match, masks=mask_options or CoreMaskOptions(),
                           guards=guard_options(guards, max_yaw))
        out, masks, records, previews = [], [], [], []
        refusals = Refusals()
        for s in range(0, len(frames), CHUNK):
            check_interrupt()
            res = swap_chunk(swapper, faces.analyzer, frames[s:s + CHUNK], per_frame[s:s + CHUNK], face_model, opts)
            out += res.frames
            masks += [union_mask(f.shape[:2], ps) for f, ps in zip(res.frames, res.patches)]
            previews += [draw_stack(f, ps) for f, ps in zip(frames[s:s + CHUNK], res.patches)]
            records += res.records
            refusals.add(s, res.records)
            pbar.update(len(res.frames))
        report = json.dumps([{"frame": i, "status": _frame_status(r), "faces": r} for i, r in enumerate(records)])
        result = to_image(out)
        image_provenance.extend(images, result, swap_stage_records(swapper, faces.analyzer, opts))
        image_provenance.record_refused(result, refused_boxes(records))
        # The refused faces (left untouched) with their reasons, for the editor's status line and
        # for API users reading the history: a refusal must be seen, not only be in `records`.
        summary = refusals.to_json()
        if source_check.warnings_of(face_model):
            summary["source_warnings"] = source_check.warnings_of(face_model)
        return io.NodeOutput(result, to_mask(masks), report, to_image(previews),
                             ui=preview_ui(cls, swap=summary))


def _frame_status(records: list[dict]) -> str:
    if not records:
        return "no_face"
    return "swapped" if any(r.get("status") == "swapped" for r in records) else "skipped"
