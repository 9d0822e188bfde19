"""Face ControlNet: hint images drawn from our landmarks, and a ControlNet apply with a per-block
strength schedule and a face mask (swapline_core.diffusion.hints / control_schedule hold the math)."""
from __future__ import annotations

import numpy as np
import torch
from comfy.controlnet import ControlBase
from comfy_api.latest import io
from typing_extensions import override

from ..swapline_core.diffusion import hints as face_hint
from ..swapline_core.diffusion.control_schedule import BlockSchedule, apply_schedule
from ..swapline_core.errors import SwaplineError
from .convert import preview_ui, to_image, to_mask
from .types import CATEGORY, Faces, Transforms


class FaceHint(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineFaceHint",
            display_name="Face ControlNet Hint (Swapline)",
            category=f"{CATEGORY}/controlnet",
            description="Draws a ControlNet hint from face landmarks, on a canvas matching what will be conditioned: "
                        "the frames (connect 'images') or Align Faces' crops (connect 'transforms'; one hint per "
                        "crop). openpose_face: OpenPose face dots (ControlNet openpose_face/full, DWPose); 5_point: "
                        "InstantID-style keypoints; 68_point: iBUG 68 contours. Also outputs a soft face-region mask "
                        "for Apply Face ControlNet.",
            inputs=[
                Faces.Input("faces", tooltip="Faces from Detect/Select/Track Faces (68-point formats need "
                                             "landmarks: the built-in analyzer and packs with 1k3d68.onnx provide "
                                             "them)."),
                io.Combo.Input("format", options=list(face_hint.FORMATS), default="openpose_face",
                               tooltip="The hint style your ControlNet was trained on."),
                io.Image.Input("images", optional=True,
                               tooltip="Frame mode: the frames the faces were found in (canvas size, one hint per "
                                       "frame)."),
                Transforms.Input("transforms", optional=True,
                                 tooltip="Crop mode: Align Faces' transforms (one hint per aligned crop, in its "
                                         "pixels). "
                                         "Takes precedence over 'images'."),
                io.Float.Input("mask_grow", default=0.25, min=0.0, max=2.0, step=0.05,
                               tooltip="The face mask covers the landmark hull grown by this fraction (forehead, "
                                       "cheeks)."),
            ],
            outputs=[io.Image.Output(display_name="hint"), io.Mask.Output(display_name="face_mask")],
        )

    @classmethod
    @override
    def execute(cls, faces, format, mask_grow, images=None, transforms=None) -> io.NodeOutput:
        by_index = {fr.index: fr.faces for fr in faces.frames}
        try:
            if transforms is not None:
                hints, masks = _crop_hints(by_index, transforms, format, mask_grow)
            elif images is not None:
                hints, masks = [], []
                h, w = images.shape[1:3]
                for i in range(images.shape[0]):
                    fs = by_index.get(i, [])
                    hints.append(face_hint.draw_hint((h, w), [(f.kps, f.landmarks) for f in fs], format))
                    masks.append(face_hint.face_region_mask((h, w), [_points(f) for f in fs], mask_grow))
            else:
                raise SwaplineError("connect 'images' (one hint per frame) or 'transforms' from Align Faces "
                                    "(one hint per aligned crop)")
        except face_hint.HintError as exc:
            raise SwaplineError(str(exc)) from exc
        hint = to_image(hints)
        return io.NodeOutput(hint, to_mask(masks), ui=preview_ui(cls, hint))


def _points(face) -> np.ndarray:
    return face.landmarks if face.landmarks is not None else face.kps


def _crop_hints(by_index, transforms, fmt, grow):
    hints, masks = [], []
    for t in transforms:
        fs = by_index.get(t["frame"], [])
        if t["face"] >= len(fs):
            raise SwaplineError(f"Align Faces made a crop of face {t['face']} in frame {t['frame']}, but these faces "
                                f"have {len(fs)} there: connect the same faces to Align Faces and Face Hint")
        f = fs[t["face"]]
        hint, mask = face_hint.crop_hint(f.kps, f.landmarks, t["matrix"], t["size"], fmt, grow)
        hints.append(hint)
        masks.append(mask)
    if not hints:
        raise SwaplineError("no aligned crops: Align Faces found no faces")
    return hints, masks


class ScheduledControl(ControlBase):
    """Wraps one applied ControlNet: its residuals are scaled per UNet block and masked to the face.

    The wrapped ControlNet runs without a predecessor so only its own residuals are scaled; earlier
    ControlNets in the chain are merged afterwards, untouched.
    """

    def __init__(self, inner: ControlBase, schedule: BlockSchedule, mask: torch.Tensor | None):
        super().__init__()
        self.inner = inner
        self.schedule = schedule
        self.mask = mask

    def get_control(self, x_noisy, t, cond, batched_number, transformer_options):
        prev = None
        if self.previous_controlnet is not None:
            prev = self.previous_controlnet.get_control(x_noisy, t, cond, batched_number, transformer_options)
        own = self.inner.get_control(x_noisy, t, cond, batched_number, transformer_options)
        if own is None:
            return prev
        own = apply_schedule(own, self.schedule, self.mask, batched_number)
        if prev is None:
            return own
        return self.control_merge(own, prev, output_dtype=None)   # strength 1.0: adds prev only

    def pre_run(self, model, percent_to_timestep_function):
        super().pre_run(model, percent_to_timestep_function)
        self.inner.pre_run(model, percent_to_timestep_function)

    def cleanup(self):
        self.inner.cleanup()
        super().cleanup()

    def get_models(self):
        return super().get_models() + self.inner.get_models()

    def get_extra_hooks(self):
        return super().get_extra_hooks() + self.inner.get_extra_hooks()

    def inference_memory_requirements(self, dtype):
        return super().inference_memory_requirements(dtype) + self.inner.inference_memory_requirements(dtype)

    def copy(self):
        c = ScheduledControl(self.inner.copy(), self.schedule, self.mask)
        self.copy_to(c)
        return c

    def deepclone_multigpu(self, load_device, autoregister=False):
        """ComfyUI >= 0.23 MultiGPU: a copy whose inner ControlNet (weights included) lives on
        `load_device`. ControlBase raises NotImplementedError here, and sampler_helpers calls it on
        every ControlNet in a cond's chain when the MODEL carries MultiGPU work units.

        The inner clone is not registered on the inner (autoregister=False): only this wrapper is in
        the conds, so the per-device chain is ours -> our clone -> its own inner. Its predecessor
        is relinked per device by core (preprocess_multigpu_conds) after every clone exists."""
        c = ScheduledControl(self.inner.deepclone_multigpu(load_device, autoregister=False), self.schedule, self.mask)
        self.copy_to(c)
        if autoregister:
            self.multigpu_clones[load_device] = c
        return c


