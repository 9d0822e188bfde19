"""InsightFace analysis packs (buffalo_l, antelopev2, any detector + recognizer folder).

Models are routed by insightface's own loader (the shape-based router, or the task manifest of
insightface 2.x packs), so a user's real files take exactly the path our tests take. We never
let insightface download: the folder is checked first and a missing file is our clear error.

68-point landmarks come from the pack's ``1k3d68.onnx`` when it has one: the router sends a
192x192-input model with a 3309-wide output (1103 3-D points, the last 68 in iBUG order) to
insightface's ``Landmark`` class under the task ``landmark_3d_68``, and ``Landmark.get`` crops
the face box itself (centre of the box, side 1.5x its longer edge) and maps the points back to
image pixels. ``2d106det.onnx`` (task ``landmark_2d_106``) is routed too but not used: nothing
downstream reads 106-point meshes. Facts checked on insightface 2.1:
- ``Landmark`` loads ``meanshape_68.pkl`` from the wheel's own ``data/objects`` (no download)
  only to estimate head pose; we switch pose off (``require_pose = False``), so a wheel without
  that file still gives landmarks and no time goes into a pose nobody reads.
- insightface 2.1's manifest V2 knows only the detection/verification/recognition tasks:
  ``get_model(pack, model_task="landmark_3d_68")`` raises ValueError. A manifest entry
  ``tasks.landmark_3d_68.file`` is therefore routed by us through the shape router (which
  insightface keeps for direct .onnx paths beside a manifest); a newer insightface that knows
  the task is asked first.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import BadModelError, MissingModelError
from ..faces.align import warp_crops
from ..interfaces import FaceAnalyzer
from ..types import Face, as_rgb_uint8, l2_normalise
from .onnx_batch import BatchRun
from .onnx_sessions import is_tensorrt, providers_for, unloadable_model
from .scrfd_batch import batch_runner, detect_batch
from .trt_profile import DETECTOR, FACES, graph_inputs, profile_options

log = logging.getLogger("swapline")

LANDMARK_TASK = "landmark_3d_68"   # insightface's taskname for 1k3d68.onnx
# (role in providers / model_files, attribute holding the model)
_ROLES = (("detector", "detector"), ("recognizer", "recognizer"), ("genderage", "genderage"),
          ("landmarks", "landmarker"))


def _file_providers(choice: str, pack: Path, path: Path, det_size: int, shared: list) -> list:
    """One file's providers: with TensorRT, the pack's providers plus that file's own profile.

    insightface learns a file's role by routing it, on a session made with these providers, so
    the batches are read off the graph first: a detector takes frames of any size ("?" x "?",
    run at det_size) and gets the detector's batches; the face-crop models (fixed crop sizes)
    get a chunk's faces."""
    if not is_tensorrt(choice):
        return shared
    try:
        inputs = graph_inputs(str(path))
    except Exception:  # onnx raises several types for unreadable files: _route reports it in our words
        return shared
    any_size = any(not isinstance(d, int) for _, shape in inputs for d in shape[2:])
    profile = profile_options(inputs, DETECTOR if any_size else FACES, {2: det_size, 3: det_size})
    return providers_for(choice, str(pack), profile)


def _route(path: str, providers: list[str]):
    from insightface.model_zoo import model_zoo

    try:
        return model_zoo.get_model(path, providers=providers)
    except Exception as exc:  # onnxruntime raises several types for unreadable graphs
        raise unloadable_model(path, exc) from exc


