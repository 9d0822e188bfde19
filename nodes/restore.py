"""Face restoration nodes: load GFPGAN/RestoreFormer/CodeFormer, restore an image batch or a clip."""
from __future__ import annotations

import json

from comfy_api.latest import io
from typing_extensions import override

from ..swapline_core.backends.cache import cached, loaded_model_files
from ..swapline_core.backends.restorers import load_restorer
from ..swapline_core.backends.trt_profile import RESTORER
from ..swapline_core.errors import SwaplineError
from ..swapline_core.faces.paste import apply_patches, union_mask
from ..swapline_core.guards import without_refused_boxes
from ..swapline_core.provenance.method import restore_record
from ..swapline_core.types import FaceSet
from ..swapline_core.video import stages as pipeline
from . import image_provenance, model_paths
from .absent import ABSENT, sentence
from .convert import check_interrupt, preview_ui, progress, to_arrays, to_image, to_mask
from .types import CATEGORY, Faces, Frames, Restorer

CHUNK = 8
# Peak activation memory per 512x512 face on top of the weights, so ComfyUI frees enough VRAM
# before a batch (the upscale node budgets its tiles the same way). Measured for GFPGANv1.4 in
# float32 on CUDA: 716 MiB at batch 1, ~782 MiB per face at batch 4-16.
BYTES_PER_FACE = 800 * 1024 ** 2


def restorer_files() -> list[str]:
    """models/facerestore_models files bare (as before), plus FaceFusion's GPEN-BFR files."""
    return model_paths.files(model_paths.FACERESTORE) + [
        f"{model_paths.FACEFUSION}/{f}" for f in model_paths.files(model_paths.FACEFUSION)
        if f.replace("\\", "/").rsplit("/", 1)[-1].lower().startswith("gpen_bfr_")]


def resolve_restorer(name: str) -> str:
    head, _, rest = name.replace("\\", "/").partition("/")
    if rest and head == model_paths.FACEFUSION:
        return model_paths.resolve(model_paths.FACEFUSION, rest)
    return model_paths.resolve(model_paths.FACERESTORE, name)


def load_managed_restorer(name: str, fidelity: float, mask_blur: float):
    """The restorer with its weights owned by ComfyUI's model management (VRAM, offloading)."""
    import comfy.model_management as mm
    import comfy.model_patcher

    path = resolve_restorer(name)
    if path.lower().endswith(".onnx"):  # GPEN-BFR: ONNX Runtime owns its device, not ComfyUI
        from ..swapline_core.backends.gpen import GpenRestorer

        return cached("gpen-restorer", path, (mask_blur,), lambda: GpenRestorer(path, "auto", mask_blur))
    load_device = mm.get_torch_device()
    offload_device = mm.unet_offload_device()

    def build():
        # Load on the offload device: load_models_gpu moves it when there is room, and can
        # offload it again when a diffusion model needs the VRAM.
        restorer = load_restorer(path, device=offload_device, fidelity=fidelity, mask_blur=mask_blur)
        patcher = comfy.model_patcher.ModelPatcher(restorer.module, load_device=load_device,
                                                   offload_device=offload_device)
        restorer.patcher = patcher  # lives as long as the cached restorer; nodes may reach it here
        restorer.use_device(load_device, lambda n: mm.load_models_gpu([patcher], memory_required=n * BYTES_PER_FACE))
        return restorer

    return cached("face-restorer", path, (fidelity, mask_blur, str(load_device)), build)


class RestorerLoader(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineRestorerLoader",
            display_name="Load Face Restorer (Swapline)",
            category=f"{CATEGORY}/loaders",
            description="Loads a face restoration model from models/facerestore_models: GFPGAN v1.3/v1.4, "
                        "RestoreFormer, or CodeFormer (needs spandrel_extra_arches), whose VRAM ComfyUI manages "
                        "like any other model's; or a GPEN-BFR ONNX (256/512/1024 px, run by ONNX Runtime).",
            inputs=[
                io.Combo.Input("restorer", options=restorer_files(),
                               tooltip="Face restoration model file in models/facerestore_models (e.g. GFPGANv1.4.pth, "
                                       "GPEN-BFR-512.onnx), or FaceFusion's facefusion/gpen_bfr_*.onnx."),
                io.Float.Input("codeformer_fidelity", default=0.5, min=0.0, max=1.0, step=0.05,
                               tooltip="CodeFormer only: 0 favours quality, 1 favours fidelity to the input face."),
                io.Float.Input("mask_blur", default=0.1, min=0.0, max=0.3, step=0.005,
                               tooltip="Feather width of the paste-back mask as a fraction of the face crop (inside the mask only)."),
                io.Boolean.Input("commercial_only", default=False, optional=True,
                                 tooltip="Refuse models whose licence does not allow commercial use, or is unknown."),
            ],
            outputs=[Restorer.Output(display_name="restorer")],
        )

    @classmethod
    @override
    def validate_inputs(cls, restorer=ABSENT):
        if restorer is ABSENT:
            return sentence(cls, "restorer", "a face restoration model file from models/facerestore_models "
                                             "(e.g. GFPGANv1.4.pth)")
        return restorer is None or model_paths.check_choice("face restorer", restorer, restorer_files(),
                                        model_paths.folders(model_paths.FACERESTORE)
                                        + model_paths.folders(model_paths.FACEFUSION))

    @classmethod
    @override
    def fingerprint_inputs(cls, restorer, **_):
        return model_paths.file_fingerprint(model_paths.FACERESTORE, restorer, resolve_restorer)

    @classmethod
    @override
    def execute(cls, restorer, codeformer_fidelity, mask_blur, commercial_only=False) -> io.NodeOutput:
        loaded = load_managed_restorer(restorer, codeformer_fidelity, mask_blur)
        if commercial_only:
            from ..swapline_core.backends.catalog import check_commercial

            check_commercial(loaded.model_files())
        return io.NodeOutput(loaded)


