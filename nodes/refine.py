"""Refine Faces in Frames: diffusion face refinement streamed over a frame sequence.

The face_refine workflow does this with core nodes on one IMAGE batch; this node does the same
steps chunk by chunk (aligned crops -> hint + face mask -> VAE encode -> sampling with the face
ControlNet -> decode -> paste back), stores only the changed pixels as a layer and resumes at
the first missing chunk, so memory stays flat on long clips. Geometry lives in
swapline_core.diffusion.refine; sampling is ComfyUI's own (comfy.sample), so model management,
samplers, schedulers and patches (LoRA, ...) behave as in KSampler.
"""
from __future__ import annotations

import hashlib

import comfy.sample
import comfy.samplers
import torch
from comfy_api.latest import io

from ..swapline_core.diffusion import hints as face_hint

from ..swapline_core.diffusion import refine as face_refine

from ..swapline_core.video import stages as pipeline
from ..swapline_core.faces.align import CROP_SIZES
from ..swapline_core.video.store import faces_key, model_stamp, stage_key
from ..swapline_core.diffusion.control_schedule import BlockSchedule
from ..swapline_core.errors import SwaplineError
from ..swapline_core.video.frames import Layer
from . import model_paths
from .controlnet import apply_face_control, schedule_inputs
from .convert import check_interrupt, progress, to_arrays, to_image, to_mask
from .types import CATEGORY, Analyzer, Faces, Frames

SAMPLE_VALUES = 4096        # values hashed per tensor for a model fingerprint
SAMPLED_TENSORS = 24        # tensors per model hashed (spread over the state dict)


def _tensor_digest(h, t) -> None:
    if not isinstance(t, torch.Tensor):
        h.update(repr(t).encode())
        return
    flat = t.detach().reshape(-1)
    step = max(1, flat.numel() // SAMPLE_VALUES)
    h.update(f"{tuple(t.shape)}{t.dtype}".encode())
    h.update(flat[::step][:SAMPLE_VALUES].float().cpu().numpy().tobytes())


def fingerprint_module(module) -> str:
    """A cheap identity of a model's weights: shapes of every tensor and values of a spread sample.

    Hashing a whole checkpoint would take seconds per run; any two different fine-tunes or
    checkpoints differ in these samples, which is what the resume key needs.
    """
    h = hashlib.sha256()
    if module is None:
        return "none"
    sd = module.state_dict()
    keys = sorted(sd)
    h.update(repr([(k, tuple(sd[k].shape)) for k in keys]).encode())
    for k in keys[:: max(1, len(keys) // SAMPLED_TENSORS)]:
        _tensor_digest(h, sd[k])
    return h.hexdigest()


def _digest_any(h, v, depth: int = 0) -> None:
    """Tensors by sampled values, containers recursively, LoRA-style adapters by their weights;
    other objects by type name only (their repr may hold a memory address)."""
    if isinstance(v, torch.Tensor):
        _tensor_digest(h, v)
    elif v is None or isinstance(v, (bool, int, float, str)):
        h.update(repr(v).encode())
    elif depth > 4:
        h.update(type(v).__name__.encode())
    elif isinstance(v, (tuple, list)):
        for x in v:
            _digest_any(h, x, depth + 1)
    elif hasattr(v, "weights"):                     # comfy.weight_adapter (LoRA, LoHa, ...)
        h.update(type(v).__name__.encode())
        _digest_any(h, v.weights, depth + 1)
    else:
        h.update(type(v).__name__.encode())


def fingerprint_model(model) -> str:
    """MODEL (ModelPatcher): base weights plus every patch (LoRA etc.) with its strengths."""
    h = hashlib.sha256(fingerprint_module(model.model).encode())
    for key in sorted(model.patches):
        h.update(key.encode())
        _digest_any(h, model.patches[key])
    h.update(repr(sorted(model.model_options.get("transformer_options", {}))).encode())
    return h.hexdigest()


def fingerprint_conditioning(cond) -> str:
    h = hashlib.sha256()
    for emb, opts in cond:
        _tensor_digest(h, emb)
        for k in sorted(opts):
            v = opts[k]
            h.update(k.encode())
            if k == "control":
                h.update(type(v).__name__.encode())
                _tensor_digest(h, getattr(v, "cond_hint_original", None))
                _tensor_digest(h, getattr(v, "strength", None))
            else:
                _digest_any(h, v)
    return h.hexdigest()


class RefineFrames(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineRefineFrames",
            display_name="Refine Faces in Frames (Swapline)",
            category=f"{CATEGORY}/video",
            description="Diffusion face refinement of a frame sequence, chunk by chunk in constant memory: every "
                        "tracked face is aligned, encoded, re-sampled at low denoise with the face ControlNet "
                        "(hint from its landmarks, per-block schedule, face mask) and pasted back; only changed "
                        "pixels are stored and an interrupted run resumes at the first missing chunk. The same "
                        "steps as the face_refine workflow, for clips too long for one IMAGE batch.",
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
        )

    @classmethod
    def execute(cls, frames, faces, model, positive, negative, vae, size, template, seed, steps, cfg,
                sampler_name, scheduler, denoise, faces_per_batch, mask_erode, mask_blur, hint_format,
                control_strength, middle, output_1, output_2, rest, control_net=None, analyzer=None) -> io.NodeOutput:
        size = int(size)
        use_control = control_net is not None and control_strength > 0
        needs68 = use_control and hint_format in face_hint.NEEDS_68
        lacking = needs68 and any(f.landmarks is None for fr in faces.frames for f in fr.faces)
        if lacking and (analyzer is None or not analyzer.supports_landmarks):
            raise SwaplineError(f"the {hint_format} hint needs 68-point landmarks: connect an analyzer that has them "
                                "(the built-in one, or an InsightFace pack with 1k3d68.onnx), or use hint_format 5_point")
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
        refined = [0]

        def compute(chunk, chunk_faces, report, first_index):
            if lacking:
                missing = [[f for f in fs if f.landmarks is None] for fs in chunk_faces]
                if any(missing):
                    analyzer.landmarks68(chunk, missing)
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
        out = frames.with_layer(Layer("refine", str(store.dir.parent), key))
        text = (f"refined {refined[0]} face crop(s) in {report.chunks_total - report.chunks_resumed} chunk(s); "
                f"{report.chunks_resumed} chunk(s) resumed from the cache")
        return io.NodeOutput(out, text, ui={"text": [text]})

    @staticmethod
    def _sample(jobs, model, positive, negative, vae, seed, steps, cfg, sampler_name, scheduler, denoise,
                control_net, control_strength, schedule):
        crops = to_image([j.crop for j in jobs])
        latent = vae.encode(crops)
        latent = comfy.sample.fix_empty_latent_channels(model, latent)
        # per-face noise from (seed, frame, face): independent of chunking and batching
        noise = torch.cat([torch.randn(latent.shape[1:], generator=torch.Generator().manual_seed((seed + j.uid) % 2**63),
                                       dtype=torch.float32)[None] for j in jobs])
        pos, neg = positive, negative
        if control_net is not None:
            pos, neg = apply_face_control(positive, negative, control_net, to_image([j.hint for j in jobs]),
                                          control_strength, (0.0, 1.0), schedule,
                                          to_mask([j.mask for j in jobs]))
        samples = comfy.sample.sample(model, noise, steps, cfg, sampler_name, scheduler, pos, neg, latent,
                                      denoise=denoise, seed=seed, disable_pbar=True)
        decoded = vae.decode(samples)
        return to_arrays(decoded.reshape(-1, *decoded.shape[-3:]))
