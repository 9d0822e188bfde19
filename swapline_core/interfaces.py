"""The two model roles every backend implements: analysers (find + describe faces) and swappers.

Backends: InsightFace packs and the built-in pip-shipped models for analysis; INSwapper-style
ONNX and the classical landmark warp for swapping. Stages above (selection, tracking, paste-back,
QA) talk only to these interfaces, so each backend stays a small module of its own.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from .types import Competence, Face, SourceIdentity, SwapPatch


class FaceAnalyzer(ABC):
    name: str = "analyzer"
    recognizer_name: str = "none"
    embedding_dim: int = 0
    supports_landmarks: bool = False
    # True: refine() re-detects a known face at its box in one pass (much cheaper than detect())
    supports_refine: bool = False

    def __init__(self) -> None:
        self.providers: dict[str, list[str]] = {}   # session name -> providers it really got

    @abstractmethod
    def detect(self, images: Sequence[np.ndarray], min_face: float | None = None) -> list[list[Face]]:
        """Boxes, five keypoints and scores for each image, best score first. ``min_face``: the
        smallest face worth finding in these images, px (a hint: a detector with a search
        pyramid may stop early, one without may ignore it)."""

    @abstractmethod
    def embed(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> None:
        """Fill ``face.embedding`` (L2-normalised) for every face, batched across images."""

    def refine(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> list[list[Face | None]]:
        """Re-detect each given face where its box says it is, at that scale only: a fresh box,
        five keypoints and score per face, or None where no face passes the detector's
        threshold there. Only where ``supports_refine``."""
        raise NotImplementedError(f"the {self.name} analyzer cannot refine a known face")

    def landmarks68(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> None:
        """Fill ``face.landmarks`` with 68 points; backends without them raise."""
        raise NotImplementedError(f"the {self.name} analyzer has no 68-point landmark model")

    def model_files(self) -> list[tuple[str, str]]:
        """(role, path) of every weight file used, for provenance and cache keys."""
        return []



class FaceSwapper(ABC):
    name: str = "swapper"
    needs_landmarks: bool = False         # True: target and source faces need ``landmarks``
    # True: patches already carry the target's colour (the paste step must not match them again).
    matches_color: bool = False
    # Where this swapper gives a usable result; faces outside are left untouched by the guards.
    competence: Competence = Competence(basis="no limits declared")

    @abstractmethod
    def swap(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
             source: SourceIdentity) -> list[list[SwapPatch]]:
        """One patch per given face, per image; batched across all faces where possible."""

    def model_files(self) -> list[tuple[str, str]]:
        return []
