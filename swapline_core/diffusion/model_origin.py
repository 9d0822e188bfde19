"""Which files a ComfyUI MODEL, VAE or CONTROL_NET input was loaded from, read off the prompt.

ComfyUI's model objects do not remember their file (``load_checkpoint_guess_config`` and
``load_controlnet`` keep none), so provenance cannot ask them. What is known for certain is the
prompt being executed: each input is a link ``[node id, output index]`` to the node that made
it. Following links back to a loader gives the file name; the caller resolves it in ComfyUI's
model folders and hashes it. Patch nodes on the way (LoRA) add their own file and are followed
through. Anything else (a merge node, a node from another pack) is reported as an unknown file
made by that node, never left out and never guessed.
"""
from __future__ import annotations

from collections.abc import Callable

from ..provenance.method import UNKNOWN_FILE

# class_type -> {output index: (role, widget holding the file name, ComfyUI model folder)}
LOADERS: dict[str, dict[int, tuple[str, str, str]]] = {
    "CheckpointLoaderSimple": {0: ("checkpoint", "ckpt_name", "checkpoints"),
                               2: ("VAE (from the checkpoint)", "ckpt_name", "checkpoints")},
    "CheckpointLoader": {0: ("checkpoint", "ckpt_name", "checkpoints"),
                         2: ("VAE (from the checkpoint)", "ckpt_name", "checkpoints")},
    "unCLIPCheckpointLoader": {0: ("checkpoint", "ckpt_name", "checkpoints"),
                               2: ("VAE (from the checkpoint)", "ckpt_name", "checkpoints")},
    "UNETLoader": {0: ("diffusion model", "unet_name", "diffusion_models")},
    "VAELoader": {0: ("VAE", "vae_name", "vae")},
    "ControlNetLoader": {0: ("ControlNet", "control_net_name", "controlnet")},
    "DiffControlNetLoader": {0: ("ControlNet", "control_net_name", "controlnet")},
}
# class_type -> (role, widget, folder, the input the patched object comes from)
PATCHERS: dict[str, tuple[str, str, str, str]] = {
    "LoraLoader": ("LoRA", "lora_name", "loras", "model"),
    "LoraLoaderModelOnly": ("LoRA", "lora_name", "loras", "model"),
}


def trace(prompt: dict, node_id: str, input_name: str, role: str,
          resolve: Callable[[str, str], str | None], sha256: Callable[[str], str]) -> list[tuple]:
    """[(role, path or "unknown file (...)", sha256 or None), ...] for ``input_name`` of ``node_id``."""
    out: list[tuple] = []
    link = ((prompt or {}).get(str(node_id)) or {}).get("inputs", {}).get(input_name)
    seen = set()
    while True:
        if not (isinstance(link, list) and len(link) == 2):
            out.append((role, f"{UNKNOWN_FILE} (the prompt does not show where '{input_name}' came from)", None))
            return out
        src, index = str(link[0]), int(link[1])
        if src in seen:
            out.append((role, f"{UNKNOWN_FILE} (a loop in the prompt at node {src})", None))
            return out
        seen.add(src)
        node = prompt.get(src) or {}
        cls, inputs = node.get("class_type", "?"), node.get("inputs") or {}
        if cls in LOADERS and index in LOADERS[cls]:
            r, widget, folder = LOADERS[cls][index]
            out.append(_file(r, inputs.get(widget), folder, cls, src, resolve, sha256))
            return out
        if cls in PATCHERS:
            r, widget, folder, through = PATCHERS[cls]
            out.append(_file(r, inputs.get(widget), folder, cls, src, resolve, sha256))
            link = inputs.get(through)
            continue
        out.append((role, f"{UNKNOWN_FILE} (made by node {src}, {cls})", None))
        return out


def _file(role, name, folder, cls, node_id, resolve, sha256) -> tuple:
    if not isinstance(name, str) or not name:
        return role, f"{UNKNOWN_FILE} ({cls} node {node_id} names no file)", None
    path = resolve(folder, name)
    if not path:
        return role, f"{UNKNOWN_FILE} ({name} not found in models/{folder})", None
    return role, path, sha256(path)
