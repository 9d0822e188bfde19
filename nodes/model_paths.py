"""Swapline's model folders inside ComfyUI, registered without clobbering user paths.

Users of other face-swap packs already have models/insightface (swappers, and analysis packs
under insightface/models/<pack>) and models/facerestore_models; we use the same layout. Paths
from extra_model_paths.yaml were registered before custom nodes load, so we only append our
default after them and add our extensions.
"""
from __future__ import annotations

import os
import re

import folder_paths

from ..swapline_core.errors import MissingModelError

INSIGHTFACE = "insightface"
FACERESTORE = "facerestore_models"
FACE_MODELS = "swapline_faces"
# ReActor 0.7's folders for HyperSwap and ReSwapper, and FaceFusion's model set (its
# .assets/models: swappers, crossface_* embedding converters, GPEN) as models/facefusion.
HYPERSWAP = "hyperswap"
RESWAPPER = "reswapper"
FACEFUSION = "facefusion"
SWAPPER_FOLDERS = (HYPERSWAP, RESWAPPER, FACEFUSION)
FACEMASK = "facemask"            # XSeg occluders and BiSeNet face parsers (FaceFusion's ONNX files)
SAFETY = "swapline_safety"       # user-supplied content-safety image classifiers (QA gate), none bundled

_FOLDERS = {
    INSIGHTFACE: ("insightface", {".onnx"}),
    HYPERSWAP: ("hyperswap", {".onnx"}),
    RESWAPPER: ("reswapper", {".onnx"}),
    FACEFUSION: ("facefusion", {".onnx"}),
    FACERESTORE: ("facerestore_models", {".pth", ".safetensors", ".ckpt", ".onnx"}),  # .onnx: GPEN-BFR
    FACE_MODELS: (os.path.join("swapline", "faces"), {".safetensors"}),
    FACEMASK: ("facemask", {".onnx"}),
    SAFETY: ("swapline_safety", {".onnx"}),
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
                 hint: str = "see docs/models.md") -> bool | str:
    """A loader's ``validate_inputs`` answer for a file/folder widget.

    ComfyUI 0.3.75 checks combo values only for V1 nodes (a V3 combo is served as "COMBO"), so a
    stale workflow naming a missing file would otherwise fail only at run time. Loaders must not
    take **kwargs in validate_inputs: that would switch off core's range checks of the rest.
    """
    if value in available:
        return True
    return (f"{kind} '{value}' was not found in {', '.join(searched) or '(no folder configured)'} "
            f"({hint}); available: {available or 'none'}")


def file_fingerprint(name: str, filename: str, resolver=None) -> str:
    """A loader's fingerprint_inputs: changes when the file (or pack folder) changes on disk, so
    ComfyUI re-runs the loader instead of reusing the model it loaded from the old bytes."""
    from ..swapline_core.backends.cache import file_identity

    try:
        path = (resolver(filename) if resolver is not None else
                resolve_pack(filename) if name == "analysis pack" else resolve(name, filename))
    except (MissingModelError, ValueError):
        return str(filename)  # validation reports the missing file
    return repr(file_identity(path))


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


def onnx_provider(choice: str) -> str:
    """A provider choice as the core takes it: TensorRT engines are cached in ComfyUI's user folder
    (user/swapline/trt_engines), built once per model, GPU and settings, kept across restarts."""
    from ..swapline_core.backends.onnx_sessions import with_engine_cache

    if not choice.startswith("TensorRT"):
        return choice
    path = os.path.join(folder_paths.get_user_directory(), "swapline", "trt_engines")
    os.makedirs(path, exist_ok=True)
    return with_engine_cache(choice, path)


# Any absolute path left after the known roots are replaced: only its last part is shown.
_ABSOLUTE = re.compile(r"(?<![\w.:/~\0-])(?:/[\w.+@-]+)+/([\w.+@-]+)")


def _roots() -> list[tuple[str, str]]:
    """(server folder, what an API client is shown instead), most specific first."""
    roots = [(folder_paths.get_input_directory(), "input"), (folder_paths.get_output_directory(), "output"),
             (folder_paths.get_temp_directory(), "temp"), (folder_paths.get_user_directory(), "user"),
             (folder_paths.models_dir, "models")]
    for name, (paths, _) in list(folder_paths.folder_names_and_paths.items()):
        for p in paths:
            inside = _relative_to(p, folder_paths.base_path)
            roots.append((p, inside if inside else f"[{name} folder]"))
    roots.append((folder_paths.base_path, "ComfyUI"))
    out = []
    for root, label in roots:
        for form in {os.path.abspath(root), os.path.realpath(root)}:
            out.append((form.rstrip(os.sep), label))
    # longer first, so models/insightface wins over models, and models over the ComfyUI base
    return sorted(out, key=lambda r: -len(r[0]))


def _relative_to(path: str, root: str) -> str | None:
    path, root = os.path.abspath(path), os.path.abspath(root)
    if path != root and os.path.commonpath([path, root]) == root:
        return os.path.relpath(path, root)
    return None


def public_text(text: str) -> str:
    """A message as API clients may see it: paths relative to ComfyUI's folders, never absolute.

    models/insightface/x.onnx stays that; a folder from extra_model_paths.yaml is shown as
    "[insightface folder]/x.onnx"; any other absolute path is cut to its file name.
    """
    if not isinstance(text, str) or os.sep not in text:
        return text
    labels = []
    for root, label in _roots():
        if len(root) > 1 and root in text:
            # a placeholder first, so the catch-all below does not cut "models/x/y" to ".../y" (an ellipsis)
            token = f"\0{len(labels)}\0"
            text = re.sub(re.escape(root) + r"(?=/|\b|$)", lambda _m, token=token: token, text)
            labels.append(label)
    text = _ABSOLUTE.sub(lambda m: "\u2026/" + m.group(1), text)
    return re.sub("\0(\\d+)\0", lambda m: labels[int(m.group(1))], text)
