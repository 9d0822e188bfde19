"""Swapline's model folders inside ComfyUI, registered without clobbering user paths.

Users of other face-swap packs already have models/insightface (swappers, and analysis packs
under insightface/models/<pack>) and models/facerestore_models; we use the same layout. Paths
from extra_model_paths.yaml were registered before custom nodes load, so we only append our
default after them and add our extensions.
"""
from __future__ import annotations

import os

import folder_paths

from ..swapline_core.errors import MissingModelError

INSIGHTFACE = "insightface"
FACERESTORE = "facerestore_models"
FACE_MODELS = "swapline_faces"
FACEMASK = "facemask"            # XSeg occluders and BiSeNet face parsers (FaceFusion's ONNX files)

_FOLDERS = {
    INSIGHTFACE: ("insightface", {".onnx"}),
    FACERESTORE: ("facerestore_models", {".pth", ".safetensors", ".ckpt"}),
    FACE_MODELS: (os.path.join("swapline", "faces"), {".safetensors"}),
    FACEMASK: ("facemask", {".onnx"}),
}


def register() -> None:
    for name, (sub, exts) in _FOLDERS.items():
        default = os.path.join(folder_paths.models_dir, sub)
        if name in folder_paths.folder_names_and_paths:
            paths, existing = folder_paths.folder_names_and_paths[name]
            if default not in paths:
                paths.append(default)
            if existing:  # an empty set means "any extension": leave the user's choice alone
                existing.update(exts)
        else:
            folder_paths.folder_names_and_paths[name] = ([default], set(exts))


def folders(name: str) -> list[str]:
    return folder_paths.get_folder_paths(name)


def files(name: str) -> list[str]:
    return folder_paths.get_filename_list(name)


def resolve(name: str, filename: str) -> str:
    """A widget value -> a real file inside the registered folders, or a clear error."""
    path = folder_paths.get_full_path(name, filename)
    if path is None:
        raise MissingModelError(filename, folders(name))
    return path


def check_choice(kind: str, value: str, available: list[str], searched: list[str],
                 hint: str = "see README.md#models") -> bool | str:
    """A loader's ``validate_inputs`` answer for a file/folder widget.

    ComfyUI 0.3.75 checks combo values only for V1 nodes (a V3 combo is served as "COMBO"), so a
    stale workflow naming a missing file would otherwise fail only at run time. Loaders must not
    take **kwargs in validate_inputs: that would switch off core's range checks of the rest.
    """
    if value in available:
        return True
    return (f"{kind} '{value}' was not found in {', '.join(searched) or '(no folder configured)'} "
            f"({hint}); available: {available or 'none'}")


def analysis_roots() -> list[str]:
    return [os.path.join(p, "models") for p in folders(INSIGHTFACE)]


def analysis_packs() -> list[str]:
    from ..swapline_core.backends.insightface_pack import list_packs

    seen: list[str] = []
    for root in analysis_roots():
        seen += [p for p in list_packs(root) if p not in seen]
    return seen


def resolve_pack(pack: str) -> str:
    if os.sep in pack or "/" in pack or pack.startswith("."):
        raise ValueError(f"analysis pack name '{pack}' must be a folder name, not a path")
    for root in analysis_roots():
        candidate = os.path.join(root, pack)
        if os.path.isdir(candidate):
            return candidate
    raise MissingModelError(pack, analysis_roots(),
                            "An analysis pack is a folder (e.g. buffalo_l/) with det_10g.onnx and w600k_r50.onnx.")


def swapline_cache_dir() -> str:
    # Not ComfyUI's temp folder: that is wiped at every start, and chunks must survive for resume.
    path = os.path.join(folder_paths.get_output_directory(), "swapline_cache")
    os.makedirs(path, exist_ok=True)
    return path
