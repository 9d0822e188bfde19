"""Face models: a source identity built from one or many images, saved as .safetensors.

The stored embedding is the normalised mean (or median) of the normalised per-image embeddings;
metadata records which recognizer made it (embeddings of different recognizers are not
comparable) and the hashes of the source images, so provenance can name them.

A face model can also carry a consent attestation (who consented, when, to what scope, and
optionally the sha256 of the signed consent document). It is bound to the identity: it names the
hashes of the source images it was given for, so a record copied onto another face model does not
count (``consent_of`` returns None for it).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..errors import NoFaceError, SwaplineError
from ..types import Face, SourceIdentity, l2_normalise
from . import source_check

log = logging.getLogger("swapline")
FORMAT = "swapline.face_model.v1"
CONSENT_SCHEMA = "swapline.consent/1"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def image_hash(image: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest()


def build_from_images(analyzer, images: Sequence[np.ndarray], reduce: str = "mean") -> SourceIdentity:
    """The identity of the largest face of each image, embedded by ``analyzer`` (a FaceAnalyzer).

    Every image must show a face: a photo without one is more likely a wrong input than a
    reason to silently average fewer images. Landmarks are added when the analyzer has them.
    Each chosen face is checked for size and detail (``source_check``): a face too small to swap
    from stops the build, a small or enlarged one is logged and recorded in
    ``metadata["source_check"]``, which the face model carries to later nodes' reports.
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
    check = source_check.check_sources(images, picked)
    if check["status"] == "refuse":
        raise SwaplineError(" ".join(i["message"] for i in check["images"] if i["verdict"] == "refuse"))
    for message in check["messages"]:
        log.warning("source check: %s", message)
    analyzer.embed(images, [[f] for f in picked])
    if analyzer.supports_landmarks:
        analyzer.landmarks68(images, [[f] for f in picked])
    fm = build(images, picked, analyzer.recognizer_name, reduce)
    return replace(fm, metadata={**fm.metadata, "source_check": check})


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


def make_consent(identity: SourceIdentity, given_by: str, date: str, scope: str,
                 document_sha256: str = "", recorded_by: str = "") -> dict:
    """A structured consent attestation for ``identity``; every problem names the field."""
    given_by, scope, date = (given_by or "").strip(), (scope or "").strip(), (date or "").strip()
    if not given_by:
        raise SwaplineError("consent: 'consent_given_by' is empty: name the person who consented (the source "
                            "person, or their legal representative)")
    if not scope:
        raise SwaplineError("consent: 'consent_scope' is empty: state what the consent covers (e.g. 'ad campaign "
                            "X, web and TV, until 2027-12-31')")
    try:
        when = _dt.date.fromisoformat(date[:10]) if len(date) <= 10 else _dt.datetime.fromisoformat(date)
    except ValueError:
        raise SwaplineError(f"consent: 'consent_date' {date!r} is not an ISO date (YYYY-MM-DD or "
                            "YYYY-MM-DDTHH:MM:SS)") from None
    doc = (document_sha256 or "").strip().lower()
    if doc and not _SHA256.match(doc):
        raise SwaplineError("consent: 'consent_document_sha256' must be the 64 hex digits of the signed consent "
                            "document's SHA-256 (e.g. from `sha256sum consent.pdf`), or empty")
    sources = list(identity.metadata.get("source_sha256") or [])
    if not sources:
        raise SwaplineError("consent: this face model records no source image hashes, so consent cannot be bound "
                            "to it; rebuild it with Build Face Model")
    return {"schema": CONSENT_SCHEMA, "given_by": given_by, "date": when.isoformat(), "scope": scope,
            "document_sha256": doc or None, "recorded_by": (recorded_by or "").strip() or None,
            "source_sha256": sources}


def with_consent(identity: SourceIdentity, consent: dict) -> SourceIdentity:
    return replace(identity, metadata={**identity.metadata, "consent": consent})


def consent_of(identity: SourceIdentity | None) -> dict | None:
    """The face model's consent attestation, if it has one that belongs to its source images."""
    if identity is None:
        return None
    c = identity.metadata.get("consent")
    if not isinstance(c, dict) or c.get("schema") != CONSENT_SCHEMA:
        return None
    if list(c.get("source_sha256") or []) != list(identity.metadata.get("source_sha256") or []):
        return None
    return c