class InsightFaceAnalyzer(FaceAnalyzer):
    def __init__(self, pack_dir: str, provider: str = "auto", det_size: int = 640,
                 det_thresh: float = 0.5):
        super().__init__()
        pack = Path(pack_dir)
        if not pack.is_dir():
            raise MissingModelError(pack.name, [str(pack.parent)],
                                    "An analysis pack is a folder such as buffalo_l/ holding "
                                    "det_10g.onnx and w600k_r50.onnx.")
        self.name = pack.name
        self.pack_dir = str(pack)
        providers = providers_for(provider, str(pack))
        self.detector = self.recognizer = self.genderage = self.landmarker = None
        if (pack / "manifest.json").is_file():
            self._load_manifest_pack(pack, providers)
        else:
            for onnx_file in sorted(pack.glob("*.onnx")):
                model = _route(str(onnx_file), _file_providers(provider, pack, onnx_file, det_size, providers))
                task = getattr(model, "taskname", None)
                if task == "detection" and self.detector is None:
                    self.detector = model
                elif task == "recognition" and self.recognizer is None:
                    self.recognizer = model
                elif task == "genderage" and self.genderage is None:
                    self.genderage = model
                elif task == LANDMARK_TASK and self.landmarker is None:
                    self.landmarker = model
                # landmark_2d_106 (2d106det.onnx) and anything else: routed, not used
        if self.detector is None:
            raise MissingModelError("a detector ONNX (e.g. det_10g.onnx)", [str(pack)],
                                    "The pack folder has no file insightface routes to a detector.")
        self.detector.prepare(0, input_size=(det_size, det_size), det_thresh=det_thresh)
        self.det_thresh = det_thresh
        if self.landmarker is not None:
            self.landmarker.require_pose = False   # pose is unused; see the module docstring
        for role, attr in _ROLES:
            model = getattr(self, attr)
            if model is not None:
                self.providers[f"{role}:{Path(model.model_file).name}"] = list(model.session.get_providers())
        # frame batches where the detector file takes them; faces in batches for the recogniser
        self.det_runner = batch_runner(self.detector)
        self.rec_runner = BatchRun(self.recognizer.session) if self.recognizer is not None else None
        self.lmk_runner = BatchRun(self.landmarker.session) if self.landmarker is not None else None
        self.batching = {f"{role}:{Path(getattr(self, attr).model_file).name}": run
                         for (role, attr), run in zip(_ROLES, (self.det_runner, self.rec_runner, None, self.lmk_runner))
                         if run is not None}
        if self.recognizer is not None:
            self.recognizer_name = f"{self.name}/{Path(self.recognizer.model_file).name}"
            self.embedding_dim = int(self.recognizer.session.get_outputs()[0].shape[-1])

    def _load_manifest_pack(self, pack: Path, providers: list[str]) -> None:
        from insightface.model_zoo import model_zoo

        for task, attr in (("detection", "detector"), ("recognition", "recognizer")):
            try:
                setattr(self, attr, model_zoo.get_model(str(pack), model_task=task, providers=providers))
            except (KeyError, ValueError, FileNotFoundError) as exc:
                if task == "detection":
                    raise BadModelError(str(pack / "manifest.json"), f"no usable {task} task ({exc})") from exc
        self.landmarker = _manifest_landmarker(pack, providers)

    @property
    def supports_landmarks(self) -> bool:
        """True only when the pack has a model insightface routes to ``landmark_3d_68``."""
        return getattr(self, "landmarker", None) is not None

    def detect(self, images: Sequence[np.ndarray], min_face: float | None = None) -> list[list[Face]]:
        # SCRFD scans fixed strides on one input size: no pyramid to cut short, min_face is moot
        out = []
        bgr = [np.ascontiguousarray(img[:, :, ::-1]) for img in images]
        if self.det_runner is not None:
            found = detect_batch(self.detector, self.det_runner, bgr, self.det_thresh)
        else:
            found = [self.detector.detect(img, max_num=0) for img in bgr]
        for bboxes, kpss in found:
            faces = []
            for i in range(bboxes.shape[0]):
                kps = kpss[i] if kpss is not None else None
                if kps is None:
                    continue
                faces.append(Face(bbox=bboxes[i, :4].astype(np.float32), kps=kps.astype(np.float32),
                                  score=float(bboxes[i, 4])))
            faces.sort(key=lambda f: -f.score)
            out.append(faces)
        if self.genderage is not None:
            self._gender_age(images, out)
        return out

    def _gender_age(self, images, faces) -> None:
        for img, fs in zip(images, faces):
            bgr = np.ascontiguousarray(img[:, :, ::-1])
            for f in fs:
                shim = {"bbox": f.bbox}
                gender, age = self.genderage.get(bgr, _DictFace(shim))
                f.gender, f.age = ("M" if int(gender) == 1 else "F"), float(age)

    def landmarks68(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> None:
        """Fill ``face.landmarks`` ((68, 2) float32 image pixels, iBUG order) from 1k3d68.onnx."""
        if self.landmarker is None:
            raise MissingModelError("a 68-point landmark ONNX (e.g. 1k3d68.onnx)", [self.pack_dir],
                                    "This pack has no file insightface routes to landmark_3d_68; "
                                    "use the built-in analyzer or add buffalo_l's 1k3d68.onnx.")
        import cv2
        from insightface.utils import face_align

        # insightface's Landmark.get, with the network run once for all faces: the crop centred on
        # the box, side 1.5x its longer edge; the last 68 points of the output, from -1..1 crop
        # units to crop pixels, then back to the image through the crop's inverse transform
        lm = self.landmarker
        size = int(lm.input_size[0])
        crops, mats, owners = [], [], []
        for img, fs in zip(images, faces):
            if not fs:
                continue
            bgr = np.ascontiguousarray(as_rgb_uint8(img)[:, :, ::-1])
            for f in fs:
                b = np.asarray(f.bbox, np.float32)
                centre = ((b[2] + b[0]) / 2, (b[3] + b[1]) / 2)
                crop, m = face_align.transform(bgr, centre, size, size / (max(b[2] - b[0], b[3] - b[1]) * 1.5), 0)
                crops.append(crop)
                mats.append(m)
                owners.append(f)
        if not crops:
            return
        mean = float(lm.input_mean)
        blob = cv2.dnn.blobFromImages(crops, 1.0 / lm.input_std, (size, size), (mean, mean, mean), swapRB=True)
        preds = self.lmk_runner({lm.input_name: blob}, lm.output_names[:1])[0]
        for f, pred, m in zip(owners, preds, mats):
            pred = pred.reshape(-1, 3 if pred.size >= 3000 else 2)[-68:, :2].astype(np.float32)
            pts = (pred + 1) * (size // 2)
            inv = cv2.invertAffineTransform(m)
            f.landmarks = np.ascontiguousarray(pts @ inv[:, :2].T + inv[:, 2], dtype=np.float32)

    def embed(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> None:
        if self.recognizer is None:
            raise MissingModelError("a recognizer ONNX (e.g. w600k_r50.onnx)", [self.pack_dir],
                                    "Identity selection and face models need a recognizer.")
        crops, owners = [], []
        size = int(self.recognizer.input_size[0])
        for img, fs in zip(images, faces):
            if not fs:
                continue
            c, _ = warp_crops(img, fs, size, "arcface")
            crops.extend(np.ascontiguousarray(x[:, :, ::-1]) for x in c)  # get_feat swaps BGR->RGB
            owners.extend(fs)
        if not crops:
            return
        # ArcFaceONNX.get_feat's own preprocessing (BGR in, swapped to RGB, (x - mean) / std), batched runs
        import cv2

        rec = self.recognizer
        m = float(rec.input_mean)
        blob = cv2.dnn.blobFromImages(crops, 1.0 / rec.input_std, tuple(rec.input_size), (m, m, m), swapRB=True)
        blob = np.ascontiguousarray(blob, dtype=getattr(rec, "input_dtype", np.float32))  # fp16 files take fp16
        feats = self.rec_runner({rec.input_name: blob}, rec.output_names[:1])[0]
        for f, e in zip(owners, l2_normalise(feats)):
            f.embedding = e

    def model_files(self) -> list[tuple[str, str]]:
        return [(role, getattr(self, attr).model_file) for role, attr in _ROLES
                if getattr(self, attr) is not None]


def _manifest_landmarker(pack: Path, providers: list[str]):
    """The manifest's landmark_3d_68 model, or None; an optional extra never fails the pack."""
    from insightface.model_zoo import model_zoo

    try:  # a future insightface whose manifests know the task
        model = model_zoo.get_model(str(pack), model_task=LANDMARK_TASK, providers=providers)
        if getattr(model, "taskname", None) == LANDMARK_TASK and hasattr(model, "get"):
            return model
    except (ValueError, KeyError, TypeError, OSError, RuntimeError, AssertionError) as exc:
        # insightface 2.1: ValueError("model_task must be one of [...]")
        log.debug("insightface has no manifest task %s (%s); reading the manifest ourselves", LANDMARK_TASK, exc)
    manifest = pack / "manifest.json"
    try:
        entry = json.loads(manifest.read_text(encoding="utf-8")).get("tasks", {}).get(LANDMARK_TASK)
    except (OSError, ValueError, AttributeError):
        return None
    if entry is None:
        return None
    why = None
    rel = entry.get("file") if isinstance(entry, dict) else None
    path = (pack / str(rel)).resolve() if isinstance(rel, str) and rel.endswith(".onnx") else None
    if path is None or not path.is_relative_to(pack.resolve()):
        why = "tasks.landmark_3d_68.file must be a .onnx path inside the pack"
    elif not path.is_file():
        why = f"{path} does not exist"
    elif isinstance(entry.get("sha256"), str) and _sha256(path) != entry["sha256"].lower():
        why = f"{path} does not match the manifest's sha256"
    else:
        try:
            model = _route(str(path), providers)
        except BadModelError as exc:
            model, why = None, str(exc)
        if model is not None and getattr(model, "taskname", None) == LANDMARK_TASK:
            return model
        why = why or f"insightface routes {path.name} to {getattr(model, 'taskname', None)!r}, not {LANDMARK_TASK}"
    log.warning("[Swapline] %s: no 68-point landmarks from this pack (%s)", manifest, why)
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _DictFace(dict):
    """insightface's attribute model reads ``face.bbox`` and writes keys; give it both."""

    def __getattr__(self, key):
        return self[key]

    def __setattr__(self, key, value):
        self[key] = value


def list_packs(analysis_root: str) -> list[str]:
    if not os.path.isdir(analysis_root):
        return []
    return sorted(d for d in os.listdir(analysis_root)
                  if os.path.isdir(os.path.join(analysis_root, d))
                  and any(n.endswith(".onnx") or n == "manifest.json"
                          for n in os.listdir(os.path.join(analysis_root, d))))
