"""Swapline install hook (run by ComfyUI-Manager and by scripts/setup.sh).

Idempotent, offline, never calls pip. It checks the built-in mesh models shipped in
models/mediapipe/ (sha256), creates the model folders Swapline reads from, warns when both
onnxruntime builds are installed, and lists which known models are present.
"""
from __future__ import annotations

import importlib.metadata as md
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from swapline_core.backends import mesh_models  # noqa: E402
from swapline_core.backends.catalog import KNOWN_MODELS, MODEL_FOLDERS  # noqa: E402


def comfy_models_dir() -> Path | None:
    """The models folder of the ComfyUI this pack sits in (custom_nodes/<pack>/../../models), or
    $SWAPLINE_MODELS_DIR; None outside a ComfyUI tree (then no folder is created anywhere)."""
    env = os.environ.get("SWAPLINE_MODELS_DIR")
    if env:
        return Path(env)
    return HERE.parent.parent / "models" if HERE.parent.name == "custom_nodes" else None


def onnxruntime_conflict() -> str | None:
    have = []
    for dist in ("onnxruntime", "onnxruntime-gpu"):
        try:
            have.append(f"{dist} {md.version(dist)}")
        except md.PackageNotFoundError:
            pass
    if len(have) < 2:
        return None
    return ("both " + " and ".join(have) + " are installed; they overwrite each other's files. Fix: "
            "pip uninstall -y onnxruntime onnxruntime-gpu && pip install onnxruntime-gpu  "
            "(or onnxruntime for CPU only)")


def mesh_models_state() -> str:
    """One line on the built-in mesh and hand models, which ship with the pack in models/mediapipe/:
    every file's sha256 checked here, offline. This script never downloads: when one is missing or
    altered it says to reinstall the pack or run the script that restores it."""
    bad = mesh_models.missing_or_changed()
    if not bad:
        return (f"built-in mesh models present, all {len(mesh_models.FILES)} files checked (sha256) in "
                f"{mesh_models.DEFAULT_DIR}")
    return ("NEEDED by the shipped built-in workflows (their analyzer, swapper and hand occluder run them): "
            + mesh_models.describe_missing(bad))


def main() -> int:
    print(f"[Swapline] {mesh_models_state()}")
    models = comfy_models_dir()
    if models is None:
        print(f"[Swapline] {HERE} is not inside a ComfyUI custom_nodes folder and SWAPLINE_MODELS_DIR is not "
              "set: no model folders created (ComfyUI registers them at start-up anyway)")
        warn = onnxruntime_conflict()
        if warn:
            print(f"[Swapline] WARNING: {warn}")
        return 0
    for sub in MODEL_FOLDERS:
        (models / sub).mkdir(parents=True, exist_ok=True)
    print(f"[Swapline] model folders ready under {models}")
    warn = onnxruntime_conflict()
    if warn:
        print(f"[Swapline] WARNING: {warn}")
    for m in KNOWN_MODELS:
        if m.filename in mesh_models.FILES:     # in the pack's own folder, reported above
            continue
        path = models / m.folder / m.filename
        state = "present" if path.exists() else "missing (optional)"
        print(f"[Swapline]   {m.folder}/{m.filename}: {state}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
