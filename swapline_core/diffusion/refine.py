"""Geometry of diffusion face refinement on a frame chunk (the sampling itself is ComfyUI's).

``prepare`` turns a chunk's tracked faces into aligned crops, ControlNet hints and face masks
in crop space; ``paste`` warps the refined crops back into their frames. Each crop carries a
stable id (frame index, face index) so its sampling noise does not depend on how the clip is
chunked: a resumed run and an uninterrupted one give the same pixels.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..faces.align import warp_crops
from ..faces.paste import apply_patches, crop_mask, crop_to_patch
from ..types import Face, SwapPatch
from . import hints as face_hint


@dataclass
class CropJob:
    frame: int            # index inside the chunk
    face: int             # index among that frame's faces
    uid: int              # stable over the whole clip: noise seed offset
    crop: np.ndarray      # (S, S, 3) uint8
    matrix: np.ndarray    # frame -> crop affine (2, 3)
    hint: np.ndarray      # (S, S, 3) uint8
    mask: np.ndarray      # (S, S) float32, face region for the ControlNet


def crop_uid(frame_index: int, face_index: int) -> int:
    return frame_index * 64 + face_index


def prepare(frames: Sequence[np.ndarray], faces: Sequence[Sequence[Face]], first_index: int, size: int,
            template: str, hint_format: str, mask_grow: float = 0.25) -> list[CropJob]:
    jobs = []
    for k, (frame, fs) in enumerate(zip(frames, faces)):
        if not fs:
            continue
        crops, mats = warp_crops(frame, fs, size, template)
        for j, (f, crop, m) in enumerate(zip(fs, crops, mats)):
            hint, mask = face_hint.crop_hint(f.kps, f.landmarks, m, size, hint_format, mask_grow)
            jobs.append(CropJob(k, j, crop_uid(first_index + k, j), crop, m, hint, mask))
    return jobs


def paste(frames: Sequence[np.ndarray], jobs: Sequence[CropJob], refined: Sequence[np.ndarray],
          mask_erode: float, mask_blur: float) -> tuple[list[list[SwapPatch]], list[np.ndarray]]:
    """Patches per frame and the resulting frames (untouched where no face was refined)."""
    if len(refined) != len(jobs):
        raise ValueError(f"{len(refined)} refined crops for {len(jobs)} faces")
    patches: list[list[SwapPatch]] = [[] for _ in frames]
    for job, crop in zip(jobs, refined):
        size = job.crop.shape[0]
        mask = crop_mask(size, "ellipse", erode=mask_erode, blur=mask_blur)
        p = crop_to_patch(frames[job.frame].shape[:2], crop.astype(np.float32), mask, job.matrix)
        if p is not None:
            patches[job.frame].append(p)
    return patches, [apply_patches(f, ps) if ps else f for f, ps in zip(frames, patches)]


def crop_noise(jobs: Sequence[CropJob], seed: int, shape: Sequence[int]) -> torch.Tensor:
    """Initial noise (N, *shape) float32, one slice per crop, seeded by (seed, frame, face): the
    same face of the same frame gets the same noise however the clip is chunked or batched."""
    return torch.cat([torch.randn(tuple(shape), generator=torch.Generator().manual_seed((seed + j.uid) % 2**63),
                                  dtype=torch.float32)[None] for j in jobs])


def lacks_landmarks(faces_per_frame: Sequence[Sequence[Face]], hint_format: str) -> bool:
    """Whether the hint format needs 68-point landmarks that some tracked face does not have."""
    return hint_format in face_hint.NEEDS_68 and any(f.landmarks is None for fs in faces_per_frame for f in fs)


def add_missing_landmarks(analyzer, frames: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> None:
    """68-point landmarks (in place) for the faces that lack them."""
    missing = [[f for f in fs if f.landmarks is None] for fs in faces]
    if any(missing):
        analyzer.landmarks68(frames, missing)
