"""Swapper loading and the image-batch swap node."""
from __future__ import annotations

import json

from comfy_api.latest import io

from ..swapline_core.backends.cache import cached
from ..swapline_core.backends.onnx_sessions import PROVIDER_CHOICES
from ..swapline_core.errors import SwaplineError
from ..swapline_core.faces.paste import MASK_KINDS, union_mask
from ..swapline_core.swap.chunk import SwapOptions, swap_chunk
from ..swapline_core.types import FaceSet
from . import model_paths
from .convert import check_interrupt, progress, to_arrays, to_image, to_mask
from .types import CATEGORY, FaceModel, Faces, Swapper

CLASSICAL = "builtin classical (landmark warp, no download)"
CHUNK = 8


def swapper_files() -> list[str]:
    # analysis packs live under insightface/models/<pack>; only top-level files are swappers
    return [f for f in model_paths.files(model_paths.INSIGHTFACE) if not f.replace("\\", "/").startswith("models/")]


def load_swapper(name: str, provider: str, mask_kind: str, mask_erode: float, mask_blur: float):
    settings = (provider, mask_kind, mask_erode, mask_blur)
    if name == CLASSICAL:
        from ..swapline_core.backends.classical import ClassicalSwapper

        return cached("classical-swapper", "", settings,
                      lambda: ClassicalSwapper(mask_erosion=mask_erode, mask_feather=mask_blur))
    from ..swapline_core.backends.inswapper import InSwapper

    path = model_paths.resolve(model_paths.INSIGHTFACE, name)
    return cached("inswapper", path, settings, lambda: InSwapper(path, provider, mask_kind, mask_erode, mask_blur))


class SwapperLoader(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineSwapperLoader",
            display_name="Load Face Swapper (Swapline)",
            category=f"{CATEGORY}/loaders",
            description="Loads a face swapper: inswapper_128.onnx (or any ONNX with its signature) from "
                        "models/insightface, or the built-in classical landmark-warp swapper.",
            inputs=[
                io.Combo.Input("swapper", options=[CLASSICAL] + swapper_files(), default=CLASSICAL,
                               tooltip="Swapper model file in models/insightface, or the built-in classical swapper."),
                io.Combo.Input("provider", options=list(PROVIDER_CHOICES), default="auto",
                               tooltip="ONNX Runtime execution provider (neural swappers)."),
                io.Combo.Input("mask", options=list(MASK_KINDS), default="ellipse",
                               tooltip="Shape of the paste-back mask in the aligned crop."),
                io.Float.Input("mask_erode", default=0.0, min=0.0, max=0.3, step=0.005,
                               tooltip="Shrink the paste mask by this fraction of the face size."),
                io.Float.Input("mask_blur", default=0.05, min=0.0, max=0.3, step=0.005,
                               tooltip="Feather width of the paste mask as a fraction of the face size (inside the mask only)."),
            ],
            outputs=[Swapper.Output(display_name="swapper")],
        )

    @classmethod
    def validate_inputs(cls, swapper):
        return swapper == CLASSICAL or model_paths.check_choice(
            "swapper", swapper, swapper_files(), model_paths.folders(model_paths.INSIGHTFACE))

    @classmethod
    def execute(cls, swapper, provider, mask, mask_erode, mask_blur) -> io.NodeOutput:
        return io.NodeOutput(load_swapper(swapper, provider, mask, mask_erode, mask_blur))


class SwapFaces(io.ComfyNode):
    @classmethod
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
            ],
            outputs=[io.Image.Output(display_name="images"), io.Mask.Output(display_name="mask"),
                     io.String.Output(display_name="records")],
        )

    @classmethod
    def execute(cls, images, faces: FaceSet, face_model, swapper, color_match) -> io.NodeOutput:
        frames = to_arrays(images)
        if len(faces.frames) != len(frames):
            raise SwaplineError(f"faces were detected on {len(faces.frames)} frames but {len(frames)} images "
                                "were given: connect the same images to Detect Faces and Swap Faces")
        per_frame = [fr.faces for fr in faces.frames]
        pbar = progress(len(frames))
        out, masks, records = [], [], []
        for s in range(0, len(frames), CHUNK):
            check_interrupt()
            res = swap_chunk(swapper, faces.analyzer, frames[s:s + CHUNK], per_frame[s:s + CHUNK], face_model,
                             SwapOptions(color_match=color_match))
            out += res.frames
            masks += [union_mask(f.shape[:2], ps) for f, ps in zip(res.frames, res.patches)]
            records += res.records
            pbar.update(len(res.frames))
        report = json.dumps([{"frame": i, "status": _frame_status(r), "faces": r} for i, r in enumerate(records)])
        return io.NodeOutput(to_image(out), to_mask(masks), report)


def _frame_status(records: list[dict]) -> str:
    if not records:
        return "no_face"
    return "swapped" if any(r.get("status") == "swapped" for r in records) else "skipped"