def _weight_input():
    return io.Float.Input("weight", default=1.0, min=0.0, max=1.0, step=0.05,
                          tooltip="Blend between the original face (0) and the restored face (1).")


def _batch_input():
    # the GPEN session's TensorRT profile is built for these batches (trt_profile.RESTORER)
    return io.Int.Input("batch", default=RESTORER.opt, min=1, max=RESTORER.max,
                        tooltip="Faces sent through the network together; lower it if you run out of VRAM.")


class RestoreFaces(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineRestoreFaces",
            display_name="Restore Faces (Swapline)",
            category=f"{CATEGORY}/restore",
            description="Restores the given faces of an image batch (typically the swapped ones): each face is "
                        "aligned to the FFHQ template, restored in batches, blended by weight and pasted back "
                        "with a feathered mask. No second detector runs; pixels outside the faces are unchanged. "
                        "Faces a Swap Faces before it refused (left untouched) are not restored.",
            inputs=[
                io.Image.Input("images", tooltip="The images to restore (e.g. the output of Swap Faces)."),
                Faces.Input("faces", tooltip="Faces of these images to restore (Select Faces, same images)."),
                Restorer.Input("restorer", tooltip="From Load Face Restorer."),
                _weight_input(),
                _batch_input(),
            ],
            outputs=[io.Image.Output(display_name="images"), io.Mask.Output(display_name="mask")],
        )

    @classmethod
    @override
    def execute(cls, images, faces: FaceSet, restorer, weight, batch) -> io.NodeOutput:
        frames = to_arrays(images)
        if len(faces.frames) != len(frames):
            raise SwaplineError(f"faces were detected on {len(faces.frames)} frames but {len(frames)} images "
                                "were given: connect the same images to Detect Faces and Restore Faces")
        # Faces a Swap Faces upstream refused stay as they were (as Restore Faces in Frames does):
        # restoring them would change the target's own face where the swap said it could not.
        per_frame, left = without_refused_boxes([fr.faces for fr in faces.frames],
                                                image_provenance.refused(images) or [])
        pbar = progress(len(frames))
        out, masks, restored = [], [], 0
        for s in range(0, len(frames), CHUNK):
            check_interrupt()
            chunk = frames[s:s + CHUNK]
            patches = restorer.restore(chunk, per_frame[s:s + CHUNK], weight=weight,
                                       batch=batch, check_interrupt=check_interrupt)
            for frame, ps in zip(chunk, patches):
                out.append(apply_patches(frame, ps) if ps else frame)
                masks.append(union_mask(frame.shape[:2], ps))
                restored += len(ps)
            pbar.update(len(chunk))
        result = to_image(out)
        models = tuple(loaded_model_files(restorer))
        image_provenance.extend(images, result, (restore_record(restorer, models),))
        return io.NodeOutput(result, to_mask(masks),
                             ui=preview_ui(cls, restore={"faces_restored": restored, "faces_left_as_refused": left}))


class RestoreFrames(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineRestoreFrames",
            display_name="Restore Faces in Frames (Swapline)",
            category=f"{CATEGORY}/video",
            description="Restores the tracked faces of a frame sequence chunk by chunk, after the swap. Only "
                        "changed pixels are stored, per chunk, on disk; re-queuing after an interrupt reuses "
                        "finished chunks. The frame count never changes. Faces the swap refused (guards, "
                        "the swapper's limits) are left as they were.",
            inputs=[
                Frames.Input("frames", tooltip="Frame sequence (e.g. from Swap Faces in Frames)."),
                Faces.Input("faces", tooltip="From Track Faces (same frames)."),
                Restorer.Input("restorer", tooltip="From Load Face Restorer."),
                _weight_input(),
                _batch_input(),
            ],
            outputs=[Frames.Output(display_name="frames"), io.String.Output(display_name="report")],
        )

    @classmethod
    @override
    def execute(cls, frames, faces, restorer, weight, batch) -> io.NodeOutput:
        pbar = progress(frames.count)
        hooks = pipeline.Hooks(progress=pbar.update, check_interrupt=check_interrupt)
        out, report = pipeline.restore_frames(frames, faces, restorer, model_paths.swapline_cache_dir(), hooks,
                                              weight=weight, batch=batch)
        text = json.dumps(report.to_json())
        return io.NodeOutput(out, text, ui=preview_ui(cls, restore=report.to_json()))
