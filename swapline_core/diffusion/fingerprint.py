"""Cheap, stable identities of diffusion inputs for resume keys: model weights (with patches
such as LoRA), conditioning, VAE and ControlNet modules.

Hashing a whole checkpoint would take seconds per run; shapes of every tensor plus a spread
sample of values tell any two different fine-tunes or checkpoints apart, which is all a resume
key needs. Objects are read duck-typed (ComfyUI's ModelPatcher: ``.model``, ``.patches``,
``.model_options``), so this module imports torch only, never ComfyUI.
"""
from __future__ import annotations

import hashlib

import torch

SAMPLE_VALUES = 4096        # values hashed per tensor for a model fingerprint
SAMPLED_TENSORS = 24        # tensors per model hashed (spread over the state dict)


def tensor_digest(h, t) -> None:
    """Feed a tensor's shape, dtype and a strided sample of its values into hash ``h``."""
    if not isinstance(t, torch.Tensor):
        h.update(repr(t).encode())
        return
    flat = t.detach().reshape(-1)
    step = max(1, flat.numel() // SAMPLE_VALUES)
    h.update(f"{tuple(t.shape)}{t.dtype}".encode())
    h.update(flat[::step][:SAMPLE_VALUES].float().cpu().numpy().tobytes())


def fingerprint_module(module) -> str:
    """A module's weights: shapes of every tensor and values of a spread sample ("none" for None)."""
    h = hashlib.sha256()
    if module is None:
        return "none"
    sd = module.state_dict()
    keys = sorted(sd)
    h.update(repr([(k, tuple(sd[k].shape)) for k in keys]).encode())
    for k in keys[:: max(1, len(keys) // SAMPLED_TENSORS)]:
        tensor_digest(h, sd[k])
    return h.hexdigest()


def _digest_any(h, v, depth: int = 0) -> None:
    """Tensors by sampled values, containers recursively, LoRA-style adapters by their weights;
    other objects by type name only (their repr may hold a memory address)."""
    if isinstance(v, torch.Tensor):
        tensor_digest(h, v)
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
    """CONDITIONING: embeddings by sampled values, options recursively; an attached ControlNet by
    its hint image and strength."""
    h = hashlib.sha256()
    for emb, opts in cond:
        tensor_digest(h, emb)
        for k in sorted(opts):
            v = opts[k]
            h.update(k.encode())
            if k == "control":
                h.update(type(v).__name__.encode())
                tensor_digest(h, getattr(v, "cond_hint_original", None))
                tensor_digest(h, getattr(v, "strength", None))
            else:
                _digest_any(h, v)
    return h.hexdigest()
