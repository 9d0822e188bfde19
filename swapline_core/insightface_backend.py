"""InsightFace analysis packs (buffalo_l, antelopev2, any detector + recognizer folder).

Models are routed by insightface's own loader (the shape-based router, or the task manifest of
insightface 2.x packs), so a user's real files take exactly the path our tests take. We never
let insightface download: the folder is checked first and a missing file is our clear error.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from .align import warp_crops
from .errors import BadModelError, MissingModelError
from .faces import Face, l2_normalise
from .interfaces import FaceAnalyzer
from .onnx_sessions import providers_for


def _route(path: str, providers: list[str]):
    from insightface.model_zoo import model_zoo

    try:
        return model_zoo.get_model(path, providers=providers)
    except Exception as exc:  # onnxruntime raises several types for unreadable graphs
        raise BadModelError(path, f"onnxruntime could not load it ({exc})") from exc


class InsightFaceAnalyzer(FaceAnalyzer):
    supports_landmarks = False

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
        providers = providers_for(provider)
        self.detector = self.recognizer = self.genderage = None
        if (pack / "manifest.json").is_file():
            self._load_manifest_pack(pack, providers)
        else:
            for onnx_file in sorted(pack.glob("*.onnx")):
                model = _route(str(onnx_file), providers)
                task = getattr(model, "taskname", None)
                if task == "detection" and self.detector is None:
                    self.detector = model
                elif task == "recognition" and self.recognizer is None:
                    self.recognizer = model
                elif task == "genderage" and self.genderage is None:
                    self.genderage = model
        if self.detector is None:
            raise MissingModelError("a detector ONNX (e.g. det_10g.onnx)", [str(pack)],
                                    "The pack folder has no file insightface routes to a detector.")
        self.detector.prepare(0, input_size=(det_size, det_size), det_thresh=det_thresh)
        self.det_thresh = det_thresh
        for role in ("detector", "recognizer", "genderage"):
            model = getattr(self, role)
            if model is not None:
                self.providers[f"{role}:{Path(model.model_file).name}"] = list(model.session.get_providers())
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
                    raise BadModelError(str(pack / "manifest.json"), f"no usable {task} task ({exc})")

    def detect(self, images: Sequence[np.ndarray]) -> list[list[Face]]:
        out = []
        for img in images:
            bboxes, kpss = self.detector.detect(np.ascontiguousarray(img[:, :, ::-1]), max_num=0)
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
        feats = np.concatenate([self.recognizer.get_feat(crops[i:i + 32])
                                for i in range(0, len(crops), 32)])
        for f, e in zip(owners, l2_normalise(feats)):
            f.embedding = e

    def model_files(self) -> list[tuple[str, str]]:
        return [(role, m.model_file) for role, m in
                (("detector", self.detector), ("recognizer", self.recognizer), ("genderage", self.genderage))
                if m is not None]


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
