"""INSwapper-style ONNX swappers (inswapper_128 and anything with its signature).

The signature is checked up front so a wrong file fails with its name instead of a shape error
deep inside onnxruntime. Faces of a whole chunk are run as one batch when the graph's batch
dimension is dynamic; the real inswapper_128 has a fixed batch of 1 and runs face by face.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import BadModelError, SwaplineError
from ..faces.align import warp_crops
from ..faces.paste import crop_mask, crop_to_patch
from ..interfaces import FaceSwapper
from ..types import Face, SourceIdentity, SwapPatch
from .onnx_sessions import create_session

SIZE = 128


def _check_signature(path: str, session) -> tuple[bool, str]:
    ins, outs = session.get_inputs(), session.get_outputs()
    ok = (len(ins) == 2 and len(outs) == 1 and len(ins[0].shape) == 4 and ins[0].shape[2:] == [SIZE, SIZE]
          and ins[1].shape[-1] == 512)
    if not ok:
        sig = ", ".join(f"{i.name}{i.shape}" for i in ins) + " -> " + ", ".join(f"{o.name}{o.shape}" for o in outs)
        raise BadModelError(path, f"it is not an INSwapper-style swapper (expected inputs "
                                  f"target[N,3,128,128] and source[N,512] and one output; got {sig})")
    batch_dim = ins[0].shape[0]
    return not isinstance(batch_dim, int) or batch_dim < 1, ins[0].type


def _load_emap(path: str) -> np.ndarray:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path, load_external_data=False)
    emap = numpy_helper.to_array(model.graph.initializer[-1])
    if emap.shape != (512, 512):
        raise BadModelError(path, f"its last initializer should be the 512x512 'emap', found {emap.shape}")
    return emap.astype(np.float32)


class InSwapper(FaceSwapper):
    def __init__(self, path: str, provider: str = "auto", mask_kind: str = "ellipse",
                 mask_erode: float = 0.0, mask_blur: float = 0.1):
        self.path = path
        self.name = Path(path).stem
        self.session = create_session(path, provider)
        self.batched, input_type = _check_signature(path, self.session)
        self.dtype = np.float16 if "float16" in input_type else np.float32
        self.emap = _load_emap(path)
        self.providers = {f"swapper:{Path(path).name}": list(self.session.get_providers())}
        self.mask = crop_mask(SIZE, mask_kind, erode=mask_erode, blur=mask_blur)
        self._names = [i.name for i in self.session.get_inputs()]
        self._latent_key = None
        self._latent = None

    def latent(self, source: SourceIdentity) -> np.ndarray:
        if source.embedding.shape[-1] != 512:
            raise SwaplineError(
                f"{self.name} needs a 512-d ArcFace identity, but the face model was made with "
                f"'{source.recognizer}' ({source.embedding.shape[-1]}-d). Build the face model "
                "with an InsightFace analysis pack (e.g. buffalo_l), or use the built-in classical swapper.")
        key = source.embedding.tobytes()
        if key != self._latent_key:  # the source identity is fixed for a whole clip: compute once
            lat = source.embedding.reshape(1, -1) @ self.emap
            self._latent = (lat / np.linalg.norm(lat)).astype(self.dtype)
            self._latent_key = key
        return self._latent

    def swap(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
             source: SourceIdentity) -> list[list[SwapPatch]]:
        latent = self.latent(source)
        crops, mats, owners = [], [], []
        for i, (img, fs) in enumerate(zip(images, faces)):
            if fs:
                c, m = warp_crops(img, fs, SIZE, "arcface")
                crops.append(c)
                mats.append(m)
                owners.extend((i, j) for j in range(len(fs)))
        out: list[list[SwapPatch]] = [[] for _ in images]
        if not owners:
            return out
        blob = np.concatenate(crops).astype(np.float32).transpose(0, 3, 1, 2) / 255.0
        mats = np.concatenate(mats)
        step = len(blob) if self.batched else 1
        results = []
        for s in range(0, len(blob), step):
            b = blob[s:s + step].astype(self.dtype)
            lat = np.repeat(latent, len(b), axis=0)
            results.append(self.session.run(None, {self._names[0]: b, self._names[1]: lat})[0])
        swapped = np.clip(np.concatenate(results).astype(np.float32), 0, 1).transpose(0, 2, 3, 1) * 255.0
        for k, (i, _j) in enumerate(owners):
            h, w = images[i].shape[:2]
            patch = crop_to_patch((h, w), swapped[k], self.mask, mats[k], {"swapper": self.name})
            if patch is not None:
                out[i].append(patch)
        return out

    def model_files(self) -> list[tuple[str, str]]:
        return [("swapper", self.path)]
