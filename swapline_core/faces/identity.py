"""Face models: a source identity built from one or many images, saved as .safetensors.

The stored embedding is the normalised mean (or median) of the normalised per-image embeddings;
metadata records which recognizer made it (embeddings of different recognizers are not
comparable) and the hashes of the source images, so provenance can name them.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np

from ..errors import NoFaceError, SwaplineError
from ..types import Face, SourceIdentity, l2_normalise

FORMAT = "swapline.face_model.v1"


def image_hash(image: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest()


def build_from_images(analyzer, images: Sequence[np.ndarray], reduce: str = "mean") -> SourceIdentity:
    """The identity of the largest face of each image, embedded by ``analyzer`` (a FaceAnalyzer).

    Every image must show a face: a photo without one is more likely a wrong input than a
    reason to silently average fewer images. Landmarks are added when the analyzer has them.
    """
    found = analyzer.detect(images)
    picked = [max(fs, key=lambda f: f.area) if fs else None for fs in found]
    empty = [i for i, f in enumerate(picked) if f is None]
    if empty:
        sizes = ", ".join(f"image {i}: {images[i].shape[1]}x{images[i].shape[0]} px" for i in empty)
        need = getattr(analyzer, "min_face_size", None)
        needed = (f"; {analyzer.name} finds faces of {need} px or more (a face at least 100 px across works "
                  "best)" if need else "")
        raise NoFaceError(f"no face found in source image(s) {empty} ({sizes}){needed}: use clear photos of "
                          "the source person")
    analyzer.embed(images, [[f] for f in picked])
    if analyzer.supports_landmarks:
        analyzer.landmarks68(images, [[f] for f in picked])
    return build(images, picked, analyzer.recognizer_name, reduce)


def build(images: Sequence[np.ndarray], faces: Sequence[Face], recognizer: str,
          reduce: str = "mean") -> SourceIdentity:
    """One chosen face per source image, already embedded by the analyzer."""
    embs = [f.embedding for f in faces if f is not None and f.embedding is not None]
    if not embs:
        raise SwaplineError("no face with an embedding was found in the source image(s); "
                            "use a clear, frontal photo of the source person")
    stack = l2_normalise(np.stack(embs))
    agg = np.median(stack, axis=0) if reduce == "median" else stack.mean(axis=0)
    best = max(range(len(faces)), key=lambda i: faces[i].area if faces[i] is not None else -1)
    return SourceIdentity(
        embedding=l2_normalise(agg), recognizer=recognizer, image=images[best], face=faces[best],
        metadata={"source_sha256": [image_hash(im) for im in images], "count": len(embs), "reduce": reduce})


def save(identity: SourceIdentity, path: str) -> None:
    from safetensors.numpy import save_file

    tensors = {"embedding": identity.embedding.astype(np.float32)}
    if identity.image is not None and identity.face is not None:
        tensors["image"] = identity.image
        tensors["kps"] = identity.face.kps.astype(np.float32)
        tensors["bbox"] = identity.face.bbox.astype(np.float32)
        if identity.face.landmarks is not None:
            tensors["landmarks"] = identity.face.landmarks.astype(np.float32)
    meta = {"format": FORMAT, "recognizer": identity.recognizer,
            "metadata": json.dumps(identity.metadata, sort_keys=True)}
    save_file(tensors, path, metadata=meta)
    from ..provenance.jobs import note_face_model

    note_face_model(path)     # delete-by-job finds the face models a job saved


def load(path: str) -> SourceIdentity:
    from safetensors import safe_open

    try:
        with safe_open(path, "np") as f:
            meta = f.metadata() or {}
            t = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:
        raise SwaplineError(f"face model '{path}' could not be read ({exc})") from exc
    if meta.get("format") != FORMAT or "embedding" not in t:
        raise SwaplineError(f"'{path}' is not a Swapline face model (format {meta.get('format')!r})")
    face = None
    if "image" in t:
        face = Face(bbox=t["bbox"], kps=t["kps"], score=1.0, landmarks=t.get("landmarks"),
                    embedding=t["embedding"])
    return SourceIdentity(embedding=t["embedding"], recognizer=meta.get("recognizer", "unknown"),
                          image=t.get("image"), face=face, metadata=json.loads(meta.get("metadata", "{}")))
