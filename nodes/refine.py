"""Refine Faces in Frames: diffusion face refinement streamed over a frame sequence.

The face_refine workflow does this with core nodes on one IMAGE batch; this node does the same
steps chunk by chunk (aligned crops -> hint + face mask -> VAE encode -> sampling with the face
ControlNet -> decode -> paste back), stores only the changed pixels as a layer and resumes at
the first missing chunk, so memory stays flat on long clips. Geometry lives in
swapline_core.diffusion.refine; sampling is ComfyUI's own (comfy.sample), so model management,
samplers, schedulers and patches (LoRA, ...) behave as in KSampler. Resume-key fingerprints are
swapline_core.diffusion.fingerprint's.
"""
from __future__ import annotations

import comfy.sample
import comfy.samplers
from comfy_api.latest import io
from typing_extensions import override

from ..swapline_core.backends.cache import file_sha256
from ..swapline_core.diffusion import hints as face_hint
from ..swapline_core.diffusion import model_origin
from ..swapline_core.diffusion import refine as face_refine
from ..swapline_core.diffusion.control_schedule import BlockSchedule
from ..swapline_core.diffusion.fingerprint import fingerprint_conditioning, fingerprint_model, fingerprint_module
from ..swapline_core.errors import SwaplineError
from ..swapline_core.faces.align import CROP_SIZES
from ..swapline_core.provenance.method import StageRecord
from ..swapline_core.video import stages as pipeline
from ..swapline_core.video.frames import Layer
from ..swapline_core.video.store import faces_key, model_stamp, stage_key
from . import model_paths
from .controlnet import apply_face_control, schedule_inputs
from .convert import check_interrupt, progress, to_arrays, to_image, to_mask
from .types import CATEGORY, Analyzer, Faces, Frames


