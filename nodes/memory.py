"""Memory budgets as ComfyUI sees them: what is free now plus what ComfyUI would free for us.

ComfyUI >= 0.16 has Dynamic VRAM (comfy-aimdo; on by default on NVIDIA): loaded model weights sit
in virtual VRAM that is evicted on demand, so VRAM that looks taken is in fact available to a
stage. Core's VAE encode sizes its batches by free memory plus that evictable part
(ModelPatcher.get_free_memory); a budget from free memory alone tiles and batches far more than
needed there. ComfyUI 0.3.75 has no such memory (nothing is evictable without unloading a model,
which load_models_gpu already did for `memory_required`): the budget is the free memory, as before.

Host RAM: 0.33's RAM-pressure cache releases cached outputs when an allocation needs it but offers
no query for how much it could, so RAM budgets stay the free RAM ComfyUI reports (psutil's
"available", which already counts reclaimable page cache).
"""
from __future__ import annotations

import sys

import torch


def evictable_memory(device) -> int:
    """Bytes of model weights ComfyUI's Dynamic VRAM would evict for us on `device` (0 when off,
    on 0.3.75, and for anything but a CUDA device: aimdo manages NVIDIA VRAM only)."""
    device = torch.device(device)
    if device.type != "cuda":
        return 0
    import comfy.model_management  # noqa: F401  (imports comfy.memory_management on 0.33)

    mem = sys.modules.get("comfy.memory_management")
    if mem is None or not getattr(mem, "aimdo_enabled", False):
        return 0
    from comfy_aimdo import model_vbar

    # the same query ModelPatcher.get_free_memory makes (an index, or None for the default device)
    return max(0, int(model_vbar.vbars_analyze(device.index)))


def available_memory(device) -> int:
    """Bytes a stage may plan for on `device`: free memory plus what ComfyUI would evict for us."""
    import comfy.model_management as mm

    device = torch.device(device)
    return int(mm.get_free_memory(device)) + evictable_memory(device)
