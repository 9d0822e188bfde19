"""Per-block strength and a spatial mask for ControlNet residuals (no ComfyUI imports).

A ControlNet hands the UNet a dict of residual lists. In ComfyUI's UNet (0.3.75,
``openaimodel.UNetModel.forward``) each block takes its residual with ``list.pop()``:

- ``"middle"``: one residual, added to the middle block's output;
- ``"output"``: one residual per input block (the ControlNet's zero convs, shallowest first).
  The output blocks pop them from the end, so the FIRST output block to run (the deepest) gets
  ``output[-1]``, the second ``output[-2]``, and so on;
- ``"input"``: residuals added after input blocks (T2I-adapter style), popped from the end too.

The schedule therefore scales ``output[-1 - k]`` by the k-th output-block strength.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class BlockSchedule:
    """Strength per UNet block, multiplied on top of the ControlNet's own strength."""
    middle: float = 1.0
    output: tuple[float, ...] = (0.7, 0.5)   # first, second, ... output block in execution order
    rest: float = 1.0

    def factor(self, key: str, index: int, count: int) -> float:
        if key == "middle":
            return self.middle
        if key == "output":
            k = count - 1 - index                 # execution order of the block that pops it
            return self.output[k] if k < len(self.output) else self.rest
        return self.rest

    def to_json(self) -> dict:
        return {"middle": self.middle, "output": list(self.output), "rest": self.rest}


def match_batch(t: torch.Tensor, target: int, batched_number: int) -> torch.Tensor:
    """Repeat a per-image tensor to the sampler's batch the way ComfyUI repeats control hints.

    The sampler stacks ``batched_number`` conditionings (cond, uncond, ...) of ``target //
    batched_number`` latents each; a batch of masks follows the latents inside every group.
    """
    if t.shape[0] == target or t.shape[0] == 1:
        return t
    per = max(1, target // max(1, batched_number))
    reps = -(-per // t.shape[0])
    t = t.repeat(reps, *([1] * (t.ndim - 1)))[:per]
    return t.repeat(target // per, *([1] * (t.ndim - 1))) if target != per else t


def resize_mask(mask: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """(B, H, W) or (B, 1, H, W) in 0..1 -> (B, 1, h, w), area-averaged so a soft edge stays soft."""
    m = mask if mask.ndim == 4 else mask.unsqueeze(1)
    m = m.float()
    if tuple(m.shape[-2:]) == tuple(hw):
        return m
    if m.shape[-2] >= hw[0] and m.shape[-1] >= hw[1]:
        return F.adaptive_avg_pool2d(m, hw)
    return F.interpolate(m, size=hw, mode="bilinear", align_corners=False)


def apply_schedule(control: dict, schedule: BlockSchedule, mask: torch.Tensor | None = None,
                   batched_number: int = 1) -> dict:
    """New residual dict: each tensor times its block factor and the mask at its resolution.

    Tensors are never changed in place: ControlNets may hand the same tensor to several blocks.
    """
    out: dict = {}
    resized: dict[tuple, torch.Tensor] = {}
    for key, values in control.items():
        scaled = []
        for i, x in enumerate(values):
            if x is None:
                scaled.append(None)
                continue
            f = schedule.factor(key, i, len(values))
            y = x * f if f != 1.0 else x
            if mask is not None and x.ndim == 4:
                k = (x.shape[0], x.shape[-2], x.shape[-1], x.device, x.dtype)
                if k not in resized:
                    m = resize_mask(mask.to(x.device), (x.shape[-2], x.shape[-1]))
                    resized[k] = match_batch(m, x.shape[0], batched_number).to(x.dtype)
                y = y * resized[k]
            scaled.append(y)
        out[key] = scaled
    return out