def schedule_inputs() -> list:
    """The per-block factor widgets (BlockSchedule), shared by every node that applies a face ControlNet."""
    d = BlockSchedule()
    return [
        io.Float.Input("middle", default=d.middle, min=0.0, max=2.0, step=0.05,
                       tooltip="Factor on the residual into the UNet middle block."),
        io.Float.Input("output_1", default=d.output[0], min=0.0, max=2.0, step=0.05,
                       tooltip="Factor on the residual into the first (deepest) output block."),
        io.Float.Input("output_2", default=d.output[1], min=0.0, max=2.0, step=0.05,
                       tooltip="Factor on the residual into the second output block."),
        io.Float.Input("rest", default=d.rest, min=0.0, max=2.0, step=0.05,
                       tooltip="Factor on every other residual (later output blocks; adapter input blocks)."),
    ]


class ApplyFaceControlNet(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineApplyFaceControlNet",
            display_name="Apply Face ControlNet (Swapline)",
            category=f"{CATEGORY}/controlnet",
            description="Core ControlNet apply plus (a) a strength per UNet block: the ControlNet residual into the "
                        "middle block and into each of the first output blocks gets its own factor (defaults 1.0 / "
                        "0.7 / 0.5: keeps the face's layout without freezing its fine detail), and (b) a face mask "
                        "that confines the control to the face region. Chains with other ControlNet applies.",
            inputs=[
                io.Conditioning.Input("positive", tooltip="Positive conditioning."),
                io.Conditioning.Input("negative", tooltip="Negative conditioning."),
                io.ControlNet.Input("control_net", tooltip="From Load ControlNet Model."),
                io.Image.Input("hint", tooltip="Hint image(s), e.g. from Face ControlNet Hint; same size as the image "
                                               "being refined."),
                io.Float.Input("strength", default=0.8, min=0.0, max=10.0, step=0.01,
                               tooltip="Overall ControlNet strength (multiplies the block factors)."),
                io.Float.Input("start_percent", default=0.0, min=0.0, max=1.0, step=0.001,
                               tooltip="Sampling progress at which the control starts."),
                io.Float.Input("end_percent", default=1.0, min=0.0, max=1.0, step=0.001,
                               tooltip="Sampling progress at which the control stops."),
                *schedule_inputs(),
                io.Mask.Input("mask", optional=True,
                              tooltip="Face mask (e.g. Face Hint's face_mask or Align Faces' masks): control only acts "
                                      "inside it, scaled to each residual's resolution. One mask or one per image."),
                io.Vae.Input("vae", optional=True, tooltip="For ControlNets that need a VAE (SD3/Flux-style)."),
            ],
            outputs=[io.Conditioning.Output(display_name="positive"), io.Conditioning.Output(display_name="negative")],
        )

    @classmethod
    @override
    def execute(cls, positive, negative, control_net, hint, strength, start_percent, end_percent,
                middle, output_1, output_2, rest, mask=None, vae=None) -> io.NodeOutput:
        if strength == 0:
            return io.NodeOutput(positive, negative)
        if start_percent >= end_percent:
            raise SwaplineError(f"start_percent ({start_percent}) must be below end_percent ({end_percent})")
        if mask is not None and mask.shape[0] not in (1, hint.shape[0]):
            raise SwaplineError(f"{mask.shape[0]} masks for {hint.shape[0]} hints: connect one mask or one per hint")
        schedule = BlockSchedule(middle=middle, output=(output_1, output_2), rest=rest)
        return io.NodeOutput(*apply_face_control(positive, negative, control_net, hint, strength,
                                                 (start_percent, end_percent), schedule, mask, vae))


def apply_face_control(positive, negative, control_net, hint: torch.Tensor, strength: float,
                       percent_range: tuple[float, float], schedule: BlockSchedule,
                       mask: torch.Tensor | None = None, vae=None) -> tuple[list, list]:
    """(positive, negative) with the ControlNet applied as core does, wrapped in ScheduledControl."""
    cond_hint = hint.movedim(-1, 1)
    made: dict = {}
    out = []
    for conditioning in (positive, negative):
        c = []
        for emb, opts in conditioning:
            opts = opts.copy()
            prev = opts.get("control")
            if prev not in made:   # one wrapper per distinct chain, shared like core does
                inner = control_net.copy().set_cond_hint(cond_hint, strength, percent_range, vae=vae)
                made[prev] = ScheduledControl(inner, schedule, mask).set_previous_controlnet(prev)
            opts["control"] = made[prev]
            opts["control_apply_to_uncond"] = False
            c.append([emb, opts])
        out.append(c)
    return out[0], out[1]