class RefineFrames(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineRefineFrames",
            display_name="Refine Faces in Frames (Swapline)",
            category=f"{CATEGORY}/video",
            description="Diffusion face refinement of a frame sequence, chunk by chunk in constant memory: every "
                        "tracked face is aligned, encoded, re-sampled at low denoise with the face ControlNet "
                        "(hint from its landmarks, per-block schedule, face mask) and pasted back; only changed "
                        "pixels are stored and an interrupted run resumes at the first missing chunk. The same "
                        "steps as the face_refine workflow, for clips too long for one IMAGE batch. Faces the swap refused "
                        "(guards, the swapper's limits) are left as they were.",
            inputs=[
                Frames.Input("frames", tooltip="The frame sequence (e.g. from Swap Faces in Frames)."),
                Faces.Input("faces", tooltip="Tracked faces of the same frames (Track Faces)."),
                io.Model.Input("model", tooltip="SD1.x/SDXL-class diffusion model (e.g. Load Checkpoint)."),
                io.Conditioning.Input("positive", tooltip="Positive conditioning (CLIP Text Encode)."),
                io.Conditioning.Input("negative", tooltip="Negative conditioning."),
                io.Vae.Input("vae", tooltip="VAE to encode the crops and decode the refined ones."),
                io.Combo.Input("size", options=[str(s) for s in CROP_SIZES if s >= 128], default="512",
                               tooltip="Aligned crop size in pixels (512 for SD1.5)."),
                io.Combo.Input("template", options=["ffhq", "arcface"], default="ffhq",
                               tooltip="Alignment template: ffhq shows forehead and chin, arcface is tighter."),
                io.Int.Input("seed", default=0, min=0, max=0xFFFFFFFFFFFFFFFF, control_after_generate=True,
                             tooltip="Noise seed; each face's noise also depends on its frame, not on chunking."),
                io.Int.Input("steps", default=20, min=1, max=200, tooltip="Sampling steps (of the full schedule)."),
                io.Float.Input("cfg", default=5.0, min=0.0, max=30.0, step=0.1, tooltip="Classifier-free guidance."),
                io.Combo.Input("sampler_name", options=list(comfy.samplers.KSampler.SAMPLERS), default="dpmpp_2m",
                               tooltip="Sampler, as in KSampler."),
                io.Combo.Input("scheduler", options=list(comfy.samplers.KSampler.SCHEDULERS), default="karras",
                               tooltip="Scheduler, as in KSampler."),
                io.Float.Input("denoise", default=0.3, min=0.0, max=1.0, step=0.01,
                               tooltip="How much of each face is re-drawn (0.2-0.4 keeps identity and pose)."),
                io.Int.Input("faces_per_batch", default=8, min=1, max=64,
                             tooltip="Crops sampled together: bounds memory; does not change the result."),
                io.Float.Input("mask_erode", default=0.02, min=0.0, max=0.3, step=0.005,
                               tooltip="Shrink the paste mask by this fraction of the crop size."),
                io.Float.Input("mask_blur", default=0.08, min=0.0, max=0.3, step=0.005,
                               tooltip="Paste feather width as a fraction of the crop size."),
                io.ControlNet.Input("control_net", optional=True,
                                    tooltip="Face ControlNet (e.g. OpenPose); without it the faces are refined "
                                            "by the prompt alone."),
                io.Combo.Input("hint_format", options=list(face_hint.FORMATS), default="openpose_face",
                               tooltip="Hint style the ControlNet was trained on."),
                io.Float.Input("control_strength", default=0.8, min=0.0, max=10.0, step=0.01,
                               tooltip="ControlNet strength (multiplies the block factors)."),
                *schedule_inputs(),
                Analyzer.Input("analyzer", optional=True,
                               tooltip="Computes 68-point landmarks for openpose_face / 68_point hints when the "
                                       "tracked faces have none (the built-in analyzer or a pack with 1k3d68.onnx)."),
            ],
            outputs=[Frames.Output(display_name="frames"), io.String.Output(display_name="report")],
            # the prompt shows which loader each model came from: provenance names those files
            hidden=[io.Hidden.prompt, io.Hidden.unique_id],
        )

    @classmethod
    @override
    def execute(cls, frames, faces, model, positive, negative, vae, size, template, seed, steps, cfg,
                sampler_name, scheduler, denoise, faces_per_batch, mask_erode, mask_blur, hint_format,
                control_strength, middle, output_1, output_2, rest, control_net=None, analyzer=None) -> io.NodeOutput:
        size = int(size)
        use_control = control_net is not None and control_strength > 0
        lacking = use_control and face_refine.lacks_landmarks([fr.faces for fr in faces.frames], hint_format)
        if lacking and (analyzer is None or not analyzer.supports_landmarks):
            raise SwaplineError(f"the {hint_format} hint needs 68-point landmarks: connect an analyzer that has them "
                                "(the built-in one, or an InsightFace pack with 1k3d68.onnx), or use hint_format "
                                "5_point")
        schedule = BlockSchedule(middle=middle, output=(output_1, output_2), rest=rest)
        settings = {"size": size, "template": template, "seed": seed, "steps": steps, "cfg": cfg,
                    "sampler": sampler_name, "scheduler": scheduler, "denoise": round(denoise, 4),
                    "mask": [mask_erode, mask_blur], "hint": hint_format if use_control else None,
                    "control_strength": control_strength if use_control else 0, "schedule": schedule.to_json()}
        key = stage_key("refine", frames.key, faces_key(faces), fingerprint_model(model),
                        fingerprint_conditioning(positive), fingerprint_conditioning(negative),
                        fingerprint_module(vae.first_stage_model),
                        fingerprint_module(control_net.control_model) if use_control else None,
                        model_stamp(analyzer) if lacking else None, settings)
        pbar = progress(frames.count)
        hooks = pipeline.Hooks(progress=pbar.update, check_interrupt=check_interrupt)
        refined, left = [0], [0]
        # Faces the swap refused stay as they were (their refusal is in frames' swap layers,
        # which frames.key covers, so the key needs nothing more).
        refusals = pipeline.swap_refusals(frames)

        def compute(chunk, chunk_faces, report, first_index):
            chunk_faces, n = pipeline.without_refused(chunk_faces, first_index, refusals)
            left[0] += n
            if lacking:
                face_refine.add_missing_landmarks(analyzer, chunk, chunk_faces)
            jobs = face_refine.prepare(chunk, chunk_faces, first_index, size, template,
                                       hint_format if use_control else "5_point")
            crops = []
            for b in range(0, len(jobs), faces_per_batch):
                check_interrupt()
                crops.extend(cls._sample(jobs[b:b + faces_per_batch], model, positive, negative, vae, seed, steps,
                                         cfg, sampler_name, scheduler, denoise,
                                         control_net if use_control else None, control_strength, schedule))
            refined[0] += len(jobs)
            return face_refine.paste(chunk, jobs, crops, mask_erode, mask_blur)

        try:
            store, report = pipeline.patch_stage(frames, faces, "refine", key, {"settings": settings},
                                                 model_paths.swapline_cache_dir(), hooks, compute)
        except face_hint.HintError as exc:
            raise SwaplineError(str(exc)) from exc
        report.extra["faces_refined"] = refined[0]
        report.extra["faces_left_as_refused"] = left[0]
        models = cls._model_files(use_control)
        record = StageRecord("refine", "diffusion refine (Stable Diffusion img2img at low denoise"
                             + (", face ControlNet)" if use_control else ", no ControlNet)"), "trained", models,
                             (("sampler", sampler_name), ("scheduler", scheduler), ("steps", steps),
                              ("denoise", round(denoise, 4)), ("seed", seed)))
        out = frames.with_layer(Layer("refine", str(store.dir.parent), key, models, (record,)))
        text = (f"refined {refined[0]} face crop(s) in {report.chunks_total - report.chunks_resumed} chunk(s); "
                f"{report.chunks_resumed} chunk(s) resumed from the cache"
                + (f"; {left[0]} face(s) the swap refused left as they were" if left[0] else ""))
        return io.NodeOutput(out, text, ui={"text": [text]})

    @classmethod
    def _model_files(cls, use_control: bool) -> tuple:
        """(role, path, sha256) of the checkpoint, VAE and ControlNet, from the loaders in the prompt.

        Hashed now, while this job runs on them (cache.file_sha256 hashes a file once per size and
        mtime); a file the prompt does not lead to is named "unknown file (...)", not left out."""
        import folder_paths

        prompt, me = cls.hidden.prompt if cls.hidden else None, cls.hidden.unique_id if cls.hidden else None
        files = []
        for name in ("model", "vae") + (("control_net",) if use_control else ()):
            files += model_origin.trace(prompt or {}, str(me), name, name, folder_paths.get_full_path, file_sha256)
        return tuple(files)

    @staticmethod
    def _sample(jobs, model, positive, negative, vae, seed, steps, cfg, sampler_name, scheduler, denoise,
                control_net, control_strength, schedule):
        crops = to_image([j.crop for j in jobs])
        latent = vae.encode(crops)
        latent = comfy.sample.fix_empty_latent_channels(model, latent)
        noise = face_refine.crop_noise(jobs, seed, latent.shape[1:])
        pos, neg = positive, negative
        if control_net is not None:
            pos, neg = apply_face_control(positive, negative, control_net, to_image([j.hint for j in jobs]),
                                          control_strength, (0.0, 1.0), schedule,
                                          to_mask([j.mask for j in jobs]))
        samples = comfy.sample.sample(model, noise, steps, cfg, sampler_name, scheduler, pos, neg, latent,
                                      denoise=denoise, seed=seed, disable_pbar=True)
        decoded = vae.decode(samples)
        return to_arrays(decoded.reshape(-1, *decoded.shape[-3:]))
