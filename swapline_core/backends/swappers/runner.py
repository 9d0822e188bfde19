"""One runner for every neural swapper family: align, normalise, feed, un-normalise, paste.

The family (families.py) says what the graph wants; this module does it for a whole chunk at
once: all faces of all frames (times the pixel-boost tiles) go through the graph as one batch
where its batch dimension is dynamic, face by face where it is fixed at 1 (most published files).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...errors import BadModelError, SwaplineError
from ...faces.align import template, umeyama, warp_crops
from ...faces.paste import crop_mask, crop_to_patch
from ...interfaces import FaceSwapper
from ...types import OUTSIDE_FRAME, Competence, Face, SourceIdentity, SwapPatch
from ..onnx_batch import BatchRun
from ..onnx_sessions import create_session
from ..trt_profile import FACES, SINGLE
from . import pixel_boost as boost
from .families import detect_family


def _load_emap(path: str) -> np.ndarray:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path, load_external_data=False)
    emap = numpy_helper.to_array(model.graph.initializer[-1]) if model.graph.initializer else np.zeros(0)
    if emap.shape != (512, 512):
        raise BadModelError(path, f"its last initializer should be the 512x512 'emap' INSwapper-style "
                                  f"swappers carry, found {emap.shape}")
    return emap.astype(np.float32)


def family_mask(size: int, template_name: str, kind: str, erode: float, blur: float) -> np.ndarray:
    """The paste mask drawn where the face is in *this* family's crop.

    crop_mask's ellipse is laid out for ArcFace-128 crops; FFHQ and ArcFace-112-v1 crops frame the
    face differently, so the mask is drawn in ArcFace-128 space and moved onto the family's
    template, giving every family the same face coverage."""
    import cv2

    base = crop_mask(size, kind, erode=erode, blur=blur)
    if template_name == "arcface_128":
        return base
    m = umeyama(template(size, "arcface_128"), template(size, template_name))
    return cv2.warpAffine(base, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=0.0)


class FamilySwapper(FaceSwapper):
    """Any known swapper family. ``identity_weight`` follows FaceFusion's face swapper weight:
    0.5 uses the source identity as is; lower values move it toward the target face's own
    identity (up to 35 % at 0), higher away from it (up to 35 % at 1). Embedding families only."""

    # Declared, not measured here (no real weights on the build machine): every family works on an
    # ArcFace/FFHQ-aligned crop; eyes under ~10 px apart mean a > 4x upscale of a 128 px crop (mush
    # even with pixel boost), and the aligned crop of a profile holds mostly background. Community
    # reports put the usable head turn of INSwapper-class models at roughly 60-70 degrees.
    competence = Competence(max_yaw=65.0, max_pitch=50.0, min_inter_ocular_px=10.0, needs_both_eyes=False,
                            basis="declared from the aligned-crop geometry (real weights not measured here)")

    def __init__(self, path: str, provider: str = "auto", mask_kind: str = "ellipse",
                 mask_erode: float = 0.0, mask_blur: float = 0.1, *, family: str = "auto",
                 pixel_boost: int = 0, identity_weight: float = 0.5, converter_dirs: Sequence[str] = ()):
        from .families import read_signature

        self.path = path
        self.name = Path(path).stem
        self.session = create_session(path, provider, FACES)
        self.spec, self.detected_by = detect_family(path, self.session, family)
        self.sig = read_signature(path, self.session)
        self.runner = BatchRun(self.session)
        self.k = boost.boost_factor(self.spec.size, pixel_boost)
        self.crop_size = self.spec.size * self.k
        self.identity_weight = float(identity_weight)
        self.providers = {f"swapper:{Path(path).name}": list(self.session.get_providers())}
        self.batching = {f"swapper:{Path(path).name}": self.runner}
        self.mask = family_mask(self.crop_size, self.spec.template, mask_kind, mask_erode, mask_blur)
        self.emap = _load_emap(path) if self.spec.source == "emap" else None
        self.converter_path = None
        self.converter = None
        if self.spec.source == "converter":
            self.converter_path = self._find_converter(converter_dirs)
            self.converter = create_session(self.converter_path, provider, SINGLE)   # run row by row
            self.providers[f"converter:{self.spec.converter}"] = list(self.converter.get_providers())
        self._mask_settings = (mask_kind, round(float(mask_erode), 4), round(float(mask_blur), 4))
        self._src_key = None
        self._src_vec = None

    @property
    def settings(self) -> tuple:
        """What changes the pixels besides the files: part of the video swap stage's key, so a
        resumed clip never reuses chunks swapped with another boost, weight or mask."""
        return (self.spec.name, self.crop_size, round(self.identity_weight, 4), self._mask_settings)

    # ------------------------------------------------------------------ source side
    def _find_converter(self, dirs: Sequence[str]) -> str:
        name = self.spec.converter
        searched = [os.path.dirname(self.path)] + [d for d in dirs if d]
        for d in searched:
            p = os.path.join(d, name)
            if os.path.isfile(p):
                sess = create_session(p, "CPU")
                ins, outs = sess.get_inputs(), sess.get_outputs()
                if len(ins) != 1 or ins[0].shape[-1] != 512 or not outs or outs[0].shape[-1] != 512:
                    raise BadModelError(p, f"an embedding converter takes [N,512] and returns [N,512]; got "
                                           f"{ins[0].shape if ins else None} -> {outs[0].shape if outs else None}")
                return p
        where = "\n".join(f"  - {d}" for d in searched)
        raise SwaplineError(f"the {self.spec.name} swapper '{Path(self.path).name}' needs its embedding converter "
                            f"'{name}' (FaceFusion's models), which was not found. Folders searched:\n{where}\n"
                            "Put it next to the swapper file (docs/models.md).")

    def to_model_space(self, emb: np.ndarray) -> np.ndarray:
        """ArcFace embeddings (M, 512) -> what the graph's source input takes, (M, D)."""
        emb = np.asarray(emb, np.float32).reshape(-1, 512)
        if self.spec.source == "emap":
            lat = (emb / np.linalg.norm(emb, axis=1, keepdims=True)) @ self.emap
            return lat / np.linalg.norm(lat, axis=1, keepdims=True)
        if self.spec.source == "embedding":
            return emb / np.linalg.norm(emb, axis=1, keepdims=True)
        name = self.converter.get_inputs()[0].name
        out = np.concatenate([self.converter.run(None, {name: e[None].astype(np.float32)})[0] for e in emb])
        out = out.reshape(len(emb), -1).astype(np.float32)
        if self.spec.normalise_converted:
            out = out / np.linalg.norm(out, axis=1, keepdims=True)
        return out

    def _source_vector(self, source: SourceIdentity) -> np.ndarray:
        if source.embedding.shape[-1] != 512:
            raise SwaplineError(
                f"{self.name} needs a 512-d ArcFace identity, but the face model was made with "
                f"'{source.recognizer}' ({source.embedding.shape[-1]}-d). Build the face model "
                "with an InsightFace analysis pack (e.g. buffalo_l), or use the built-in classical swapper.")
        key = source.embedding.tobytes()
        if key != self._src_key:  # one identity for a whole clip: convert once
            self._src_vec = self.to_model_space(source.embedding)[0]
            self._src_key = key
        return self._src_vec

    def _source_image(self, source: SourceIdentity) -> np.ndarray:
        if source.image is None or source.face is None:
            raise SwaplineError(f"the {self.spec.name} swapper takes the source as an aligned face image, but this "
                                "face model holds no source image; rebuild it with Build Face Model")
        crop, _ = warp_crops(source.image, [source.face], self.spec.source_size, self.spec.source_template)
        return (crop[0].astype(np.float32) / 255.0).transpose(2, 0, 1)   # RGB/255, no mean/std

    def source_inputs(self, source: SourceIdentity, targets: Sequence[Face]) -> tuple[np.ndarray, list[dict]]:
        """One source row per target face, and what was done to it (for the records)."""
        if not self.spec.uses_embedding:
            img = self._source_image(source)
            return np.repeat(img[None], len(targets), axis=0), [{} for _ in targets]
        vec = self._source_vector(source)
        rows = np.repeat(vec[None], len(targets), axis=0)
        notes = [{} for _ in targets]
        if abs(self.identity_weight - 0.5) > 1e-6 and targets:
            alpha = float(np.interp(self.identity_weight, [0.0, 1.0], [0.35, -0.35]))
            have = [i for i, f in enumerate(targets) if f.embedding is not None and f.embedding.shape[-1] == 512]
            if have:
                tgt = self.to_model_space(np.stack([targets[i].embedding for i in have]))
                rows[have] = rows[have] * (1.0 - alpha) + tgt * alpha
            for i in range(len(targets)):
                notes[i] = {"identity_weight": round(self.identity_weight, 3)} if i in have else \
                    {"identity_weight": "not applied: the target face has no 512-d embedding "
                                        "(Detect Faces with embeddings)"}
        return rows, notes

    # ------------------------------------------------------------------ target side
    def _normalise(self, crops: np.ndarray) -> np.ndarray:
        x = crops.astype(np.float32) / 255.0
        x = (x - np.asarray(self.spec.mean, np.float32)) / np.asarray(self.spec.std, np.float32)
        return x.transpose(0, 3, 1, 2)

    def _denormalise(self, out: np.ndarray) -> np.ndarray:
        y = out.astype(np.float32).transpose(0, 2, 3, 1)
        if self.spec.output == "denorm":
            y = y * np.asarray(self.spec.std, np.float32) + np.asarray(self.spec.mean, np.float32)
        return np.clip(y, 0.0, 1.0) * 255.0

    def run_crops(self, crops: np.ndarray, sources: np.ndarray) -> np.ndarray:
        """Aligned uint8 crops (M, K*s, K*s, 3) and one source row per crop -> swapped float crops."""
        k = self.k
        tiles = boost.split(crops, k)
        src = np.repeat(sources, k * k, axis=0).astype(np.float32, copy=False)
        # fp16 files: BatchRun feeds their half-precision inputs and hands float32 back
        out = self.runner({self.sig.target: self._normalise(tiles), self.sig.source: src})[0]
        return boost.merge(self._denormalise(out), k)

    def swap(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
             source: SourceIdentity) -> list[list[SwapPatch]]:
        crops, mats, owners, flat = [], [], [], []
        for i, (img, fs) in enumerate(zip(images, faces)):
            if fs:
                c, m = warp_crops(img, fs, self.crop_size, self.spec.template)
                crops.append(c)
                mats.append(m)
                owners.extend((i, j) for j in range(len(fs)))
                flat.extend(fs)
        out: list[list[SwapPatch]] = [[] for _ in images]
        if not owners:
            return out
        sources, notes = self.source_inputs(source, flat)
        swapped = self.run_crops(np.concatenate(crops), sources)
        mats = np.concatenate(mats)
        info = {"swapper": self.name, "family": self.spec.name}
        if self.k > 1:
            info["pixel_boost"] = self.crop_size
        for n, (i, _j) in enumerate(owners):
            h, w = images[i].shape[:2]
            patch = crop_to_patch((h, w), swapped[n], self.mask, mats[n], {**info, **notes[n]})
            # One patch per face, always: a face partly outside the frame is pasted on its visible
            # part (crop_to_patch clips), one with no pixel of its mask inside is refused with the
            # reason. Dropping it instead would pin every later face's patch on the wrong face.
            if patch is None or not patch.mask.any():
                patch = SwapPatch.refusal(OUTSIDE_FRAME, info)
            out[i].append(patch)
        return out

    def model_files(self) -> list[tuple[str, str]]:
        files = [("swapper", self.path)]
        if self.converter_path:
            files.append(("embedding converter", self.converter_path))
        return files
