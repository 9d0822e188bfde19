"""Choosing which detected faces get swapped.

Identity (embedding similarity to the face model) is the default because an index or "largest"
flips between people on video; the other modes are there for stills and quick tests.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..types import Face

MODES = ("identity", "largest", "index", "reading_order", "all", "gender_female", "gender_male")


def parse_indices(text: str) -> list[int]:
    out = []
    for part in (text or "").replace(" ", "").split(","):
        if not part:
            continue
        if "-" in part[1:]:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def similarities(faces: Sequence[Face], reference: np.ndarray) -> list[float | None]:
    ref = np.asarray(reference, np.float32)
    return [None if f.embedding is None or f.embedding.shape != ref.shape
            else float(np.dot(f.embedding, ref)) for f in faces]


def reading_order(faces: Sequence[Face]) -> list[int]:
    """Left to right, then top to bottom by rows of roughly one face height."""
    if not faces:
        return []
    row_h = float(np.median([f.bbox[3] - f.bbox[1] for f in faces]))
    key = [(round(float(f.bbox[1]) / max(row_h, 1.0)), float(f.bbox[0])) for f in faces]
    return sorted(range(len(faces)), key=lambda i: key[i])


def select(faces: Sequence[Face], mode: str = "identity", reference: np.ndarray | None = None,
           threshold: float = 0.35, indices: str = "0", max_faces: int = 1) -> tuple[list[int], list[float | None]]:
    """Indices of the chosen faces (into ``faces``) and each face's similarity to the reference."""
    sims = similarities(faces, reference) if reference is not None else [None] * len(faces)
    if mode == "identity":
        if reference is None:
            raise ValueError("identity selection needs a face model (reference identity)")
        ranked = sorted((i for i, s in enumerate(sims) if s is not None and s >= threshold),
                        key=lambda i: -sims[i])
        chosen = ranked[:max_faces] if max_faces > 0 else ranked
    elif mode == "largest":
        chosen = sorted(range(len(faces)), key=lambda i: -faces[i].area)[:max(max_faces, 1)]
    elif mode in ("index", "reading_order"):
        order = reading_order(faces) if mode == "reading_order" else list(range(len(faces)))
        chosen = [order[i] for i in parse_indices(indices) if 0 <= i < len(order)]
    elif mode == "all":
        chosen = list(range(len(faces)))
    elif mode.startswith("gender_"):
        want = "F" if mode.endswith("female") else "M"
        if faces and all(f.gender is None for f in faces):
            raise ValueError("this analyzer does not predict gender (use a pack with genderage.onnx)")
        chosen = [i for i, f in enumerate(faces) if f.gender == want]
        chosen = chosen[:max_faces] if max_faces > 0 else chosen
    else:
        raise ValueError(f"unknown selection mode '{mode}' (choose from {', '.join(MODES)})")
    return chosen, sims
