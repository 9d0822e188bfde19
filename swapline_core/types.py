"""Plain data types shared by every stage: faces found in a frame and the source identity.

Conventions used across the core:
- images are ``numpy.uint8`` arrays shaped (H, W, 3), RGB;
- a batch is a sequence of such images (frames may differ in size);
- five keypoints follow InsightFace's order: left eye, right eye, nose, left mouth corner,
  right mouth corner, where "left" is the image-left side;
- embeddings are float32 and L2-normalised.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


@dataclass
class Face:
    bbox: np.ndarray                      # (4,) float32: x1, y1, x2, y2 in pixels
    kps: np.ndarray                       # (5, 2) float32
    score: float
    embedding: np.ndarray | None = None   # (D,) float32, L2-normalised
    landmarks: np.ndarray | None = None   # (68, 2) float32 when the analyzer provides them
    gender: str | None = None             # "M"/"F" where the pack predicts it
    age: float | None = None
    track_id: int | None = None

    @property
    def area(self) -> float:
        x1, y1, x2, y2 = (float(v) for v in self.bbox)
        return max(0.0, x2 - x1) * max(0.0, y2 - y1)

    @property
    def inter_ocular(self) -> float:
        return float(np.linalg.norm(self.kps[1] - self.kps[0]))

    def copy(self, **changes) -> Face:
        return replace(self, **changes)

    def to_json(self) -> dict:
        out = {"bbox": [round(float(v), 2) for v in self.bbox],
               "kps": [[round(float(x), 2), round(float(y), 2)] for x, y in self.kps],
               "score": round(float(self.score), 4)}
        if self.gender is not None:
            out["gender"] = self.gender
        if self.age is not None:
            out["age"] = round(float(self.age), 1)
        if self.track_id is not None:
            out["track_id"] = int(self.track_id)
        return out


@dataclass
class FrameFaces:
    """What one frame holds. ``status`` is "ok" or "no_face"; never silently empty."""
    index: int
    faces: list[Face] = field(default_factory=list)
    width: int = 0
    height: int = 0

    @property
    def status(self) -> str:
        return "ok" if self.faces else "no_face"


@dataclass
class SourceIdentity:
    """A face model: the identity to paste, independent of any one image."""
    embedding: np.ndarray                 # recogniser space of ``recognizer``
    recognizer: str
    image: np.ndarray | None = None       # a representative source image (for classical swap)
    face: Face | None = None              # the face within ``image``
    metadata: dict = field(default_factory=dict)


def l2_normalise(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, 1e-12)


def as_rgb_uint8(image: np.ndarray) -> np.ndarray:
    """Accept gray, RGB, RGBA, uint8 or float in [0,1]; return contiguous RGB uint8."""
    a = np.asarray(image)
    if a.dtype != np.uint8:
        a = (np.clip(a.astype(np.float32), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    if a.ndim != 3:
        raise ValueError(f"expected an image shaped (H, W, C), got {a.shape}")
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    elif a.shape[2] == 4:
        a = a[:, :, :3]
    elif a.shape[2] != 3:
        raise ValueError(f"expected 1, 3 or 4 channels, got {a.shape[2]}")
    return np.ascontiguousarray(a)


@dataclass
class FaceSet:
    """Per-frame faces as they flow between nodes (the SWAPLINE_FACES socket).

    ``analyzer`` is the live analyzer object, so later stages (embeddings for QA, 68-point
    landmarks for the classical swapper) reuse the same models without a second loader.
    """
    frames: list[FrameFaces]
    analyzer: object = None
    selection: str = "all detected"
    similarities: list[list[float | None]] = field(default_factory=list)
    cuts: tuple[int, ...] = ()            # frame indices where a new shot starts (from Track Faces)

    def counts(self) -> list[int]:
        return [len(f.faces) for f in self.frames]

    def to_json(self) -> dict:
        return {"analyzer": getattr(self.analyzer, "name", None), "selection": self.selection,
                "cuts": [int(c) for c in self.cuts],
                "frames": [{"index": fr.index, "status": fr.status,
                            "faces": [f.to_json() for f in fr.faces],
                            **({"similarity": [None if s is None else round(s, 4) for s in self.similarities[k]]}
                               if k < len(self.similarities) else {})}
                           for k, fr in enumerate(self.frames)]}

@dataclass(frozen=True)
class Competence:
    """Where a swapper works well, declared by the swapper; the guards leave faces outside it
    untouched (and report why). Angles in degrees (``swapline_core.guards.pose``); sizes are the
    five-point inter-ocular distance in frame pixels."""
    max_yaw: float = 90.0
    max_pitch: float = 90.0
    min_inter_ocular_px: float = 0.0
    needs_both_eyes: bool = False         # the nose tip must lie between the eyes (none hidden)
    basis: str = ""                       # where the numbers come from (measured / declared)

    def to_json(self) -> dict:
        return {"max_yaw": self.max_yaw, "max_pitch": self.max_pitch,
                "min_inter_ocular_px": self.min_inter_ocular_px, "needs_both_eyes": self.needs_both_eyes}


@dataclass
class SwapPatch:
    """A swapped face as a patch: ``pixels`` replaces the frame inside ``region`` by ``mask``."""
    region: tuple[int, int, int, int]     # x0, y0, x1, y1 (clipped to the frame)
    pixels: np.ndarray                    # (h, w, 3) float32 in 0..255
    mask: np.ndarray                      # (h, w) float32 in 0..1; 0 leaves the frame untouched
    info: dict = field(default_factory=dict)
    layers: dict = field(default_factory=dict)   # mask-stack parts (name -> (h, w) "may swap"), for previews

    @classmethod
    def refusal(cls, reason: str, info: dict | None = None) -> SwapPatch:
        """No pixels, and why: what a swapper returns for a face it cannot swap, so that its
        patches stay one per face (``FaceSwapper.swap``) and the face's record says the reason."""
        return cls((0, 0, 0, 0), np.zeros((0, 0, 3), np.float32), np.zeros((0, 0), np.float32),
                   {**(info or {}), "status": "skipped", "reason": reason})

    @property
    def refused(self) -> bool:
        return self.info.get("status") == "skipped" and bool(self.info.get("reason"))


# The reason (category "outside the frame") for a face with no pixel of its paste mask in the frame.
OUTSIDE_FRAME = "outside the frame: no pixels to paste"


@dataclass
class ClipContext:
    """What per-chunk steps (guards, masks) may know beyond their chunk: every frame's tracked
    faces, the clip index of the chunk's first frame and the shot cuts. Built from data that is
    fixed before the chunk runs, so a resumed job sees the same context as an uninterrupted one."""
    faces: FaceSet | None = None
    first_index: int = 0
    cuts: tuple[int, ...] = ()            # clip indices where a new shot starts
    read_frames: object = None            # callable(clip indices) -> frames, for pre-/post-roll
    # Which pixels read_frames returns (the sequence's key): the same face set can be swapped twice
    # (a second swap stage over swapped frames), and anything cached from the frames must tell them apart.
    frames_key: str | None = None
